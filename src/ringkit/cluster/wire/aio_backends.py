"""Async backends: the same small interface as :mod:`ringkit.cluster.wire.backends`, awaited.

Redis goes through ``redis.asyncio`` (redis-py's own asyncio client, same options as the sync
backend). memcached and the memory store are their kinds' one set of operations
(:mod:`ringkit.cluster.wire.memcached.ops`, :mod:`ringkit.cluster.wire.memory`) over an asyncio
transport (:mod:`ringkit.cluster.wire.memcached.transports`).

>>> import asyncio
>>> from ringkit.cluster.wire.urls import parse_url
>>> backend = open_async_backend(parse_url("memory://doctest-aio-backend"), timeout_s=1.0)
>>> asyncio.run(backend.call("set_many", {b"k": b"v"}, None))
>>> asyncio.run(backend.call("get_many", [b"k"]))
{b'k': b'v'}
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from ringkit.cluster.wire.backends import (
    _INCR_SCRIPT,
    _milliseconds,
    open_kind,
    redis_options,
    require_redis,
)
from ringkit.cluster.wire.failures import not_integer, server_failed
from ringkit.cluster.wire.handles import AsyncConnection
from ringkit.cluster.wire.memcached.ops import MemcachedServer
from ringkit.cluster.wire.memcached.transports import StreamTransport
from ringkit.cluster.wire.memory import AsyncNoTransport, MemoryServer
from ringkit.cluster.wire.urls import ServerURL
from ringkit.errors import BackendError

__all__ = [
    "AsyncBackend",
    "AsyncRedisBackend",
    "open_async_backend",
]

T = TypeVar("T")


class AsyncBackend(Protocol):
    """What the async client needs from one server. Methods raise BackendError on failure."""

    url: ServerURL

    async def get_many(self, keys: Sequence[bytes]) -> dict[bytes, bytes]: ...
    async def set_many(self, items: Mapping[bytes, bytes], ttl_s: float | None) -> None: ...
    async def add(self, key: bytes, value: bytes, ttl_s: float | None) -> bool: ...
    async def delete(self, key: bytes) -> bool: ...
    async def incr(self, key: bytes, delta: int) -> int | None: ...
    async def touch(self, key: bytes, ttl_s: float) -> bool: ...
    async def ping(self) -> None: ...
    async def flush(self) -> None: ...
    async def close(self) -> None: ...


def _memory(url: ServerURL) -> AsyncConnection:
    return AsyncConnection(MemoryServer(url), AsyncNoTransport())


class AsyncRedisBackend:
    """A backend over ``redis.asyncio``."""

    def __init__(
        self, url: ServerURL, *, timeout_s: float, connect_timeout_s: float, max_connections: int
    ) -> None:
        redis = require_redis(url)
        self.url = url
        self._errors: tuple[type[Exception], ...] = (
            redis.RedisError,
            OSError,
            asyncio.TimeoutError,
        )
        options = redis_options(
            url,
            timeout_s=timeout_s,
            connect_timeout_s=connect_timeout_s,
            max_connections=max_connections,
        )
        retry = redis.asyncio.retry.Retry(redis.backoff.NoBackoff(), 0)
        # NOTE: a blocking pool, not redis.asyncio's default one, which raises "Too many
        # connections" at once when a round of concurrent calls (a re-admitted server's hint
        # deletes, a wide multi-get) outnumbers max_connections; here the extra calls wait for
        # a free connection, at most timeout_s.
        if options.pop("ssl", False):
            options["connection_class"] = redis.asyncio.SSLConnection
        pool = redis.asyncio.BlockingConnectionPool(timeout=timeout_s, retry=retry, **options)
        self._client = redis.asyncio.Redis(connection_pool=pool)
        self._incr = self._client.register_script(_INCR_SCRIPT)

    @property
    def client(self) -> Any:
        """The ``redis.asyncio`` client, which the fenced form sends its scripts through."""
        return self._client

    async def _call(self, action: Callable[[Any], Awaitable[T]]) -> T:
        try:
            return await action(self._client)
        except self._errors as error:
            raise server_failed(self.url, error) from None

    async def get_many(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        values = await self._call(lambda client: client.mget(keys))
        return {key: value for key, value in zip(keys, values, strict=True) if value is not None}

    async def set_many(self, items: Mapping[bytes, bytes], ttl_s: float | None) -> None:
        px = _milliseconds(ttl_s, self.url)

        async def action(client: Any) -> None:
            pipe = client.pipeline(transaction=False)
            for key, value in items.items():
                pipe.set(key, value, px=px)
            await pipe.execute()

        await self._call(action)

    async def add(self, key: bytes, value: bytes, ttl_s: float | None) -> bool:
        px = _milliseconds(ttl_s, self.url)
        return bool(await self._call(lambda client: client.set(key, value, px=px, nx=True)))

    async def delete(self, key: bytes) -> bool:
        return bool(await self._call(lambda client: client.delete(key)))

    async def incr(self, key: bytes, delta: int) -> int | None:
        try:
            result = await self._call(lambda client: self._incr(keys=[key], args=[delta]))
        except BackendError as error:
            if "not an integer" in str(error):
                raise not_integer(key) from None
            raise
        return None if result is None else int(result)

    async def touch(self, key: bytes, ttl_s: float) -> bool:
        px = _milliseconds(ttl_s, self.url)
        return bool(await self._call(lambda client: client.pexpire(key, px)))

    async def ping(self) -> None:
        await self._call(lambda client: client.ping())

    async def flush(self) -> None:
        await self._call(lambda client: client.flushdb())

    async def close(self) -> None:
        await self._client.aclose()


def _memcached(
    url: ServerURL, *, timeout_s: float, connect_timeout_s: float, max_connections: int
) -> AsyncConnection:
    transport = StreamTransport(
        url,
        timeout_s=timeout_s,
        connect_timeout_s=connect_timeout_s,
        max_connections=max_connections,
    )
    return AsyncConnection(MemcachedServer(url), transport)


def open_async_backend(
    url: ServerURL,
    *,
    timeout_s: float,
    connect_timeout_s: float | None = None,
    max_connections: int = 32,
) -> AsyncBackend:
    """Return the async backend for `url` (connections open lazily, on first use).

    :raises ConfigError: when the client library the URL needs is not installed
    """
    kinds = {
        "memcached": _memcached,
        "redis": AsyncRedisBackend,
        "rediss": AsyncRedisBackend,
    }
    backend: AsyncBackend = open_kind(
        url, _memory, kinds, timeout_s, connect_timeout_s, max_connections
    )
    return backend
