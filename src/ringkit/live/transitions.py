"""A member's ownership transitions, logged as ``owns`` decides them: opt-in, bounded, cheap.

``member.log_transitions()`` turns the log on. From then on every call of ``owns(key)`` or
``owns_many(keys)`` (with the member's own ``replicas``) decides under the log's lock and
reads ``CLOCK_MONOTONIC`` there, just before and just after deciding; when its answer for a
key differs from the last one, a :class:`Transition` is appended: the key, the new answer, the
time the answer was decided by (nanoseconds), the epoch of the snapshot decided on, and the
fencing token of the interval that began or ended. A loss also carries the time just before
the interval's last True answer was decided, so ``[gain.at_ns, loss.last_owned_ns]`` is a span
in which the member surely held the key by its own decisions: what an auditor compares across
processes (one monotonic clock per machine), as the ownership checker in ``tests/chaos_live``
does.

The log sees what ``owns`` answers, not what it would have answered: a key nobody asks about has
no transitions, and a lease that runs out between two calls shows as a loss at the next call
(``last_owned_ns`` bounds when it may have begun). With the log off, ``owns`` pays one attribute
test; on, a lock and a dictionary look-up per key. The log keeps the latest `capacity`
transitions; ``dropped`` counts the ones it let go.

>>> log = TransitionLog(capacity=2)
>>> with log.lock:
...     log.observe("k", True, before_ns=9, after_ns=10, epoch=3, token=lambda key: 3)
...     log.observe("k", True, before_ns=19, after_ns=20, epoch=3, token=lambda key: 3)
...     log.observe("k", False, before_ns=29, after_ns=30, epoch=4, token=lambda key: None)
>>> [(t.owned, t.at_ns, t.last_owned_ns, t.token) for t in log.drain()]
[(True, 10, 9, 3), (False, 30, 19, 3)]
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from dataclasses import dataclass

from ringkit.errors import ConfigError
from ringkit.hashing import Key

__all__ = ["OpenInterval", "Transition", "TransitionLog"]


@dataclass(frozen=True, slots=True)
class Transition:
    """``owns(key)`` turned to `owned`, decided by `at_ns` (CLOCK_MONOTONIC, under the lock).

    `epoch`: the snapshot decided on. `token`: the fencing token of the interval that began
    (`owned`) or ended. `last_owned_ns`: for a loss, the time just before the interval's last
    True answer was decided (for a gain, the time just before this one: the interval's
    certain span is from `at_ns` of the gain to `last_owned_ns` of the loss).
    """

    key: Key
    owned: bool
    at_ns: int
    epoch: int
    token: int | None
    last_owned_ns: int


@dataclass(frozen=True, slots=True)
class OpenInterval:
    """A key owned since `since_ns`, last decided True just after `last_owned_ns`."""

    key: Key
    since_ns: int
    last_owned_ns: int
    token: int | None


class _Interval:
    """A key's current interval of True answers (mutable: its last answer moves on)."""

    __slots__ = ("last_ns", "seen", "since_ns", "token")

    def __init__(self, since_ns: int, last_ns: int, token: int | None, seen: object) -> None:
        self.since_ns, self.last_ns, self.token = since_ns, last_ns, token
        self.seen = seen  # the `generation` the token was last checked at


class TransitionLog:
    """The bounded log of one member's ownership transitions (see the module docstring).

    Reading: ``drain``, ``entries``, ``open_intervals``, ``dropped``. ``lock`` is the lock
    ``owns`` decides under while the log is on; ``observe`` is called with it held.
    """

    def __init__(self, *, capacity: int = 100_000) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ConfigError(f"capacity must be an int >= 1, got {capacity!r}")
        self.lock = threading.RLock()
        self._entries: collections.deque[Transition] = collections.deque(maxlen=capacity)
        self._owned: dict[Key, _Interval] = {}
        self._dropped = 0

    def observe(
        self,
        key: Key,
        owned: bool,
        *,
        before_ns: int,
        after_ns: int,
        epoch: int,
        token: Callable[[Key], int | None],
        generation: object = None,
    ) -> None:
        """Note that ``owns(key)`` decided `owned` between `before_ns` and `after_ns`.

        The caller holds ``lock``. `token(key)` is called when the key becomes owned, and
        again while it stays owned only when `generation` (what the token depends on besides
        the key: the epoch, the lease, the store's last lapse) changed since the last check:
        it costs a walk of the history. A token that changed between two True answers means
        the interval ended unseen in between (a process paused past its lease, which it
        took again): a loss and a gain are logged, as the next False answer would have.
        """
        interval = self._owned.get(key)
        if owned:
            if interval is not None:
                if generation == interval.seen:
                    interval.last_ns = before_ns
                    return
                interval.seen = generation
                began = token(key)
                if began == interval.token:
                    interval.last_ns = before_ns
                    return
                self._append(
                    Transition(key, False, before_ns, epoch, interval.token, interval.last_ns)
                )
            else:
                began = token(key)
            self._owned[key] = _Interval(after_ns, before_ns, began, generation)
            self._append(Transition(key, True, after_ns, epoch, began, before_ns))
        elif interval is not None:
            del self._owned[key]
            self._append(Transition(key, False, after_ns, epoch, interval.token, interval.last_ns))

    def _append(self, transition: Transition) -> None:
        if len(self._entries) == self._entries.maxlen:
            self._dropped += 1
        self._entries.append(transition)

    def drain(self) -> list[Transition]:
        """Return the transitions logged so far, oldest first, and forget them."""
        with self.lock:
            entries = list(self._entries)
            self._entries.clear()
            return entries

    def entries(self) -> list[Transition]:
        """Return the transitions logged so far, oldest first (the log keeps them)."""
        with self.lock:
            return list(self._entries)

    def open_intervals(self) -> list[OpenInterval]:
        """The keys owned at their last call, each with its interval so far."""
        with self.lock:
            return [
                OpenInterval(key, i.since_ns, i.last_ns, i.token) for key, i in self._owned.items()
            ]

    @property
    def dropped(self) -> int:
        """How many transitions the log let go (it keeps the latest `capacity`)."""
        return self._dropped
