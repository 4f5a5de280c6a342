"""Routing: which servers a key is written to and read from, from one swappable placement.

A :class:`Router` answers, for a key, its *replicas* (the first `replicas` nodes of its
preference list, routed by its ``{tag}`` if it has one), its *read order* (the replicas; for a
hot key, its spread copies first, rotating) and its *write targets* (the replicas plus, for a
hot key, its spread copies). The placement is one attribute, read once per call: publishing a
new placement is one assignment, which is what live rebalancing builds on.

>>> from ringkit import HashRing
>>> router = Router(HashRing(["a", "b", "c"]), replicas=2)
>>> router.replica_names(b"cart:{7}") == router.replica_names(b"profile:{7}")
True
"""

from __future__ import annotations

from ringkit.cluster.hotkeys import HotKeys
from ringkit.cluster.servers import route_key
from ringkit.placement import Placement

__all__ = ["Router"]


class Router:
    """Replicas, read order and write targets of keys, under one placement reference."""

    def __init__(
        self, placement: Placement, *, replicas: int, hot_keys: HotKeys | None = None
    ) -> None:
        self.placement = placement
        self.replicas = replicas
        self.hot_keys = hot_keys

    def replica_names(self, key: bytes) -> list[str]:
        """Return the nodes holding `key`: the first `replicas` of its preference list."""
        placement, route = self.placement, route_key(key)
        if self.replicas == 1:
            return [placement.node_for(route)]
        return placement.nodes_for(route, self.replicas)

    def _copies(self, key: bytes, spread: int) -> list[str]:
        return self.placement.nodes_for(route_key(key), spread)

    def read_order(self, key: bytes) -> list[str]:
        """Return the servers a read of `key` tries, in order (hot keys rotate their copies)."""
        replicas = self.replica_names(key)
        hot = self.hot_keys
        spread = hot.spread_for(key) if hot is not None else 0
        if hot is None or spread <= 1:
            return replicas
        copies = self._copies(key, spread)
        first = copies[hot.next_slot() % len(copies)]
        return [first, *(name for name in dict.fromkeys([*replicas, *copies]) if name != first)]

    def write_names(self, key: bytes) -> list[str]:
        """Return the servers a write of `key` goes to: replicas, then any spread copies."""
        replicas = self.replica_names(key)
        spread = self.hot_keys.spread_for(key) if self.hot_keys is not None else 0
        if spread <= self.replicas:
            return replicas
        return replicas + [name for name in self._copies(key, spread) if name not in replicas]

    def extra_copies(self, key: bytes) -> list[str]:
        """Return the servers that hold a spread copy of `key` beyond its replicas."""
        if self.hot_keys is None:
            return []
        replicas = self.replica_names(key)
        return [n for n in self._copies(key, self.hot_keys.spread) if n not in replicas]
