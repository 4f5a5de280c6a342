"""AsyncShardedClient: the asyncio twin of :class:`~ringkit.cluster.client.ShardedClient`.

Same options, same routing, same replication, fallback, quorum, read repair, hinted
invalidation and re-admission; every call is awaited. Redis goes through ``redis.asyncio`` and
memcached through ringkit's minimal asyncio protocol client (:mod:`ringkit.cluster.aio_backends`).
Multi-key calls send their per-server batches concurrently (``asyncio.gather``): one round trip
per server, all servers at once.

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
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Any, TypeVar

from ringkit.cluster.aio_backends import AsyncBackend, open_async_backend
from ringkit.cluster.core import ClientCore, check_delta, check_ttl
from ringkit.cluster.health import Hook, OpEvent, ServerHealth, ServerStats
from ringkit.cluster.serializers import Decoded
from ringkit.cluster.servers import key_bytes
from ringkit.cluster.urls import ServerURL
from ringkit.errors import BackendError, ConfigError

__all__ = ["AsyncServer", "AsyncShardedClient"]

T = TypeVar("T")


async def _delete(backend: AsyncBackend, *, key: bytes) -> bool:
    return await backend.delete(key)


async def _set_many(
    backend: AsyncBackend, *, items: dict[bytes, bytes], ttl_s: float | None
) -> None:
    await backend.set_many(items, ttl_s)


class AsyncServer:
    """One async backend server with its health, counters and hooks (see ``Server``)."""

    def __init__(
        self, name: str, backend: AsyncBackend, health: ServerHealth, hooks: Sequence[Hook]
    ) -> None:
        self.name = name
        self.backend = backend
        self.health = health
        self.stats = ServerStats()
        self.hooks = tuple(hooks)

    @property
    def url(self) -> ServerURL:
        """The server's URL."""
        return self.backend.url

    async def call(
        self,
        op: str,
        action: Callable[[AsyncBackend], Awaitable[T]],
        *,
        hits: Callable[[T], tuple[int, int]] | None = None,
    ) -> T:
        """Await `action` on the backend; count it; mark the server down if it fails.

        :raises BackendError: when the server fails (it is then marked down)
        """
        start = time.perf_counter()
        try:
            result = await action(self.backend)
        except BackendError as error:
            elapsed = time.perf_counter() - start
            self.health.mark_down(now=time.monotonic())
            self.stats.record(elapsed, error=True)
            for hook in self.hooks:
                hook(OpEvent(self.name, op, "error", elapsed, str(error)))
            raise
        elapsed = time.perf_counter() - start
        hit, miss = hits(result) if hits is not None else (0, 0)
        self.stats.record(elapsed, hits=hit, misses=miss)
        for hook in self.hooks:
            outcome = "ok" if hits is None else ("hit" if hit else "miss")
            hook(OpEvent(self.name, op, outcome, elapsed))
        return result

    async def usable(self) -> bool:
        """Return True if the server is up, probing (and re-admitting) it when it is due."""
        health = self.health
        if health.up:
            return True
        if not health.claim_probe(now=time.monotonic()):
            self.stats.bump("skipped")
            return False
        try:
            await self.call("ping", lambda backend: backend.ping())
            for key in health.take_hints():
                await self.call("invalidate", partial(_delete, key=key))
        except BackendError:
            health.probe_failed(now=time.monotonic())
            self.stats.bump("skipped")
            return False
        health.readmit()
        self.stats.bump("readmissions")
        return True


class AsyncShardedClient(ClientCore[AsyncServer]):
    """The asyncio sharded client: ``await client.get(key)`` and the same verbs as the sync one."""

    def _open_server(
        self,
        name: str,
        url: ServerURL,
        health: ServerHealth,
        *,
        timeout_s: float,
        connect_timeout_s: float | None,
        max_connections: int,
        hooks: Sequence[Hook],
    ) -> AsyncServer:
        backend = open_async_backend(
            url,
            timeout_s=timeout_s,
            connect_timeout_s=connect_timeout_s,
            max_connections=max_connections,
        )
        return AsyncServer(name, backend, health, hooks)

    async def _fetch(self, name: str, group: list[bytes]) -> dict[bytes, bytes] | None:
        server, count = self._servers[name], len(group)
        try:
            return await server.call(
                "get_many",
                lambda b: b.get_many(group),
                hits=lambda found: (len(found), count - len(found)),
            )
        except BackendError:
            server.stats.bump("failovers")
            return None

    async def _record(self, keys: Iterable[bytes]) -> None:
        hot = self._hot
        if hot is None:
            return
        for data in keys:
            hot.record(data)
        for data in hot.drain_left():
            for name in self._router.extra_copies(data):
                await self._try(name, "delete", partial(_delete, key=data), [data])

    async def get(self, key: str | bytes) -> Any:
        """Return the value stored at `key`, or None when no replica has it.

        :raises BackendError: when no replica of the key could be reached
        """
        return (await self.get_many([key])).get(key)

    async def get_many(self, keys: Iterable[str | bytes]) -> dict[Any, Any]:
        """Return ``{key: value}`` for the keys found; per-server batches run concurrently.

        :raises BackendError: when no replica of some key could be reached
        """
        given = {key_bytes(key): key for key in keys}
        await self._record(given)
        found = await (
            self._read_all_replicas(list(given))
            if self._read_all
            else self._read_first(list(given))
        )
        return {given[data]: decoded.value for data, decoded in found.items()}

    async def _read_first(self, keys: list[bytes]) -> dict[bytes, Decoded]:
        orders = {key: self._router.read_order(key) for key in keys}
        position = dict.fromkeys(keys, 0)
        missed: dict[bytes, list[str]] = {}
        answered: set[bytes] = set()
        found: dict[bytes, tuple[bytes, Decoded]] = {}
        pending = list(keys)
        while pending:
            groups: dict[str, list[bytes]] = {}
            for key in pending:
                while position[key] < len(orders[key]):
                    name = orders[key][position[key]]
                    position[key] += 1
                    if await self._servers[name].usable():
                        groups.setdefault(name, []).append(key)
                        break
            results = await asyncio.gather(*(self._fetch(n, g) for n, g in groups.items()))
            pending = []
            for (name, group), values in zip(groups.items(), results, strict=True):
                if values is None:
                    pending.extend(group)
                    continue
                answered.update(group)
                for key in group:
                    if key in values:
                        found[key] = (values[key], self._decode(values[key]))
                    else:
                        missed.setdefault(key, []).append(name)
                        pending.append(key)
        self._check_answered(keys, answered)
        if self._read_repair:
            for key, names in missed.items():
                if key in found:
                    await self._repair(key, *found[key], names)
        return {key: decoded for key, (_, decoded) in found.items()}

    def _check_answered(self, keys: list[bytes], answered: set[bytes]) -> None:
        unreachable = [key for key in keys if key not in answered]
        if unreachable:
            raise BackendError(
                f"no replica of {len(unreachable)} keys could be reached, first: "
                f"{unreachable[0]!r}; every server holding them is down"
            )

    async def _read_all_replicas(self, keys: list[bytes]) -> dict[bytes, Decoded]:
        groups: dict[str, list[bytes]] = {}
        for key in keys:
            for name in dict.fromkeys(self._router.read_order(key)):
                if await self._servers[name].usable():
                    groups.setdefault(name, []).append(key)
        results = await asyncio.gather(*(self._fetch(n, g) for n, g in groups.items()))
        answers: dict[bytes, dict[str, bytes | None]] = {}
        for (name, group), values in zip(groups.items(), results, strict=True):
            if values is not None:
                for key in group:
                    answers.setdefault(key, {})[name] = values.get(key)
        self._check_answered(keys, set(answers))
        found: dict[bytes, Decoded] = {}
        for key, by_server in answers.items():
            copies = {n: (raw, self._decode(raw)) for n, raw in by_server.items() if raw}
            if not copies:
                continue
            stored, best = max(copies.values(), key=lambda copy: copy[1].version)
            found[key] = best
            stale = [n for n in by_server if n not in copies or copies[n][1].version < best.version]
            if stale and self._read_repair:
                await self._repair(key, stored, best, stale)
        return found

    async def _repair(self, key: bytes, stored: bytes, decoded: Decoded, names: list[str]) -> None:
        if decoded.version == 0:
            return  # a raw counter or a foreign value: its TTL is unknown
        ttl_s = decoded.expires_at_ms / 1000 - time.time() if decoded.expires_at_ms else None
        if ttl_s is not None and ttl_s <= 0:
            return
        for name in names:
            await self._try(name, "repair", lambda b: b.set_many({key: stored}, ttl_s), [key])

    async def _try(
        self,
        name: str,
        op: str,
        action: Callable[[AsyncBackend], Awaitable[T]],
        keys: Iterable[bytes],
    ) -> tuple[bool, T | None]:
        server = self._servers[name]
        if await server.usable():
            try:
                return True, await server.call(op, action)
            except BackendError:
                pass
        for data in keys:
            server.health.hint(data)
        return False, None

    async def set(self, key: str | bytes, value: object, *, ttl_s: float | None = None) -> None:
        """Store `value` at `key` on its replicas (see ``ShardedClient.set``)."""
        await self.set_many({key: value}, ttl_s=ttl_s)

    async def set_many(
        self, items: Mapping[str | bytes, object], *, ttl_s: float | None = None
    ) -> None:
        """Store every item; per-server batches run concurrently; validated before writing.

        :raises QuorumError: listing the keys that fewer than `write_quorum` replicas took
        """
        encoded = self._encode_many(items, ttl_s)
        groups: dict[str, dict[bytes, bytes]] = {}
        replicas = {data: self._router.replica_names(data) for data in encoded}
        for data, stored in encoded.items():
            for name in self._router.write_names(data):
                groups.setdefault(name, {})[data] = stored
        outcomes = await asyncio.gather(
            *(
                self._try(name, "set_many", partial(_set_many, items=group, ttl_s=ttl_s), group)
                for name, group in groups.items()
            )
        )
        acked = {
            (name, data)
            for (name, group), (ok, _) in zip(groups.items(), outcomes, strict=True)
            if ok
            for data in group
        }
        self._check_quorum(replicas, acked)

    async def _each(
        self, data: bytes, op: str, action: Callable[[AsyncBackend], Awaitable[T]]
    ) -> list[T]:
        replicas = self._router.replica_names(data)
        answers: list[T] = []
        acked: set[tuple[str, bytes]] = set()
        for name in self._router.write_names(data):
            ok, answer = await self._try(name, op, action, [data])
            if ok:
                acked.add((name, data))
                if name in replicas:
                    answers.append(answer)  # type: ignore[arg-type]
        self._check_quorum({data: replicas}, acked)
        return answers

    async def add(self, key: str | bytes, value: object, *, ttl_s: float | None = None) -> bool:
        """Store `value` only where `key` is absent; return what the first replica answered."""
        [(data, stored)] = self._encode_many({key: value}, ttl_s).items()
        return (await self._each(data, "add", lambda b: b.add(data, stored, ttl_s)))[0]

    async def delete(self, key: str | bytes) -> bool:
        """Delete `key` from its replicas; return True if any replica had it."""
        data = key_bytes(key)
        return any(await self._each(data, "delete", lambda b: b.delete(data)))

    async def incr(self, key: str | bytes, delta: int = 1) -> int | None:
        """Add `delta` to the integer at `key` (see ``ShardedClient.incr``)."""
        check_delta(delta)
        self._check_counter()
        data = key_bytes(key)
        return (await self._each(data, "incr", lambda b: b.incr(data, delta)))[0]

    async def decr(self, key: str | bytes, delta: int = 1) -> int | None:
        """Subtract `delta` (stopping at 0); return the new value, or None if it is missing."""
        return await self.incr(key, -check_delta(delta))

    async def touch(self, key: str | bytes, ttl_s: float) -> bool:
        """Give `key` a new TTL on its replicas; return True if any replica had it."""
        if check_ttl(ttl_s) is None:
            raise ConfigError("ttl_s must be a number > 0, got None")
        data = key_bytes(key)
        return any(await self._each(data, "touch", lambda b: b.touch(data, ttl_s)))

    async def check_health(self) -> list[str]:
        """Probe every down server whose dead timeout has passed; return those still down."""
        for server in self._servers.values():
            await server.usable()
        return self.down_servers

    async def flush(self) -> None:
        """Delete every key on every server."""
        for server in self._servers.values():
            await server.call("flush", lambda b: b.flush())

    async def close(self) -> None:
        """Close every connection pool."""
        for server in self._servers.values():
            await server.backend.close()
