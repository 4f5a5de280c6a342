"""Server health and counters: mark a failing server down, skip it, re-admit it after a check.

A server that errors or times out is marked *down* at once and skipped by every operation for
`dead_timeout_s` seconds (pymemcache's HashClient calls this its dead timeout). After that, the
first operation that wants the server claims a *probe*: a ping with the normal timeout. If the
ping answers, the server is re-admitted; otherwise it stays down for another `dead_timeout_s`.
Only one thread probes at a time; the others keep skipping, so a hung server costs at most one
timeout per dead timeout instead of one per request.

While a server is down, every key it should have been written is *hinted* (Dynamo's hinted
handoff, here as invalidation): on the servers that took the write, where any process finds
the hint (:mod:`ringkit.cluster.wire.redis.handoff`), and here, in :class:`ServerHealth`, only when
no such server could keep it (at most `max_hints` per server either way; the rest are counted in
`hints_dropped`). On re-admission those keys are deleted from the server, so a server that missed
writes while hung never serves the old value: reads miss there and fall back to a replica that took
the write.

Counters per server (:class:`ServerStats`) can be read with ``snapshot()`` and exported; hooks
receive one :class:`OpEvent` per server call.

>>> health = ServerHealth("a", dead_timeout_s=5.0, max_hints=10)
>>> health.mark_down(now=100.0)
>>> health.up, health.probe_due(now=101.0), health.probe_due(now=105.0)
(False, False, True)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ringkit.cluster.checks import non_negative_int, non_negative_seconds

__all__ = [
    "DEFAULT_DEAD_TIMEOUT_S",
    "Hook",
    "OpEvent",
    "ServerHealth",
    "ServerStats",
    "StatsSnapshot",
]

DEFAULT_DEAD_TIMEOUT_S = 5.0


@dataclass(frozen=True, slots=True)
class OpEvent:
    """One call to one server: `outcome` is hit, miss, ok or error; `elapsed_s` its latency."""

    server: str
    op: str
    outcome: str
    elapsed_s: float
    error: str | None = None


Hook = Callable[[OpEvent], None]


@dataclass(frozen=True, slots=True)
class StatsSnapshot:
    """Counters of one server at one moment."""

    calls: int
    hits: int
    misses: int
    errors: int
    failovers: int
    skipped: int
    readmissions: int
    latency_total_s: float
    latency_max_s: float

    @property
    def latency_mean_s(self) -> float:
        """Mean latency per call, 0 before the first call."""
        return self.latency_total_s / self.calls if self.calls else 0.0


class ServerStats:
    """Counters of one server: hits, misses, errors, failovers, skips, latency."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(
            ("calls", "hits", "misses", "errors", "failovers", "skipped", "readmissions"), 0
        )
        self._latency_total_s = 0.0
        self._latency_max_s = 0.0

    def record(
        self, elapsed_s: float, hits: int = 0, misses: int = 0, *, error: bool = False
    ) -> None:
        """Count one call with its latency and outcome."""
        with self._lock:
            counts = self._counts
            counts["calls"] += 1
            if hits:
                counts["hits"] += hits
            if misses:
                counts["misses"] += misses
            if error:
                counts["errors"] += 1
            self._latency_total_s += elapsed_s
            if elapsed_s > self._latency_max_s:
                self._latency_max_s = elapsed_s

    def bump(self, name: str, count: int = 1) -> None:
        """Add `count` to counter `name` (failovers, skipped, readmissions)."""
        with self._lock:
            self._counts[name] += count

    def snapshot(self) -> StatsSnapshot:
        """Return the counters as they are now."""
        with self._lock:
            return StatsSnapshot(
                **self._counts,
                latency_total_s=self._latency_total_s,
                latency_max_s=self._latency_max_s,
            )


class ServerHealth:
    """Up/down state of one server, its probe schedule and the hints kept for it in memory.

    The memory hints are the fallback for writes whose hint no other server could keep.
    """

    def __init__(self, name: str, *, dead_timeout_s: float, max_hints: int) -> None:
        self.name = name
        self.dead_timeout_s = non_negative_seconds("dead_timeout_s", dead_timeout_s)
        self.max_hints = non_negative_int("max_hints", max_hints)
        self.up = True
        self.hints_dropped = 0
        self.down_since_ms = 0
        self._retry_at = 0.0
        self._probing = False
        self._hints: dict[bytes, int] = {}  # key -> version of the newest write it missed
        self._lock = threading.Lock()

    def mark_down(self, *, now: float) -> None:
        """Mark the server down until `now` + dead timeout."""
        with self._lock:
            if self.up:  # the failure this client saw first, in Unix ms (other processes' clock)
                self.down_since_ms = int(time.time() * 1000)
            self.up = False
            self._retry_at = now + self.dead_timeout_s
            self._probing = False

    def probe_soon(self) -> None:
        """Let the next operation that wants the server probe it (another process re-admitted it).

        Only while it is down; a server that is up stays up.
        """
        with self._lock:
            if not self.up:
                self._retry_at = 0.0

    def probe_due(self, *, now: float) -> bool:
        """Return True when the server is down and its dead timeout has passed."""
        return not self.up and now >= self._retry_at

    def claim_probe(self, *, now: float) -> bool:
        """Return True for the one caller that should probe the server now."""
        with self._lock:
            if self.up or self._probing or now < self._retry_at:
                return False
            self._probing = True
            return True

    def hint(self, key: bytes, version: int = 0) -> None:
        """Remember that `key` changed while the server was down, by a write at `version`.

        `version` is that of the value or tombstone the server missed (0: none, an ``incr``):
        re-admission then removes only what is older than it (:meth:`take_hints`).
        """
        with self._lock:
            if key in self._hints:
                self._hints[key] = max(self._hints[key], version)
            elif len(self._hints) < self.max_hints:
                self._hints[key] = version
            else:
                self.hints_dropped += 1

    @property
    def pending_hints(self) -> int:
        """How many keys are hinted in memory for this server."""
        with self._lock:
            return len(self._hints)

    def take_hints(self) -> dict[bytes, int]:
        """Return and forget the hinted keys, each with the newest version it missed."""
        with self._lock:
            hints, self._hints = self._hints, {}
            return hints

    def readmit(self) -> None:
        """Mark the server up again (after its hints were applied)."""
        with self._lock:
            self.up = True
            self._probing = False

    def probe_failed(self, *, now: float) -> None:
        """Keep the server down for another dead timeout."""
        self.mark_down(now=now)
