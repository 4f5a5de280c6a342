"""``memory://NAME``: the coordination service inside one process, for tests and one-process use.

It keeps what etcd keeps, the same way: a revision counter, every key's create and mod
revisions, the whole history of changes (so a watch can replay from any revision and a read can
look at a past one), and leases whose keys a reaper thread deletes when they are not renewed.
Stores connected to the same NAME in one process share it; other processes cannot see it.

>>> service = MemoryBackend.named("doctest")
>>> lease, ttl = service.grant(5.0)
>>> service.create("/m/a", b"1", lease)[0], service.create("/m/a", b"2", lease)[1].value
(True, b'1')
>>> service.get_prefix("/m/")[0]
1
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from ringkit.errors import BackendError
from ringkit.live.backend import Event, Record, SwapAnswer, WatchHandle

__all__ = ["MemoryBackend"]

_REAP_INTERVAL_S = 0.02


@dataclass
class _Watch:
    prefix: str
    range_end: str | None
    next_revision: int
    on_events: Callable[[Sequence[Event]], None]
    wake: threading.Condition
    cancelled: bool = False
    thread: threading.Thread | None = field(default=None, repr=False)

    def cancel(self) -> None:
        with self.wake:
            self.cancelled = True
            self.wake.notify_all()


class MemoryBackend:
    """An in-process, thread-safe stand-in for etcd's KV, lease and watch services.

    Registry: ``named(name)``. Keys: ``get_prefix``, ``create``, ``swap``, ``delete``.
    Leases: ``grant``, ``keepalive``, ``time_to_live``, ``revoke``. Watching: ``watch``.
    """

    _registry: ClassVar[dict[str, MemoryBackend]] = {}
    _registry_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Condition()
        self._revision = 0
        self._keys: dict[str, Record] = {}
        self._by_revision: dict[int, list[tuple[Event, int]]] = {}  # revision -> (event, lease)
        self._leases: dict[int, tuple[float, float]] = {}  # id -> (ttl_s, deadline)
        self._lease_ids = itertools.count(1)
        self._reaper = threading.Thread(target=self._reap, name=f"memory-{name}-leases")
        self._reaper.daemon = True
        self._reaper.start()

    @classmethod
    def named(cls, name: str) -> MemoryBackend:
        """Return the service called `name` in this process, creating it on first use."""
        with cls._registry_lock:
            if name not in cls._registry:
                cls._registry[name] = cls(name)
            return cls._registry[name]

    def describe(self) -> str:
        return f"memory://{self.name}"

    # -- keys ------------------------------------------------------------------------------------

    def get_prefix(self, prefix: str, revision: int = 0) -> tuple[int, list[Record]]:
        with self._lock:
            if revision == 0 or revision >= self._revision:
                found = [r for k, r in sorted(self._keys.items()) if k.startswith(prefix)]
                return self._revision, found
            state: dict[str, Record] = {}
            creates: dict[str, int] = {}
            events = (pair for rev in range(1, revision + 1) for pair in self._by_revision[rev])
            for event, lease in events:
                if not event.key.startswith(prefix):
                    continue
                if event.kind == "delete":
                    state.pop(event.key, None)
                    creates.pop(event.key, None)
                else:
                    created = creates.setdefault(event.key, event.revision)
                    state[event.key] = Record(
                        event.key, event.value, event.revision, created, lease
                    )
            return self._revision, [state[k] for k in sorted(state)]

    def read_revisions(self, prefix: str, *, timeout_s: float) -> tuple[int, dict[str, int]]:
        with self._lock:
            found = {k: r.mod_revision for k, r in self._keys.items() if k.startswith(prefix)}
            return self._revision, found

    def cluster_id(self) -> int:
        return 0  # one process's service is never restored or replaced

    def _write(
        self, key: str, value: bytes, lease: int, also: tuple[str, bytes] | None = None
    ) -> Record:
        """Put `key` (and `also`, under the same lease) at the next revision (the lock is held)."""
        self._revision += 1
        self._by_revision[self._revision] = []
        for put_key, put_value in [(key, value), *([also] if also else [])]:
            old = self._keys.get(put_key)
            created = old.create_revision if old else self._revision
            self._keys[put_key] = Record(put_key, put_value, self._revision, created, lease)
            self._by_revision[self._revision].append(
                (Event("put", put_key, put_value, self._revision, lease), lease)
            )
        self._lock.notify_all()
        return self._keys[key]

    def _remove(self, keys: list[str]) -> None:
        """Delete `keys` at one new revision (the lock is held)."""
        if not keys:
            return
        self._revision += 1
        self._by_revision[self._revision] = [
            (Event("delete", key, b"", self._revision), self._keys.pop(key).lease) for key in keys
        ]
        self._lock.notify_all()

    def create(
        self, key: str, value: bytes, lease: int, *, also: tuple[str, bytes] | None = None
    ) -> tuple[bool, Record]:
        with self._lock:
            current = self._keys.get(key)
            return self._swap(key, value, lease, 0, also) if current is None else (False, current)

    def create_unless_changed(
        self,
        key: str,
        value: bytes,
        lease: int,
        *,
        prefix: str,
        revision: int,
        also: tuple[str, bytes] | None = None,
    ) -> tuple[bool, Record]:
        with self._lock:
            current = self._keys.get(key)
            if current is not None:
                return False, current
            changed = any(
                r.mod_revision > revision for k, r in self._keys.items() if k.startswith(prefix)
            )
            if changed:
                return False, Record(key, b"", 0, 0, 0)
            return self._swap(key, value, lease, 0, also)

    def swap(self, key: str, value: bytes, lease: int, mod_revision: int) -> tuple[bool, Record]:
        return self._swap(key, value, lease, mod_revision, None)

    def start_swap(
        self,
        key: str,
        value: bytes,
        lease: int,
        mod_revision: int,
        done: Callable[[SwapAnswer], None],
    ) -> None:
        result: SwapAnswer
        try:
            result = self.swap(key, value, lease, mod_revision)
        except BackendError as error:
            result = error
        done(result)

    def _swap(
        self,
        key: str,
        value: bytes,
        lease: int,
        mod_revision: int,
        also: tuple[str, bytes] | None,
    ) -> tuple[bool, Record]:
        with self._lock:
            current = self._keys.get(key)
            if (current.mod_revision if current else 0) != mod_revision:
                return False, current or Record(key, b"", 0, 0, 0)
            if lease and lease not in self._leases:
                raise BackendError(f"lease {lease} must be alive to write {key!r}, got expired")
            return True, self._write(key, value, lease, also)

    def put_unless_newer(self, key: str, value: bytes, revision: int) -> tuple[bool, Record]:
        with self._lock:
            current = self._keys.get(key)
            if current is not None and current.mod_revision > revision:
                return False, current
            return True, self._write(key, value, 0)

    def delete(self, key: str) -> None:
        with self._lock:
            self._remove([key] if key in self._keys else [])

    # -- leases ----------------------------------------------------------------------------------

    def grant(self, ttl_s: float) -> tuple[int, float]:
        with self._lock:
            lease = next(self._lease_ids)
            self._leases[lease] = (ttl_s, time.monotonic() + ttl_s)
            self._lock.notify_all()  # the reaper may be asleep with no lease to watch
            return lease, ttl_s

    def keepalive(self, lease: int) -> float:
        with self._lock:
            if lease not in self._leases:
                return 0.0
            ttl_s, _ = self._leases[lease]
            self._leases[lease] = (ttl_s, time.monotonic() + ttl_s)
            return ttl_s

    def time_to_live(self, lease: int) -> float:
        with self._lock:
            if lease not in self._leases:
                return 0.0
            return max(0.0, self._leases[lease][1] - time.monotonic())

    def revoke(self, lease: int) -> None:
        with self._lock:
            self._expire(lease)

    def _expire(self, lease: int) -> None:
        """Drop `lease` and delete its keys at one revision, as etcd does (the lock is held)."""
        if self._leases.pop(lease, None) is not None:
            self._remove([k for k, r in self._keys.items() if r.lease == lease])

    def _reap(self) -> None:
        """Expire leases at their deadlines; sleep while there are none (``grant`` wakes it)."""
        with self._lock:
            while True:
                now = time.monotonic()
                for lease in [lid for lid, (_, end) in self._leases.items() if end <= now]:
                    self._expire(lease)
                ends = [end for _, end in self._leases.values()]
                # Expiry is checked at most every _REAP_INTERVAL_S, like etcd's lessor loop.
                wait = max(_REAP_INTERVAL_S, min(ends) - now) if ends else None
                self._lock.wait(wait)

    # -- watching --------------------------------------------------------------------------------

    def watch(
        self,
        prefix: str,
        start_revision: int,
        on_events: Callable[[Sequence[Event]], None],
        on_error: Callable[[Exception], None],
        *,
        replacing: WatchHandle | None = None,
        range_end: str | None = None,
    ) -> _Watch:
        if replacing is not None:
            replacing.cancel()
        with self._lock:
            first = start_revision if start_revision > 0 else self._revision + 1  # 0: from now
        watch = _Watch(prefix, range_end, max(1, first), on_events, self._lock)
        watch.thread = threading.Thread(target=self._deliver, args=(watch,), name="memory-watch")
        watch.thread.daemon = True
        watch.thread.start()
        return watch

    def _deliver(self, watch: _Watch) -> None:
        """Hand the watch every revision from its next one on, one revision per call."""
        while True:
            with self._lock:
                while not watch.cancelled and watch.next_revision > self._revision:
                    self._lock.wait()
                if watch.cancelled:
                    return
                revision = watch.next_revision
                batch = [
                    event
                    for event, _ in self._by_revision.get(revision, ())
                    if (
                        watch.prefix <= event.key < watch.range_end
                        if watch.range_end is not None
                        else event.key.startswith(watch.prefix)
                    )
                ]
                watch.next_revision = revision + 1
            if batch:
                watch.on_events(batch)

    def close(self) -> None:
        """Nothing to release: the service lives as long as the process."""
