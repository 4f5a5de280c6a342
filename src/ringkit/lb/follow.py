"""Following a live ring: a controller's one thread, woken by every change and on a timer.

A controller acts on the members *as etcd holds them now*, not on the snapshot its watch last
delivered: each pass reads the member records afresh (one range read, linearizable in etcd), so
it never acts on a ring older than the service's, and a pass that cannot read them does nothing
(the live ring's rule: act only on a store confirmed current). The store's watch only wakes
the thread; a timer wakes it too (``resync_s``), so a proxy that reloaded and lost its runtime
changes is put right without waiting for the next change (HAProxy's dynamic servers do not
survive a reload), and a pass that asks to be called again soon (a server draining) is.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Self

from ringkit.errors import ConfigError, RingkitError
from ringkit.live import MemberInfo, Store, Subscription
from ringkit.live.snapshot import decode_member

__all__ = ["Follower", "Following", "Reading", "read_members"]

_log = logging.getLogger("ringkit.lb")


@dataclass(frozen=True, slots=True)
class Reading:
    """The member records read at `revision`: name → member, and name → the record's creation."""

    revision: int
    members: dict[str, MemberInfo]
    created: dict[str, int]


def read_members(store: Store) -> Reading:
    """Read `store`'s member records from the service now (not from the watch).

    :raises BackendError: when the service cannot be reached
    """
    prefix = store.member_key("")
    revision, records = store.backend.get_prefix(prefix)
    members: dict[str, MemberInfo] = {}
    created: dict[str, int] = {}
    for record in records:
        try:
            info = decode_member(record.value, record.lease)
        except ConfigError as error:
            _log.warning("ignoring unreadable member record %s: %s", record.key, error)
            continue
        members[info.name] = info
        created[info.name] = record.create_revision
    return Reading(revision, members, created)


class Follower:
    """Calls `step()` on its own thread after every change of `store` and every `resync_s`.

    `step` returns the seconds until it wants to run again (None: at the next change or
    resync). An error it raises is logged (with its traceback when it is not a
    :class:`RingkitError`) and the thread goes on: a controller never stops following.
    ``start``, ``wake``, ``close``.
    """

    def __init__(
        self, store: Store, step: Callable[[], float | None], *, resync_s: float, name: str
    ) -> None:
        if not resync_s > 0:
            raise ConfigError(f"resync_s must be > 0, got {resync_s!r}")
        self._store, self._step, self._resync_s = store, step, resync_s
        self._wakeup = threading.Event()
        self._stopped = threading.Event()
        self._subscription: Subscription | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.last_error: Exception | None = None

    def start(self) -> None:
        """Subscribe to the store and start the thread (its first pass runs at once)."""
        self._subscription = self._store.subscribe(lambda change: self._wakeup.set())
        self._thread.start()

    def wake(self) -> None:
        """Run a pass soon (as a change would)."""
        self._wakeup.set()

    def _run(self) -> None:
        while not self._stopped.is_set():
            self._wakeup.clear()
            delay: float | None = None
            try:
                delay = self._step()
                self.last_error = None
            except RingkitError as error:  # etcd or the proxy away, a pool refused: said, retried
                self.last_error = error
                _log.error("%s: %s", self._thread.name, error)
            except Exception as error:  # a bug must not stop the proxy's pool from following
                self.last_error = error
                _log.exception("%s: unexpected error; retrying", self._thread.name)
            self._wakeup.wait(self._resync_s if delay is None else min(delay, self._resync_s))

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop following: no pass starts after this returns (one under way finishes first)."""
        self._stopped.set()
        if self._subscription is not None:
            self._subscription.cancel()
        self._wakeup.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)


class Following:
    """What every controller offers about its thread: start, close, a context, the last error.

    A controller sets ``self._follower`` (a :class:`Follower` of its own pass) in ``__init__``.
    """

    _follower: Follower

    def start(self) -> Self:
        """Follow the store in a background thread (first pass at once); return self."""
        self._follower.start()
        return self

    def close(self) -> None:
        """Stop following (the proxy's pool stays as the last pass left it)."""
        self._follower.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def last_error(self) -> Exception | None:
        """The error of the background thread's last pass (None when it succeeded)."""
        return self._follower.last_error
