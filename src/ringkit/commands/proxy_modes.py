"""``--mode haproxy|nginx`` for ``lookup`` and ``plan``: a proxy's pool from its file or socket.

``--config FILE`` with ``--backend NAME`` (HAProxy) or ``--upstream NAME`` (nginx) reads the
pool as the proxy reads it; ``--socket SOCK`` takes HAProxy's servers, ids, weights and states
from its runtime API (``show servers state``) instead of the file's, keeping the file's hashing
settings, or ``--hash-type`` without a file. A change to plan is written as the proxy's
operator makes it: ``--add NAME=ADDR[,id=N][,weight=W]`` (nginx: ``--add ADDR[,weight=W]``),
``--remove NAME``, ``--weight NAME=W``. A change read from the file is an edit and a reload:
HAProxy renumbers servers without an ``id``; one read from the socket keeps the running ids.
"""

from __future__ import annotations

import argparse
from bisect import bisect_left
from dataclasses import dataclass, replace
from typing import Any

from ringkit.compat import Continuum, HAProxyRing, NginxServer
from ringkit.compat.haproxy_backend import ConfiguredServer, HAProxyBackend, runtime_backend
from ringkit.compat.haproxy_config import read_haproxy_backend
from ringkit.compat.haproxy_state import read_servers_state
from ringkit.compat.nginx_config import NginxUpstream, read_nginx_upstream
from ringkit.errors import ConfigError

__all__ = [
    "PROXY_MODES",
    "ProxyPool",
    "load_pool",
    "print_proxy_report",
    "proxy_report",
    "renumbering_notes",
]

from ringkit.commands.parsers.proxy import PROXY_MODES


@dataclass(frozen=True, slots=True)
class ProxyPool:
    """A proxy's pool before a change: an HAProxy backend or an nginx upstream."""

    mode: str
    haproxy: HAProxyBackend | None = None
    nginx: NginxUpstream | None = None
    runtime: bool = False

    def layout(self) -> Continuum:
        """Return the placement the proxy routes by."""
        if self.haproxy is not None:
            return self.haproxy.layout()
        assert self.nginx is not None
        return self.nginx.layout()

    def changed(self, add: list[str], remove: list[str], weights: list[str]) -> ProxyPool:
        """Return the pool after adding, removing and reweighting servers (in that order).

        :raises ConfigError: for an unreadable spec, an unknown or duplicate server
        """
        if self.haproxy is not None:
            servers = list(self.haproxy.servers)
            for spec in add:
                server = _haproxy_spec(spec, self.runtime)
                if server.name in (s.name for s in servers):
                    raise ConfigError(f"--add {spec!r}: server {server.name!r} is already there")
                servers.append(server)
            servers = _without(servers, remove, [s.name for s in servers])
            for name, weight in (_weight_spec(spec) for spec in weights):
                _known(name, [s.name for s in servers])
                servers = [replace(s, weight=weight) if s.name == name else s for s in servers]
            return replace(self, haproxy=self.haproxy.with_servers(servers))
        assert self.nginx is not None
        entries = [entry.server for entry in self.nginx.servers]
        entries += [_nginx_spec(spec) for spec in add]
        entries = _without(entries, remove, [s.address for s in entries])
        for address, weight in (_weight_spec(spec) for spec in weights):
            _known(address, [s.address for s in entries])
            entries = [replace(s, weight=weight) if s.address == address else s for s in entries]
        return replace(self, nginx=self.nginx.with_servers(entries))


def _known(name: str, names: list[str]) -> bool:
    if name not in names:
        raise ConfigError(f"server {name!r} is not in the pool ({', '.join(names)})")
    return True


def _without(items: list[Any], remove: list[str], names: list[str]) -> list[Any]:
    for name in remove:
        _known(name, names)
    return [item for item, name in zip(items, names, strict=True) if name not in remove]


def _weight_spec(spec: str) -> tuple[str, int]:
    name, equals, value = spec.rpartition("=")
    if not equals or not name or not value.isdigit():
        raise ConfigError(f"--weight takes NAME=WEIGHT, got {spec!r}")
    return name, int(value)


def _haproxy_spec(spec: str, runtime: bool) -> ConfiguredServer:
    head, *options = spec.split(",")
    name, equals, address = head.partition("=")
    if not equals or not name or not address:
        raise ConfigError(f"--add takes NAME=ADDR[,id=N][,weight=W], got {spec!r}")
    values: dict[str, int] = {}
    for option in options:
        key, _, value = option.partition("=")
        if key not in ("id", "weight") or not value.isdigit():
            raise ConfigError(f"--add option must be id=N or weight=W, got {option!r} in {spec!r}")
        values[key] = int(value)
    if runtime and "id" not in values:
        raise ConfigError(
            f"--add {spec!r} needs id=N with --socket: HAProxy 2.6's 'add server' without an "
            "id places the server's points as for id 0; give the id you will add it with"
        )
    weight = values.get("weight", 1)
    return ConfiguredServer(name, address, values.get("id"), weight, False, False, 0)


def _nginx_spec(spec: str) -> NginxServer:
    address, *options = spec.split(",")
    weight = 1
    for option in options:
        key, _, value = option.partition("=")
        if key != "weight" or not value.isdigit():
            raise ConfigError(f"--add takes ADDR[,weight=W] for nginx, got {spec!r}")
        weight = int(value)
    if "=" in address:
        raise ConfigError(
            f"--add takes ADDR[,weight=W] for nginx (servers are addresses), got {spec!r}"
        )
    return NginxServer(address, weight=weight)


def load_pool(args: argparse.Namespace) -> ProxyPool:
    """Return the pool named by ``--config`` / ``--backend`` / ``--upstream`` / ``--socket``.

    :raises ConfigError: for a missing or misplaced option, or a file ringkit cannot read
    :raises BackendError: when the socket does not answer
    """
    if args.mode == "nginx":
        haproxy_only = {
            "--backend": args.backend,
            "--socket": args.socket,
            "--hash-type": args.hash_type,
        }
        for flag, value in haproxy_only.items():
            if value is not None:
                raise ConfigError(
                    f"{flag} is for --mode haproxy; nginx reads --config and --upstream"
                )
        if not args.config or not args.upstream:
            raise ConfigError("--mode nginx needs --config FILE and --upstream NAME")
        return ProxyPool("nginx", nginx=read_nginx_upstream(args.config, upstream=args.upstream))
    if args.upstream is not None:
        raise ConfigError("--upstream is for --mode nginx; haproxy reads --backend")
    if not args.backend or not (args.config or args.socket):
        raise ConfigError("--mode haproxy needs --backend NAME and --config FILE or --socket SOCK")
    if args.config and args.hash_type:
        raise ConfigError("--hash-type is read from --config; give one or the other")
    if not args.socket:
        return ProxyPool("haproxy", haproxy=read_haproxy_backend(args.config, backend=args.backend))
    state = read_servers_state(args.socket, args.backend)
    if not state:
        raise ConfigError(f"HAProxy reports no servers for backend {args.backend!r}")
    if args.config:
        backend = read_haproxy_backend(args.config, backend=args.backend).with_runtime(state)
    else:
        backend = runtime_backend(args.backend, state, (args.hash_type or "consistent").split())
    return ProxyPool("haproxy", haproxy=backend, runtime=True)


def renumbering_notes(old: Continuum, new: Continuum) -> list[str]:
    """Return a note when HAProxy gives servers other ids after the change (a reload).

    Servers without an ``id`` are numbered by position, so removing or inserting one moves
    the points, and the keys, of every server numbered after it.
    """
    if not isinstance(old, HAProxyRing) or not isinstance(new, HAProxyRing):
        return []
    before, after = old.ids, new.ids
    changed = [
        f"{name} {before[name]}->{after[name]}"
        for name in before
        if name in after and before[name] != after[name]
    ]
    if not changed:
        return []
    return [
        f"HAProxy renumbers servers without an id: {', '.join(changed)}; their points move "
        "with their ids. Give every server an 'id' to keep its keys"
    ]


def proxy_report(pool: ProxyPool, key: str) -> dict[str, Any]:
    """Return what ``lookup --mode haproxy|nginx`` prints: hash, deciding point, owner."""
    layout = pool.layout()
    key_hash = layout.point_for(key)
    report: dict[str, Any] = {"mode": pool.mode, "key": key, "hash": f"0x{key_hash:08x}"}
    if isinstance(layout, HAProxyRing):
        assert pool.haproxy is not None
        points = layout.server_points
        after = bisect_left(points.tolist(), key_hash) % len(points)
        chosen = layout.point_chosen(key_hash)
        report |= {
            "backend": pool.haproxy.name,
            "balance": pool.haproxy.balance,
            "hash_function": layout.hash_function + (" avalanche" if layout.avalanche else ""),
            "point": f"0x{chosen:08x}",
            "next_point": f"0x{int(points[after]):08x}",
            "previous_point": f"0x{int(points[after - 1]):08x}",
            "ids": layout.ids,
        }
    else:
        assert pool.nginx is not None
        index = layout.index_for_point(key_hash)
        report |= {
            "upstream": pool.nginx.name,
            "key_expression": pool.nginx.key,
            "point": f"0x{int(layout.points[index]):08x}",
            "point_index": index,
            "points": len(layout.points),
            "wrapped": key_hash > int(layout.points[-1]),
        }
    report["owner"] = layout.node_for(key)
    return report


def print_proxy_report(report: dict[str, Any]) -> None:
    """Print a proxy lookup report as aligned lines."""
    print(f"key      {report['key']!r}")
    if report["mode"] == "haproxy":
        settings = f"balance {report['balance']}, hash-type consistent {report['hash_function']}"
        print(f"backend  {report['backend']} ({settings})")
        print(f"hash     {report['hash']}")
        around = f"next {report['next_point']}, previous {report['previous_point']}"
        print(f"point    {report['point']} (the nearer of {around}; a tie goes to the previous)")
    else:
        print(f"upstream {report['upstream']} (hash {report['key_expression']} consistent)")
        print(f"hash     {report['hash']} (crc32)")
        walk = " (wrapped past the last point)" if report["wrapped"] else ""
        print(f"point    {report['point']} (#{report['point_index']} of {report['points']}){walk}")
    print(f"owner    {report['owner']}")
