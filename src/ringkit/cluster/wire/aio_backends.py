"""Async backends: the same small interface as :mod:`ringkit.cluster.wire.backends`, awaited.

Redis goes through ``redis.asyncio`` (redis-py's own asyncio client, same options as the sync
backend). memcached goes through :class:`AsyncMemcachedBackend`, a minimal asyncio client of
memcached's text protocol written here rather than a dependency: the maintained asyncio
libraries send one command per round trip for ``set`` and have their own value encoding,
while ringkit needs pipelined ``set_many`` (one round trip per server, as the sync path) and
raw bytes, which is a few dozen lines of protocol (memcached ``doc/protocol.txt``). Each call
runs under ``asyncio.wait_for`` with the client's timeout; a connection that timed out or
failed is closed, never reused with a half-read reply. Memory stores are shared with the sync
backend (``memory://NAME`` is one store per process whichever client names it).

>>> import asyncio
>>> from ringkit.cluster.wire.urls import parse_url
>>> backend = open_async_backend(parse_url("memory://doctest-aio-backend"), timeout_s=1.0)
>>> asyncio.run(backend.set_many({b"k": b"v"}, None))
>>> asyncio.run(backend.get_many([b"k"]))
{b'k': b'v'}
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from ringkit.cluster.values.codec import buries, supersedes
from ringkit.cluster.values.expiry import memcached_exptime
from ringkit.cluster.values.keys import tombstone_key
from ringkit.cluster.wire.backends import (
    _INCR_SCRIPT,
    _milliseconds,
    open_kind,
    redis_options,
    require_redis,
    server_failed,
    too_large,
    ttl_of_meta,
)
from ringkit.cluster.wire.memory import MemoryBackend, _not_integer
from ringkit.cluster.wire.urls import ServerURL
from ringkit.errors import BackendError, ConfigError

__all__ = [
    "AsyncBackend",
    "AsyncMemcachedBackend",
    "AsyncMemoryBackend",
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


class AsyncMemoryBackend:
    """The memory backend behind an async face (no I/O: each call runs at once)."""

    def __init__(self, url: ServerURL) -> None:
        self.url = url
        self._sync = MemoryBackend(url)

    @property
    def sync(self) -> MemoryBackend:
        """The blocking backend over the same store (the memory store does no I/O)."""
        return self._sync

    async def get_many(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        return self._sync.get_many(keys)

    async def set_many(self, items: Mapping[bytes, bytes], ttl_s: float | None) -> None:
        self._sync.set_many(items, ttl_s)

    async def add(self, key: bytes, value: bytes, ttl_s: float | None) -> bool:
        return self._sync.add(key, value, ttl_s)

    async def delete(self, key: bytes) -> bool:
        return self._sync.delete(key)

    async def repair(self, key: bytes, value: bytes, ttl_s: float | None) -> bool:
        return self._sync.repair(key, value, ttl_s)

    async def bury(self, key: bytes, tombstone: bytes, ttl_s: float) -> bool:
        return self._sync.bury(key, tombstone, ttl_s)

    async def bury_many(self, tombstones: Mapping[bytes, bytes], ttl_s: float) -> list[bytes]:
        return self._sync.bury_many(tombstones, ttl_s)

    async def incr(self, key: bytes, delta: int) -> int | None:
        return self._sync.incr(key, delta)

    async def touch(self, key: bytes, ttl_s: float) -> bool:
        return self._sync.touch(key, ttl_s)

    async def ping(self) -> None:
        self._sync.ping()

    async def flush(self) -> None:
        self._sync.flush()

    async def close(self) -> None:
        """Nothing to release."""


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
                raise _not_integer(key) from None
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


_Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class AsyncMemcachedBackend:
    """A minimal asyncio client of memcached's text protocol, with a pool of connections."""

    def __init__(
        self, url: ServerURL, *, timeout_s: float, connect_timeout_s: float, max_connections: int
    ) -> None:
        self.url = url
        self._timeout_s = timeout_s
        self._connect_timeout_s = connect_timeout_s
        self._idle: list[_Connection] = []
        self._slots = max_connections
        self._owner: tuple[int, int] = (0, 0)
        self._semaphore: asyncio.Semaphore | None = None

    def _pool_for_this_loop(self) -> asyncio.Semaphore:
        # Connections belong to one event loop and one process: start afresh in another.
        owner = (os.getpid(), id(asyncio.get_running_loop()))
        if self._semaphore is None or owner != self._owner:
            self._owner, self._idle = owner, []
            self._semaphore = asyncio.Semaphore(self._slots)
        return self._semaphore

    async def _exchange(self, request: bytes, replies: int) -> list[bytes]:
        """Send `request`, read `replies` replies (a VALUE block counts as one, up to END)."""
        semaphore = self._pool_for_this_loop()
        async with semaphore:
            connection = self._idle.pop() if self._idle else None
            try:
                if connection is None:
                    connection = await asyncio.wait_for(
                        asyncio.open_connection(self.url.host, self.url.port),
                        self._connect_timeout_s,
                    )
                result = await asyncio.wait_for(
                    self._talk(connection, request, replies), self._timeout_s
                )
            except (TimeoutError, OSError, asyncio.IncompleteReadError) as error:
                if connection is not None:
                    connection[1].close()
                raise server_failed(self.url, error) from None
            self._idle.append(connection)
            return result

    @staticmethod
    async def _talk(connection: _Connection, request: bytes, replies: int) -> list[bytes]:
        reader, writer = connection
        writer.write(request)
        await writer.drain()
        lines: list[bytes] = []
        while len(lines) < replies:
            line = await reader.readuntil(b"\r\n")
            if line.startswith(b"VALUE "):
                size = int(line.split()[3])
                data = await reader.readexactly(size + 2)
                lines.append(line + data)
                replies += 1  # the END still follows
            else:
                lines.append(line[:-2])
        return lines

    @staticmethod
    def _check(line: bytes, url: ServerURL, items: Mapping[bytes, bytes] | None = None) -> bytes:
        """Return `line`, or raise: the caller's ConfigError for a refused request, else a failure.

        A reply line is read whole before this, so the connection stays in step either way.
        """
        text = line.decode(errors="replace")
        if line.startswith(b"CLIENT_ERROR"):
            raise ConfigError(f"server {url} refused the request: {text}")
        if items and line.startswith(b"SERVER_ERROR") and b"too large" in line:
            raise too_large(url, items, text)
        if line.startswith((b"SERVER_ERROR", b"ERROR")):
            raise BackendError(f"server {url} answered {text!r}")
        return line

    async def get_many(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        if not keys:
            return {}
        return self._values(await self._exchange(b"get " + b" ".join(keys) + b"\r\n", 1))

    def _values(self, lines: list[bytes]) -> dict[bytes, bytes]:
        """Return the values of a ``get``'s reply (its VALUE blocks, then END)."""
        found = {}
        for line in lines[:-1]:
            header, _, data = line.partition(b"\r\n")
            found[header.split()[1]] = data[:-2]
        self._check(lines[-1], self.url)
        return found

    async def set_many_then_get(
        self, items: Mapping[bytes, bytes], ttl_s: float | None, keys: Sequence[bytes]
    ) -> dict[bytes, bytes]:
        """Store every item, then read `keys`: pipelined, one round trip (as the sync form)."""
        expire = memcached_exptime(ttl_s, time.time(), str(self.url))
        request = b"".join(
            b"set %s 0 %d %d\r\n%s\r\n" % (key, expire, len(value), value)
            for key, value in items.items()
        )
        request += b"get " + b" ".join(keys) + b"\r\n"
        lines = await self._exchange(request, len(items) + 1)
        self._stored(lines[: len(items)], items)
        return self._values(lines[len(items) :])

    def _stored(self, answers: list[bytes], items: Mapping[bytes, bytes]) -> None:
        if any(self._check(line, self.url, items) != b"STORED" for line in answers):
            raise BackendError(f"server {self.url} did not store every key: {answers[:3]}")

    async def _store(
        self, verb: bytes, items: Mapping[bytes, bytes], ttl_s: float | None
    ) -> list[bytes]:
        expire = memcached_exptime(ttl_s, time.time(), str(self.url))
        request = b"".join(
            b"%s %s 0 %d %d\r\n%s\r\n" % (verb, key, expire, len(value), value)
            for key, value in items.items()
        )
        answers = await self._exchange(request, len(items))
        return [self._check(line, self.url, items) for line in answers]

    async def set_many(self, items: Mapping[bytes, bytes], ttl_s: float | None) -> None:
        if items:
            self._stored(await self._store(b"set", items, ttl_s), items)

    async def add(self, key: bytes, value: bytes, ttl_s: float | None) -> bool:
        return (await self._store(b"add", {key: value}, ttl_s))[0] == b"STORED"

    async def _one(self, request: bytes) -> bytes:
        return self._check((await self._exchange(request, 1))[0], self.url)

    async def delete(self, key: bytes) -> bool:
        return await self._one(b"delete %s\r\n" % key) == b"DELETED"

    async def gets(self, key: bytes) -> tuple[bytes | None, bytes]:
        """Return `key`'s value and its cas token (None and b"" when absent)."""
        return self._cas_value(await self._exchange(b"gets %s\r\n" % key, 1))

    def _cas_value(self, lines: list[bytes]) -> tuple[bytes | None, bytes]:
        """Return the value and cas token of a one-key ``gets`` reply (None and b"": absent)."""
        self._check(lines[-1], self.url)
        if len(lines) == 1:
            return None, b""
        header, _, data = lines[0].partition(b"\r\n")
        return data[:-2], header.split()[4]

    async def cas(self, key: bytes, value: bytes, token: bytes, expire: int) -> bool:
        """Store `value` if `key` still has cas `token`, expiring at `expire` (protocol.txt)."""
        request = b"cas %s 0 %d %d %s\r\n%s\r\n" % (key, expire, len(value), token, value)
        return await self._one(request) == b"STORED"

    async def repair(self, key: bytes, value: bytes, ttl_s: float | None) -> bool:
        """Store envelope `value` only where it supersedes what is here (``gets`` + ``cas``).

        As the sync backend: the tombstone is read before, and again after an ``add``.
        """
        tomb_key = tombstone_key(key)
        there, token = await self.gets(key)
        tomb, _ = await self.gets(tomb_key)
        if not supersedes(value, there, tomb):
            return False
        if there is not None:
            expire = memcached_exptime(ttl_s, time.time(), str(self.url))
            return await self.cas(key, value, token, expire)
        if not await self.add(key, value, ttl_s):
            return False
        tomb, _ = await self.gets(tomb_key)
        if tomb is not None and not supersedes(value, None, tomb):
            now, token = await self.gets(key)
            if now == value:
                await self.cas(key, value, token, -1)  # expired at once: taken back
            return False
        return True

    async def bury(self, key: bytes, tombstone: bytes, ttl_s: float) -> bool:
        """Keep `tombstone` beside `key` for `ttl_s`, then delete `key` unless it is newer.

        As the sync backend: the tombstone first, pipelined with the key's ``gets`` (one
        round trip), the delete a ``cas`` that expires the key.
        """
        tomb = {tombstone_key(key): tombstone}
        expire = memcached_exptime(ttl_s, time.time(), str(self.url))
        request = b"set %s 0 %d %d\r\n%s\r\ngets %s\r\n" % (
            tombstone_key(key),
            expire,
            len(tombstone),
            tombstone,
            key,
        )
        lines = await self._exchange(request, 2)
        self._stored(lines[:1], tomb)
        there, token = self._cas_value(lines[1:])
        if there is None or not buries(tombstone, there):
            return False
        return await self.cas(key, there, token, -1)

    async def bury_many(self, tombstones: Mapping[bytes, bytes], ttl_s: float) -> list[bytes]:
        """:meth:`bury` each key, one after the other (memcached has no batched ``cas``)."""
        return [key for key, tomb in tombstones.items() if await self.bury(key, tomb, ttl_s)]

    async def incr(self, key: bytes, delta: int) -> int | None:
        verb = b"incr" if delta >= 0 else b"decr"
        [answer] = await self._exchange(b"%s %s %d\r\n" % (verb, key, abs(delta)), 1)
        if answer.startswith(b"CLIENT_ERROR"):
            raise _not_integer(key)  # about the value (the delta is checked before)
        if self._check(answer, self.url) == b"NOT_FOUND":
            return None
        return int(answer)

    async def touch(self, key: bytes, ttl_s: float) -> bool:
        expire = memcached_exptime(ttl_s, time.time(), str(self.url))
        return await self._one(b"touch %s %d\r\n" % (key, expire)) == b"TOUCHED"

    async def ttl_left(self, key: bytes) -> float | None:
        """Return the seconds `key` has left (``mg KEY t``), as the sync backend does."""
        [line] = await self._exchange(b"mg %s t\r\n" % key, 1)
        return None if line == b"ERROR" else ttl_of_meta(self._check(line, self.url))

    async def ping(self) -> None:
        await self._one(b"version\r\n")

    async def flush(self) -> None:
        await self._one(b"flush_all\r\n")

    async def close(self) -> None:
        for _, writer in self._idle:
            writer.close()
        self._idle = []


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
        "memcached": AsyncMemcachedBackend,
        "redis": AsyncRedisBackend,
        "rediss": AsyncRedisBackend,
    }
    backend: AsyncBackend = open_kind(
        url, AsyncMemoryBackend, kinds, timeout_s, connect_timeout_s, max_connections
    )
    return backend
