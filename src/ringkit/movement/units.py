"""How a pair of placements becomes segments with preference rows, for :func:`ringkit.diff`.

Each placement says which exact units it routes by (``placement.segmentation(replicas)``); when
both offer the same kind of units (same basis, size and hasher), the diff is exact:

- ``"points"``: two rings (``placement.ring``) over one space and hasher: the union of their
  tokens;
- ``"partitions"`` (fixed partition tables) and ``"slots"`` (maglev tables for one replica,
  Redis Cluster slot tables): one segment per unit, with each unit's replica row.

Anything else: one segment per key of a given sample (``basis="keys"``).

Rows hold ids into one name table shared by both placements (-1 pads short rows). Beside them,
what ``hash % N`` (:class:`ringkit.Modulo` over the same nodes, in the order its ``add`` and
``remove`` would leave them) moves: exactly for one replica, over residues otherwise.

>>> modulo_fraction(["A", "B", "C"], ["A", "B", "C", "D"], 1)
0.75
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any

import numpy as np
import numpy.typing as npt
import xxhash

from ringkit.errors import ConfigError
from ringkit.hashing import Hasher, Key, get_hasher, hash_many, xxh3_64
from ringkit.movement.segments import (
    IntArray,
    UInt64Array,
    changes,
    merged_boundaries,
    preference_rows,
)
from ringkit.placement import Placement, Segmentation, TokenRing
from ringkit.ring import SPACE_64
from ringkit.ring.preference import walk_distinct

__all__ = [
    "Units",
    "as_sequence",
    "check_points",
    "check_replicas",
    "key_rows",
    "modulo_fraction",
    "modulo_order",
    "modulo_streams",
    "native_hashes",
    "optimum_fraction",
    "units_for",
]

Locate = Callable[[Sequence[Key]], UInt64Array]
# Beyond this many residues (lcm of the two node counts) the replicated modulo baseline is
# estimated from a fixed-seed sample of residues instead of enumerated.
_RESIDUES_EXACT = 1 << 16
_RESIDUE_SAMPLE = 1 << 16


@dataclass(frozen=True, slots=True)
class Units:
    """Segments (ends in a space of `space` points) and both placements' preference rows."""

    basis: str
    space: int
    ends: UInt64Array
    old_rows: IntArray
    new_rows: IntArray
    locate: Locate | None


def _ids(names: Sequence[str], table: dict[str, int]) -> IntArray:
    return np.array([table[name] for name in names], dtype=np.int64)


def _ring_token_rows(ring: TokenRing, replicas: int, table: dict[str, int]) -> IntArray:
    owners = ring.token_owners.astype(np.int64)
    zone_keys = [(node.zone is not None, node.zone or node.name) for node in ring.nodes]
    zone_index: dict[tuple[bool, str], int] = {}
    zone_of = np.array([zone_index.setdefault(z, len(zone_index)) for z in zone_keys])
    zoned = any(node.zone is not None for node in ring.nodes)
    if zoned and replicas > len(zone_index):
        rows = _walk_rows(ring, replicas, owners.tolist(), zone_of.tolist())
    else:
        rows = preference_rows(owners, zone_of, replicas)
    mapped: IntArray = _ids([node.name for node in ring.nodes], table)[rows]
    return mapped


def _walk_rows(ring: TokenRing, replicas: int, owners: list[int], zone_of: list[int]) -> IntArray:
    """Per-token preference rows by the ring's own walk (zones with more replicas than zones).

    Runtime: O(n·w) in Python for n tokens and walks of w steps; such rings are small.
    """
    width = min(replicas, len(ring))
    rows = np.empty((len(owners), width), dtype=np.int64)
    for start in range(len(owners)):
        rows[start] = list(islice(walk_distinct(owners, start, zone_of), width))
    return rows


# NOTE: the registered xxh3_64 is a Python wrapper; calling the C function straight from map()
# hashes str keys about 3x faster (benchmarks/bench_movement.py, moved_keys over 10M keys).
_C_FUNCTIONS: dict[Callable[[bytes], int], Callable[[bytes], int]] = {
    xxh3_64: xxhash.xxh3_64_intdigest
}


def native_hashes(keys: Sequence[Key], hasher: Hasher) -> UInt64Array:
    """Return the native hashes of `keys` (``hash_many``), fast when every key is a str.

    >>> native_hashes(["a", b"a", 7], get_hasher("fnv1a_32")).tolist()
    [3826002220, 3826002220, 839689206]
    """
    function = _C_FUNCTIONS.get(hasher.function, hasher.function)
    try:
        encoded = map(str.encode, keys)  # type: ignore[arg-type]
        return np.fromiter(map(function, encoded), dtype=np.uint64, count=len(keys))
    except TypeError:  # not all str: the general path encodes (or refuses) each key
        return hash_many(keys, hasher)


def _ring_locate(ring: TokenRing) -> Locate:
    def locate(keys: Sequence[Key]) -> UInt64Array:
        hashes = native_hashes(keys, ring.hasher)
        if ring.space != SPACE_64:
            return hashes % np.uint64(ring.space)
        if ring.hasher.bits < 64:
            hashes <<= np.uint64(64 - ring.hasher.bits)  # widen, as the ring does
        return hashes

    return locate


def _ring_units(old: TokenRing, new: TokenRing, replicas: int, table: dict[str, int]) -> Units:
    ends_and_rows = _merge(old, new, replicas, table)
    return Units("points", old.space, *ends_and_rows, _ring_locate(new))


def _merge(
    old: TokenRing, new: TokenRing, replicas: int, table: dict[str, int]
) -> tuple[UInt64Array, IntArray, IntArray]:
    ends, old_index, new_index = merged_boundaries(old.tokens, new.tokens)
    old_rows = _ring_token_rows(old, replicas, table)[old_index]
    new_rows = _ring_token_rows(new, replicas, table)[new_index]
    return ends, old_rows, new_rows


def _padded(rows: Sequence[Sequence[str]], replicas: int, table: dict[str, int]) -> IntArray:
    width = max((min(replicas, len(row)) for row in rows), default=1)
    result = np.full((len(rows), width), -1, dtype=np.int64)
    for index, row in enumerate(rows):
        ids = [table[name] for name in row[:width]]
        result[index, : len(ids)] = ids
    return result


def _table_units(
    old: Segmentation, new: Segmentation, replicas: int, table: dict[str, int]
) -> Units:
    """One segment per unit of two tables of one size: partitions or slots."""
    assert old.rows is not None and new.rows is not None and new.unit_for is not None
    unit_for = new.unit_for
    ends = np.arange(new.size, dtype=np.uint64)
    old_rows = _padded(old.rows(), replicas, table)
    new_rows = _padded(new.rows(), replicas, table)

    def locate(keys: Sequence[Key]) -> UInt64Array:
        return np.fromiter((unit_for(key) for key in keys), dtype=np.uint64, count=len(keys))

    return Units(new.basis, new.size, ends, old_rows, new_rows, locate)


def key_rows(
    placement: Placement, keys: Sequence[Key], replicas: int, table: dict[str, int]
) -> IntArray:
    """Return each key's preference row (its first `replicas` nodes) as ids into `table`.

    Runtime: one batch lookup for one replica, a ``nodes_for`` per key otherwise.
    """
    if replicas == 1:
        return _ids(placement.node_for_many(keys), table)[:, None]
    return _padded([placement.nodes_for(key, replicas) for key in keys], replicas, table)


def units_for(
    old: Placement,
    new: Placement,
    replicas: int,
    keys: Sequence[Key] | None,
    table: dict[str, int],
) -> Units | None:
    """Return the exact segments of `old` -> `new`, or over `keys`; None if neither applies."""
    old_units, new_units = old.segmentation(replicas), new.segmentation(replicas)
    if old_units is not None and old_units == new_units:
        if old_units.basis == "points" and old.ring is not None and new.ring is not None:
            return _ring_units(old.ring, new.ring, replicas, table)
        if old_units.basis != "points":
            return _table_units(old_units, new_units, replicas, table)
    if keys is None:
        return None
    ends = np.arange(len(keys), dtype=np.uint64)
    old_rows = key_rows(old, keys, replicas, table)
    new_rows = key_rows(new, keys, replicas, table)
    return Units("keys", len(keys), ends, old_rows, new_rows, None)


# -- the hash % N baseline ---------------------------------------------------------------------


def modulo_order(old_names: Sequence[str], new_names: Sequence[str]) -> list[str]:
    """Return the new node order ``Modulo`` would have: survivors in place, newcomers appended.

    >>> modulo_order(["A", "B", "C"], ["A", "C", "D"])
    ['A', 'C', 'D']
    """
    kept = set(new_names)
    old_set = set(old_names)
    return [name for name in old_names if name in kept] + [
        name for name in new_names if name not in old_set
    ]


def _modulo_rows(values: UInt64Array, ids: IntArray, replicas: int) -> IntArray:
    count = len(ids)
    width = min(replicas, count)
    first = (values % np.uint64(count)).astype(np.int64)
    rows: IntArray = ids[(first[:, None] + np.arange(width)) % count]
    return rows


def _modulo_count(values: UInt64Array, old: Sequence[str], new: Sequence[str], r: int) -> int:
    table = {name: index for index, name in enumerate(sorted({*old, *new}))}
    old_rows = _modulo_rows(values, _ids(old, table), r)
    new_rows = _modulo_rows(values, _ids(modulo_order(old, new), table), r)
    return len(changes(old_rows, new_rows).stream_segment)


def modulo_fraction(old: Sequence[str], new: Sequence[str], replicas: int) -> float:
    """Return the fraction of copies ``hash % N`` moves from `old` to `new` nodes (uniform hash).

    One replica, exactly: a key stays iff ``h % N`` and ``h % M`` name the same node, i.e. for a
    node at index i before and j after with i ≡ j (mod gcd(N, M)), one residue of lcm(N, M)
    each. More replicas: counted over every residue of lcm(N, M), or a fixed-seed sample of
    65,536 when lcm(N, M) > 2**16 (standard error about 0.1 percentage point).
    Runtime: O(N + M) for one replica; O(min(lcm, 2**16)·R²) otherwise.
    """
    order = modulo_order(old, new)
    n, m = len(old), len(order)
    if replicas == 1:
        g = math.gcd(n, m)
        position = {name: index for index, name in enumerate(order)}
        stay = sum(
            1 for i, name in enumerate(old) if name in position and (i - position[name]) % g == 0
        )
        return 1 - stay * g / (n * m)
    lcm = n * m // math.gcd(n, m)
    if lcm <= _RESIDUES_EXACT:
        values = np.arange(lcm, dtype=np.uint64)
    else:
        values = np.random.default_rng(0).integers(0, lcm, _RESIDUE_SAMPLE).astype(np.uint64)
    streams = _modulo_count(values, old, new, replicas)
    return streams / (len(values) * min(replicas, m))


def modulo_streams(
    old: Sequence[str],
    new: Sequence[str],
    hasher: Hasher | str,
    keys: Sequence[Key],
    replicas: int,
) -> int:
    """Return how many (key, source, destination) streams ``hash % N`` needs over `keys`."""
    return _modulo_count(native_hashes(keys, get_hasher(hasher)), old, new, replicas)


# -- checks shared by diff and Movement --------------------------------------------------------


def as_sequence(keys: Iterable[Key]) -> Sequence[Key]:
    """Return `keys` as a sequence (a list if it is only iterable).

    :raises TypeError: for a single str or bytes, which is one key, not a list of them
    """
    if isinstance(keys, (str, bytes)):
        raise TypeError(f"keys must be an iterable of keys, got a single {type(keys).__name__}")
    return keys if isinstance(keys, Sequence) else list(keys)


def check_points(points: npt.ArrayLike | Iterable[int], space: int) -> UInt64Array:
    """Return `points` as a uint64 array after checking they lie in [0, space).

    An integer ndarray is checked vectorised; any other iterable point by point.

    :raises TypeError: for points that are not ints
    :raises ConfigError: for a point outside [0, space)
    """
    values: Any
    if isinstance(points, np.ndarray):
        if points.dtype.kind not in "iu" and points.size:
            raise TypeError(f"points must be ints, got an array of {points.dtype}")
        values = points.reshape(-1)
        low, high = (int(values.min()), int(values.max())) if values.size else (0, 0)
    else:
        values = list(points)  # type: ignore[arg-type]
        for value in values:
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise TypeError(f"points must be ints, got {type(value).__name__}")
        low, high = (int(min(values)), int(max(values))) if values else (0, 0)
    if low < 0 or high >= space:
        raise ConfigError(f"point must be in [0, {space}), got {low if low < 0 else high!r}")
    return np.asarray(values, dtype=np.uint64)


def check_replicas(replicas: object) -> int:
    """Return `replicas` after checking it is an int >= 1.

    :raises TypeError: when it is not an int
    :raises ConfigError: when it is < 1
    """
    if isinstance(replicas, bool) or not isinstance(replicas, int):
        raise TypeError(f"replicas must be int, got {type(replicas).__name__}")
    if replicas < 1:
        raise ConfigError(f"replicas must be >= 1, got {replicas!r}")
    return replicas


def optimum_fraction(old: Placement, new: Placement) -> float:
    """Return the least fraction any placement must move: the sum of fair-share gains."""
    before = {node.name: node.weight for node in old.nodes}
    after = {node.name: node.weight for node in new.nodes}
    total_before, total_after = sum(before.values()), sum(after.values())
    return math.fsum(
        max(0.0, weight / total_after - before.get(name, 0.0) / total_before)
        for name, weight in after.items()
    )
