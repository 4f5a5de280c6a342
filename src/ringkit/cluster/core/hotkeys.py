"""Hot keys: find the most requested keys with a Space-Saving sketch, and spread their reads.

A ring spreads *keys*, not *requests*: one viral booking can melt the node that owns it however
many vnodes there are (the hot-spot problem that motivated Karger et al. 1997).
:class:`SpaceSaving` (Metwally, Agrawal and El Abbadi, "Efficient computation of frequent and top-k
elements in data streams", ICDT 2005) keeps `capacity` counters; a new key takes over the smallest
counter and inherits its count as its error bound, so every key with more than N / capacity
requests is tracked, with a count that over-estimates by at most that bound. Updates may be
weighted, so a batch is first aggregated and then applied in one pass.

:class:`HotKeys` is the client's policy: it records the keys read, keeps the `top` of them as
the *hot set*, and for a hot key the client keeps ``spread`` copies (the first `spread` nodes
of its preference list) and rotates its reads over them, so its load is divided by `spread`.

Copies must stay coherent with writes from *any* client, so a key is spread
in steps (:mod:`ringkit.cluster.core.hotcopies`): a *marker* on its replicas, which every writer
reads back in the round trip of its write and then updates or invalidates the copies before it
acknowledges; then the copies, written version-checked. Only then does this client *activate* the
key (``activate``) and rotate its reads, for half the marker's lifetime
(:data:`SPREAD_MARKER_TTL_S`), marking and copying again (``due``) before that runs out. When a key
leaves the hot set the client stops reading its copies at once and deletes them (``drain_left``), so
they never serve a stale value if it comes back.

>>> sketch = SpaceSaving(capacity=2)
>>> for key in ["a", "b", "a", "c", "a"]:
...     sketch.add(key)
>>> sketch.top(1)
[('a', 3, 0)]
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import Counter
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, replace
from typing import Generic, TypeVar

from ringkit.cluster.checks import int_in_range, one_of, positive_int
from ringkit.cluster.values.keys import key_bytes
from ringkit.errors import ConfigError

__all__ = ["COPY_TTL_S", "REMEDIES", "SPREAD_MARKER_TTL_S", "HotKeys", "SpaceSaving", "SplitStats"]

K = TypeVar("K", bound=Hashable)
# How long a spread marker lives on a key's replicas. A client reads a key's copies for half of
# it after marking, and marks again after a quarter, so a marker never expires under a reader.
SPREAD_MARKER_TTL_S = 60.0
# The longest a copy (or an invalidated copy) lives: a copy nobody refreshes goes away.
COPY_TTL_S = SPREAD_MARKER_TTL_S
# A failed attempt to spread a key is retried after this long, not at every read.
_RETRY_S = 1.0
# What a client does with a hot key: copies its reads rotate over, or parts its counts spread over.
REMEDIES = ("spread", "split")


@dataclass(frozen=True, slots=True)
class SplitStats:
    """What a client did with split counters since it began.

    Split counters are :mod:`ringkit.cluster.remedies.splits`. `keys_split`: keys this client
    switched into split mode; `increments`: incr / decr sent to a part other than the key itself;
    `sums`: reads that summed parts; `marker_reads`: reads of a key's split marker (to learn
    whether another process split it); `parts_missing`: counts sent to a part that was gone (the
    key had been deleted), then sent to the key itself.
    """

    keys_split: int = 0
    increments: int = 0
    sums: int = 0
    marker_reads: int = 0
    parts_missing: int = 0


class SpaceSaving(Generic[K]):
    """The Space-Saving top-k sketch over at most `capacity` counters.

    Invariants: at most `capacity` keys are tracked; each tracked key's count >= its true count
    and count - error <= its true count; the sum of counts equals the total weight added.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = positive_int("capacity", capacity)
        self.total = 0
        self._counts: dict[K, int] = {}
        self._errors: dict[K, int] = {}
        # A lazy min-heap of (count, seq, key): stale entries are skipped when popped.
        self._heap: list[tuple[int, int, K]] = []
        self._seq = itertools.count()

    def add(self, key: K, count: int = 1) -> None:
        """Count `count` more requests of `key`.

        Runtime: O(log capacity) amortised.
        """
        self.total += count
        counts = self._counts
        if key in counts:
            counts[key] += count
        elif len(counts) < self.capacity:
            counts[key] = count
            self._errors[key] = 0
        else:
            floor = self._pop_min()
            counts[key] = floor + count
            self._errors[key] = floor
        heapq.heappush(self._heap, (counts[key], next(self._seq), key))
        if len(self._heap) > 4 * self.capacity:
            self._rebuild()

    def add_counts(self, counts: Iterable[tuple[K, int]]) -> None:
        """Add pre-aggregated ``(key, count)`` pairs (a batch), heaviest first."""
        for key, count in sorted(counts, key=lambda pair: -pair[1]):
            self.add(key, count)

    def _pop_min(self) -> int:
        counts = self._counts
        while True:
            count, _, key = heapq.heappop(self._heap)
            if counts.get(key) == count:
                del counts[key]
                del self._errors[key]
                return count

    def _rebuild(self) -> None:
        self._heap = [(count, next(self._seq), key) for key, count in self._counts.items()]
        heapq.heapify(self._heap)

    def top(self, n: int) -> list[tuple[K, int, int]]:
        """Return up to `n` ``(key, count, error)`` triples, highest count first."""
        ranked = sorted(self._counts.items(), key=lambda item: -item[1])[:n]
        return [(key, count, self._errors[key]) for key, count in ranked]

    def __len__(self) -> int:
        return len(self._counts)

    def _check(self) -> None:
        assert len(self._counts) <= self.capacity
        assert sum(self._counts.values()) == self.total or len(self._counts) == self.capacity
        assert all(0 <= self._errors[key] <= count for key, count in self._counts.items())


class HotKeys:
    """Find the `top` hot keys from the reads a client records, and relieve them.

    With ``remedy="spread"`` (the default) a hot key's reads rotate over copies on `spread`
    nodes. With ``remedy="split"`` the client also records its ``incr`` / ``decr`` keys, and a
    hot counter is kept as `parts` sub-counters on distinct nodes
    (:mod:`ringkit.cluster.remedies.splits`); :meth:`split` switches a key by hand. Recording is
    a list append; every `refresh_every` records the batch is counted into the sketch and the
    hot set recomputed. Thread-safe.
    """

    def __init__(
        self,
        *,
        top: int = 16,
        spread: int = 3,
        capacity: int = 1024,
        refresh_every: int = 1024,
        remedy: str = "spread",
        parts: int = 8,
    ) -> None:
        for label, value in (("top", top), ("spread", spread), ("refresh_every", refresh_every)):
            positive_int(label, value)
        if positive_int("capacity", capacity) < top:
            raise ConfigError(f"capacity must be >= top ({top}), got {capacity!r}")
        self.remedy = one_of("remedy", remedy, REMEDIES)
        self.parts = int_in_range("parts", parts, 2, 256)
        self._forced: set[bytes] = set()
        self._split_stats = SplitStats()
        self.spread = spread
        self.top_n = top
        self.refresh_every = refresh_every
        self.sketch: SpaceSaving[bytes] = SpaceSaving(capacity)
        self._buffer: list[bytes] = []
        self._hot: frozenset[bytes] = frozenset()
        self._slots = itertools.count()
        self._lock = threading.Lock()
        self._left: set[bytes] = set()
        # key -> when it was last marked (monotonic): its copies are read until +TTL/2.
        self._marked: dict[bytes, float] = {}
        self._tried: dict[bytes, float] = {}

    def record(self, key: bytes) -> None:
        """Record one read of `key`."""
        buffer = self._buffer
        buffer.append(key)
        if len(buffer) >= self.refresh_every:
            self.refresh()

    def refresh(self) -> frozenset[bytes]:
        """Count the recorded reads into the sketch and recompute the hot set; return it."""
        with self._lock:
            batch, self._buffer = self._buffer, []
            self.sketch.add_counts(Counter(batch).items())
            before = self._hot
            self._hot = frozenset(key for key, _, _ in self.sketch.top(self.top_n))
            if self.remedy == "spread":  # split keys have no copies to delete
                self._left = (self._left | (before - self._hot)) - self._hot
            for key in before - self._hot:  # stop reading its copies at once
                self._marked.pop(key, None)
                self._tried.pop(key, None)
        return self._hot

    def drain_left(self) -> frozenset[bytes]:
        """Return and forget the keys that left the hot set (their copies should be deleted)."""
        if not self._left:
            return frozenset()
        with self._lock:
            left, self._left = frozenset(self._left), set()
            return left

    @property
    def hot(self) -> frozenset[bytes]:
        """The keys whose reads are spread right now."""
        return self._hot

    def spread_for(self, key: bytes) -> int:
        """Return how many copies `key` gets: `spread` if it is hot, else 0."""
        return self.spread if key in self._hot else 0

    def active_spread(self, key: bytes) -> int:
        """Return how many copies reads of `key` rotate over: `spread` once activated, else 0."""
        marked = self._marked.get(key)
        if marked is None or time.monotonic() >= marked + SPREAD_MARKER_TTL_S / 2:
            return 0
        return self.spread

    def due(self, key: bytes, now: float) -> bool:
        """Return True if hot `key` should be marked and copied now (and count the attempt)."""
        if (
            self.remedy != "spread"
            or key not in self._hot
            or now < self._tried.get(key, -_RETRY_S) + _RETRY_S
        ):
            return False
        marked = self._marked.get(key)
        if marked is not None and now < marked + SPREAD_MARKER_TTL_S / 4:
            return False
        with self._lock:
            self._tried[key] = now
        return True

    def activate(self, key: bytes, marked_at: float) -> None:
        """Rotate reads of `key` over its copies: marked at `marked_at`, copied since."""
        with self._lock:
            if key in self._hot:
                self._marked[key] = marked_at

    def next_slot(self) -> int:
        """Return the next rotation slot (which copy a hot read goes to first)."""
        return next(self._slots)

    def top(self, n: int = 10) -> list[tuple[bytes, int, int]]:
        """Return the `n` most read keys as ``(key, count, error)``."""
        with self._lock:
            return self.sketch.top(n)

    # -- split counters (remedy="split") -------------------------------------------------------

    def split(self, key: str | bytes) -> None:
        """Split counter `key` at its next ``incr`` whether or not the sketch finds it hot.

        :raises ConfigError: when this policy's remedy is not ``"split"``, or `key` is invalid
        :raises TypeError: when `key` is not str or bytes
        """
        if self.remedy != "split":
            raise ConfigError(f"split() needs remedy='split', got remedy={self.remedy!r}")
        data = key_bytes(key)
        with self._lock:
            self._forced.add(data)

    def wants_split(self, key: bytes) -> bool:
        """Return True if counter `key` should be split (hot, or switched by :meth:`split`)."""
        return self.remedy == "split" and (key in self._hot or key in self._forced)

    def count_split(self, event: str, n: int = 1) -> None:
        """Add `n` to the split count `event` (a field name of :class:`SplitStats`)."""
        with self._lock:
            stats = self._split_stats
            self._split_stats = replace(stats, **{event: getattr(stats, event) + n})

    def split_stats(self) -> SplitStats:
        """Return what this policy's client did with split counters so far."""
        return self._split_stats
