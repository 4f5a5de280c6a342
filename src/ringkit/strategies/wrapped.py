"""RingBacked: the base of placements built on a HashRing (allocated, bounded, scheduled).

Such a placement keeps a ring in ``_ring``: its nodes, ``hasher``, ``ring`` and ``shares`` are
the ring's, and membership changes are the ring's own (``add`` / ``remove`` / ``reweight``),
wrapped again by ``_with_ring``. What it adds (token allocation, load caps, versioned hashing)
stays in its own module.

>>> from ringkit.strategies.scheduled import ScheduledRemap
>>> remap = ScheduledRemap(["a", "b"])
>>> remap.ring.nodes == remap.nodes, remap.add("c").ring == remap.ring.add("c")
(True, True)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Self

from ringkit.hashing import Hasher, Key, check_key_batch
from ringkit.nodes import Node
from ringkit.placement import PlacementBase
from ringkit.ring import HashRing

__all__ = ["RingBacked"]


class RingBacked(PlacementBase):
    """A placement over ``self._ring``; a subclass says how to wrap another ring (``_with_ring``).

    Looking up (the ring's, unless overridden): ``node_for``, ``nodes_for``, ``node_for_many``.
    Changing membership (the ring's, wrapped again): ``add``, ``remove``, ``discard``,
    ``reweight``. Measuring: ``ring``, ``hasher``, ``nodes``, ``shares``, ``len``, ``in``,
    ``iter``, ``==``.
    """

    __slots__ = ("_names", "_nodes", "_ring")
    _container = "ring"

    def _set_ring(self, ring: HashRing) -> None:
        """Install `ring` (and the node tuples the base reads)."""
        self._ring = ring
        self._nodes = ring.nodes
        self._names = tuple(ring)

    def _with_ring(self, ring: HashRing) -> Self:
        """Return this placement, options kept, over `ring`."""
        raise NotImplementedError

    def _added(self, node: Node) -> Self:
        return self._with_ring(self._ring.add(node))

    def _removed(self, name: str) -> Self:
        return self._with_ring(self._ring.remove(name))

    def _reweighted(self, node: Node) -> Self:
        return self._with_ring(self._ring.reweight(node.name, node.weight))

    @property
    def ring(self) -> HashRing:
        """The ring this placement is built on."""
        return self._ring

    @property
    def hasher(self) -> Hasher:
        """The ring's hash function (``diff`` compares ``hash % N`` with it)."""
        return self._ring.hasher

    def node_for(self, key: Key) -> str:
        """Return the owner of `key` (see ``HashRing.node_for``).

        :raises EmptyRingError: when there are no nodes
        """
        return self._ring.node_for(key)

    def nodes_for(self, key: Key, n: int) -> list[str]:
        """Return the preference list of `key` (see ``HashRing.nodes_for``).

        :raises ConfigError: when `n` < 1
        :raises EmptyRingError: when there are no nodes
        """
        return self._ring.nodes_for(key, n)

    def node_for_many(self, keys: Iterable[Key]) -> list[str]:
        """Return the owner of each key, in order.

        :raises EmptyRingError: when there are no nodes
        """
        check_key_batch(keys, "node_for_many")
        return self._ring.node_for_many(keys)

    def shares(self) -> dict[str, float]:
        """Return each node's exact keyspace fraction on the ring (``HashRing.shares``)."""
        return self._ring.shares()

    def __contains__(self, name: object) -> bool:
        return name in self._ring
