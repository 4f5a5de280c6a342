"""Token tables: the arrays behind a ring, and how points are searched in them.

A :class:`TokenTable` is two parallel numpy arrays, sorted tokens (uint64) and owner indices
(uint16, or uint32 beyond 65,536 owners), plus a *prefix table*: for each value of a point's top
bits, the index of the first token with those bits. The prefix table narrows every search to a
bucket of a few tokens, for at most 2 bytes per token (so a ring costs at most 12 bytes per
vnode, against the ~40 bytes per routing entry the literature quotes).

Search rule: the owner of point p is the first token >= p; past the last token it wraps to the
first (libketama's rule; the wrap-around is one line, tested).

>>> table = TokenTable.build([np.array([40], np.uint64), np.array([160, 300], np.uint64)], 360)
>>> table.tokens.tolist(), table.owners.tolist()
([40, 160, 300], [0, 1, 1])
>>> table.search_many(np.array([75, 310, 40], np.uint64)).tolist()
[1, 0, 0]
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from ringkit.errors import ConfigError
from ringkit.hashing import encode_key
from ringkit.placement import count_text

__all__ = [
    "DEFAULT_VNODES",
    "SPACE_64",
    "TokenTable",
    "label_suffixes",
    "owner_dtype",
    "vnode_count",
    "vnode_label",
]

SPACE_64 = 1 << 64
DEFAULT_VNODES = 160  # vnodes of a node of weight 1 (libketama and Envoy use 100-160)
# Points per chunk of a batch search: small enough that the temporaries stay in cache.
_CHUNK = 1 << 14
# Below this many points one ``searchsorted`` beats the prefix-table search, whose dozen array
# operations cost ~30 us whatever the batch: 100 points on 640 / 64,000 tokens 2.6 / 3.4 us
# against 29 / 35 us, 1,024 points 16 / 26 us against 57 / 83 us (10,000: 190 / 285 us
# against 482 / 1,119 us, the other way round). A client's multi-key read is such a batch.
_SEARCHSORTED_UP_TO = 1024
# Scalar lookups search Python lists up to this many tokens (see TokenTable.make_lookup).
_LIST_LOOKUP_MAX_TOKENS = 1 << 14
# One prefix entry per 2-4 tokens: at most 2 bytes per token with uint32 entries.
_TOKENS_PER_BUCKET_LOG2 = 1

UInt64Array = npt.NDArray[np.uint64]
IndexArray = npt.NDArray[np.unsignedinteger[Any]]


def vnode_label(name: str, i: int) -> bytes:
    """Return the label hashed for vnode `i` of node `name`: ``f"{name}#{i}"`` in UTF-8.

    >>> vnode_label("cache-a", 7)
    b'cache-a#7'
    """
    return f"{name}#{i}".encode()


def vnode_count(vnodes: int, weight: float) -> int:
    """Return the number of vnodes a node of `weight` gets: ``max(1, floor(vnodes*weight + 0.5))``.

    >>> vnode_count(160, 1.0), vnode_count(160, 0.5), vnode_count(1, 0.1)
    (160, 80, 1)

    :raises ConfigError: when ``vnodes * weight`` is too large to be a float (no ring that
        large could be built; callers refuse large counts with ``check_token_count``)
    """
    try:
        return max(1, math.floor(vnodes * weight + 0.5))
    except OverflowError:
        raise ConfigError(
            f"vnodes x weight must be a finite number, got {count_text(vnodes)} x {weight!r}"
        ) from None


@lru_cache(maxsize=64)
def label_suffixes(count: int) -> tuple[bytes, ...]:
    """Return the label suffixes ``b"#0" … b"#{count-1}"`` (cached: every node shares them)."""
    return tuple(f"#{i}".encode() for i in range(count))


def _array_lookup(
    point_of: Callable[[bytes], int], table: TokenTable, names: tuple[str, ...]
) -> Callable[[Any], str]:
    """Return the scalar lookup of a large table: memoryviews over the arrays themselves."""

    def lookup(
        key: Any,
        point_of: Callable[[bytes], int] = point_of,
        tokens: memoryview = table.tokens.data,
        owners: memoryview = table.owners.data,
        names: tuple[str, ...] = names,
        prefix: memoryview = table.prefix.data,
        shift: int = table.prefix_shift,
        count: int = len(table.tokens),
        bisect: Callable[..., int] = bisect_left,
        encode_key: Callable[[Any], bytes] = encode_key,
        raw: Any = bytes,
    ) -> str:
        if key.__class__ is raw:
            data = key
        else:
            try:
                data = key.encode()
            except AttributeError:
                data = encode_key(key)
        point = point_of(data)
        bucket = point >> shift
        index = bisect(tokens, point, prefix[bucket], prefix[bucket + 1])
        return names[owners[index if index < count else 0]]

    return lookup


def owner_dtype(count: int) -> type[np.unsignedinteger[Any]]:
    """Return the smallest unsigned dtype that indexes `count` owners."""
    return np.uint16 if count <= 2**16 else np.uint32


@dataclass(frozen=True, eq=False)
class TokenTable:
    """Sorted tokens, their owners, and the prefix table that speeds up searching them.

    Invariants (``check``): tokens ascending; equal tokens ordered by owner index; the prefix
    table's entry ``b`` is the first token whose top bits are >= ``b``.
    """

    tokens: UInt64Array
    owners: IndexArray
    space: int
    prefix: IndexArray
    prefix_shift: int
    max_bucket: int

    @classmethod
    def build(cls, per_owner: Sequence[UInt64Array], space: int) -> TokenTable:
        """Return the table of owner ``i``'s tokens ``per_owner[i]``; ties ordered by owner."""
        dtype = owner_dtype(len(per_owner))
        if not per_owner:
            return cls.from_sorted(np.empty(0, np.uint64), np.empty(0, dtype), space)
        tokens = np.concatenate(per_owner)
        owners = np.repeat(np.arange(len(per_owner), dtype=dtype), [len(p) for p in per_owner])
        # A stable sort of owner-ordered input keeps equal tokens ordered by owner.
        order = np.argsort(tokens, kind="stable")
        return cls.from_sorted(tokens[order], owners[order], space)

    @classmethod
    def from_sorted(cls, tokens: UInt64Array, owners: IndexArray, space: int) -> TokenTable:
        """Return the table of already sorted tokens and their owners (arrays are frozen)."""
        count = len(tokens)
        bits = max(0, count.bit_length() - 1 - _TOKENS_PER_BUCKET_LOG2)
        if space != SPACE_64:
            bits = 0  # the shift needs a power-of-two space; explicit small spaces are small
        shift = 64 - bits
        starts = np.arange(1 << bits, dtype=np.uint64) << np.uint64(shift % 64)
        prefix: IndexArray = np.empty(
            (1 << bits) + 1, dtype=np.uint32 if count < 2**32 else np.uint64
        )
        prefix[:-1] = np.searchsorted(tokens, starts, side="left")
        prefix[-1] = count
        for array in (tokens, owners, prefix):
            array.flags.writeable = False
        max_bucket = int(np.diff(prefix).max()) if count else 0
        return cls(tokens, owners, space, prefix, shift, max_bucket)

    def __len__(self) -> int:
        return len(self.tokens)

    # -- searching -----------------------------------------------------------------------------

    def search(self, point: int) -> int:
        """Return the index of the first token >= `point`, wrapping to 0 past the last."""
        bucket = point >> self.prefix_shift  # 0 when the table has no prefix bits
        lo, hi = int(self.prefix[bucket]), int(self.prefix[bucket + 1])
        index = bisect_left(self.tokens.data, point, lo, hi)
        return index if index < len(self.tokens) else 0

    def search_many(self, points: UInt64Array) -> npt.NDArray[np.intp]:
        """Return, for each point, the index of the first token >= it (wrapping to 0)."""
        tokens, count = self.tokens, len(self.tokens)
        if self.prefix_shift == 64 or len(points) <= _SEARCHSORTED_UP_TO:
            index = np.searchsorted(tokens, points, side="left")
            index[index == count] = 0
            return index
        # A full binary search per point mispredicts and misses the cache at every level. The
        # prefix table narrows each point to a bucket of a few tokens; a branchless search with
        # a fixed number of steps finishes it, in chunks small enough to stay in cache: 2-8x
        # faster than searchsorted from 16k to 2.56M tokens (benchmarks/bench_lookup.py).
        prefix, shift, last = self.prefix, np.uint64(self.prefix_shift), count - 1
        steps = [1 << k for k in reversed(range(self.max_bucket.bit_length()))]
        index = np.empty(len(points), dtype=np.intp)
        for begin in range(0, len(points), _CHUNK):
            chunk = points[begin : begin + _CHUNK]
            bucket = chunk >> shift
            found = prefix[bucket].astype(np.intp)
            end = prefix[bucket + 1].astype(np.intp)
            for step in steps:
                candidate = found + step
                below = candidate <= end
                below &= tokens[np.minimum(candidate - 1, last)] < chunk
                found += step * below
            index[begin : begin + _CHUNK] = found
        index[index == count] = 0
        return index

    def make_lookup(
        self, point_of: Callable[[bytes], int], names: tuple[str, ...]
    ) -> Callable[[Any], str]:
        """Return ``key -> owner name`` with every array and function bound as a local.

        NOTE: default-argument binding (the local-binding trick of sortedcontainers) saves an
        attribute lookup per step. Rings of up to ``_LIST_LOOKUP_MAX_TOKENS`` tokens search
        Python lists (a memoryview builds a new int on every read; a small list is all in
        cache); larger rings search the arrays through memoryviews, whose contiguous memory
        beats a list's scattered int objects and keeps 12 bytes per vnode
        (benchmarks/bench_lookup.py). Precondition: the table is not empty.
        """
        # With no prefix bits the shift is 64: every point is in bucket 0, which holds all.
        shift, count = self.prefix_shift, len(self.tokens)
        if count > _LIST_LOOKUP_MAX_TOKENS:
            return _array_lookup(point_of, self, names)
        tokens, prefix = self.tokens.tolist(), self.prefix.tolist()
        owner_names = [names[owner] for owner in self.owners.tolist()]

        def lookup(
            key: Any,
            point_of: Callable[[bytes], int] = point_of,
            tokens: list[int] = tokens,
            owner_names: list[str] = owner_names,
            prefix: list[int] = prefix,
            shift: int = shift,
            count: int = count,
            bisect: Callable[..., int] = bisect_left,
            encode_key: Callable[[Any], bytes] = encode_key,
            raw: Any = bytes,
        ) -> str:
            # Bytes first (a cache client's routed keys): a str's encode() raised on bytes
            # cost 0.7 us per lookup, three times the lookup itself.
            if key.__class__ is raw:
                data = key
            else:
                try:
                    data = key.encode()
                except AttributeError:
                    data = encode_key(key)  # int keys; anything else is a TypeError
            point = point_of(data)
            bucket = point >> shift
            index = bisect(tokens, point, prefix[bucket], prefix[bucket + 1])
            # Past the last token: wrap around to the first.
            return owner_names[index if index < count else 0]

        return lookup

    # -- changing ------------------------------------------------------------------------------

    def inserted(self, added: UInt64Array, position: int, owners_after: int) -> TokenTable:
        """Return the table with owner indices >= `position` shifted up and `added` owned by
        `position` (ties: after equal tokens of owners that sort before it).
        """
        added = np.sort(added)
        dtype = owner_dtype(owners_after)
        owners = self.owners.astype(dtype)
        owners += owners >= position
        at = np.searchsorted(self.tokens, added, side="left")
        for k in np.flatnonzero(at < len(self.tokens)):  # rare: a new token equals an old one
            i = int(at[k])
            while i < len(self.tokens) and self.tokens[i] == added[k] and owners[i] < position:
                i += 1
            at[k] = i
        tokens = np.insert(self.tokens, at, added)
        owners = np.insert(owners, at, np.full(len(added), position, dtype=dtype))
        return TokenTable.from_sorted(tokens, owners, self.space)

    def without(self, position: int, owners_after: int) -> TokenTable:
        """Return the table without owner `position`'s tokens; later owners shift down."""
        keep = self.owners != position
        owners = self.owners[keep].astype(owner_dtype(owners_after))
        owners -= owners > position
        return TokenTable.from_sorted(self.tokens[keep], owners, self.space)

    # -- measuring -----------------------------------------------------------------------------

    def arc_lengths(self) -> UInt64Array:
        """Return the length of the arc (previous token, token] of each token, exactly.

        uint64 arithmetic wraps modulo 2**64, which is exact for the 64-bit space; the first
        arc (wrapping past zero) is fixed up for other spaces. When every token sits at one
        point (a lone token, or ties only), the first owns the whole circle, reported as
        ``space % 2**64`` (0 for the 64-bit space: use ``owned_points`` for exact totals).
        """
        tokens = self.tokens
        lengths = np.empty_like(tokens)
        if len(tokens) == 0:
            return lengths
        lengths[1:] = tokens[1:] - tokens[:-1]
        if self.whole_circle():
            lengths[0] = self.space % SPACE_64
        else:
            lengths[0] = (int(tokens[0]) - int(tokens[-1])) % self.space
        return lengths

    def whole_circle(self) -> bool:
        """Return True when the first token owns the whole circle (all tokens at one point)."""
        return len(self.tokens) > 0 and self.tokens[0] == self.tokens[-1]

    def owned_points(self, owner_count: int) -> list[int]:
        """Return the exact number of points each owner holds (sum of its arc lengths)."""
        result = [0] * owner_count
        if len(self.tokens) == 0:
            return result
        if self.whole_circle() or owner_count == 1:  # one owner of everything: 2**64 overflows
            result[int(self.owners[0])] = self.space
            return result
        order = np.argsort(self.owners, kind="stable")
        owners_sorted = self.owners[order]
        starts = np.flatnonzero(np.r_[True, owners_sorted[1:] != owners_sorted[:-1]])
        # uint64 sums are exact: with two distinct tokens no owner's total reaches 2**64.
        sums = np.add.reduceat(self.arc_lengths()[order], starts)
        for owner, total in zip(owners_sorted[starts].tolist(), sums.tolist(), strict=True):
            result[owner] = int(total)
        return result

    def check(self, owner_count: int) -> None:
        """Assert the invariants (for tests)."""
        tokens, owners = self.tokens, self.owners
        assert len(tokens) == len(owners)
        if len(tokens):
            assert bool(np.all(tokens[1:] >= tokens[:-1])), "tokens not sorted"
            ties = np.flatnonzero(tokens[1:] == tokens[:-1])
            assert bool(np.all(owners[ties] < owners[ties + 1])), "ties not ordered by owner"
            assert int(owners.max()) < owner_count
            assert int(tokens.max()) < self.space
        starts = np.arange(len(self.prefix) - 1, dtype=np.uint64) << np.uint64(
            self.prefix_shift % 64
        )
        assert np.array_equal(self.prefix[:-1], np.searchsorted(tokens, starts))
        assert int(self.prefix[-1]) == len(tokens)
