"""The array engine behind :func:`ringkit.diff`: segments, preference rows, changes, coalescing.

Two rings over one space cut the circle at the union of their tokens into *segments*; inside a
segment neither ring has a token, so every point of it has the same owner (and the same
preference list) in each ring. Merging the two sorted token arrays therefore gives the exact
diff: a segment moved iff its owners differ, and its length is exact. Placements with a table
(partitions, maglev slots) are the same picture with one segment per entry. Everything here is
vectorised numpy over segments; :mod:`ringkit.movement` wraps it in public types.

Segment ``i`` is ``(ends[i - 1], ends[i]]``; segment 0 wraps: ``(ends[-1], ends[0]]``.

>>> ends, _, _ = merged_boundaries(np.array([10, 35], np.uint64), np.array([35, 50], np.uint64))
>>> ends.tolist()
[10, 35, 50]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "Changes",
    "Runs",
    "arc_lengths_exact",
    "changes",
    "coalesce",
    "exact_sum",
    "exact_total",
    "merged_boundaries",
    "preference_rows",
    "segment_lengths",
    "segment_total",
    "streams_at",
]

UInt64Array = npt.NDArray[np.uint64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
_SPACE_64 = 1 << 64
_BUCKET_BITS = 16
_CHUNK = 1 << 18


def merged_boundaries(
    old_tokens: UInt64Array, new_tokens: UInt64Array
) -> tuple[UInt64Array, IntArray, IntArray]:
    """Return the segment ends (the sorted union of two sorted token arrays) and, for each end,
    the index of the first old and the first new token >= it (the owning tokens; wrapped to 0).

    Runtime: O(n): the concatenation is two sorted runs, which a stable argsort (timsort)
    merges in one pass; counting the old tokens before each end replaces two binary searches.

    >>> old, new = np.array([10, 35], np.uint64), np.array([35, 50], np.uint64)
    >>> ends, old_index, new_index = merged_boundaries(old, new)
    >>> ends.tolist(), old_index.tolist(), new_index.tolist()
    ([10, 35, 50], [0, 1, 0], [0, 0, 1])
    """
    both = np.concatenate((old_tokens, new_tokens))
    order = np.argsort(both, kind="stable")
    merged = both[order]
    first = np.empty(len(merged), dtype=bool)
    first[:1] = True
    np.not_equal(merged[1:], merged[:-1], out=first[1:])
    is_old = order < len(old_tokens)
    # old tokens strictly before each merged position
    old_before: IntArray = np.cumsum(is_old) - is_old
    positions = np.flatnonzero(first)
    old_index: IntArray = old_before[positions]
    new_index = positions - old_index
    # Past the last token of a ring: its first token owns the segment (wrap-around).
    old_index[old_index == len(old_tokens)] = 0
    new_index[new_index == len(new_tokens)] = 0
    return merged[positions], old_index, new_index


def segment_lengths(starts: UInt64Array, ends: UInt64Array, space: int) -> UInt64Array:
    """Return the exact length of each arc (start, end] in a space of `space` points.

    A full circle (start == end) is reported as ``space % 2**64``; :func:`exact_total` counts it
    as `space`.

    >>> segment_lengths(np.array([90, 10], np.uint64), np.array([10, 90], np.uint64), 100).tolist()
    [20, 80]
    """
    lengths = ends - starts  # uint64 wraps modulo 2**64: exact for the 64-bit space
    if space != _SPACE_64:
        wrapped = starts >= ends
        lengths[wrapped] = ends[wrapped] + (np.uint64(space) - starts[wrapped])
    return lengths


def exact_sum(values: UInt64Array) -> int:
    """Return the exact sum of a uint64 array as a Python int, without temporaries.

    The uint64 sum is exact modulo 2**64; a float64 sum, off by far less than 2**63 for fewer
    than 2**40 values, tells how many times it wrapped.

    >>> exact_sum(np.array([2**64 - 1] * 3, np.uint64)) == 3 * (2**64 - 1)
    True
    """
    wrapped = int(np.sum(values, dtype=np.uint64))
    approximate = float(np.sum(values, dtype=np.float64))
    return wrapped + round((approximate - wrapped) / 2**64) * 2**64


def exact_total(starts: UInt64Array, ends: UInt64Array, space: int) -> int:
    """Return the exact total length of arcs (start, end] as a Python int.

    >>> exact_total(np.array([5], np.uint64), np.array([5], np.uint64), 2**64) == 2**64
    True
    """
    full = starts == ends
    return exact_sum(segment_lengths(starts, ends, space)[~full]) + space * int(full.sum())


def segment_total(ends: UInt64Array, segments: IntArray, space: int) -> int:
    """Return the exact total length of the given segments (with repeats) of `ends`.

    Runtime: O(m + s) for m segment ends and s segments, with one temporary of each size.
    """
    if len(ends) == 1:  # a single segment is the whole circle
        return space * len(segments)
    lengths = np.empty_like(ends)
    np.subtract(ends[1:], ends[:-1], out=lengths[1:])
    lengths[0] = (int(ends[0]) - int(ends[-1])) % space  # segment 0 wraps
    return exact_sum(lengths[segments])


def preference_rows(owners: IntArray, zone_of: IntArray, replicas: int) -> IntArray:
    """Return, per token, the first `replicas` owners of distinct zones walking clockwise.

    A node without a zone is its own zone, so for zone-less rings this is the first `replicas`
    distinct nodes: the ring's preference list. Every step advances all unfinished tokens by one
    position at once; runs of one owner are short, so few steps are needed.
    Runtime: O(n·R·s) for n tokens and s the longest walk.

    >>> preference_rows(np.array([0, 0, 1, 2]), np.array([0, 1, 2]), 2).tolist()
    [[0, 1], [0, 1], [1, 2], [2, 0]]
    """
    count = len(owners)
    width = min(replicas, int(zone_of.max()) + 1)  # zone ids are 0 … z-1, every node has tokens
    if width == 1:
        return owners[:, None]
    zones = zone_of[owners]
    # Column-major: each dense step compares whole columns.
    rows = np.full((count, width), -1, dtype=np.int64, order="F")
    rows[:, 0] = owners
    zone_less = bool(np.array_equal(zone_of, np.arange(len(zone_of))))
    row_zones = rows if zone_less else rows.copy(order="F")
    row_zones[:, 0] = zones
    filled = np.ones(count, dtype=np.int64)
    step = 1
    pending = np.ones(count, dtype=bool)
    # Dense steps while most tokens are unfinished: whole-array rolls instead of gathers.
    while np.count_nonzero(pending) > count // 8:
        fresh = pending.copy()
        zone_ahead = np.roll(zones, -step)
        for column in range(width):
            fresh &= row_zones[:, column] != zone_ahead
        hit = np.flatnonzero(fresh)
        _fill(rows, row_zones, filled, hit, np.roll(owners, -step)[hit], zone_ahead[hit])
        pending = filled < width
        step += 1
    active = np.flatnonzero(pending)
    while active.size:
        at = (active + step) % count
        fresh = (row_zones[active] != zones[at][:, None]).all(axis=1)
        _fill(rows, row_zones, filled, active[fresh], owners[at[fresh]], zones[at[fresh]])
        active = active[filled[active] < width]
        step += 1
    return rows


def _fill(
    rows: IntArray, row_zones: IntArray, filled: IntArray, hit: IntArray, owner: Any, zone: Any
) -> None:
    """Append `owner` (of `zone`) to the rows `hit`, at their next free column."""
    # Flat indices into the column-major arrays: a 1-D scatter, cheaper than a 2-D one.
    flat = filled[hit] * len(rows) + hit
    rows.reshape(-1, order="F")[flat] = owner
    if row_zones is not rows:
        row_zones.reshape(-1, order="F")[flat] = zone
    filled[hit] += 1


@dataclass(frozen=True, slots=True)
class Changes:
    """What changed, per segment: gained and lost replicas, and the streams pairing them.

    ``gain_*`` / ``loss_*`` are parallel arrays (segment, node); ``stream_*`` are the streams
    (segment, source, destination), in segment order. Node ids index a shared name table.
    """

    gain_segment: IntArray
    gain_node: IntArray
    loss_segment: IntArray
    loss_node: IntArray
    stream_segment: IntArray
    stream_source: IntArray
    stream_destination: IntArray


def _membership(rows: IntArray, others: IntArray) -> BoolArray:
    """Return, for each entry of `rows`, whether its row in `others` holds the same node."""
    found: BoolArray = (rows[:, :, None] == others[:, None, :]).any(axis=2)
    return found


def changes(old_rows: IntArray, new_rows: IntArray) -> Changes:
    """Compare preference rows segment by segment (-1 pads short rows).

    A gained replica is paired with a lost one of the same segment, in preference order: the
    destination takes over the copy the source gives up, and the source, which still holds the
    data, serves it (Cassandra streams a bootstrap from the replica being replaced). A gain with
    no loss to pair (the replica count grows) streams from the segment's old primary; a loss with
    no gain (it shrinks) needs no stream.
    Runtime: O(m·R²) for m segments.
    """
    if old_rows.shape[1] == new_rows.shape[1] == 1:
        return _changes_single(old_rows[:, 0], new_rows[:, 0])
    if old_rows.shape == new_rows.shape:
        # Most rows are equal entry by entry; compare sets only where some entry differs.
        rows = np.flatnonzero((old_rows != new_rows).any(axis=1))
        found = _changes_sets(old_rows[rows], new_rows[rows])
        return Changes(
            gain_segment=rows[found.gain_segment],
            gain_node=found.gain_node,
            loss_segment=rows[found.loss_segment],
            loss_node=found.loss_node,
            stream_segment=rows[found.stream_segment],
            stream_source=found.stream_source,
            stream_destination=found.stream_destination,
        )
    return _changes_sets(old_rows, new_rows)


def _changes_sets(old_rows: IntArray, new_rows: IntArray) -> Changes:
    gained = (new_rows >= 0) & ~_membership(new_rows, old_rows)
    lost = (old_rows >= 0) & ~_membership(old_rows, new_rows)
    gain_segment, gain_column = np.nonzero(gained)
    loss_segment, loss_column = np.nonzero(lost)
    gain_node = new_rows[gain_segment, gain_column]
    loss_node = old_rows[loss_segment, loss_column]
    gain_rank = (np.cumsum(gained, axis=1) - 1)[gain_segment, gain_column]
    loss_count = lost.sum(axis=1)
    loss_offset = np.concatenate(([0], np.cumsum(loss_count)[:-1]))
    paired = gain_rank < loss_count[gain_segment]
    source = old_rows[gain_segment, 0].copy()
    source[paired] = loss_node[loss_offset[gain_segment[paired]] + gain_rank[paired]]
    return Changes(
        gain_segment.astype(np.int64),
        gain_node,
        loss_segment.astype(np.int64),
        loss_node,
        gain_segment.astype(np.int64),
        source,
        gain_node,
    )


def _changes_single(old: IntArray, new: IntArray) -> Changes:
    # One replica: a segment moved iff its owner changed; the old owner sends, the new receives.
    segment = np.flatnonzero(old != new)
    source, destination = old[segment], new[segment]
    return Changes(segment, destination, segment, source, segment, source, destination)


@dataclass(frozen=True, slots=True)
class Runs:
    """Maximal runs of adjacent segments sharing a key (a node or a source→destination pair).

    ``first`` / ``last`` are segment indices (a run that wraps has first > last), ``key`` the
    shared key, and ``run_of[i]`` the run of input record ``i``.
    """

    first: IntArray
    last: IntArray
    key: IntArray
    run_of: IntArray


def coalesce(segment: IntArray, key: IntArray, count: int) -> Runs:
    """Join records of adjacent segments with the same key into runs, across the wrap too.

    `segment` must be ascending (records in segment order); `count` is the number of segments,
    so segment ``count - 1`` is adjacent to segment 0.
    Runtime: O(r log r) for r records (O(r) when each segment has at most one record).
    """
    if not len(segment):
        empty = np.empty(0, dtype=np.int64)
        return Runs(empty, empty, empty, empty)
    unique_segments = bool(np.all(segment[1:] > segment[:-1]))
    order = np.arange(len(segment)) if unique_segments else np.argsort(key, kind="stable")
    seg, k = segment[order], key[order]
    starts = np.ones(len(seg), dtype=bool)
    starts[1:] = (k[1:] != k[:-1]) | (seg[1:] != seg[:-1] + 1)
    run_sorted = np.cumsum(starts) - 1
    ends = np.append(starts[1:], True)
    first, last, run_key = seg[starts], seg[ends], k[starts]
    run_of = np.empty(len(seg), dtype=np.int64)
    run_of[order] = run_sorted
    return _join_wrap(Runs(first, last.copy(), run_key, run_of), count)


def _join_wrap(runs: Runs, count: int) -> Runs:
    """Merge a run starting at segment 0 into the run of the same key ending at the last one."""
    heads = {int(runs.key[i]): i for i in np.flatnonzero(runs.first == 0).tolist()}
    drop: dict[int, int] = {}
    for tail in np.flatnonzero(runs.last == count - 1).tolist():
        head = heads.get(int(runs.key[tail]))
        if head is not None and head != tail:
            runs.last[tail] = runs.last[head]
            drop[head] = tail
    if not drop:
        return runs
    target = np.arange(len(runs.first))
    for head, tail in drop.items():
        target[head] = tail
    keep = np.ones(len(runs.first), dtype=bool)
    keep[list(drop)] = False
    renumber = np.cumsum(keep) - 1
    return Runs(runs.first[keep], runs.last[keep], runs.key[keep], renumber[target[runs.run_of]])


def _touched(starts: UInt64Array, ends: UInt64Array, points: UInt64Array, space: int) -> IntArray:
    """Return the indices of the points in buckets that some arc (start, end] reaches.

    The space is cut into 2**16 equal buckets; a 64 KB table of touched buckets then drops
    most points with one shift (or division) and one gather, before any binary search.
    """
    buckets = 1 << _BUCKET_BITS
    width = -(-space // buckets)
    if width & (width - 1) == 0:  # a power of two: shift instead of dividing
        shift = np.uint64(width.bit_length() - 1)

        def bucket(values: UInt64Array) -> UInt64Array:
            return values >> shift
    else:
        step = np.uint64(width)

        def bucket(values: UInt64Array) -> UInt64Array:
            return values // step

    low, high = bucket(starts).astype(np.int64), bucket(ends).astype(np.int64)
    wraps = starts >= ends
    marks = np.zeros(buckets + 1, dtype=np.int64)
    np.add.at(marks, low, 1)
    np.add.at(marks, np.where(wraps, buckets, high + 1), -1)
    marks[0] += int(np.count_nonzero(wraps))  # a wrapping arc also covers [0, end]
    np.add.at(marks, high[wraps] + 1, -1)
    touched = np.cumsum(marks[:-1]) > 0
    # Chunks keep the temporaries small enough to stay in cache.
    found = [
        np.flatnonzero(touched[bucket(points[at : at + _CHUNK])]) + at
        for at in range(0, len(points), _CHUNK)
    ]
    result: IntArray = np.concatenate(found) if found else np.empty(0, dtype=np.int64)
    return result


def streams_at(
    points: UInt64Array, ends: UInt64Array, stream_segment: IntArray, space: int
) -> tuple[IntArray, IntArray]:
    """Return (point index, stream index) for every stream whose segment holds a point.

    `stream_segment` is ascending. Points outside the buckets the moved segments reach are
    dropped first; the rest are searched among the moved segments only, which stay in cache
    however large the rings are.
    Runtime: O(p) for p points, plus O(c log s) for c candidates and s moved segments.
    """
    moved = np.unique(stream_segment)
    if not len(moved) or not len(points):
        empty = np.empty(0, dtype=np.int64)
        return empty, empty
    starts, moved_ends = ends[moved - 1], ends[moved]
    candidates = _touched(starts, moved_ends, points, space)
    chosen = points[candidates]
    slot = np.searchsorted(moved_ends, chosen, side="left")
    slot[slot == len(moved_ends)] = 0  # past the last moved end: the wrapping segment, if any
    start, end = starts[slot], moved_ends[slot]
    inside = np.where(
        start < end, (chosen > start) & (chosen <= end), (chosen > start) | (chosen <= end)
    )
    hits = np.flatnonzero(inside)
    low = np.searchsorted(stream_segment, moved[slot[hits]], side="left")
    high = np.searchsorted(stream_segment, moved[slot[hits]], side="right")
    counts = high - low
    base = np.repeat(low - (np.cumsum(counts) - counts), counts)
    return np.repeat(candidates[hits], counts), base + np.arange(int(counts.sum()))


def arc_lengths_exact(starts: UInt64Array, ends: UInt64Array, space: int) -> list[int]:
    """Return exact arc lengths as ints; start == end is the whole circle (`space`)."""
    raw = segment_lengths(starts, ends, space).tolist()
    full = (starts == ends).tolist()
    return [space if whole else length for length, whole in zip(raw, full, strict=True)]
