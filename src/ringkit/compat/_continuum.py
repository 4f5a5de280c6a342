"""Continuum: the sorted circle of points that ketama and Envoy's ring hash both build.

libketama, libmemcached, twemproxy and Envoy's ``ring_hash`` share one lookup: a key's hash goes
to the first point >= it on a sorted array of points, and a hash past the last point wraps to the
first (libketama ``ketama_get_server``, Envoy ``RingHashLoadBalancer::Ring::chooseHost``). They
differ only in how the points are made, so each layout module builds its points and hands them
here. Unlike :class:`ringkit.HashRing`, the points keep their system's own width (32 bits for
ketama, 64 for Envoy) and points that collide keep the system's tie order
(server index), because exactness rules here.

>>> circle = Continuum.from_points(
...     (Node("a"),), [10, 20, 30], [0, 0, 0], hasher=Hasher("len", lambda d: len(d) * 10, 32),
...     rebuild=lambda servers: None, kind="demo")
>>> circle.node_for_point(25), circle.node_for("abcd")
('a', 'a')
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import numpy.typing as npt

from ringkit.compat.hashkit import hash_md5, md5_word_parts
from ringkit.errors import ConfigError
from ringkit.hashing import Hasher, Key, encode_key
from ringkit.nodes import Node
from ringkit.placement import IndexArray, PlacementBase, check_n, check_not_empty

__all__ = ["Continuum"]

UInt64Array = npt.NDArray[np.uint64]
_LIST_LIMIT = 1 << 16
# Buckets per point in the scalar lookup's table, as a power of two: with 8-16 buckets per point
# about 90% of buckets hold no point, and a key landing in one needs no bisect at all.
_BUCKETS_PER_POINT_LOG2 = 3
_MAX_BUCKET_BITS = 16  # 512 KiB of bucket table at most (a list of 65,536 references)
# Ketama's 32-bit MD5 hash picks its bucket by its top 16 bits, bytes 2-3 of the digest.
_MD5_BUCKET_BITS = 16
_TOP_16_BITS = struct.Struct("<2xH").unpack_from
Rebuild = Callable[[tuple[Node, ...]], "Continuum"]


class Continuum(PlacementBase):
    """Sorted points (uint64 holding `bits`-wide values), each owned by one node.

    Invariants: ``points`` is sorted; ``owners[i]`` indexes ``nodes``; points that are equal are
    ordered as the source system orders them (by server index). Immutable. `hasher` is the
    system's key hash, `bits` wide; an unweighted layout (``weighted=False``) refuses weights.

    Looking up: ``node_for``, ``node_for_point``, ``nodes_for``, ``node_for_many``,
    ``owner_indices_for_hashes``, ``point_for``. Changing membership (new objects, rebuilt by
    the system's own rule): ``add``, ``remove``, ``discard``, ``reweight``. Measuring:
    ``shares``, ``points``, ``owners``, ``nodes``, ``hasher``, ``len``, ``in``, ``iter``, ``==``.
    """

    # NOTE: no __slots__: each continuum shadows node_for with a closure in its __dict__ (as
    # HashRing does), one Python call per lookup instead of two.
    routes_by_hash = True  # a key goes to the first point >= its hash
    _hasher: Hasher

    def __init__(
        self,
        nodes: tuple[Node, ...],
        points: UInt64Array,
        owners: npt.NDArray[np.intp],
        *,
        hasher: Hasher,
        rebuild: Rebuild,
        kind: str,
        weighted: bool = True,
    ) -> None:
        self._nodes = nodes
        self._names = tuple(node.name for node in nodes)
        self._points = points
        self._owners = owners
        self._hasher = hasher
        self._bits = hasher.bits
        self._key_hash = hasher.function
        self._rebuild = rebuild
        self._container = kind
        self._weighted = weighted
        self._points.flags.writeable = False
        self._owners.flags.writeable = False
        # Scalar lookups bisect a Python list: numpy's searchsorted costs microseconds per call
        # (benchmarks/bench_compat.py). Past _LIST_LIMIT points (Envoy's 8M maximum) the lists
        # would cost more memory than they save time, and numpy answers instead.
        small = len(points) <= _LIST_LIMIT
        self._point_list: list[int] | None = points.tolist() if small else None
        self._point_names: tuple[str, ...] | None = (
            tuple(self._names[i] for i in owners.tolist()) if small else None
        )
        if self._point_list is not None and self._point_names is not None and len(points):
            vars(self)["node_for"] = _make_lookup(
                self._key_hash, points, self._point_list, self._point_names, self._bits
            )

    @classmethod
    def from_points(
        cls,
        nodes: tuple[Node, ...],
        points: Iterable[int],
        owners: Iterable[int],
        *,
        hasher: Hasher,
        rebuild: Rebuild,
        kind: str,
        weighted: bool = True,
    ) -> Continuum:
        """Return a continuum from unsorted points and their owners' indices into `nodes`.

        Points are sorted by (point, owner index), libmemcached's ``continuum_item_cmp`` order;
        a stable sort gives the same order for libketama, twemproxy and Envoy, whose comparators
        look at the point alone (glibc's ``qsort`` merges, so it is stable in practice).

        Runtime: O(P log P) for P points.
        """
        point_array = np.fromiter(points, dtype=np.uint64)
        owner_array = np.fromiter(owners, dtype=np.intp, count=len(point_array))
        order = np.lexsort((owner_array, point_array))
        return cls(
            nodes,
            point_array[order],
            owner_array[order],
            hasher=hasher,
            rebuild=rebuild,
            kind=kind,
            weighted=weighted,
        )

    # -- looking up ------------------------------------------------------------------------

    def point_for(self, key: Key) -> int:
        """Return the key's hash as the system computes it (its width, unsigned)."""
        return self._key_hash(encode_key(key))

    def _index_for_point(self, point: int) -> int:
        if isinstance(point, bool) or not isinstance(point, int):
            raise TypeError(f"point must be int, got {type(point).__name__}")
        if not 0 <= point < 1 << self._bits:
            raise ConfigError(f"point must be in [0, 2**{self._bits}), got {point!r}")
        if self._point_list is not None:
            index = bisect_left(self._point_list, point)
        else:
            index = int(np.searchsorted(self._points, np.uint64(point), side="left"))
        # Past the last point: wrap to the first (ketama_get_server returns mcsarr[0]).
        return 0 if index == len(self._points) else index

    def index_for_point(self, point: int) -> int:
        """Return the index into ``points`` of the point that owns `point` (first >=, wrap).

        Runtime: O(log P).

        :raises EmptyRingError: when there are no points
        :raises ConfigError: when `point` is outside [0, 2**bits)
        """
        check_not_empty(len(self._points), "index_for_point")
        return self._index_for_point(point)

    def node_for_point(self, point: int) -> str:
        """Return the node owning `point`: the first point >= it, wrapping past the last.

        Runtime: O(log P).

        :raises EmptyRingError: when there are no nodes
        :raises ConfigError: when `point` is outside [0, 2**bits)
        """
        check_not_empty(len(self._points), "node_for_point")
        return self._names[int(self._owners[self._index_for_point(point)])]

    def node_for(self, key: Key) -> str:
        """Return the node that owns `key`. Runtime: O(len(key) + log P).

        A continuum of up to 65,536 points answers through a closure bound in ``__init__``
        (``_make_lookup``: a bucket table, then a bisect only when the bucket holds a point).

        :raises EmptyRingError: when there are no nodes
        :raises TypeError: when `key` is not str, bytes or int
        """
        check_not_empty(len(self._points), "node_for")
        point = self._key_hash(key.encode() if type(key) is str else encode_key(key))
        return self.node_for_point(point)

    def nodes_for(self, key: Key, n: int) -> list[str]:
        """Return up to `n` distinct nodes, walking clockwise from the key's point.

        Runtime: O(log P + P) in the worst case, usually a few steps.

        :raises EmptyRingError: when there are no nodes
        :raises ConfigError: when `n` < 1
        """
        check_n(n)
        check_not_empty(len(self._points), "nodes_for")
        start = self._index_for_point(self.point_for(key))
        wanted = min(n, len(self._names))
        found: list[str] = []
        for step in range(len(self._points)):
            name = self._names[int(self._owners[(start + step) % len(self._points)])]
            if name not in found:
                found.append(name)
                if len(found) == wanted:
                    break
        return found

    def owner_indices_for_hashes(self, hashes: npt.NDArray[np.uint64]) -> IndexArray:
        """Return the owner index of each key hash: the first point >= it, wrapping.

        :raises EmptyRingError: when there are no nodes
        """
        check_not_empty(len(self._points), "owner_indices_for_hashes")
        indices = np.searchsorted(self._points, hashes, side="left")
        indices[indices == len(self._points)] = 0
        result: IndexArray = self._owners[indices]
        return result

    # -- changing membership ---------------------------------------------------------------

    def _rebuilt(self, nodes: tuple[Node, ...]) -> Continuum:
        # Every point is recomputed as the system does (weights are relative to the total);
        # removing a server is what twemproxy's auto-eject does.
        return self._rebuild(nodes)

    def _weights_refused(self) -> tuple[str, str] | None:
        if self._weighted:
            return None
        return f"the unweighted {self._container}", "use weighted=True for weighted nodes"

    # -- measuring -------------------------------------------------------------------------

    def shares(self) -> dict[str, float]:
        """Return each node's exact fraction of the hash space (arc lengths / 2**bits).

        Runtime: O(P).
        """
        space = 1 << self._bits
        if len(self._points) == 0:
            return {}
        lengths = np.diff(self._points.astype(np.float64), prepend=0.0)
        # The first point also owns the wrapped arc past the last point.
        lengths[0] = float(int(self._points[0]) + space - int(self._points[-1]))
        if len(self._points) == 1:
            lengths[0] = float(space)
        owned = np.bincount(self._owners, weights=lengths, minlength=len(self._names))
        return {name: float(owned[i]) / space for i, name in enumerate(self._names)}

    @property
    def points(self) -> UInt64Array:
        """The sorted points (read-only)."""
        return self._points

    @property
    def owners(self) -> npt.NDArray[np.intp]:
        """For each point, the index of its node in ``nodes`` (read-only)."""
        return self._owners

    @property
    def bits(self) -> int:
        """The width of points and key hashes: 32 (ketama) or 64 (Envoy)."""
        return self._bits

    def _identity(self) -> tuple[object, ...]:
        return (self._container, self._nodes, self._points, self._owners)

    def _repr_options(self) -> str:
        return f", kind={self._container!r}, points={len(self._points)}"


def _bucket_table(
    points: UInt64Array, point_names: tuple[str, ...], bits: int, *, bucket_bits: int = 0
) -> tuple[int, list[str | None], array[int]]:
    """Return (shift, each bucket's owner or None for a bucket that holds points, its starts).

    The top bits of a hash (``hash >> shift``) pick a bucket. A bucket that holds no point lies
    inside one arc, so every hash in it has the same owner. This is the prefix table of
    ``ringkit.ring.tokens`` taken one step further, since a continuum is small (at most
    ``_LIST_LIMIT`` points here). A hash in a bucket that holds points bisects the whole list:
    ~10% of hashes, and bounds per bucket would cost more memory (tuples of ints in a dict, ~200
    bytes per point) than the few bisect steps they save. ``starts`` (``_bucket_starts``) gives
    those bounds at 2 bytes per bucket, for the MD5 lookup's fixed 16-bit buckets.
    """
    count = len(points)
    if not bucket_bits:
        bucket_bits = min(
            bits, (count - 1).bit_length() + _BUCKETS_PER_POINT_LOG2, _MAX_BUCKET_BITS
        )
    shift = bits - bucket_bits
    starts = _bucket_starts(points, shift, bucket_bits)
    first = np.frombuffer(starts, dtype=np.uint16 if starts.typecode == "H" else np.uint32)
    lo, hi = first[:-1].astype(np.intp), first[1:]
    # Past the last point: wrap to the first (the extra last name); numpy builds 65,536 entries
    # in about a millisecond where a Python loop took tens.
    owners = np.array([*point_names, point_names[0]], dtype=object)[lo]
    owners[lo != hi] = None
    bucket_names: list[str | None] = owners.tolist()
    return shift, bucket_names, starts


def _bucket_starts(points: UInt64Array, shift: int, bucket_bits: int) -> array[int]:
    """Return the index of the first point >= each bucket's start, then the point count.

    16-bit indices (128 KiB for 65,536 buckets) below 65,536 points, else 32-bit.
    """
    starts = np.arange(1 << bucket_bits, dtype=np.uint64) << np.uint64(shift)
    first = np.append(np.searchsorted(points, starts, side="left"), len(points))
    small = len(points) < 1 << 16
    return array("H" if small else "I", first.astype(np.uint16 if small else np.uint32).tobytes())


def _make_lookup(
    key_hash: Callable[[bytes], int],
    points: UInt64Array,
    point_list: list[int],
    point_names: tuple[str, ...],
    bits: int,
) -> Callable[[Any], str]:
    """Return ``key -> owner name`` for a non-empty continuum, every table bound as a local.

    A hash in a bucket without points answers from ``bucket_names``; any other bisects the
    points. The answers are those of a plain bisect (first point >= hash, wrapping).
    """
    if key_hash is hash_md5:
        return _make_md5_lookup(points, point_list, point_names, bits)
    shift, bucket_names, _ = _bucket_table(points, point_names, bits)

    def lookup(
        key: Any,
        key_hash: Callable[[bytes], int] = key_hash,
        bucket_names: list[str | None] = bucket_names,
        point_list: list[int] = point_list,
        point_names: tuple[str, ...] = point_names,
        shift: int = shift,
        count: int = len(point_list),
        bisect: Callable[..., int] = bisect_left,
        encode_key: Callable[[Any], bytes] = encode_key,
    ) -> str:
        try:
            data = key.encode()
        except AttributeError:
            data = encode_key(key)  # bytes and int keys; anything else is a TypeError
        point = key_hash(data)
        name = bucket_names[point >> shift]
        if name is not None:
            return name
        index = bisect(point_list, point)
        # Past the last point: wrap to the first (ketama_get_server returns mcsarr[0]).
        return point_names[index if index < count else 0]

    return lookup


def _make_md5_lookup(
    points: UInt64Array, point_list: list[int], point_names: tuple[str, ...], bits: int
) -> Callable[[Any], str]:
    """Return ``_make_lookup``'s closure with ketama's MD5 key hash inlined.

    NOTE: a copy of that closure on purpose: MD5 costs most of a ketama lookup, and calling
    ``hash_md5`` through one more Python frame added ~15% (benchmarks/bench_compat.py). The
    bucket is the hash's top 16 bits, read straight from the digest (bytes 2-3 of its first
    little-endian word) by one precompiled struct: no shift, and at most ~2% of buckets hold a
    point at 8 servers (1,280 points). A key in such a bucket reads the whole word and bisects
    only that bucket's points, bounded by ``starts`` (the ring's prefix table).
    """
    shift, bucket_names, starts = _bucket_table(
        points, point_names, bits, bucket_bits=_MD5_BUCKET_BITS
    )
    assert shift == bits - _MD5_BUCKET_BITS == 16  # the struct below reads exactly these bits
    md5, word = md5_word_parts()

    def lookup(
        key: Any,
        md5: Callable[[bytes], Any] = md5,
        word: Callable[[bytes], tuple[int, ...]] = word,
        top: Callable[[bytes], tuple[int, ...]] = _TOP_16_BITS,
        bucket_names: list[str | None] = bucket_names,
        starts: array[int] = starts,
        point_list: list[int] = point_list,
        point_names: tuple[str, ...] = point_names,
        count: int = len(point_list),
        bisect: Callable[..., int] = bisect_left,
        encode_key: Callable[[Any], bytes] = encode_key,
    ) -> str:
        try:
            data = key.encode()
        except AttributeError:
            data = encode_key(key)  # bytes and int keys; anything else is a TypeError
        digest = md5(data).digest()
        bucket = top(digest)[0]  # hash_md5(data) >> 16
        name = bucket_names[bucket]
        if name is not None:
            return name
        # hash_md5: the digest's first little-endian word
        index = bisect(point_list, word(digest)[0], starts[bucket], starts[bucket + 1])
        return point_names[index if index < count else 0]  # past the last point: wrap

    return lookup
