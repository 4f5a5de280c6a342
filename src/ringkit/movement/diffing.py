"""Movement: exactly which arcs and keys move when a placement changes, from whom to whom.

``diff(old, new)`` compares two placements over one key space. For two rings it merges their
sorted tokens: wherever the owner of a stretch of points differs, that stretch moved, so the moved
arcs, their lengths and ``moved_fraction`` are exact, not sampled: exactly which keys move, and
to which node. With ``replicas=R`` it compares preference lists instead: each
node's gained and lost replica ranges, and the streams that rebuild R copies of every key.
Partition tables and maglev tables are compared entry by entry, exactly; any other placement over
a key sample. Beside every result stands what ``hash % N`` would have moved (Karger et al. 1997's
motivation for consistent hashing).

A node E added at token 50 takes the arc (35, 50] from the node owning token 60 (the first token
>= a point owns it, as libketama and Envoy rule):

>>> from ringkit.ring import HashRing
>>> old = HashRing.from_tokens({"A": [10], "B": [35], "C": [60], "D": [85]}, space=100)
>>> movement = diff(old, old.add("E", tokens=[50]))
>>> movement.arcs
(MovedArc(start=35, end=50, source='C', destination='E', length=15),)
>>> movement.moved_fraction, movement.moved_points([15, 45, 55, 70, 95])
(0.15, [(45, 'C', 'E')])
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from ringkit.errors import ConfigError, EmptyRingError, UnsupportedError
from ringkit.hashing import DEFAULT_HASH, Key
from ringkit.movement.plan import (
    DEFAULT_BANDWIDTH_BYTES_PER_S,
    DEFAULT_MAX_STREAMS,
    DEFAULT_SETUP_S,
    MigrationPlan,
    arc_candidates,
    build_plan,
    check_plan_options,
    check_sizes,
    pair_candidates,
)
from ringkit.movement.segments import (
    Changes,
    IntArray,
    Runs,
    UInt64Array,
    arc_lengths_exact,
    changes,
    coalesce,
    exact_total,
    segment_total,
    streams_at,
)
from ringkit.movement.units import (
    Locate,
    Units,
    as_sequence,
    check_points,
    check_replicas,
    key_rows,
    modulo_fraction,
    modulo_streams,
    optimum_fraction,
    units_for,
)
from ringkit.placement import Placement, unknown_node
from ringkit.ring import Arc

__all__ = ["MovedArc", "Movement", "diff"]


@dataclass(frozen=True, slots=True)
class MovedArc:
    """The arc (start, end] whose copy moves from `source` to `destination`; `length` points.

    An arc wraps when start >= end (start == end is the whole circle). For partition and maglev
    tables the points are entry indices: (a, b] holds entries a+1 … b.
    """

    start: int
    end: int
    source: str
    destination: str
    length: int

    def __str__(self) -> str:
        return f"arc ({self.start}, {self.end}] from {self.source} to {self.destination}"


@dataclass(frozen=True, slots=True, eq=False)
class Movement:
    """What a change of placement moves. Made by :func:`diff`; read-only.

    ``basis`` says what was compared: ``"points"`` (two rings, exact), ``"partitions"`` or
    ``"slots"`` (tables, exact) or ``"keys"`` (a key sample). ``moved_total`` counts moved
    copies exactly (points, entries or keys; R per key with replicas) and ``moved_fraction`` is
    it over all copies after the change; ``optimum_fraction`` is the least any placement must
    move to reach the new fair shares, ``modulo_fraction`` what ``hash % N`` moves on the same
    nodes. ``keys_*`` are set when ``diff`` was given keys.

    Arcs: ``arcs``, ``pairs``, ``gained``, ``lost``. Keys: ``moved_points``, ``moved_keys``. Plan.
    """

    basis: str
    replicas: int
    space: int
    nodes_before: tuple[str, ...]
    nodes_after: tuple[str, ...]
    moved_total: int
    moved_fraction: float
    optimum_fraction: float
    modulo_fraction: float
    keys_total: int | None
    keys_moved: int | None
    modulo_keys_moved: int | None
    _names: tuple[str, ...] = field(repr=False)
    _ends: UInt64Array = field(repr=False)
    _changes: Changes = field(repr=False)
    _locate: Locate | None = field(repr=False)
    _placements: tuple[Any, Any] = field(repr=False)
    _keys: Sequence[Key] | None = field(repr=False)
    _cache: dict[str, Any] = field(repr=False, default_factory=dict)

    # -- arcs ----------------------------------------------------------------------------------

    def _runs(self) -> Runs:
        if "runs" not in self._cache:
            streams = self._changes
            pair = streams.stream_source * len(self._names) + streams.stream_destination
            self._cache["runs"] = coalesce(streams.stream_segment, pair, len(self._ends))
        runs: Runs = self._cache["runs"]
        return runs

    def _bounds(self, first: IntArray, last: IntArray) -> tuple[UInt64Array, UInt64Array]:
        # Segment i is (ends[i - 1], ends[i]]; index -1 is the wrap from the last segment.
        return self._ends[first - 1], self._ends[last]

    @property
    def arcs(self) -> tuple[MovedArc, ...]:
        """The moved arcs, coalesced where adjacent, ordered by end (then source, destination).

        Empty for a diff over keys (``basis="keys"``), which has no arcs.
        Runtime: O(a log a) for a arcs, once (cached).
        """
        if self.basis == "keys":
            return ()
        if "arcs" not in self._cache:
            runs = self._runs()
            starts, ends = self._bounds(runs.first, runs.last)
            count = len(self._names)
            order = np.lexsort((runs.key % count, runs.key // count, ends))
            starts, ends, keys = starts[order], ends[order], runs.key[order]
            lengths = arc_lengths_exact(starts, ends, self.space)
            names = self._names
            self._cache["arcs"] = tuple(
                MovedArc(start, end, names[key // count], names[key % count], length)
                for start, end, key, length in zip(
                    starts.tolist(), ends.tolist(), keys.tolist(), lengths, strict=True
                )
            )
        arcs: tuple[MovedArc, ...] = self._cache["arcs"]
        return arcs

    def pairs(self) -> dict[tuple[str, str], int]:
        """Return the exact total moved per (source, destination), largest first.

        >>> from ringkit.ring import HashRing
        >>> old = HashRing.from_tokens({"A": [10], "B": [35], "C": [60], "D": [85]}, space=100)
        >>> diff(old, old.remove("C")).pairs()
        {('C', 'D'): 25}
        """
        streams = self._changes
        count = len(self._names)
        pair = streams.stream_source * count + streams.stream_destination
        order = np.argsort(pair, kind="stable")
        pair, segments = pair[order], streams.stream_segment[order]
        starts, ends = self._bounds(segments, segments)
        cuts = np.flatnonzero(np.diff(pair)) + 1
        totals = {
            (self._names[int(group[0]) // count], self._names[int(group[0]) % count]): (
                exact_total(first, last, self.space)
            )
            for group, first, last in zip(
                np.split(pair, cuts), np.split(starts, cuts), np.split(ends, cuts), strict=True
            )
            if len(group)
        }
        return dict(sorted(totals.items(), key=lambda item: (-item[1], item[0])))

    def _node_arcs(self, node: str, segments: IntArray, nodes: IntArray) -> list[Arc]:
        if self.basis == "keys":
            raise UnsupportedError(
                "a diff over keys has no arcs; use moved_keys() for the keys a node gains or loses"
            )
        if node not in self._names:
            raise unknown_node(node, self._names, "diff")
        chosen = segments[nodes == self._names.index(node)]
        runs = coalesce(chosen, np.zeros(len(chosen), dtype=np.int64), len(self._ends))
        starts, ends = self._bounds(runs.first, runs.last)
        lengths = arc_lengths_exact(starts, ends, self.space)
        arcs = [
            Arc(start, end, node, length)
            for start, end, length in zip(starts.tolist(), ends.tolist(), lengths, strict=True)
        ]
        return sorted(arcs, key=lambda arc: arc.end)

    def gained(self, node: str) -> list[Arc]:
        """Return the arcs `node` holds a copy of after the change but not before.

        :raises UnknownNodeError: when `node` is in neither placement
        :raises UnsupportedError: for a diff over keys (``basis="keys"``)
        """
        return self._node_arcs(node, self._changes.gain_segment, self._changes.gain_node)

    def lost(self, node: str) -> list[Arc]:
        """Return the arcs `node` held a copy of before the change but not after.

        :raises UnknownNodeError: when `node` is in neither placement
        :raises UnsupportedError: for a diff over keys (``basis="keys"``)
        """
        return self._node_arcs(node, self._changes.loss_segment, self._changes.loss_node)

    # -- keys ----------------------------------------------------------------------------------

    def _point_streams(self, points: UInt64Array) -> tuple[IntArray, IntArray]:
        """Return (point index, stream index) for every stream covering a point."""
        return streams_at(points, self._ends, self._changes.stream_segment, self.space)

    def _key_streams(self, keys: Sequence[Key]) -> tuple[IntArray, IntArray, IntArray]:
        """Return (key index, source id, destination id) for every stream a key needs."""
        if self._locate is None:
            old, new = self._placements
            table = {name: index for index, name in enumerate(self._names)}
            found = changes(
                key_rows(old, keys, self.replicas, table), key_rows(new, keys, self.replicas, table)
            )
            return found.stream_segment, found.stream_source, found.stream_destination
        index, stream = self._point_streams(self._locate(keys))
        return index, self._changes.stream_source[stream], self._changes.stream_destination[stream]

    def moved_points(self, points: npt.ArrayLike) -> list[tuple[int, str, str]]:
        """Return ``(point, source, destination)`` for each moved point (one per stream).

        Points are positions in the diff's space (partition or slot numbers for tables).
        Runtime: O(p log a) for p points and a moved arcs.

        :raises ConfigError: for a point outside [0, space)
        :raises UnsupportedError: for a diff over keys (``basis="keys"``)
        """
        if self._locate is None:
            raise UnsupportedError("a diff over keys has no points; use moved_keys()")
        array = check_points(points, self.space)
        index, stream = self._point_streams(array)
        names = self._names
        return [
            (point, names[source], names[destination])
            for point, source, destination in zip(
                array[index].tolist(),
                self._changes.stream_source[stream].tolist(),
                self._changes.stream_destination[stream].tolist(),
                strict=True,
            )
        ]

    def moved_keys(self, keys: Iterable[Key]) -> list[tuple[Key, str, str]]:
        """Return ``(key, source, destination)`` for each moved key (one per stream), in order.

        Runtime: O(k) hashing plus O(k log a) searching for k keys and a moved arcs.

        :raises TypeError: when a key is not str, bytes or int
        """
        sequence = as_sequence(keys)
        index, sources, destinations = self._key_streams(sequence)
        names = self._names
        return [
            (sequence[i], names[s], names[d])
            for i, s, d in zip(index.tolist(), sources.tolist(), destinations.tolist(), strict=True)
        ]

    # -- planning ------------------------------------------------------------------------------

    def plan(
        self,
        keys: Iterable[Key] | None = None,
        sizes: Iterable[int] | None = None,
        *,
        max_streams_per_source: int = DEFAULT_MAX_STREAMS,
        max_streams_per_destination: int | None = None,
        setup_s: float = DEFAULT_SETUP_S,
        bandwidth_bytes_per_s: float = DEFAULT_BANDWIDTH_BYTES_PER_S,
        total_bytes: int | None = None,
    ) -> MigrationPlan:
        """Return the migration plan: one range read per moved arc, in waves.

        With `keys` (default: the keys given to ``diff``) each transfer counts its keys, with
        `sizes` (bytes per key, aligned with `keys`) its bytes; otherwise bytes are estimated as
        the arc's share of `total_bytes`, if given. A diff over keys has one transfer per
        (source, destination) pair. See :mod:`ringkit.movement.plan` for the cost model.

        :raises ConfigError: for sizes without keys, sizes not aligned with keys, a negative
            size, or invalid limits or cost model
        """
        check_plan_options(
            max_streams_per_source, max_streams_per_destination, setup_s, bandwidth_bytes_per_s
        )
        key_list = self._keys if keys is None else as_sequence(keys)
        size_array = check_sizes(sizes, key_list)
        if self._locate is None:
            assert key_list is not None  # a diff over keys always has them
            index, sources, destinations = self._key_streams(key_list)
            sized = None if size_array is None else size_array[index]
            candidates = pair_candidates(self._names, sources, destinations, sized)
        else:
            runs = self._runs()
            starts, ends = self._bounds(runs.first, runs.last)
            hit_runs = hit_sizes = None
            if key_list is not None:
                index, stream = self._point_streams(self._locate(key_list))
                hit_runs = runs.run_of[stream]
                hit_sizes = None if size_array is None else size_array[index]
            lengths = arc_lengths_exact(starts, ends, self.space)
            candidates = arc_candidates(
                self._names, runs.key, (starts, ends, lengths), hit_runs, hit_sizes
            )
        return build_plan(
            candidates,
            space=self.space,
            max_streams_per_source=max_streams_per_source,
            max_streams_per_destination=max_streams_per_destination,
            setup_s=setup_s,
            bandwidth_bytes_per_s=bandwidth_bytes_per_s,
            total_bytes=total_bytes,
        )


def diff(
    old: Placement, new: Placement, *, replicas: int = 1, keys: Iterable[Key] | None = None
) -> Movement:
    """Return what changing placement `old` into `new` moves.

    Exact for two rings over one space and hasher (their merged tokens), for two partition
    tables of one size and for two maglev tables of one size (one replica); for any other pair
    of placements the diff is over `keys`, which is then required. With `keys`, the result also
    counts the streams those keys need, for the placements and for ``hash % N``.
    Runtime (rings): O(T) to merge T tokens, O(T·R²) with replicas, O(k) for k keys.

    >>> from ringkit.ring import HashRing
    >>> old = HashRing(["A", "B", "C"], vnodes=64)
    >>> movement = diff(old, old.add("D"))
    >>> {arc.destination for arc in movement.arcs}, movement.optimum_fraction
    ({'D'}, 0.25)

    :raises ConfigError: when `replicas` < 1, or `keys` are needed and missing
    :raises EmptyRingError: when either placement has no nodes
    """
    replicas = check_replicas(replicas)
    key_list = None if keys is None else as_sequence(keys)
    before = tuple(node.name for node in old.nodes)
    after = tuple(node.name for node in new.nodes)
    names = tuple(sorted({*before, *after}))
    units = _units(old, new, replicas, key_list, names)
    found = changes(units.old_rows, units.new_rows)
    segments = found.stream_segment
    moved = segment_total(units.ends, segments, units.space)
    copies = int(np.count_nonzero(units.new_rows >= 0))
    capacity = units.new_rows.shape[1] * units.space if units.basis == "points" else copies
    movement = Movement(
        units.basis,
        replicas,
        units.space,
        before,
        after,
        moved,
        moved / capacity,
        optimum_fraction(old, new),
        modulo_fraction(before, after, replicas),
        None,
        None,
        None,
        _names=names,
        _ends=units.ends,
        _changes=found,
        _locate=units.locate,
        _placements=(old, new),
        _keys=key_list,
    )
    if key_list is None:
        return movement
    hasher = new.hasher or DEFAULT_HASH
    return replace(
        movement,
        keys_total=len(key_list),
        keys_moved=len(segments if units.basis == "keys" else movement._key_streams(key_list)[0]),
        modulo_keys_moved=modulo_streams(before, after, hasher, key_list, replicas),
    )


def _units(
    old: Placement,
    new: Placement,
    replicas: int,
    keys: Sequence[Key] | None,
    names: tuple[str, ...],
) -> Units:
    for side, placement in (("old", old), ("new", new)):
        if len(placement) == 0:
            raise EmptyRingError(f"diff() needs nodes on both sides; the {side} placement is empty")
    table = {name: index for index, name in enumerate(names)}
    units = units_for(old, new, replicas, keys, table)
    if units is None:
        raise ConfigError(
            f"diff of {type(old).__name__} and {type(new).__name__} needs keys=: they share no "
            "exact segmentation (same-space rings, partition or slot tables); pass a key sample"
        )
    return units
