"""A lease lock: one holder at a time, and a holder that dies lets go by itself.

The lock is one key created only if absent, under a lease its holder keeps alive from a thread
(etcd's own ``concurrency.Mutex`` and the election recipe rest on the same two primitives, a
create-if-absent transaction and a lease). The key's value names the holder (host, process,
since when), so a second coordinator is refused with a message that says who holds the lock.
Releasing revokes the lease, which deletes the key; a holder that dies stops renewing and etcd
deletes the key when the lease expires, ``ttl_s`` seconds later at most.

A holder that is paused for longer than the TTL loses the lock without knowing it at once;
``check()`` says so before each step that needs it, and the view key's compare-and-swap on the
epoch (:mod:`ringkit.cluster.views.etcd`) refuses whatever such a holder publishes late.

>>> from ringkit.live.memory import MemoryBackend
>>> service = MemoryBackend.named("leaselock-doctest")
>>> with LeaseLock(service, "/views/cluster/lock", "doctest", ttl_s=5) as lock:
...     lock.held
True
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from types import TracebackType

from ringkit.errors import BackendError, ConfigError
from ringkit.live.backend import Backend

__all__ = ["DEFAULT_LOCK_TTL_S", "LeaseLock", "default_holder"]

DEFAULT_LOCK_TTL_S = 10.0


def default_holder() -> str:
    """Return ``HOST:PID``, the name a lock records for this process."""
    return f"{socket.gethostname()}:{os.getpid()}"


class LeaseLock:
    """A lock on `key` in `backend`, held under a lease renewed every ``ttl_s / 3`` seconds.

    Taking: ``acquire`` (or ``with``). Checking: ``held``, ``check``. Letting go: ``release``.
    """

    def __init__(self, backend: Backend, key: str, holder: str, *, ttl_s: float) -> None:
        if not ttl_s > 0:
            raise ConfigError(f"lock ttl_s must be > 0, got {ttl_s!r}")
        self.backend, self.key, self.holder, self.ttl_s = backend, key, holder, ttl_s
        self._lease = 0
        self._lost = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def held(self) -> bool:
        """True while this lock is taken and its lease has not been lost."""
        return self._lease != 0 and not self._lost.is_set()

    def acquire(self) -> LeaseLock:
        """Take the lock; return self.

        :raises ConfigError: when another holder has it (the message names the holder)
        :raises BackendError: when the coordination service cannot be reached
        """
        lease, granted_s = self.backend.grant(self.ttl_s)
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        value = json.dumps({"holder": self.holder, "since": since, "ttl_s": granted_s}).encode()
        taken, record = self.backend.create(self.key, value, lease)
        if not taken:
            self.backend.revoke(lease)
            raise ConfigError(
                f"lock {self.key!r} on {self.backend.describe()} must be free to change "
                f"membership, got held by {_describe(record.value)}; wait for that coordinator "
                f"to finish (a dead one lets go when its lease expires)"
            )
        self._lease = lease
        self._lost.clear()
        self._stop.clear()
        every_s = max(0.2, min(self.ttl_s, granted_s) / 3)
        self._thread = threading.Thread(
            target=self._renew, args=(every_s,), name="ringkit-lease-lock", daemon=True
        )
        self._thread.start()
        return self

    def _renew(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            try:
                if self.backend.keepalive(self._lease) <= 0:
                    self._lost.set()
                    return
            except BackendError:
                continue  # the service may come back before the lease runs out

    def check(self) -> None:
        """Raise unless the lock is still held.

        :raises ConfigError: when the lease was lost (the holder stalled past its TTL)
        """
        if not self.held:
            raise ConfigError(
                f"lock {self.key!r} must be held to change membership, got it lost (its lease "
                f"of {self.ttl_s:g} s expired); run the change again, or resume it"
            )

    def release(self) -> None:
        """Let go: stop renewing and revoke the lease, which deletes the key."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        lease, self._lease = self._lease, 0
        if lease:
            # If etcd cannot be reached, it deletes the key when the lease expires anyway.
            with contextlib.suppress(BackendError):
                self.backend.revoke(lease)

    def __enter__(self) -> LeaseLock:
        return self.acquire()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def _describe(value: bytes) -> str:
    """Name the holder recorded in a lock's value (any bytes: another tool may hold the key)."""
    try:
        data = json.loads(value)
        return f"{data['holder']!r} since {data['since']}"
    except (ValueError, KeyError, TypeError):
        return repr(value[:80])
