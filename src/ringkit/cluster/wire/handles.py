"""A server as the client and the coordinator hold it: its kind's operations over one transport.

A handle pairs a server kind's operations (memcached's :class:`MemcachedServer`, the memory
store's, Redis's) with a transport and runs each call's operation with the one drive function
of its I/O (:mod:`ringkit.cluster.wire.drive`). :class:`FencedBackend` blocks; it is also the
coordinator's handle on a server (the view, the audit log, the checkpoint, the key index).
:class:`AsyncFencedServer` awaits; the async client only calls its ``serve``. Both send every
call with the epoch it was routed by (:func:`~ringkit.cluster.wire.fence.routed_by`); neither
holds a decision of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ringkit.cluster.wire.drive import AsyncTransport, SyncTransport, Wire, drive_async, drive_sync
from ringkit.cluster.wire.fence import EpochOf
from ringkit.cluster.wire.memory import MemoryBackend, MemoryServer, NoTransport
from ringkit.cluster.wire.urls import ServerURL

if TYPE_CHECKING:
    from ringkit.cluster.wire.index import Index
    from ringkit.cluster.wire.items import Hinted

__all__ = [
    "AsyncConnection",
    "AsyncFencedServer",
    "Connection",
    "FencedBackend",
    "ServerKind",
    "fence",
    "fence_async",
]

PointOf = Callable[[bytes], int]


class ServerKind(Protocol):
    """What one server kind does on one server, such as an ItemServer (memory, memcached)."""

    url: ServerURL
    index_keys: bool

    def plain(self, method: str, args: Sequence[Any]) -> Wire[Any]: ...
    def steps(
        self, method: str, args: Sequence[Any], sent: int, point_of: PointOf
    ) -> Wire[Any]: ...
    def index(self, epoch_of: EpochOf, point_of: PointOf, transport: Any) -> Index: ...


class ClosingSync(SyncTransport, Protocol):
    def close(self) -> None: ...


class ClosingAsync(AsyncTransport, Protocol):
    async def close(self) -> None: ...


class Connection:
    """One server, unfenced and blocking: a plain Backend (see ringkit.cluster.wire.backends)."""

    def __init__(self, kind: ServerKind, transport: ClosingSync) -> None:
        self.kind, self.transport, self.url = kind, transport, kind.url

    def _run(self, method: str, *args: Any) -> Any:
        return drive_sync(self.kind.plain(method, args), self.transport)

    def get_many(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        found: dict[bytes, bytes] = self._run("get_many", keys)
        return found

    def set_many(self, items: Mapping[bytes, bytes], ttl_s: float | None) -> None:
        self._run("set_many", items, ttl_s)

    def add(self, key: bytes, value: bytes, ttl_s: float | None) -> bool:
        return bool(self._run("add", key, value, ttl_s))

    def delete(self, key: bytes) -> bool:
        return bool(self._run("delete", key))

    def incr(self, key: bytes, delta: int) -> int | None:
        counted: int | None = self._run("incr", key, delta)
        return counted

    def touch(self, key: bytes, ttl_s: float) -> bool:
        return bool(self._run("touch", key, ttl_s))

    def ping(self) -> None:
        self._run("ping")

    def flush(self) -> None:
        self._run("flush")

    def close(self) -> None:
        self.transport.close()


class AsyncConnection:
    """One server, unfenced, with an asyncio transport: what the async client fences."""

    def __init__(self, kind: ServerKind, transport: ClosingAsync) -> None:
        self.kind, self.transport, self.url = kind, transport, kind.url

    async def call(self, method: str, *args: Any) -> Any:
        """Await the unfenced call `method(*args)`."""
        return await drive_async(self.kind.plain(method, args), self.transport)

    async def close(self) -> None:
        await self.transport.close()


class _Fenced:
    def __init__(self, kind: ServerKind, epoch_of: EpochOf, point_of: PointOf) -> None:
        self.kind, self.url, self.epoch_of, self.point_of = kind, kind.url, epoch_of, point_of

    @property
    def index_keys(self) -> bool:
        """Whether Redis writes record their keys in the server's index."""
        return self.kind.index_keys

    @index_keys.setter
    def index_keys(self, value: bool) -> None:
        self.kind.index_keys = value


class FencedBackend(_Fenced):
    """A blocking server handle whose every call carries its routed epoch."""

    def __init__(self, inner: Connection, epoch_of: EpochOf, point_of: PointOf) -> None:
        super().__init__(inner.kind, epoch_of, point_of)
        self.inner = inner
        self._transport = inner.transport

    def serve(self, method: str, *args: Any) -> Any:
        """Run call `method(*args)`, fenced by the routed epoch."""
        operation = self.kind.steps(method, args, self.epoch_of(), self.point_of)
        return drive_sync(operation, self._transport)

    def get_many(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        found: dict[bytes, bytes] = self.serve("get_many", keys)
        return found

    def set_many(self, items: Mapping[bytes, bytes], ttl_s: float | None) -> None:
        self.serve("set_many", items, ttl_s)

    def add(self, key: bytes, value: bytes, ttl_s: float | None) -> bool:
        return bool(self.serve("add", key, value, ttl_s))

    def delete(self, key: bytes) -> bool:
        return bool(self.serve("delete", key))

    def repair(self, key: bytes, value: bytes, ttl_s: float | None) -> bool:
        """Store envelope `value` only where it supersedes what the server holds."""
        return bool(self.serve("repair", key, value, ttl_s))

    def bury(self, key: bytes, tombstone: bytes, ttl_s: float) -> bool:
        """Delete `key`, keeping `tombstone` beside it for `ttl_s` (a delete while data moves)."""
        return bool(self.serve("bury", key, tombstone, ttl_s))

    def bury_many(self, tombstones: Mapping[bytes, bytes], ttl_s: float) -> list[bytes]:
        """:meth:`bury` each key with its tombstone; return those gone."""
        gone: list[bytes] = self.serve("bury_many", tombstones, ttl_s)
        return gone

    def incr(self, key: bytes, delta: int) -> int | None:
        counted: int | None = self.serve("incr", key, delta)
        return counted

    def touch(self, key: bytes, ttl_s: float) -> bool:
        return bool(self.serve("touch", key, ttl_s))

    def ttl_left(self, key: bytes) -> float | None:
        """Return the seconds `key` has left; None when it has no expiry or is missing."""
        left: float | None = self.serve("ttl_left", key)
        return left

    def sweep_index(self, cursor: bytes, batch: int) -> tuple[int, bytes]:
        """Drop the index entries of vanished keys among `batch` from `cursor` (Redis only)."""
        swept: tuple[int, bytes] = self.serve("sweep_index", cursor, batch)
        return swept

    def ping(self) -> None:
        self.serve("ping")

    def flush(self) -> None:
        self.serve("flush")

    def close(self) -> None:
        self.inner.close()

    def add_hints(self, server: str, keys: Sequence[bytes], max_hints: int) -> Hinted | None:
        """Keep hints for down `server` here, then read its re-admission stamp."""
        hinted: Hinted | None = self.serve("add_hints", server, keys, max_hints)
        return hinted

    def mark_readmitted(self, server: str, at_ms: int) -> None:
        """Stamp here that a process begins re-admitting `server` at `at_ms` (Unix ms)."""
        self.serve("mark_readmitted", server, at_ms)

    def read_hints(self, server: str) -> list[bytes]:
        """Return the keys hinted here for `server`."""
        hinted: list[bytes] = self.serve("read_hints", server)
        return hinted

    def drop_hints(self, server: str, keys: Sequence[bytes]) -> None:
        """Remove exactly `keys` from the hints kept here for `server`."""
        self.serve("drop_hints", server, keys)

    def set_copy(self, key: bytes, copy: bytes, ttl_s: float | None) -> bool | None:
        """Store hot-key `copy` unless this server holds a version as new; None: contended."""
        stored: bool | None = self.serve("set_copy", key, copy, ttl_s)
        return stored

    def read_markers(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        """Return the spread markers held here for `keys`."""
        found: dict[bytes, bytes] = self.serve("read_markers", keys)
        return found

    def write_marked(
        self, op: str, args: Sequence[Any], keys: Sequence[bytes]
    ) -> tuple[Any, dict[bytes, bytes]]:
        """Run write `op(*args)`, then read the spread markers of `keys`, after it, here."""
        marked: tuple[Any, dict[bytes, bytes]] = self.serve("write_marked", op, args, keys)
        return marked

    def write_markers(self, markers: Mapping[bytes, bytes], ttl_s: float) -> None:
        """Store spread markers ``{key: spread}`` here, expiring after `ttl_s`."""
        self.serve("write_markers", markers, ttl_s)

    def server_epoch(self) -> int:
        """Return the epoch of the newest view this server was given (0 if none)."""
        return int(self.serve("server_epoch"))

    def read_view(self) -> bytes | None:
        """Return the JSON of the newest view this server holds, or None."""
        view: bytes | None = self.serve("read_view")
        return view

    def publish(self, epoch: int, view_json: bytes, *, replace: bool = False) -> int:
        """Give the server view `epoch` unless it holds a newer one; return its epoch after.

        :raises ViewConflictError: when the server holds another view at `epoch`
        """
        return int(self.serve("publish", epoch, view_json, replace))

    def append_audit(self, line: bytes) -> None:
        """Append one line (a JSON record) to the server's audit log."""
        self.serve("append_audit", line)

    def read_audit(self) -> list[bytes]:
        """Return the audit log's lines, oldest first."""
        lines: list[bytes] = self.serve("read_audit")
        return lines

    def read_checkpoint(self) -> bytes | None:
        """Return the rebalance checkpoint stored on this server, or None."""
        data: bytes | None = self.serve("read_checkpoint")
        return data

    def write_checkpoint(self, data: bytes | None) -> None:
        """Store (or, with None, drop) the rebalance checkpoint on this server."""
        self.serve("write_checkpoint", data)

    @property
    def index(self) -> Index:
        """The key index of this server, for the coordinator's range reads.

        :raises UnsupportedError: on memcached, which cannot list its keys
        """
        return self.kind.index(self.epoch_of, self.point_of, self._transport)


class AsyncFencedServer(_Fenced):
    """An asyncio server handle whose every call carries its routed epoch."""

    def __init__(self, inner: AsyncConnection, epoch_of: EpochOf, point_of: PointOf) -> None:
        super().__init__(inner.kind, epoch_of, point_of)
        self.inner = inner
        self._transport = inner.transport

    async def serve(self, method: str, *args: Any) -> Any:
        """Await call `method(*args)`, fenced by the routed epoch."""
        operation = self.kind.steps(method, args, self.epoch_of(), self.point_of)
        return await drive_async(operation, self._transport)

    async def close(self) -> None:
        await self.inner.close()


def fence(backend: Any, epoch_of: EpochOf, point_of: PointOf) -> FencedBackend:
    """Return blocking `backend` fenced by `epoch_of` (the epoch each call was routed with)."""
    if isinstance(backend, FencedBackend):
        backend = backend.inner
    if isinstance(backend, MemoryBackend):
        backend = Connection(MemoryServer(backend.url), NoTransport())
    return FencedBackend(backend, epoch_of, point_of)


def fence_async(
    backend: AsyncConnection, epoch_of: EpochOf, point_of: PointOf
) -> AsyncFencedServer:
    """Return asyncio `backend` fenced by `epoch_of` (the epoch each call was routed with)."""
    return AsyncFencedServer(backend, epoch_of, point_of)
