"""AsyncShardedClient: the asyncio face of the one client core.

Same options, same routing, replication, fallback, quorum, read repair, hints and
re-admission, and the same views, fencing and retry as
:class:`~ringkit.cluster.client.ShardedClient`: every decision is the core's
(:mod:`ringkit.cluster.clientcore`), driven here by awaiting the backends
(:func:`~ringkit.cluster.drivers.steps.run_async`). Redis goes through ``redis.asyncio`` with the
same fencing scripts; memcached and the memory store run the very operations of the blocking
client over an asyncio transport (:mod:`ringkit.cluster.wire.drive`). The per-server batches
of one round are sent at once (``asyncio.gather``): one round trip per server, all servers at
once. ``add_server`` / ``remove_server`` run the coordinator in a worker thread (it is a long
batch job with its own thread pool), so the event loop keeps serving while keys move.

>>> import asyncio
>>> from ringkit import HashRing
>>> async def demo() -> object:
...     urls = {n: f"memory://doctest-aio-{n}" for n in "abc"}
...     client = AsyncShardedClient(HashRing(list(urls)), urls, replicas=2)
...     await client.set("booking:42", {"seat": "12A"})
...     return await client.get("booking:42")
>>> asyncio.run(demo())
{'seat': '12A'}
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from ringkit.cluster.clientcore import REFUSED, STEPS, ClientCore, check_delta
from ringkit.cluster.core.servers import Server
from ringkit.cluster.drivers.steps import Call, Steps, call_async, run_async
from ringkit.cluster.options import ServerOptions
from ringkit.cluster.rebalance.options import RebalanceOptions, RebalanceReport
from ringkit.cluster.values.expiry import ttl_keyword
from ringkit.cluster.values.keys import user_key
from ringkit.cluster.views.view import ClusterView
from ringkit.cluster.wire.backends import open_async_backend
from ringkit.cluster.wire.fence import routed_epoch
from ringkit.cluster.wire.handles import AsyncFencedServer, fence_async
from ringkit.cluster.wire.urls import ServerURL
from ringkit.errors import EpochLostError, StaleViewError

__all__ = ["AsyncShardedClient"]

T = TypeVar("T")


class AsyncShardedClient(ClientCore[AsyncFencedServer]):
    """The asyncio sharded client: ``await client.get(key)``; see ``ShardedClient`` for each verb.

    Reading: ``get``, ``get_many``. Writing: ``set``, ``set_many``, ``add``, ``delete``,
    ``delete_many``, ``incr``, ``decr``, ``touch``. Membership: ``view``, ``epoch``,
    ``refresh_view``, ``adopt_view``, ``add_server``, ``remove_server``. Operating:
    ``check_health``, ``flush``, ``close`` and the shared ``placement``, ``replicas_for``,
    ``stats``, ``down_servers``.
    """

    def _open_backend(self, url: ServerURL, options: ServerOptions) -> AsyncFencedServer:
        backend = open_async_backend(url, **options.connection)
        return fence_async(backend, routed_epoch(self._epoch), self._point_of)

    async def _run(self, steps: Steps[T]) -> T:
        return await run_async(steps, self._servers.server)

    async def _call_alone(self, call: Call, server: Server[AsyncFencedServer]) -> Any:
        """Await a lone call (:mod:`ringkit.cluster.core.alone`); a refusal answers REFUSED."""
        try:
            return await call_async(call, server)
        except (StaleViewError, EpochLostError):
            return REFUSED

    async def _write(self, encoded: Mapping[bytes, bytes], ttl_s: float | None) -> None:
        lone = self._lone_set(encoded, ttl_s)
        if lone is None or not self._lone_done(await self._call_alone(*lone)):
            await self._run(self._set_encoded(encoded, ttl_s))

    async def get(self, key: str | bytes) -> Any:
        """Return the value stored at `key`, or None when no replica has it."""
        data = user_key(key)
        lone = self._lone_get(data)
        if lone is not None:
            value = self._lone_got(lone, data, await self._call_alone(*lone))
            if value is not STEPS:
                return value
        return await self._run(self._get(data))

    async def get_many(
        self, keys: Iterable[str | bytes], *, on_error: str = "raise"
    ) -> dict[Any, Any]:
        """Return ``{key: value}`` for the keys found; per-server batches run concurrently.

        ``on_error="miss"`` leaves out the keys no replica of which could be reached.
        """
        return await self._run(self._get_many(keys, on_error))

    @ttl_keyword
    async def set(self, key: str | bytes, value: object, *, ttl_s: float | None = None) -> None:
        """Store `value` at `key` on its replicas."""
        await self._write(self.writer.encode_one(key, value, ttl_s), ttl_s)

    @ttl_keyword
    async def set_many(
        self, items: Mapping[str | bytes, object], *, ttl_s: float | None = None
    ) -> None:
        """Store every item; per-server batches run concurrently; validated before writing."""
        await self._write(self.writer.encode_many(items, ttl_s), ttl_s)

    @ttl_keyword
    async def add(self, key: str | bytes, value: object, *, ttl_s: float | None = None) -> bool:
        """Store `value` only where `key` is absent; return what the first replica answered."""
        return await self._run(self._add(key, value, ttl_s))

    async def delete(self, key: str | bytes) -> bool:
        """Delete `key` from its replicas; return True if any replica had it."""
        return await self._run(self._delete(key))

    async def delete_many(self, keys: Iterable[str | bytes]) -> int:
        """Delete every key from its replicas; return how many some replica had."""
        return await self._run(self._delete_many(keys))

    async def incr(self, key: str | bytes, delta: int = 1) -> int | None:
        """Add `delta` to the integer at `key`; None if it is missing."""
        return await self._run(self._incr(key, delta))

    async def decr(self, key: str | bytes, delta: int = 1) -> int | None:
        """Subtract `delta` (stopping at 0); return the new value, or None if it is missing."""
        return await self.incr(key, -check_delta(delta))

    @ttl_keyword
    async def touch(self, key: str | bytes, ttl_s: float) -> bool:
        """Give `key` a new TTL on its replicas; return True if any replica had it."""
        return await self._run(self._touch(key, ttl_s))

    async def refresh_view(self, *, at_least: int = 0) -> ClusterView:
        """Read the newest view from the view store and adopt it if it is newer."""
        return await self._run(self._refresh(at_least))

    async def add_server(
        self, name: str, url: str, *, options: RebalanceOptions | None = None
    ) -> RebalanceReport:
        """Add server `name` at `url` and move its keys to it while traffic goes on."""
        self._check_change("add")
        view = await self.refresh_view()
        return await asyncio.to_thread(self._change, view, options, "add", name, url)

    async def remove_server(
        self, name: str, *, options: RebalanceOptions | None = None
    ) -> RebalanceReport:
        """Remove server `name`, moving its keys to their new owners while traffic goes on."""
        self._check_change("remove")
        view = await self.refresh_view()
        return await asyncio.to_thread(self._change, view, options, "remove", name)

    async def check_health(self) -> list[str]:
        """Probe every down server whose dead timeout has passed; return those still down."""
        return await self._run(self._check_health())

    async def sweep_index(self) -> int:
        """Drop the key index entries of keys that expired or were evicted; return how many."""
        return await self._run(self._sweep_index())

    async def flush(self) -> None:
        """Delete every key on every server."""
        await self._run(self._flush())

    async def close(self) -> None:
        """Close every connection pool, and stop following the view store."""
        await asyncio.to_thread(self._tracker.close)
        if self.metrics is not None:
            self.metrics.untrack()
        for _, server in self._servers.items():
            await server.backend.close()
