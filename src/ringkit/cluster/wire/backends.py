"""Backends: one small interface over an in-process store, Redis (redis-py) and memcached.

A backend speaks bytes to one server: ``get_many``, ``set_many``, ``add``, ``delete``, ``incr``
(a negative delta decrements, stopping at 0 as memcached does, so that every backend agrees),
``touch``, ``ping`` and ``flush``. Multi-key calls are one round trip (memcached ``get k1 k2 …``
and batched ``set``; Redis ``MGET`` and an untransacted pipeline). Every server failure
(refused, reset, timed out, protocol error) is raised as :class:`ringkit.errors.BackendError`,
which the client turns into a failover; a request the server refuses as the caller's error
(memcached's ``CLIENT_ERROR``, ``SERVER_ERROR object too large for cache``, a counter that is not
one) and a TTL the server cannot keep (:mod:`ringkit.cluster.values.expiry`) are
:class:`~ringkit.errors.ConfigError` for that call, and never mark the server down. Each backend
owns a connection pool, so one backend is safe to share between threads, and re-creates it after
a fork (the pid is checked), so a child process (gunicorn's workers) never shares a socket with
its parent.

``memory://NAME`` stores live in a process-wide registry: two clients that name the same store
share it, which makes the embedded backend useful for demos and tests.

>>> store = open_backend(parse_url("memory://doctest-backends"), timeout_s=1.0)
>>> store.set_many({b"k": b"v"}, None)
>>> store.get_many([b"k"])
{b'k': b'v'}
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from ringkit.cluster.values.expiry import redis_px
from ringkit.cluster.wire.failures import not_integer, server_failed
from ringkit.cluster.wire.handles import Connection
from ringkit.cluster.wire.memcached.ops import MemcachedServer
from ringkit.cluster.wire.memcached.transports import SocketTransport
from ringkit.cluster.wire.memory import MemoryBackend, MemoryStore, memory_store
from ringkit.cluster.wire.urls import ServerURL, parse_url
from ringkit.errors import BackendError, ConfigError

__all__ = [
    "Backend",
    "MemoryBackend",
    "MemoryStore",
    "RedisBackend",
    "memory_store",
    "open_backend",
    "parse_url",
]

T = TypeVar("T")


class Backend(Protocol):
    """What the client needs from one server.

    All methods raise BackendError on failure, ConfigError on a request refused as the caller's.
    """

    url: ServerURL

    def get_many(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        """Return the keys found with their stored bytes; one round trip."""
        ...

    def set_many(self, items: Mapping[bytes, bytes], ttl_s: float | None) -> None:
        """Store every item, expiring after `ttl_s` seconds if given; one round trip."""
        ...

    def add(self, key: bytes, value: bytes, ttl_s: float | None) -> bool:
        """Store `value` only if `key` is absent; return whether it was stored."""
        ...

    def delete(self, key: bytes) -> bool:
        """Delete `key`; return whether it was there."""
        ...

    def incr(self, key: bytes, delta: int) -> int | None:
        """Add `delta` (may be negative, stops at 0); None when `key` is missing.

        :raises ConfigError: when the stored value is not a decimal integer >= 0
        """
        ...

    def touch(self, key: bytes, ttl_s: float) -> bool:
        """Give `key` a new TTL; return whether it was there."""
        ...

    def ping(self) -> None:
        """Return when the server answers (the health check)."""
        ...

    def flush(self) -> None:
        """Delete every key on the server (``flush_all`` / ``FLUSHDB``)."""
        ...

    def close(self) -> None:
        """Release the connections."""
        ...


# -- redis -------------------------------------------------------------------------------------

# INCRBY on an existing key only, clamped at 0, keeping the TTL: memcached's incr/decr rules,
# counting only what memcached counts (digits: no sign), so every backend refuses a stored -5.
_INCR_SCRIPT = """
local v = redis.call('GET', KEYS[1])
if not v then return false end
if not string.find(v, '^%d+$') then return redis.error_reply('ERR value is not an integer') end
local n = redis.call('INCRBY', KEYS[1], ARGV[1])
if n < 0 then redis.call('SET', KEYS[1], 0, 'KEEPTTL'); return 0 end
return n
"""


def require_redis(url: ServerURL) -> Any:
    """Return the ``redis`` package (redis-py, with ``redis.asyncio``).

    :raises ConfigError: with the install hint when redis-py is not installed
    """
    try:
        import redis
        import redis.asyncio
    except ImportError:
        raise ConfigError(
            f"{url} needs redis-py; install it with: pip install 'ringkit[redis]'"
        ) from None
    return redis


class RedisBackend:
    """A backend over redis-py, with its thread-safe (and fork-checking) connection pool."""

    def __init__(
        self, url: ServerURL, *, timeout_s: float, connect_timeout_s: float, max_connections: int
    ) -> None:
        redis = require_redis(url)
        self.url = url
        self._errors: tuple[type[Exception], ...] = (redis.RedisError, OSError)
        self._response_error: type[Exception] = redis.ResponseError
        options = redis_options(
            url,
            timeout_s=timeout_s,
            connect_timeout_s=connect_timeout_s,
            max_connections=max_connections,
        )
        # No retries: a timeout is reported after timeout_s, not after several.
        self._client = redis.Redis(**options, retry=redis.retry.Retry(redis.backoff.NoBackoff(), 0))
        self._incr = self._client.register_script(_INCR_SCRIPT)

    @property
    def client(self) -> Any:
        """The redis-py client (with its pool), which the fenced form sends its scripts through."""
        return self._client

    def _call(self, action: Callable[[Any], T]) -> T:
        try:
            return action(self._client)
        except self._response_error as error:
            raise BackendError(f"server {self.url} refused the command: {error}") from None
        except self._errors as error:
            raise server_failed(self.url, error) from None

    def get_many(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        values = self._call(lambda client: client.mget(keys))
        return {key: value for key, value in zip(keys, values, strict=True) if value is not None}

    def set_many(self, items: Mapping[bytes, bytes], ttl_s: float | None) -> None:
        px = _milliseconds(ttl_s, self.url)

        def action(client: Any) -> None:
            if px is None:
                client.mset(items)
                return
            pipe = client.pipeline(transaction=False)
            for key, value in items.items():
                pipe.set(key, value, px=px)
            pipe.execute()

        self._call(action)

    def add(self, key: bytes, value: bytes, ttl_s: float | None) -> bool:
        px = _milliseconds(ttl_s, self.url)
        return bool(self._call(lambda client: client.set(key, value, px=px, nx=True)))

    def delete(self, key: bytes) -> bool:
        return bool(self._call(lambda client: client.delete(key)))

    def incr(self, key: bytes, delta: int) -> int | None:
        try:
            result = self._call(lambda client: self._incr(keys=[key], args=[delta]))
        except BackendError as error:
            if "not an integer" in str(error):
                raise not_integer(key) from None
            raise
        return None if result is None else int(result)

    def touch(self, key: bytes, ttl_s: float) -> bool:
        px = _milliseconds(ttl_s, self.url)
        return bool(self._call(lambda client: client.pexpire(key, px)))

    def ping(self) -> None:
        self._call(lambda client: client.ping())

    def flush(self) -> None:
        self._call(lambda client: client.flushdb())

    def close(self) -> None:
        self._client.close()


def ttl_of_pttl(pttl: object) -> float | None:
    """Return the seconds a Redis ``PTTL`` reply leaves (-1 no expiry, -2 missing: None)."""
    left = int(str(pttl))
    return None if left < 0 else max(left, 1) / 1000


def _milliseconds(ttl_s: float | None, url: ServerURL) -> int | None:
    return None if ttl_s is None else redis_px(ttl_s, time.time(), str(url))


def _memcached(
    url: ServerURL, *, timeout_s: float, connect_timeout_s: float, max_connections: int
) -> Connection:
    transport = SocketTransport(
        url,
        timeout_s=timeout_s,
        connect_timeout_s=connect_timeout_s,
        max_connections=max_connections,
    )
    return Connection(MemcachedServer(url), transport)


def open_backend(
    url: ServerURL,
    *,
    timeout_s: float,
    connect_timeout_s: float | None = None,
    max_connections: int = 32,
) -> Backend:
    """Return the backend for `url` (connections are opened lazily, on first use).

    :raises ConfigError: when the client library the URL needs is not installed
    """
    kinds = {"memcached": _memcached, "redis": RedisBackend, "rediss": RedisBackend}
    backend: Backend = open_kind(
        url, MemoryBackend, kinds, timeout_s, connect_timeout_s, max_connections
    )
    return backend


def open_kind(
    url: ServerURL,
    memory: Callable[[ServerURL], Any],
    networked: Mapping[str, Callable[..., Any]],
    timeout_s: float,
    connect_timeout_s: float | None,
    max_connections: int,
) -> Any:
    """Open the backend class that serves `url`'s scheme (the sync and async factories' rule).

    The connect timeout defaults to the call timeout.
    """
    if url.scheme == "memory":
        return memory(url)
    connect = timeout_s if connect_timeout_s is None else connect_timeout_s
    return networked[url.scheme](
        url, timeout_s=timeout_s, connect_timeout_s=connect, max_connections=max_connections
    )


def redis_options(
    url: ServerURL,
    *,
    timeout_s: float,
    connect_timeout_s: float | None = None,
    max_connections: int | None = None,
) -> dict[str, Any]:
    """Return the keyword options of ``redis.Redis`` (or ``redis.asyncio.Redis``) for `url`."""
    options: dict[str, Any] = {
        "host": url.host,
        "port": url.port,
        "db": url.db,
        "username": url.username,
        "password": url.password,
        "ssl": url.tls,
        "socket_timeout": timeout_s,
    }
    if connect_timeout_s is not None:
        options["socket_connect_timeout"] = connect_timeout_s
    if max_connections is not None:
        options["max_connections"] = max_connections
    return options
