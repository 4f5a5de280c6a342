"""Backends: one small interface over an in-process store, Redis and memcached, and its openers.

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
a fork, so a child process (gunicorn's workers) never shares a socket with its parent.

Each server kind is one folder (``wire/redis/``, ``wire/memcached/``; the in-process store is
``wire/memory.py``): its operations, written once, and a blocking and an asyncio transport.
:data:`KINDS` maps a URL scheme to them; :func:`open_backend` and :func:`open_async_backend` pair
a kind's operations with the transport of the caller's I/O.

``memory://NAME`` stores live in a process-wide registry: two clients that name the same store
share it, which makes the embedded backend useful for demos and tests.

>>> from ringkit.cluster.wire.urls import parse_url
>>> store = open_backend(parse_url("memory://doctest-backends"), timeout_s=1.0)
>>> store.set_many({b"k": b"v"}, None)
>>> store.get_many([b"k"])
{b'k': b'v'}
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ringkit.cluster.wire.handles import AsyncConnection, Connection
from ringkit.cluster.wire.memcached.ops import MemcachedServer
from ringkit.cluster.wire.memcached.transports import SocketTransport, StreamTransport
from ringkit.cluster.wire.memory import AsyncNoTransport, MemoryBackend, MemoryServer
from ringkit.cluster.wire.redis.ops import RedisServer
from ringkit.cluster.wire.redis.transports import AsyncPoolTransport, PoolTransport
from ringkit.cluster.wire.urls import ServerURL

__all__ = ["KINDS", "Backend", "Kind", "open_async_backend", "open_backend"]


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


@dataclass(frozen=True, slots=True)
class Kind:
    """A networked server kind: its operations on one server, and its two transports."""

    operations: Callable[[ServerURL], Any]
    blocking: Callable[..., Any]
    asyncio: Callable[..., Any]


KINDS: Mapping[str, Kind] = {
    "memcached": Kind(MemcachedServer, SocketTransport, StreamTransport),
    "redis": Kind(RedisServer, PoolTransport, AsyncPoolTransport),
    "rediss": Kind(RedisServer, PoolTransport, AsyncPoolTransport),
}


def _transport_options(
    timeout_s: float, connect_timeout_s: float | None, max_connections: int
) -> dict[str, Any]:
    """The keyword options of every transport; the connect timeout defaults to the call's."""
    connect = timeout_s if connect_timeout_s is None else connect_timeout_s
    return {
        "timeout_s": timeout_s,
        "connect_timeout_s": connect,
        "max_connections": max_connections,
    }


def open_backend(
    url: ServerURL,
    *,
    timeout_s: float,
    connect_timeout_s: float | None = None,
    max_connections: int = 32,
) -> Backend:
    """Return the blocking backend for `url` (connections are opened lazily, on first use).

    :raises ConfigError: when the client library the URL needs is not installed
    """
    if url.scheme == "memory":
        return MemoryBackend(url)
    kind = KINDS[url.scheme]
    options = _transport_options(timeout_s, connect_timeout_s, max_connections)
    return Connection(kind.operations(url), kind.blocking(url, **options))


def open_async_backend(
    url: ServerURL,
    *,
    timeout_s: float,
    connect_timeout_s: float | None = None,
    max_connections: int = 32,
) -> AsyncConnection:
    """Return the asyncio backend for `url` (connections open lazily, on first use).

    :raises ConfigError: when the client library the URL needs is not installed
    """
    if url.scheme == "memory":
        return AsyncConnection(MemoryServer(url), AsyncNoTransport())
    kind = KINDS[url.scheme]
    options = _transport_options(timeout_s, connect_timeout_s, max_connections)
    return AsyncConnection(kind.operations(url), kind.asyncio(url, **options))
