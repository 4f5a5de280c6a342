"""Routing: which servers a key is written to and read from, under one cluster view.

A :class:`Router` answers, for a key, its *replicas* (the first `replicas` nodes of its
preference list, routed by its ``{tag}`` if it has one), its *read order* and its *write
targets*. A stable view routes by its placement: reads try the replicas (an activated hot key's
spread copies first, rotating), writes go to the replicas (the writer then updates the copies
it learns of from the key's spread marker, :mod:`ringkit.cluster.core.hotcopies`). While data moves
the view holds two placements: reads try the new owners, then the old ones (while rolling
back: the abandoned owners first, who took every write), and writes go to both sides, the copy's
source side first, so that a delete or a counter update also reaches the copy that a fallback
read may find. A router is a value built once per view; a client swaps its one reference to
route by a newer view.

>>> from ringkit import HashRing
>>> from ringkit.cluster.views.view import ClusterView
>>> view = ClusterView(0, HashRing(["a", "b", "c"]), {n: f"memory://{n}" for n in "abc"}, 2)
>>> router = Router(view)
>>> router.replica_names(b"cart:{7}") == router.replica_names(b"profile:{7}")
True
"""

from __future__ import annotations

from ringkit.cluster.core.hotkeys import HotKeys
from ringkit.cluster.values.keys import route_key
from ringkit.cluster.views.view import ClusterView
from ringkit.placement import Placement

__all__ = ["Router"]


class Router:
    """Replicas, read order and write targets of keys, under one view (immutable)."""

    __slots__ = ("hot_keys", "placement", "replicas", "view")

    def __init__(self, view: ClusterView, *, hot_keys: HotKeys | None = None) -> None:
        self.view = view
        self.placement = view.placement
        self.replicas = view.replicas
        self.hot_keys = hot_keys

    def _names(self, key: bytes, placement: Placement) -> list[str]:
        route = route_key(key)
        if self.replicas == 1:
            return [placement.node_for(route)]
        return placement.nodes_for(route, self.replicas)

    def _both(self, key: bytes, placements: tuple[Placement, ...]) -> list[str]:
        found: dict[str, None] = {}
        for placement in placements:
            found.update(dict.fromkeys(self._names(key, placement)))
        return list(found)

    def replica_names(self, key: bytes) -> list[str]:
        """Return the nodes holding `key`: the first `replicas` of its preference list."""
        return self._names(key, self.placement)

    def _copies(self, key: bytes, spread: int) -> list[str]:
        return self.placement.nodes_for(route_key(key), spread)

    def _spread(self, key: bytes) -> int:
        # Copies are read only under a view that spreads hot keys: under any other, writers do
        # not update them (they read no markers), so a copy may be stale.
        if self.hot_keys is None or not self.view.hot_copies:
            return 0
        return self.hot_keys.active_spread(key)

    def copy_names(self, key: bytes, spread: int) -> list[str]:
        """Return the servers of `key`'s `spread` copies beyond its replicas."""
        replicas = self.replica_names(key)
        return [name for name in self._copies(key, spread) if name not in replicas]

    def read_order(self, key: bytes) -> list[str]:
        """Return the servers a read of `key` tries, in order (hot keys rotate their copies)."""
        if self.view.transitional:
            return self._both(key, self.view.read_placements)
        replicas = self.replica_names(key)
        hot = self.hot_keys
        spread = self._spread(key)
        if hot is None or spread <= 1:
            return replicas
        copies = self._copies(key, spread)
        first = copies[hot.next_slot() % len(copies)]
        return [first, *(name for name in dict.fromkeys([*replicas, *copies]) if name != first)]

    def read_orders(self, keys: list[bytes]) -> list[list[str]]:
        """Return :meth:`read_order` of each of `keys`, in one batch lookup where it can.

        A stable view with one replica and no hot-key spread routes the whole batch with the
        placement's vectorised ``node_for_many`` (a third of the time of one lookup per key).
        """
        if self.replicas != 1 or self.view.transitional or self.hot_keys is not None:
            return [self.read_order(key) for key in keys]
        # No key with a "{": each key routes by itself (route_key), so skip the per-key call.
        routes = keys if b"{" not in b"".join(keys) else [route_key(key) for key in keys]
        return [[name] for name in self.placement.node_for_many(routes)]

    def write_names(self, key: bytes) -> list[str]:
        """Return the servers a write of `key` goes to: its replicas (both sides while moving).

        A hot key's copies are not written blindly here: the writer updates them,
        version-checked, once its write tells it that the key is spread.
        """
        view = self.view
        if view.previous is not None:
            return self._both(key, (view.previous, view.placement))
        return self.replica_names(key)

    def extra_copies(self, key: bytes) -> list[str]:
        """Return the servers that hold a spread copy of `key` beyond its replicas."""
        if self.hot_keys is None:
            return []
        return self.copy_names(key, self.hot_keys.spread)
