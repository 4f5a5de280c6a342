"""A server as the client and the coordinator hold it: its kind's operations over one transport.

A handle pairs a server kind's operations (memcached's :class:`MemcachedServer`, the memory
store's, Redis's) with a transport and runs each call's operation with the one drive function
of its I/O (:mod:`ringkit.cluster.wire.drive`). :class:`FencedBackend` blocks; it is also the
coordinator's handle on a server (the view, the audit log, the checkpoint, the key index).
:class:`AsyncFencedServer` awaits; the async client only calls its ``serve_at``. Both send
every call with the epoch it was routed by: the one a driver's call carries (``serve_at``), else
the one :func:`~ringkit.cluster.wire.fence.routed_by` set (``serve``, the plain interface);
neither holds a decision of its own.
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


class _BackendVerbs:
    """The plain Backend interface (:mod:`ringkit.cluster.wire.backends`), typed, written once.

    Each verb is one call of ``serve``, which the handle defines: unfenced (:class:`Connection`)
    or fenced by the routed epoch (:class:`FencedBackend`).
    """

    def serve(self, method: str, *args: Any) -> Any:
        raise NotImplementedError

    def get_many(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        found: dict[bytes, bytes] = self.serve("get_many", keys)
        return found

    def set_many(self, items: Mapping[bytes, bytes], ttl_s: float | None) -> None:
        self.serve("set_many", items, ttl_s)

    def add(self, key: bytes, value: bytes, ttl_s: float | None) -> bool:
        return bool(self.serve("add", key, value, ttl_s))

    def delete(self, key: bytes) -> bool:
        return bool(self.serve("delete", key))

    def incr(self, key: bytes, delta: int) -> int | None:
        counted: int | None = self.serve("incr", key, delta)
        return counted

    def touch(self, key: bytes, ttl_s: float) -> bool:
        return bool(self.serve("touch", key, ttl_s))

    def ping(self) -> None:
        self.serve("ping")

    def flush(self) -> None:
        self.serve("flush")


class Connection(_BackendVerbs):
    """One server, unfenced and blocking: a plain Backend (see ringkit.cluster.wire.backends)."""

    def __init__(self, kind: ServerKind, transport: ClosingSync) -> None:
        self.kind, self.transport, self.url = kind, transport, kind.url

    def serve(self, method: str, *args: Any) -> Any:
        """Run call `method(*args)` unfenced."""
        return drive_sync(self.kind.plain(method, args), self.transport)

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


class FencedBackend(_Fenced, _BackendVerbs):
    """A blocking server handle whose every call carries its routed epoch.

    The client's drivers make every call through :meth:`serve_at`, by name and with its epoch,
    as the async handle's drivers do. The typed methods below are for the callers that name a
    call in their code: the plain :class:`~ringkit.cluster.wire.backends.Backend` interface, and
    the coordinator's view, audit log and checkpoint.
    """

    def __init__(self, inner: Connection, epoch_of: EpochOf, point_of: PointOf) -> None:
        super().__init__(inner.kind, epoch_of, point_of)
        self.inner = inner
        self._transport = inner.transport

    def serve(self, method: str, *args: Any) -> Any:
        """Run call `method(*args)`, fenced by the routed epoch."""
        return self.serve_at(self.epoch_of(), method, args)

    def serve_at(self, epoch: int, method: str, args: Sequence[Any]) -> Any:
        """Run call `method(*args)`, fenced by `epoch`: the drivers' calls, which carry theirs."""
        operation = self.kind.steps(method, args, epoch, self.point_of)
        return drive_sync(operation, self._transport)

    def close(self) -> None:
        self.inner.close()

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
        return await self.serve_at(self.epoch_of(), method, args)

    async def serve_at(self, epoch: int, method: str, args: Sequence[Any]) -> Any:
        """Await call `method(*args)`, fenced by `epoch`: the drivers' calls, which carry theirs."""
        operation = self.kind.steps(method, args, epoch, self.point_of)
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
