"""The embedded backend: process-wide named stores of bytes (``memory://NAME``).

Two clients that name the same store share it, in one process, as two clients of one server
would; this is what makes the memory backend useful for demos and tests. A store's
`unavailable` flag makes every call fail like a server that is down, for simulations.

>>> store = memory_store("doctest-memory")
>>> store.name, store.unavailable
('doctest-memory', False)
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ringkit.cluster.values.codec import buries, lifts, stored_version, supersedes
from ringkit.cluster.values.keys import EPOCH_KEY, tombstone_key
from ringkit.cluster.wire.drive import Wire
from ringkit.cluster.wire.failures import not_integer
from ringkit.cluster.wire.fence import EpochOf, check_epoch, epoch_value
from ringkit.cluster.wire.items import ItemServer, Update
from ringkit.cluster.wire.urls import ServerURL
from ringkit.errors import BackendError

if TYPE_CHECKING:
    from ringkit.cluster.wire.index import Index

__all__ = ["MemoryBackend", "MemoryServer", "MemoryStore", "NoTransport", "memory_store"]

T = TypeVar("T")


# memcached's counters: an unsigned 64-bit number in decimal, wrapping past the top on incr.
_COUNTER_WRAP = 1 << 64


class MemoryStore:
    """A named in-process store: a dict of bytes with expiry times, behind a lock.

    `unavailable` makes every call fail as if the server were down (for simulations and tests).
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.unavailable = False
        self.data: dict[bytes, tuple[bytes, float]] = {}
        self.lock = threading.Lock()

    def live(self, key: bytes, now: float) -> bytes | None:
        """Return the value of `key` unless it is missing or expired (call with the lock held)."""
        entry = self.data.get(key)
        if entry is None:
            return None
        if entry[1] and entry[1] <= now:
            del self.data[key]
            return None
        return entry[0]


def _lift(store: MemoryStore, key: bytes, value: bytes, now: float) -> None:
    """Drop the delete tombstone of `key` if `value`, just stored, is newer (codec.lifts)."""
    tomb = tombstone_key(key)
    if tomb in store.data and lifts(value, store.live(tomb, now)):
        del store.data[tomb]


_STORES: dict[str, MemoryStore] = {}
_STORES_LOCK = threading.Lock()


def memory_store(name: str) -> MemoryStore:
    """Return the process-wide store `name`, creating it on first use."""
    with _STORES_LOCK:
        store = _STORES.get(name)
        if store is None:
            store = _STORES[name] = MemoryStore(name)
        return store


def _reset_locks_in_child() -> None:
    # A lock held by another thread at fork time would stay held forever in the child.
    global _STORES_LOCK, _LOCKS_LOCK
    _STORES_LOCK = threading.Lock()
    for store in _STORES.values():
        store.lock = threading.Lock()
    _LOCKS_LOCK = threading.Lock()
    _LOCKS.clear()  # each store's fence lock is made afresh on its next use


os.register_at_fork(after_in_child=_reset_locks_in_child)


class MemoryBackend:
    """A backend over a :class:`MemoryStore` (``memory://NAME``)."""

    def __init__(self, url: ServerURL) -> None:
        self.url = url
        self.store = memory_store(url.name)

    def _locked(self, action: Callable[[MemoryStore, float], T]) -> T:
        store = self.store
        if store.unavailable:
            raise BackendError(f"server {self.url} is unavailable")
        with store.lock:
            return action(store, time.monotonic())

    @staticmethod
    def _expiry(ttl_s: float | None) -> float:
        return time.monotonic() + ttl_s if ttl_s else 0.0

    def get_many(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        def action(store: MemoryStore, now: float) -> dict[bytes, bytes]:
            found = {key: store.live(key, now) for key in keys}
            return {key: value for key, value in found.items() if value is not None}

        return self._locked(action)

    def set_many(self, items: Mapping[bytes, bytes], ttl_s: float | None) -> None:
        """Store every item; drop the delete tombstones older than the values (codec.lifts)."""
        expiry = self._expiry(ttl_s)

        def action(store: MemoryStore, now: float) -> None:
            store.data.update((key, (value, expiry)) for key, value in items.items())
            for key, value in items.items():
                _lift(store, key, value, now)

        self._locked(action)

    def add(self, key: bytes, value: bytes, ttl_s: float | None) -> bool:
        def action(store: MemoryStore, now: float) -> bool:
            if store.live(key, now) is not None:
                return False
            store.data[key] = (value, self._expiry(ttl_s))
            _lift(store, key, value, now)
            return True

        return self._locked(action)

    def delete(self, key: bytes) -> bool:
        return self._locked(lambda store, now: store.data.pop(key, None) is not None)

    def repair(self, key: bytes, value: bytes, ttl_s: float | None) -> bool:
        """Store envelope `value` only where it supersedes what is here; return whether it did."""

        def action(store: MemoryStore, now: float) -> bool:
            there, tomb = store.live(key, now), store.live(tombstone_key(key), now)
            if not supersedes(value, there, tomb):
                return False
            store.data[key] = (value, self._expiry(ttl_s))
            _lift(store, key, value, now)
            return True

        return self._locked(action)

    def repair_many(self, items: Mapping[bytes, bytes], ttl_s: float | None) -> list[bytes]:
        """:meth:`repair` each key with its envelope; return the keys that landed."""
        return [key for key, value in items.items() if self.repair(key, value, ttl_s)]

    def bury(self, key: bytes, tombstone: bytes, ttl_s: float) -> bool:
        """Delete `key` unless newer, keep `tombstone` beside it for `ttl_s`; True if it went."""

        def action(store: MemoryStore, now: float) -> bool:
            gone = buries(tombstone, store.live(key, now))
            if gone:
                store.data.pop(key, None)
            tomb = store.live(tombstone_key(key), now)
            if tomb is None or stored_version(tomb) < stored_version(tombstone):
                store.data[tombstone_key(key)] = (tombstone, self._expiry(ttl_s))
            return gone

        return self._locked(action)

    def bury_many(self, tombstones: Mapping[bytes, bytes], ttl_s: float) -> list[bytes]:
        """:meth:`bury` each key with its tombstone; return the keys that went."""
        return [key for key, tomb in tombstones.items() if self.bury(key, tomb, ttl_s)]

    def incr(self, key: bytes, delta: int) -> int | None:
        def action(store: MemoryStore, now: float) -> int | None:
            value = store.live(key, now)
            if value is None:
                return None
            if not (len(value) <= 20 and value.isdigit() and int(value) < _COUNTER_WRAP):
                raise not_integer(key)
            result = max(0, int(value) + delta) % _COUNTER_WRAP
            store.data[key] = (str(result).encode(), store.data[key][1])
            return result

        return self._locked(action)

    def touch(self, key: bytes, ttl_s: float) -> bool:
        def action(store: MemoryStore, now: float) -> bool:
            value = store.live(key, now)
            if value is not None:
                store.data[key] = (value, self._expiry(ttl_s))
            return value is not None

        return self._locked(action)

    def ttl_left(self, key: bytes) -> float | None:
        """Return the seconds `key` has left; None when it has no expiry or is missing."""

        def action(store: MemoryStore, now: float) -> float | None:
            expiry = store.data[key][1] if store.live(key, now) is not None else 0.0
            return max(expiry - now, 0.001) if expiry else None

        return self._locked(action)

    def ping(self) -> None:
        self._locked(lambda store, now: None)

    def flush(self) -> None:
        self._locked(lambda store, now: store.data.clear())

    def close(self) -> None:
        """Nothing to release: the store outlives the client, as a server would."""


def _at_once(call: Callable[..., Any], args: Sequence[Any]) -> Wire[Any]:
    """The operation of a call that needs no I/O: it completes without a request."""
    return call(*args)
    yield  # a generator, like every operation


class NoTransport:
    """The memory store's transport: its operations never send a request."""

    def exchange(self, request: object) -> object:
        raise AssertionError(f"the memory store sends no requests, got {request!r}")

    def close(self) -> None:
        """Nothing to release: the store outlives the client, as a server would."""


class AsyncNoTransport:
    """The memory store's transport for the async client: never used either."""

    async def exchange(self, request: object) -> object:
        raise AssertionError(f"the memory store sends no requests, got {request!r}")

    async def close(self) -> None:
        """Nothing to release."""


class MemoryServer(ItemServer):
    """The operations of one memory store, each atomic under the store's process-wide lock.

    The fence reads the store's epoch under that lock, so it holds for every client of the
    process, as Redis's scripts hold for every client of the server.
    """

    def __init__(self, url: ServerURL) -> None:
        self.url = url
        self.backend = MemoryBackend(url)
        self.store = self.backend.store

    def steps(
        self, method: str, args: Sequence[Any], sent: int, point_of: Callable[[bytes], int]
    ) -> Wire[Any]:
        return self._locked(super().steps(method, args, sent, point_of))

    def _locked(self, operation: Wire[Any]) -> Wire[Any]:
        with _lock_for(self.url.name):  # nothing here yields: the call runs under the lock
            return (yield from operation)

    def plain(self, method: str, args: Sequence[Any]) -> Wire[Any]:
        return _at_once(getattr(self.backend, method), args)

    def fenced(self, sent: int, operation: Wire[Any], *, write: bool) -> Wire[Any]:
        entry = self.store.data.get(EPOCH_KEY)
        check_epoch(epoch_value(entry[0] if entry else None), sent, self.url, write=write)
        return (yield from operation)

    def swap(self, key: bytes, update: Update, ttl_s: float | None) -> Wire[Any]:
        held = self.backend.get_many([key]).get(key)
        new, result = update(held)
        if new is not None and new != held:
            # Stored as memcached's cas stores it: a hot-key copy lifts no tombstone.
            with self.store.lock:
                self.store.data[key] = (new, MemoryBackend._expiry(ttl_s))
        return result
        yield  # a generator, like every operation

    def index(self, epoch_of: EpochOf, point_of: Callable[[bytes], int], transport: Any) -> Index:
        from ringkit.cluster.wire.index import ScanIndex

        return ScanIndex(self.store, point_of, epoch_of)


_LOCKS: dict[str, threading.RLock] = {}
_LOCKS_LOCK = threading.Lock()


def _lock_for(name: str) -> threading.RLock:
    with _LOCKS_LOCK:
        lock = _LOCKS.get(name)
        if lock is None:
            lock = _LOCKS[name] = threading.RLock()
        return lock
