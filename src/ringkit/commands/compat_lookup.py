"""``ringkit lookup KEY --mode MODE --servers SPEC``: a key placed as another system places it.

The modes are the layouts of ``ringkit.compat``. ``--servers`` takes each system's own notation:

- ketama modes (libketama, libmemcached, spy, twemproxy):
  ``"10.0.1.1:11211 600,10.0.1.2:11211 300"`` (twemproxy also ``"127.0.0.1:11212:1 alias"``);
- envoy: ``"127.0.0.1:90,127.0.0.1:91 2"`` (address, optional weight);
- cassandra: ``"10.0.0.1=-9000000000000000000 0,10.0.0.2=3000000000000000000"`` (node=tokens);
- redis: ``"a=0-8191,b=8192-16383"`` (node=slot ranges, space-separated).
"""

from __future__ import annotations

from typing import Any

from ringkit.compat import cassandra_ring, envoy_ring, ketama, redis_cluster
from ringkit.compat.ketama import KETAMA_VARIANTS, PLACEHOLDERS
from ringkit.errors import ConfigError

__all__ = ["COMPAT_MODES", "compat_report", "print_compat_report"]

COMPAT_MODES = (*KETAMA_VARIANTS, "envoy", "cassandra", "redis")


def _pairs(text: str, what: str) -> dict[str, list[str]]:
    """Parse ``name=v1 v2,name2=v3`` into ``{name: [v1, v2], ...}``."""
    table: dict[str, list[str]] = {}
    for item in text.split(","):
        name, equals, values = item.strip().partition("=")
        if not equals or not name or not values.split():
            raise ConfigError(
                f"unparsable --servers item {item.strip()!r}; expected "
                f"'node={what}' items separated by commas"
            )
        table[name.strip()] = values.split()
    return table


def _envoy_hosts(text: str) -> dict[str, int]:
    hosts: dict[str, int] = {}
    for item in text.split(","):
        fields = item.split()
        if not 1 <= len(fields) <= 2 or not (len(fields) == 1 or fields[1].isdigit()):
            raise ConfigError(
                f"unparsable --servers item {item.strip()!r}; expected "
                f"'address [weight]' items separated by commas"
            )
        hosts[fields[0]] = int(fields[1]) if len(fields) == 2 else 1
    return hosts


def _check_no_placeholder(servers: str) -> None:
    """Refuse an ellipsis pasted from an example as if it were a server."""
    for item in servers.split(","):
        if item.strip() in PLACEHOLDERS:
            raise ConfigError(
                f"--servers item {item.strip()!r} is a placeholder, not a server, got "
                f"{servers!r}; list every server, e.g. "
                f'"10.0.1.1:11211 600,10.0.1.2:11211 300"'
            )


def compat_report(
    mode: str,
    servers: str,
    key: str,
    replicas: int,
    *,
    key_hash: str | None = None,
    weighted: bool = True,
) -> dict[str, Any]:
    """Return what ``lookup --mode`` prints: owner, key hash and the point or slot chosen.

    `weighted=False` (``--unweighted``) is libmemcached's plain ketama behaviour.

    :raises ConfigError: for an unknown mode, a bad ``--servers`` spec (an ellipsis among
        them), a key hash given to a mode that has none to choose, or ``--unweighted`` given
        to a mode other than libmemcached and spy
    """
    _check_no_placeholder(servers)
    if key_hash is not None and mode not in ("libmemcached", "spy", "twemproxy"):
        raise ConfigError(f"--key-hash is for libmemcached, spy and twemproxy, not {mode!r}")
    if not weighted and mode not in ("libmemcached", "spy"):
        raise ConfigError(f"--unweighted is for libmemcached and spy, not {mode!r}")
    if mode in KETAMA_VARIANTS or mode == "envoy":
        layout = (
            ketama(servers, variant=mode, hash=key_hash, weighted=weighted)
            if mode != "envoy"
            else envoy_ring(_envoy_hosts(servers))
        )
        width = layout.bits // 4
        point_hash = layout.point_for(key)
        index = layout.index_for_point(point_hash)
        return {
            "mode": mode,
            "key": key,
            "hash": f"0x{point_hash:0{width}x}",
            "point": f"0x{int(layout.points[index]):0{width}x}",
            "point_index": index,
            "points": len(layout.points),
            "wrapped": point_hash > int(layout.points[-1]),
            "owner": layout.node_for(key),
            "replicas": layout.nodes_for(key, replicas),
        }
    if mode == "cassandra":
        ring = cassandra_ring(_pairs(servers, "token token ..."), replication_factor=replicas)
        token = ring.token_for(key)
        found = ring.replicas_for_token(token)
        return {"mode": mode, "key": key, "hash": str(token), "owner": found[0], "replicas": found}
    if mode == "redis":
        cluster = redis_cluster(_pairs(servers, "first-last first-last ..."))
        slot = cluster.slot_for(key)
        return {
            "mode": mode,
            "key": key,
            "hash": f"slot {slot}",
            "owner": cluster.node_for_slot(slot),
            "replicas": [cluster.node_for_slot(slot)],
        }
    raise ConfigError(f"unknown mode {mode!r}; known: ring, {', '.join(COMPAT_MODES)}")


def print_compat_report(report: dict[str, Any]) -> None:
    """Print a compat lookup report as aligned lines."""
    print(f"key      {report['key']!r}")
    print(f"mode     {report['mode']}")
    print(f"hash     {report['hash']}")
    if "point" in report:
        walk = " (wrapped past the last point)" if report["wrapped"] else ""
        print(f"point    {report['point']} (#{report['point_index']} of {report['points']}){walk}")
    print(f"owner    {report['owner']}")
    if len(report["replicas"]) > 1:
        print(f"replicas {', '.join(report['replicas'])}")
