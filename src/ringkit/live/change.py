"""Changes: one epoch to the next, with exactly what moved, for subscribers and members.

``change.movement`` is ``ringkit.diff(old.ring, new.ring)``. ``diff`` refuses an empty side, but
a live ring has two such changes, the first join and the last leave; there the movement is an
:class:`EmptySideMovement`: everything arrives from nowhere, or leaves to nowhere (the empty name
``""``). Its ``gained``/``lost`` arcs are what ``diff`` gives against a one-token placeholder
ring, so they are coalesced exactly as ``diff`` coalesces.

>>> from ringkit.ring import HashRing
>>> ring = HashRing.from_tokens({"a": [10], "b": [40]}, space=100)
>>> moved = EmptySideMovement.between(HashRing.from_tokens({}, space=100), ring)
>>> [(arc.source, arc.destination, arc.length) for arc in moved.arcs]
[('', 'a', 70), ('', 'b', 30)]
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ringkit.movement import MovedArc, Movement, diff
from ringkit.placement import Placement
from ringkit.ring import Arc, HashRing

if TYPE_CHECKING:
    from ringkit.live.snapshot import Snapshot

__all__ = ["Change", "EmptySideMovement", "MemberChange", "movement_between"]

_NOBODY = "\x00ringkit-live-nobody"


@dataclass(frozen=True, slots=True, eq=False)
class EmptySideMovement:
    """``diff`` for a change whose old or new ring is empty: every copy arrives or leaves.

    ``moved_fraction`` is 1.0 (0.0 when both sides are empty); ``arcs`` name ``""`` as the side
    that has no node. ``gained(node)`` / ``lost(node)`` as :class:`Movement` has them.
    """

    replicas: int
    nodes_before: tuple[str, ...]
    nodes_after: tuple[str, ...]
    moved_fraction: float
    _inner: Movement | None = field(repr=False)
    _arriving: bool = field(repr=False)

    @classmethod
    def between(cls, old: Placement, new: Placement, *, replicas: int = 1) -> EmptySideMovement:
        """Return the movement from `old` to `new`, one of which has no nodes."""
        before = tuple(node.name for node in old.nodes)
        after = tuple(node.name for node in new.nodes)
        full = new if after else old
        if not len(full):
            return cls(replicas, before, after, 0.0, None, True)
        space = full.space if isinstance(full, HashRing) else 2**64
        placeholder = HashRing.from_tokens({_NOBODY: [0]}, space=space)
        inner = (
            diff(placeholder, full, replicas=replicas)
            if after
            else diff(full, placeholder, replicas=replicas)
        )
        return cls(replicas, before, after, 1.0, inner, bool(after))

    @property
    def arcs(self) -> tuple[MovedArc, ...]:
        """The arcs that move, with ``""`` for the empty side."""
        if self._inner is None:
            return ()
        return tuple(
            MovedArc(
                arc.start,
                arc.end,
                arc.source.replace(_NOBODY, ""),
                arc.destination.replace(_NOBODY, ""),
                arc.length,
            )
            for arc in self._inner.arcs
        )

    def gained(self, node: str) -> list[Arc]:
        """Return the arcs `node` holds a copy of after the change (all of them on arrival)."""
        if self._inner is None or not self._arriving or node not in self.nodes_after:
            return []
        return self._inner.gained(node)

    def lost(self, node: str) -> list[Arc]:
        """Return the arcs `node` held a copy of before the change (all of them on departure)."""
        if self._inner is None or self._arriving or node not in self.nodes_before:
            return []
        return self._inner.lost(node)


def movement_between(
    old: Placement, new: Placement, *, replicas: int = 1
) -> Movement | EmptySideMovement:
    """Return ``diff(old, new, replicas=…)``, or an :class:`EmptySideMovement` for an empty side.

    :raises ConfigError: for two placements ``diff`` cannot compare exactly (a ring and a table)
    """
    if len(old) == 0 or len(new) == 0:
        return EmptySideMovement.between(old, new, replicas=replicas)
    return diff(old, new, replicas=replicas)


@dataclass(frozen=True, slots=True, eq=False)
class Change:
    """One new epoch: ``old`` and ``new`` snapshots and, computed on first use, ``movement``.

    ``applied_s`` is the ``time.monotonic()`` at which this process applied it (made it).
    """

    old: Snapshot
    new: Snapshot
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)
    applied_s: float = field(default_factory=time.monotonic, repr=False)

    @property
    def movement(self) -> Movement | EmptySideMovement:
        """``ringkit.diff(old.ring, new.ring)`` (see :func:`movement_between`)."""
        if "movement" not in self._cache:
            self._cache["movement"] = movement_between(self.old.ring, self.new.ring)
        found: Movement | EmptySideMovement = self._cache["movement"]
        return found

    def movement_for(self, replicas: int) -> Movement | EmptySideMovement:
        """The movement of every copy with `replicas` copies per key."""
        if replicas == 1:
            return self.movement
        key = f"movement/{replicas}"
        if key not in self._cache:
            self._cache[key] = movement_between(self.old.ring, self.new.ring, replicas=replicas)
        found: Movement | EmptySideMovement = self._cache[key]
        return found

    def __repr__(self) -> str:
        return f"Change(epoch {self.old.epoch} -> {self.new.epoch})"


@dataclass(frozen=True, slots=True)
class MemberChange:
    """What one member must load (``gained``) and may drop (``lost``) at a new epoch."""

    member: str
    old_epoch: int
    new_epoch: int
    replicas: int
    gained: tuple[Arc, ...]
    lost: tuple[Arc, ...]
    change: Change = field(repr=False)
