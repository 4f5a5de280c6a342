"""Currency: a store confirms, on a thread of its own, that it holds what etcd holds now.

A watch that goes silent says nothing, and etcd 3.4 gives a client no cheap way to notice: it
answers keepalive pings more often than every 5 s with GOAWAY, sends progress notifications
every 10 minutes by default, and a member that is stopped (a hung VM, a network dropping
packets) cancels nothing, even under require-leader. So the store asks, as Raft's ReadIndex
and Chubby's cache leases do (Ongaro 2014, §6.4; Burrows 2006, §2.5): at least every
``within_s / 2`` it makes a *linearizable* read of the keys and mod revisions under its prefix,
with a deadline of ``within_s / 4``, and compares them with its own records. The read reflects
every write committed before it was *sent*; when the records match (or the watch closes the
difference within ``within_s / 4``), the store was current at that send time. A difference the
watch does not close means the watch is silent: the store opens it again, on another endpoint,
and reads again at once. Waiting for the next round instead would leave no slack: the round
after a missed one is sent ``within_s`` after the last confirmed read, so one watch that lags
by ``within_s / 4`` (a loaded machine) would end every owner's fencing interval.

Whoever acts on the ring (``member.owns``) asks ``current()``: False once the last confirmed
read was sent more than ``within_s`` ago. So a process never answers from a ring more than
``within_s`` older than etcd's, whatever its watch does.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

from ringkit.errors import BackendError

__all__ = ["Confirmed", "Confirmer"]

_log = logging.getLogger("ringkit.live")

#: Reads per round: after one that fails (its endpoint is left for the next) or that the
#: watch does not match (the watch is opened again), the next is sent at once.
_ATTEMPTS_PER_ROUND = 3


class Confirmed(Protocol):
    """What a :class:`Confirmer` needs from the store it confirms."""

    def read_revisions(self, timeout_s: float) -> tuple[int, dict[str, int]]:
        """Read (revision, key → mod revision) of the followed keys from the service."""
        ...

    def holds(self, revision: int, found: dict[str, int], timeout_s: float) -> bool:
        """Wait up to `timeout_s` for the store to hold what the service held at `revision`."""
        ...

    def rewatch(self) -> None:
        """Open the watch again, on another endpoint, from the store's next epoch."""
        ...


class Confirmer:
    """Confirms a store's records against the service every ``within_s() / 2`` seconds.

    Reading: ``age_s``, ``current``, ``confirmed``. ``close`` ends the thread.
    """

    def __init__(
        self,
        store: Confirmed,
        within_s: Callable[[], float],
        *,
        name: str = "store",
        on_resume: Callable[[], None] = lambda: None,
    ) -> None:
        self._store, self._within_s, self._on_resume = store, within_s, on_resume
        self._sent = -float("inf")  # monotonic send time of the last read that confirmed
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._confirmation = threading.Condition()
        self._warned = False
        self._thread = threading.Thread(target=self._run, name=f"ringkit-live-confirm-{name}")
        self._thread.daemon = True

    def start(self) -> None:
        """Start confirming (the store calls it once it has read its first records)."""
        self._thread.start()

    def confirmed(self, sent: float) -> None:
        """Record that what a read sent at monotonic time `sent` returned is held."""
        with self._confirmation:
            if not self.current():
                self._on_resume()  # a lapse ends: owners' fencing tokens start again
            if sent > self._sent:
                self._sent = sent
            self._confirmation.notify_all()
        if self._warned:
            _log.info("the live ring's store is current again")
            self._warned = False

    def reschedule(self) -> None:
        """Look at ``within_s()`` again now (it shrank: a member with a shorter TTL came)."""
        self._wake.set()

    def age_s(self) -> float:
        """Seconds since the last confirmed read was sent (inf before the first)."""
        return time.monotonic() - self._sent

    def current(self) -> bool:
        """Whether the last confirmed read was sent at most ``within_s()`` ago."""
        return time.monotonic() - self._sent <= self._within_s()

    def wait_current(self, timeout_s: float) -> bool:
        """Block until ``current()`` (a confirmation may be due); return whether it is."""
        with self._confirmation:
            return self._confirmation.wait_for(self.current, timeout=timeout_s)

    def _run(self) -> None:
        while not self._stop.is_set():
            within = self._within_s()
            started = time.monotonic()
            self._round(within)
            self._sleep_until_due(started)

    def _sleep_until_due(self, started: float) -> None:
        """Sleep until ``within_s() / 2`` after `started`, as it is when woken."""
        while not self._stop.is_set():
            remaining = started + self._within_s() / 2 - time.monotonic()
            if remaining <= 0:
                return
            self._wake.wait(remaining)
            self._wake.clear()

    def _round(self, within: float) -> None:
        """One confirmation: a read (on the next endpoint if one does not answer), compared.

        A read whose difference the watch does not close opens the watch again and is made
        again in the same round, answered by the new watch.
        """
        for _ in range(_ATTEMPTS_PER_ROUND):
            if self._stop.is_set():
                return
            sent = time.monotonic()
            try:
                revision, found = self._store.read_revisions(within / 4)
            except BackendError as error:
                self._warn(f"a confirming read failed: {error}")
                continue
            if self._store.holds(revision, found, within / 4):
                self.confirmed(sent)
                return
            self._warn(f"its watch has not delivered revision {revision} within {within / 4:g} s")
            try:
                self._store.rewatch()
            except BackendError as error:
                _log.info("watching again failed: %s", error)

    def _warn(self, reason: str) -> None:
        """Log once per stretch of not being current, at the first reason seen."""
        if not self._warned and not self.current():
            _log.warning("the live ring's store is not confirmed current: %s", reason)
            self._warned = True
        else:
            _log.debug("live ring confirmation: %s", reason)

    def close(self) -> None:
        """Stop confirming (``current`` turns False after ``within_s``)."""
        self._stop.set()
        self._wake.set()
        # A read under way ends within its deadline; the store closes its client after it.
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=self._within_s())
