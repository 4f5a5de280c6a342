"""Adapters: ringkit's placements inside the clients people already use.

**pymemcache.** ``HashClient`` takes a *hasher* class with ``add_node``, ``remove_node`` and
``get_node``; it calls ``hasher()`` with no argument and adds each server as ``"host:port"``.
:class:`PlacementHasher` is such a class over any ringkit placement (a ``HashRing`` by
default), so switching a pymemcache user to ringkit's ring is one argument::

    from pymemcache.client.hash import HashClient
    from ringkit.cluster.adapters import PlacementHasher
    client = HashClient(servers, hasher=PlacementHasher)

Another placement goes in through ``functools.partial(PlacementHasher, placement=Modulo())``.
:class:`KetamaHasher` is the ketama-compatible one: ``HashClient(servers, hasher=KetamaHasher)``
places keys exactly where libmemcached's weighted ketama does (``ringkit.compat.ketama``), so a
Python service and a PHP or C one agree on every key; ``partial(KetamaHasher,
variant="spy")`` matches spymemcached.

**redis-py.** :class:`RedisRouter` routes keys (with ``{tag}`` hash tags) to one ``redis.Redis``
per node and makes ``MGET`` / ``MSET`` one round trip per node; everything else stays redis-py's.

>>> hasher = PlacementHasher()
>>> for server in ["10.0.0.1:11211", "10.0.0.2:11211"]:
...     hasher.add_node(server)
>>> hasher.get_node("booking:42") in {"10.0.0.1:11211", "10.0.0.2:11211"}
True
>>> PlacementHasher().get_node("k") is None
True
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ringkit.cluster.checks import positive_seconds
from ringkit.cluster.values.keys import route_key
from ringkit.cluster.wire.redis.transports import redis_options
from ringkit.cluster.wire.urls import parse_url
from ringkit.errors import ConfigError, EmptyRingError, UnknownNodeError, format_names
from ringkit.placement import Placement
from ringkit.ring import HashRing

__all__ = ["KetamaHasher", "PlacementHasher", "RedisRouter"]


class PlacementHasher:
    """A pymemcache ``HashClient`` hasher backed by an immutable ringkit placement.

    ``add_node`` / ``remove_node`` swap in a new placement (placements are values), so a
    ``get_node`` running in another thread always sees one whole placement.
    """

    def __init__(self, placement: Placement | None = None) -> None:
        self.placement: Placement = HashRing([]) if placement is None else placement

    def add_node(self, node: str) -> None:
        """Add server `node` (``"host:port"``); adding a present node does nothing."""
        if node not in self.placement:
            self.placement = self.placement.add(node)

    def remove_node(self, node: str) -> None:
        """Remove server `node`.

        :raises UnknownNodeError: when `node` was never added (a ValueError in pymemcache's
            own hasher; both name the node)
        """
        self.placement = self.placement.remove(node)

    def get_node(self, key: str | bytes) -> str | None:
        """Return the server for `key`, or None when there is none (what HashClient expects)."""
        try:
            return self.placement.node_for(route_key(key.encode() if isinstance(key, str) else key))
        except EmptyRingError:
            return None


class KetamaHasher:
    """A pymemcache ``HashClient`` hasher with an exact ketama layout over the servers.

    The continuum is rebuilt over the servers present on every ``add_node`` / ``remove_node``
    (what libmemcached and twemproxy do); servers are ``"host:port"`` with weight 1.
    """

    def __init__(self, *, variant: str = "libmemcached", weighted: bool = True) -> None:
        self.variant = variant
        self.weighted = weighted
        self.servers: tuple[str, ...] = ()
        self.placement: Placement | None = None

    def _rebuild(self, servers: tuple[str, ...]) -> None:
        from ringkit.compat.ketama import ketama

        placement = ketama(list(servers), variant=self.variant, weighted=self.weighted)
        self.servers, self.placement = servers, placement

    def add_node(self, node: str) -> None:
        """Add server `node` (``"host:port"``); adding a present node does nothing.

        :raises ConfigError: for an unknown variant or an unparsable server
        """
        if node not in self.servers:
            self._rebuild((*self.servers, node))

    def remove_node(self, node: str) -> None:
        """Remove server `node`.

        :raises UnknownNodeError: when `node` was never added
        """
        if node not in self.servers:
            raise UnknownNodeError(
                f"node {node!r} is not in the continuum "
                f"({len(self.servers)} nodes: {format_names(self.servers)})"
            )
        rest = tuple(server for server in self.servers if server != node)
        if rest:
            self._rebuild(rest)
        else:
            self.servers, self.placement = (), None

    def get_node(self, key: str | bytes) -> str | None:
        """Return the server for `key` (the whole key: ketama knows no hash tags), or None."""
        return None if self.placement is None else self.placement.node_for(key)


class RedisRouter:
    """Route keys to one ``redis.Redis`` client per node of a placement.

    Looking up: ``client_for(key)``, ``node_for(key)``. Multi-key: ``mget(keys)``,
    ``mset(mapping)`` (one round trip per node). Keys with a ``{tag}`` route by the tag.
    """

    def __init__(self, placement: Placement, clients: Mapping[str, Any]) -> None:
        names = [node.name for node in placement.nodes]
        missing = [name for name in names if name not in clients]
        if missing:
            raise ConfigError(
                f"node {missing[0]!r} has no redis client; missing: {format_names(missing)}"
            )
        unknown = [name for name in clients if name not in placement]
        if unknown:
            raise UnknownNodeError(
                f"client {unknown[0]!r} is not a node of the placement "
                f"({len(names)} nodes: {format_names(names)})"
            )
        self.placement = placement
        self.clients = dict(clients)

    @classmethod
    def from_urls(
        cls, placement: Placement, urls: Mapping[str, str], *, timeout_s: float = 1.0
    ) -> RedisRouter:
        """Build a router with a ``redis.Redis`` per node from ``redis://`` URLs.

        :raises ConfigError: when a URL is not a redis:// or rediss:// URL, or `timeout_s` is
            not a number > 0
        """
        import redis

        positive_seconds("timeout_s", timeout_s)
        clients = {}
        for name, text in urls.items():
            url = parse_url(text)
            if url.scheme not in ("redis", "rediss"):
                raise ConfigError(f"RedisRouter needs redis:// URLs, got {url.redacted()!r}")
            clients[name] = redis.Redis(**redis_options(url, timeout_s=timeout_s))
        return cls(placement, clients)

    def node_for(self, key: str | bytes) -> str:
        """Return the node that owns `key` (by its ``{tag}`` if it has one)."""
        data = key.encode() if isinstance(key, str) else key
        return self.placement.node_for(route_key(data))

    def client_for(self, key: str | bytes) -> Any:
        """Return the ``redis.Redis`` client of the node that owns `key`."""
        return self.clients[self.node_for(key)]

    def _group(self, keys: Iterable[str | bytes]) -> dict[str, list[str | bytes]]:
        groups: dict[str, list[str | bytes]] = {}
        for key in keys:
            groups.setdefault(self.node_for(key), []).append(key)
        return groups

    def mget(self, keys: Sequence[str | bytes]) -> list[Any]:
        """Return the values of `keys` in order (None when missing): one MGET per node."""
        found: dict[str | bytes, Any] = {}
        for name, group in self._group(keys).items():
            found.update(zip(group, self.clients[name].mget(group), strict=True))
        return [found[key] for key in keys]

    def mset(self, mapping: Mapping[str | bytes, Any]) -> None:
        """Set every key: one MSET per node."""
        for name, group in self._group(mapping).items():
            self.clients[name].mset({key: mapping[key] for key in group})

    def close(self) -> None:
        """Close every client."""
        for client in self.clients.values():
            client.close()
