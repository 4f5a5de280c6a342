"""How a rebalance runs and what it did: options, throttle, progress bar, counters, report.

:class:`Throttle` is a token bucket shared by every stream: a stream asks for the keys of its
next page and sleeps until the rate allows them. :class:`Progress` counts keys and bytes and
reports them to a callback, ``(title, keys done, keys planned, bytes done)``; the library draws
nothing (``ringkit rebalance`` draws the callback as a bar on stderr).

>>> throttle = Throttle(None)
>>> throttle.take(1_000_000)  # no limit: returns at once
0.0
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING

from ringkit.cluster.checks import (
    non_negative_seconds,
    positive_int,
    positive_int_or_none,
    positive_seconds,
    positive_seconds_or_none,
)

if TYPE_CHECKING:
    from ringkit.movement import Transfer

__all__ = [
    "DEFAULT_PAGE_BYTES",
    "Progress",
    "ProgressCallback",
    "RebalanceOptions",
    "RebalanceReport",
    "Tally",
    "Throttle",
]

# Told after every page of keys: (title, keys done, keys planned, bytes done).
ProgressCallback = Callable[[str, int, int, int], None]


class Throttle:
    """A token bucket: at most `keys_per_s` keys per second on average (None: no limit)."""

    def __init__(self, keys_per_s: float | None) -> None:
        # A rate, held to the rule of a duration: a finite number > 0, or None.
        self.keys_per_s = positive_seconds_or_none("keys_per_s", keys_per_s)
        self._lock = threading.Lock()
        self._next = time.monotonic()

    def take(self, keys: int) -> float:
        """Wait until `keys` more keys may move; return the seconds waited."""
        if self.keys_per_s is None:
            return 0.0
        with self._lock:
            now = time.monotonic()
            start = max(self._next, now)
            self._next = start + keys / self.keys_per_s
        wait = start - now
        if wait > 0:
            time.sleep(wait)
        return max(wait, 0.0)


class Progress:
    """Counters of a rebalance (keys and bytes moved), reported to `show` when it is given.

    `show` is called with ``(title, keys done, keys planned, bytes done)`` on entering and after
    every page, one call at a time, so it needs no lock of its own.
    """

    def __init__(self, total_keys: int, *, show: ProgressCallback | None, title: str) -> None:
        self.total_keys = total_keys
        self.keys = 0
        self.bytes = 0
        self._lock = threading.Lock()
        self._show = show
        self._title = title

    def advance(self, keys: int, size_bytes: int) -> None:
        """Count `keys` more keys and `size_bytes` more bytes."""
        with self._lock:
            self.keys += keys
            self.bytes += size_bytes
            self._report()

    def _report(self) -> None:
        if self._show is not None:
            self._show(self._title, self.keys, self.total_keys, self.bytes)

    def __enter__(self) -> Progress:
        with self._lock:
            self._report()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None


#: The most bytes (keys and values) a copied page holds, unless one value alone is larger: a
#: page of 500 values near 1 MB held its source for seconds and timed out, and every read of
#: other keys on that server waited behind it.
DEFAULT_PAGE_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class RebalanceOptions:
    """How a rebalance runs: page size, throttles, progress, audit file and a transfer hook.

    A copied page holds at most `batch` keys and `page_bytes` bytes of keys and values (None:
    no byte bound), and one key at least: a value larger than `page_bytes` moves alone.

    The checkpoint is saved at most every `checkpoint_s` seconds (0: after every transfer) and
    at the end of the copy; a resumed rebalance runs again what was not saved (the copy is
    idempotent). `progress` is told the counts after every page (see :class:`Progress`).
    `on_transfer` is called after each finished transfer (and its checkpoint)
    with it and the number finished so far; an exception raised there stops the rebalance.
    """

    batch: int = 500
    page_bytes: int | None = DEFAULT_PAGE_BYTES
    keys_per_s: float | None = None
    max_streams_per_source: int = 2
    scan: bool = True
    progress: ProgressCallback | None = field(default=None, compare=False)
    audit_path: str | None = None
    timeout_s: float = 2.0
    checkpoint_s: float = 0.25
    on_transfer: Callable[[Transfer, int], None] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        positive_int("batch", self.batch)
        positive_int("max_streams_per_source", self.max_streams_per_source)
        positive_int_or_none("page_bytes", self.page_bytes)
        Throttle(self.keys_per_s)  # validates
        non_negative_seconds("checkpoint_s", self.checkpoint_s)
        positive_seconds("timeout_s", self.timeout_s)


@dataclass(frozen=True, slots=True)
class RebalanceReport:
    """What a rebalance did. `keys_streamed` counts keys read from sources on moved arcs."""

    outcome: str
    epoch: int
    transfers: int
    transfers_skipped: int
    keys_planned: int
    keys_streamed: int
    keys_copied: int
    bytes_copied: int
    keys_deleted: int
    elapsed_s: float

    @property
    def keys_per_s(self) -> float:
        """Keys streamed per second of the whole rebalance."""
        return self.keys_streamed / self.elapsed_s if self.elapsed_s > 0 else 0.0


@dataclass
class Tally:
    """Counters of one rebalance, shared by its streams."""

    streamed: int = 0
    copied: int = 0
    bytes: int = 0
    planned: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, streamed: int, copied: int, size: int) -> None:
        with self.lock:
            self.streamed += streamed
            self.copied += copied
            self.bytes += size
