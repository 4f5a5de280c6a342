"""ScheduledRemap: a ring whose hash depends on a version, moved to the next version in slices.

A middle position between a pure ring and a full rehash, common in caches: keep the ring pure,
but make the hash of a key depend on a version, so that a controlled rehash moves a planned
fraction of keys. A *cursor*
sweeps a version-independent selector hash of each key: keys whose selector is below the cursor
are hashed with version v + 1, the rest with version v. ``advance(fraction)`` moves the cursor,
and with it exactly the keys in that slice of the selector space.

This is not consistent hashing any more: for the keys a step touches the move is all or nothing,
like a modulus change (about (N − 1)/N of them change node), while every other key stays put.
:meth:`ScheduledRemap.report` counts both on a set of keys.

Version 0 hashes keys as a plain :class:`~ringkit.HashRing` does, so a ring in service can start
remapping without a flag day; version v >= 1 hashes ``b"v<v>\\x00" + key``.

>>> remap = ScheduledRemap(["a", "b", "c"])
>>> half = remap.advance(0.5)
>>> half.version, half.progress
(0, 0.5)
>>> half.advance(0.5).version
1
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ringkit.errors import ConfigError
from ringkit.hashing import DEFAULT_HASH, HasherLike, Key, check_key_batch, encode_key
from ringkit.nodes import NodesLike
from ringkit.ring import DEFAULT_VNODES, SPACE_64, HashRing
from ringkit.strategies.options import Strategy
from ringkit.strategies.wrapped import RingBacked

__all__ = ["RemapReport", "ScheduledRemap"]

_SELECTOR_SALT = b"\x00remap\x00"


@dataclass(frozen=True, slots=True)
class RemapReport:
    """What one remap step did to a set of keys: touched keys and how many of them moved."""

    keys: int
    touched: int
    moved_touched: int
    moved_untouched: int

    @property
    def moved_fraction_of_touched(self) -> float:
        """The fraction of touched keys that changed node (~(N − 1)/N: all or nothing)."""
        return self.moved_touched / self.touched if self.touched else 0.0


class ScheduledRemap(RingBacked):
    """A hash ring plus (version, cursor); an immutable value.

    Looking up: ``node_for``, ``nodes_for``, ``node_for_many``, ``version_for``.
    Remapping: ``advance``, ``report``, ``version``, ``progress``.
    Changing membership: ``add``, ``remove``, ``discard``, ``reweight`` (the cursor is kept;
    keys move as on the ring: only to or from the node changed).
    Measuring: ``ring``, ``nodes``, ``shares``, ``len``, ``in``, ``iter``, ``==``.
    """

    __slots__ = ("_cursor", "_version")

    def __init__(
        self,
        nodes: NodesLike = (),
        *,
        vnodes: int = DEFAULT_VNODES,
        hasher: HasherLike = DEFAULT_HASH,
        version: int = 0,
    ) -> None:
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise ConfigError(f"version must be an int >= 0, got {version!r}")
        self._set_ring(HashRing(nodes, vnodes=vnodes, hasher=hasher))
        self._version = version
        self._cursor = 0

    def _with(self, ring: HashRing, version: int, cursor: int) -> ScheduledRemap:
        result = ScheduledRemap.__new__(ScheduledRemap)
        result._set_ring(ring)
        result._version, result._cursor = version, cursor
        return result

    def _with_ring(self, ring: HashRing) -> ScheduledRemap:
        return self._with(ring, self._version, self._cursor)

    # -- looking up --------------------------------------------------------------------------

    def version_for(self, key: Key) -> int:
        """Return the version `key` is hashed with now: v + 1 if its selector is below the cursor.

        :raises TypeError: when `key` is not str, bytes or int
        """
        selector = self._ring.hasher.point(_SELECTOR_SALT + encode_key(key))
        return self._version + 1 if selector < self._cursor else self._version

    def _hashed(self, key: Key) -> bytes:
        data = encode_key(key)
        version = self.version_for(data)
        return data if version == 0 else b"v%d\x00" % version + data

    def node_for(self, key: Key) -> str:
        """Return the owner of `key` under its current version. Runtime: O(log(N·V)).

        :raises EmptyRingError: when there are no nodes
        """
        return self._ring.node_for(self._hashed(key))

    def nodes_for(self, key: Key, n: int) -> list[str]:
        """Return the preference list of `key` under its current version.

        :raises ConfigError: when `n` < 1
        :raises EmptyRingError: when there are no nodes
        """
        return self._ring.nodes_for(self._hashed(key), n)

    def node_for_many(self, keys: Iterable[Key]) -> list[str]:
        """Return the owner of each key, in order.

        :raises EmptyRingError: when there are no nodes
        """
        check_key_batch(keys, "node_for_many")
        return self._ring.node_for_many(self._hashed(key) for key in keys)

    # -- remapping ---------------------------------------------------------------------------

    @property
    def version(self) -> int:
        """The version every key not yet reached by the cursor is hashed with."""
        return self._version

    @property
    def progress(self) -> float:
        """How far the cursor has swept toward version + 1, in [0, 1)."""
        return self._cursor / SPACE_64

    def advance(self, fraction: float) -> ScheduledRemap:
        """Return the remap with `fraction` more of the selector space on version + 1.

        Reaching the end completes the version: version + 1 with the cursor back at 0. A step
        never runs into the next version.

        :raises ConfigError: when `fraction` is not in (0, 1]
        """
        if not 0 < fraction <= 1:
            raise ConfigError(f"fraction must be in (0, 1], got {fraction!r}")
        cursor = self._cursor + round(fraction * SPACE_64)
        if cursor >= SPACE_64:
            return self._with(self._ring, self._version + 1, 0)
        return self._with(self._ring, self._version, cursor)

    def report(self, after: ScheduledRemap, keys: Iterable[Key]) -> RemapReport:
        """Count, over `keys`, those whose version changed from this remap to `after`, and how
        many of them and of the others changed node.

        Runtime: O(K log(N·V)).
        """
        items = list(keys)
        before, later = self.node_for_many(items), after.node_for_many(items)
        touched = moved_touched = moved_untouched = 0
        for key, old, new in zip(items, before, later, strict=True):
            if self.version_for(key) != after.version_for(key):
                touched += 1
                moved_touched += old != new
            else:
                moved_untouched += old != new
        return RemapReport(len(items), touched, moved_touched, moved_untouched)

    # -- measuring ----------------------------------------------------------------------------

    def shares(self) -> dict[str, float]:
        """Return each node's exact share of the ring's points; keys reach points through a
        versioned hash, so for real keys these are estimates of the same quantity."""
        return self._ring.shares()

    def _identity(self) -> tuple[object, ...]:
        return (self._ring, self._version, self._cursor)

    def _repr_options(self) -> str:
        return f", version={self._version}, progress={self.progress:.3f}"


# The registry's entry (ringkit.strategies.registry): the options build_placement passes.
STRATEGY = Strategy("scheduled", ScheduledRemap, {"vnodes": DEFAULT_VNODES, "hasher": DEFAULT_HASH})
