"""The membership surface of placements built on a HashRing (allocated, bounded, scheduled).

Such a placement keeps a ring in ``_ring`` and answers ``ring``, ``hasher``, ``nodes``,
``shares``, ``len``, ``in`` and ``iter`` from it; what it adds (allocation, load caps, versioned
hashing) stays in its own module.
"""

from __future__ import annotations

from collections.abc import Iterator

from ringkit.hashing import Hasher
from ringkit.nodes import Node
from ringkit.ring import HashRing

__all__ = ["RingWrapperMixin"]


class RingWrapperMixin:
    """Delegates the ring-derived part of the placement protocol to ``self._ring``."""

    __slots__ = ()
    _ring: HashRing

    @property
    def ring(self) -> HashRing:
        """The ring this placement is built on."""
        return self._ring

    @property
    def hasher(self) -> Hasher:
        """The ring's hash function (``diff`` compares ``hash % N`` with it)."""
        return self._ring.hasher

    @property
    def nodes(self) -> tuple[Node, ...]:
        """The ring's nodes, sorted by name."""
        return self._ring.nodes

    def shares(self) -> dict[str, float]:
        """Return each node's exact keyspace fraction on the ring (``HashRing.shares``)."""
        return self._ring.shares()

    def __len__(self) -> int:
        return len(self._ring)

    def __contains__(self, name: object) -> bool:
        return name in self._ring

    def __iter__(self) -> Iterator[str]:
        return iter(self._ring)
