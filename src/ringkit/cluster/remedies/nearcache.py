"""The near-cache: a client's own small, bounded copy of the values it reads most.

The remedy for a hot key that caches it locally in each app server (a *near cache*, as
Hazelcast and Apache Ignite call theirs): a read of a
cached key is answered from the client's memory, with no server round trip, so however many
processes read a viral key, its node sees one read per process per `ttl_s`. Facebook's memcache
(Nishtala et al., NSDI 2013) puts the same kind of cache in front of its servers' clients;
Caffeine and Guava's ``CacheBuilder`` bound it the same two ways. Here:

- by size: at most `max_items` keys, the least recently used one evicted first (an
  ``OrderedDict`` as LRU list, Python's ``functools.lru_cache`` recipe);
- by time: an entry is served at most `ttl_s` seconds after the read that filled it *began*,
  so a write another process acknowledged is seen by every read that starts more than `ttl_s`
  after the acknowledgement (the bound ``docs/cluster.md`` states);
- by this client's own writes: every write (set, add, delete, incr, decr, touch, single and
  multi-key, acknowledged, failed or of unknown outcome) drops its keys when it returns or
  raises, and a read that overlapped a write of this client never fills the cache (each fill
  carries the write sequence number seen when its read began, :meth:`NearCache.fill_token`).

Which keys are cached: every key read (``hot_only=False``, the default: the LRU keeps the hot
ones), or with ``hot_only=True`` only the keys pinned with :meth:`NearCache.pin` and the keys
the client's :class:`~ringkit.cluster.core.hotkeys.HotKeys` sketch finds hot.

>>> near = NearCache(max_items=2, ttl_s=60)
>>> token = near.fill_token()
>>> near.fill(b"a", 1, token); near.fill(b"b", 2, token); near.fill(b"c", 3, token)
>>> near.lookup(b"a"), near.lookup(b"c")
((False, None), (True, 3))
>>> near.stats().evictions
1
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from ringkit.cluster.checks import is_flag, positive_int, positive_seconds
from ringkit.cluster.core.hotkeys import HotKeys
from ringkit.cluster.drivers.steps import Steps
from ringkit.cluster.values.keys import key_bytes

__all__ = [
    "NearCache",
    "NearCacheStats",
    "invalidating",
    "read_many_through",
    "read_through",
    "wanted",
]


@dataclass(frozen=True, slots=True)
class NearCacheStats:
    """What a near-cache did since it was made: reads answered, and entries dropped and why."""

    hits: int
    misses: int
    evictions: int
    expirations: int
    invalidations: int
    size: int


class NearCache:
    """A size- and TTL-bounded LRU map of key to value read, local to one client.

    Invariants: at most `max_items` entries; an entry is never served after its deadline (the
    start of the read that filled it + `ttl_s`); no entry is filled by a read that overlapped a
    write of the owning client. Thread-safe (one lock; every operation is O(1)).

    Reading: ``lookup``, ``wants``. Filling: ``fill_token``, ``fill``. Writing: ``invalidate``.
    Per-key switch: ``pin``, ``unpin``, ``pinned``. Measuring: ``stats``, ``len()``.
    """

    def __init__(self, *, max_items: int, ttl_s: float, hot_only: bool = False) -> None:
        self.max_items = positive_int("max_items", max_items)
        self.ttl_s = float(positive_seconds("ttl_s", ttl_s))
        self.hot_only = is_flag("hot_only", hot_only)
        # key -> (deadline on the monotonic clock, value); most recently used last.
        self._entries: OrderedDict[bytes, tuple[float, Any]] = OrderedDict()
        self._pinned: set[bytes] = set()
        self._lock = threading.Lock()
        # Bumped by every invalidation: a read that saw another number must not fill.
        self._writes = 0
        self._hits = self._misses = self._evictions = self._expirations = 0
        self._invalidations = 0

    def __repr__(self) -> str:
        return (
            f"NearCache(max_items={self.max_items}, ttl_s={self.ttl_s}, hot_only={self.hot_only})"
        )

    def __len__(self) -> int:
        return len(self._entries)

    # -- which keys ----------------------------------------------------------------------------

    def pin(self, key: str | bytes) -> None:
        """Cache `key` even with ``hot_only=True`` and whether or not it is hot."""
        with self._lock:
            self._pinned.add(key_bytes(key))

    def unpin(self, key: str | bytes) -> None:
        """Stop pinning `key`, and drop its entry (a hot key may come back)."""
        data = key_bytes(key)
        with self._lock:
            self._pinned.discard(data)
            self._entries.pop(data, None)

    @property
    def pinned(self) -> frozenset[bytes]:
        """The keys pinned with :meth:`pin`."""
        return frozenset(self._pinned)

    def wants(self, key: bytes, hot: frozenset[bytes]) -> bool:
        """Return True if reads of `key` go through the cache (`hot`: the sketch's hot set)."""
        return not self.hot_only or key in self._pinned or key in hot

    # -- reading and filling -------------------------------------------------------------------

    def lookup(self, key: bytes) -> tuple[bool, Any]:
        """Return ``(True, value)`` when `key` has a live entry, else ``(False, None)``.

        Runtime: O(1).
        """
        now = time.monotonic()
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                if now < entry[0]:
                    self._entries.move_to_end(key)
                    self._hits += 1
                    return True, entry[1]
                del self._entries[key]
                self._expirations += 1
            self._misses += 1
            return False, None

    def fill_token(self) -> tuple[int, float]:
        """Return what a read records when it begins: the write number and the time."""
        return self._writes, time.monotonic()

    def fill(self, key: bytes, value: Any, token: tuple[int, float]) -> None:
        """Cache `value` of `key`, read by a read that began at `token`.

        Nothing is cached when a write of this client was invalidated since (its value may
        be older than that write); the entry lives `ttl_s` from the read's beginning.
        """
        writes, began = token
        with self._lock:
            if writes != self._writes:
                return
            entries = self._entries
            entries[key] = (began + self.ttl_s, value)
            entries.move_to_end(key)
            if len(entries) > self.max_items:
                entries.popitem(last=False)
                self._evictions += 1

    # -- writing -------------------------------------------------------------------------------

    def invalidate(self, keys: Iterable[bytes]) -> None:
        """Drop the entries of `keys`: this client wrote them (or tried to)."""
        with self._lock:
            self._writes += 1
            for key in keys:
                if self._entries.pop(key, None) is not None:
                    self._invalidations += 1

    # -- measuring -----------------------------------------------------------------------------

    def stats(self) -> NearCacheStats:
        """Return the counts so far: hits, misses, evictions, expirations, invalidations."""
        with self._lock:
            return NearCacheStats(
                self._hits,
                self._misses,
                self._evictions,
                self._expirations,
                self._invalidations,
                len(self._entries),
            )

    def _check(self) -> None:
        assert len(self._entries) <= self.max_items


# -- the client's reads and writes through a near-cache --------------------------------------

T = TypeVar("T")


def wanted(near: NearCache | None, keys: Iterable[bytes], hot_keys: HotKeys | None) -> list[bytes]:
    """Return those of `keys` whose reads go through `near` (none without a near-cache)."""
    if near is None:
        return []
    hot = hot_keys.hot if hot_keys is not None else frozenset()
    return [key for key in keys if near.wants(key, hot)]


def read_through(
    near: NearCache, key: bytes, read: Steps[Any], hot_keys: HotKeys | None
) -> Steps[Any]:
    """Answer `key` from `near`, or run `read` (the servers') and fill `near` with its value.

    A hit is still recorded by the hot-key sketch, so a key answered from memory stays hot.
    """
    hit, value = near.lookup(key)
    if hit:
        if hot_keys is not None:
            hot_keys.record(key)
        return value
    token = near.fill_token()
    value = yield from read
    near.fill(key, value, token)
    return value


def read_many_through(
    near: NearCache,
    keys: list[bytes],
    read: Callable[[list[bytes]], Steps[dict[bytes, Any]]],
    hot_keys: HotKeys | None,
    *,
    fill_misses: bool = True,
) -> Steps[dict[bytes, Any]]:
    """Answer what `near` holds of `keys`; `read` the rest from the servers and fill `near`.

    Returns ``{key: value}`` (a value may be None: a miss the servers answered). Without
    `fill_misses`, a key `read` left out is not cached as a miss (it may have been unreachable).
    """
    cached = wanted(near, keys, hot_keys)
    values: dict[bytes, Any] = {}
    for key in cached:
        hit, value = near.lookup(key)
        if hit:
            values[key] = value
    token = near.fill_token()
    asked = [key for key in keys if key not in values] if values else keys
    if asked:
        found = yield from read(asked)
        values.update(found)
        fills = set(cached)
        for key in asked:  # in the order asked: the last ones are the most recent
            if key in fills and (fill_misses or key in found):
                near.fill(key, found.get(key), token)
    return values


def invalidating(near: NearCache | None, keys: Iterable[bytes], steps: Steps[T]) -> Steps[T]:
    """Return write `steps` that then drop `keys` from `near`, whatever the outcome."""
    return steps if near is None else _dropping(near, keys, steps)


def _dropping(near: NearCache, keys: Iterable[bytes], steps: Steps[T]) -> Steps[T]:
    """Run `steps`, then drop `keys` from `near` when they return or raise."""
    try:
        return (yield from steps)
    finally:
        near.invalidate(keys)
