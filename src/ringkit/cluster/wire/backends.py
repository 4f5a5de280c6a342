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

import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from ringkit.cluster.values.codec import buries, supersedes
from ringkit.cluster.values.expiry import memcached_exptime, redis_px
from ringkit.cluster.values.keys import tombstone_key
from ringkit.cluster.wire.memory import MemoryBackend, MemoryStore, _not_integer, memory_store
from ringkit.cluster.wire.urls import ServerURL, parse_url
from ringkit.errors import BackendError, ConfigError

__all__ = [
    "Backend",
    "MemcachedBackend",
    "MemoryBackend",
    "MemoryStore",
    "RedisBackend",
    "memory_store",
    "open_backend",
    "parse_url",
    "server_failed",
    "too_large",
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


def server_failed(url: ServerURL, error: BaseException) -> BackendError:
    """Return the BackendError for a call to `url` that failed with `error`.

    The message names the server (password hidden) and the root cause: the innermost error of
    the chain, such as the ``ConnectionRefusedError`` under redis-py's ``ConnectionError``.

    >>> from ringkit.cluster.wire.urls import parse_url
    >>> try:
    ...     try:
    ...         raise ConnectionRefusedError(111, "Connection refused")
    ...     except OSError:
    ...         raise RuntimeError("Error 111 connecting to 127.0.0.1:1")
    ... except RuntimeError as outer:
    ...     print(server_failed(parse_url("redis://:secret@127.0.0.1:1/0"), outer))
    server redis://:***@127.0.0.1:1/0 failed: ConnectionRefusedError: [Errno 111] Connection refused
    """
    cause, seen = error, {id(error)}
    while True:
        inner = cause.__cause__ or (None if cause.__suppress_context__ else cause.__context__)
        # NOTE: not into a BaseException: asyncio.wait_for raises TimeoutError from the
        # CancelledError of the call it cut short, which says nothing.
        if not isinstance(inner, Exception) or id(inner) in seen:
            break
        cause = inner
        seen.add(id(cause))
    text = str(cause) or ("no answer in time" if isinstance(cause, TimeoutError) else "no detail")
    if type(cause).__name__ == "AuthenticationError":
        # Views carry no secrets: a server learnt from one needs this process's own.
        text += (
            "; give its password inline in the URL, with credentials= "
            "(server name, host:port or '*') or RINGKIT_REDIS_PASSWORD"
        )
    return BackendError(f"server {url} failed: {type(cause).__name__}: {text}")


def too_large(url: ServerURL, items: Mapping[bytes, bytes], answer: str) -> ConfigError:
    """Return the ConfigError for memcached's ``SERVER_ERROR object too large for cache``.

    The server is fine: the value is larger than its item size limit (``memcached -I``, 1 MiB by
    default), so this is the caller's error, never a failover. It names the largest value sent.
    """
    key = max(items, key=lambda data: len(items[data]))
    return ConfigError(
        f"server {url} refused the value of key {key!r:.60} ({len(items[key])} bytes) as too "
        f"large for its item size limit (memcached -I, 1 MiB by default): {answer}; lower "
        f"max_value_bytes below the server's limit"
    )


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
                raise _not_integer(key) from None
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


def ttl_of_meta(line: bytes) -> float | None:
    """Return the seconds memcached's ``mg KEY t`` reply leaves (``HD t59``; -1, or a miss: None).

    memcached counts whole seconds, so up to a second is lost here. A memcached older than 1.6
    answers ``ERROR`` (no meta commands): no TTL known either.

    >>> ttl_of_meta(b"HD t59"), ttl_of_meta(b"HD t-1"), ttl_of_meta(b"EN"), ttl_of_meta(b"ERROR")
    (59.0, None, None, None)
    """
    flags = line.split()
    if not flags or flags[0] not in (b"HD", b"VA"):
        return None  # EN: missing
    left = next((int(flag[1:]) for flag in flags[1:] if flag.startswith(b"t")), -1)
    return None if left < 0 else float(max(left, 1))


def _milliseconds(ttl_s: float | None, url: ServerURL) -> int | None:
    return None if ttl_s is None else redis_px(ttl_s, time.time(), str(url))


# -- memcached ---------------------------------------------------------------------------------


class MemcachedBackend:
    """A backend over pymemcache: one plain ``Client`` (one connection) per calling thread.

    pymemcache's ``Client`` is not thread-safe, and its ``PooledClient`` costs 30-120% of a
    loopback round trip more per call (a pool checkout, a context manager, a lock; 1.3x a bare
    ``Client`` in benchmarks/bench_fanout.py, 2.2x in bench_cluster.py's run of docs/cluster.md).
    A connection per thread needs no checkout: a thread's call
    always finds its own. The connections are closed by :meth:`close` (and a thread's when it
    ends); the fenced client serialises a process's calls to one server anyway
    (:class:`~ringkit.cluster.wire.fencing.FencedBackend`), so at most one of them is busy at once.
    """

    def __init__(
        self, url: ServerURL, *, timeout_s: float, connect_timeout_s: float, max_connections: int
    ) -> None:
        try:
            from pymemcache.client.base import Client
            from pymemcache.exceptions import (
                MemcacheClientError,
                MemcacheError,
                MemcacheServerError,
                MemcacheUnknownCommandError,
            )
        except ImportError:
            raise ConfigError(
                f"{url} needs pymemcache; install it with: pip install 'ringkit[memcached]'"
            ) from None
        self.url = url
        self._client_error = MemcacheClientError
        self._server_error = MemcacheServerError
        self._unknown_command = MemcacheUnknownCommandError
        self._errors: tuple[type[Exception], ...] = (MemcacheError, OSError)

        def connect() -> Any:
            return Client(
                (url.host, url.port),
                connect_timeout=connect_timeout_s,
                timeout=timeout_s,
                no_delay=True,
                default_noreply=False,
            )

        self._connect = connect
        self._pid = os.getpid()
        self._local = threading.local()
        self._opened: list[Any] = []  # every thread's client, for close()
        self._opened_lock = threading.Lock()

    def _client(self) -> Any:
        """Return this thread's client (connected lazily, by pymemcache, on first use)."""
        client = getattr(self._local, "client", None)
        if client is None or self._pid != os.getpid():
            if self._pid != os.getpid():
                # Forked: the inherited sockets belong to the parent; open our own.
                self._pid, self._local, self._opened = os.getpid(), threading.local(), []
                self._opened_lock = threading.Lock()
            client = self._local.client = self._connect()
            with self._opened_lock:
                self._opened.append(client)
        return client

    def _call(self, action: Callable[[Any], T], items: Mapping[bytes, bytes] | None = None) -> T:
        """Run `action`; a refused request is the caller's ConfigError, a failure BackendError.

        pymemcache closes the connection on any error, so none is reused out of step.
        """
        try:
            return action(self._client())
        except self._client_error as error:
            # CLIENT_ERROR (or a request pymemcache would not send): the request, not the server.
            raise ConfigError(f"server {self.url} refused the request: {error}") from None
        except self._server_error as error:
            if items and "too large" in str(error):
                raise too_large(self.url, items, str(error)) from None
            raise server_failed(self.url, error) from None
        except self._errors as error:
            raise server_failed(self.url, error) from None

    def get_many(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        result: dict[bytes, bytes] = self._call(lambda client: client.get_many(keys))
        return result

    def set_many(self, items: Mapping[bytes, bytes], ttl_s: float | None) -> None:
        expire = memcached_exptime(ttl_s, time.time(), str(self.url))
        failed = self._call(
            lambda client: client.set_many(dict(items), expire, noreply=False), items
        )
        if failed:
            raise BackendError(f"server {self.url} did not store {len(failed)} keys")

    def set_many_then_get(
        self, items: Mapping[bytes, bytes], ttl_s: float | None, keys: Sequence[bytes]
    ) -> dict[bytes, bytes]:
        """Store every item, then read `keys`: both pipelined on one connection, one round trip.

        memcached answers the requests of a connection in order (protocol.txt), so the read
        sees the stores. A writer reads its keys' hot-copy markers this way.
        """
        expire = memcached_exptime(ttl_s, time.time(), str(self.url))
        request = b"".join(
            b"set %s 0 %d %d\r\n%s\r\n" % (key, expire, len(value), value)
            for key, value in items.items()
        )
        request += b"get " + b" ".join(keys) + b"\r\n"
        found = self._call(lambda client: self._pipelined(client, request, len(items)), items)
        return {key: value for key, (value, _) in found.items()}

    def _pipelined(
        self, client: Any, request: bytes, stores: int
    ) -> dict[bytes, tuple[bytes, bytes]]:
        """Send `request` (`stores` stores, then one get or gets) and read its answers in order.

        Returns the values found with their cas tokens (b"" for a ``get``).
        """
        from pymemcache.client.base import _readline, _readvalue
        from pymemcache.exceptions import MemcacheUnknownError

        try:
            if client.sock is None:
                client._connect()
            client.sock.sendall(request)
            buf, found = b"", dict[bytes, tuple[bytes, bytes]]()
            for _ in range(stores):
                buf, line = _readline(client.sock, buf)
                if line != b"STORED":
                    self._refused(line)
            while True:
                buf, line = _readline(client.sock, buf)
                if line == b"END":
                    return found
                if not line.startswith(b"VALUE "):
                    self._refused(line)
                    raise MemcacheUnknownError(line[:32])
                _, key, _, size, *token = line.split()
                buf, value = _readvalue(client.sock, buf, int(size))
                found[key] = value, token[0] if token else b""
        except Exception:
            client.close()  # never reuse a connection left out of step
            raise

    def _refused(self, line: bytes) -> None:
        """Raise pymemcache's error for an answer that is not the one expected."""
        text = line.decode(errors="replace")
        if line.startswith(b"CLIENT_ERROR"):
            raise self._client_error(text)
        raise self._server_error(text)

    def add(self, key: bytes, value: bytes, ttl_s: float | None) -> bool:
        expire = memcached_exptime(ttl_s, time.time(), str(self.url))
        return bool(
            self._call(lambda client: client.add(key, value, expire, noreply=False), {key: value})
        )

    def gets(self, key: bytes) -> tuple[bytes | None, bytes | None]:
        """Return `key`'s value and cas token ((None, None) when absent; protocol.txt)."""
        found: tuple[bytes | None, bytes | None] = self._call(lambda client: client.gets(key))
        return found

    def store_unchanged(
        self, key: bytes, value: bytes, token: bytes | None, ttl_s: float | None
    ) -> bool:
        """Store `value` if `key` is as the ``gets`` that gave `token` read it (None: absent).

        ``add`` where it was absent, ``cas`` otherwise: a write in between makes either refuse.
        """
        expire = memcached_exptime(ttl_s, time.time(), str(self.url))

        def action(client: Any) -> bool:
            if token is None:
                return bool(client.add(key, value, expire, noreply=False))
            return bool(client.cas(key, value, token, expire, noreply=False))

        return self._call(action, {key: value})

    def delete(self, key: bytes) -> bool:
        return bool(self._call(lambda client: client.delete(key, noreply=False)))

    def repair(self, key: bytes, value: bytes, ttl_s: float | None) -> bool:
        """Store envelope `value` only where it supersedes what is here (``gets`` + ``cas``).

        ``add`` where the key is absent and ``cas`` where it is older: a write that lands in
        between makes either refuse, so the repair never replaces it (memcached protocol.txt).
        """
        expire = memcached_exptime(ttl_s, time.time(), str(self.url))
        tomb_key = tombstone_key(key)

        def action(client: Any) -> bool:
            found = client.gets_many([key, tomb_key])
            there, token = found.get(key, (None, None))
            if not supersedes(value, there, found.get(tomb_key, (None, None))[0]):
                return False
            if there is not None:
                return bool(client.cas(key, value, token, expire, noreply=False))
            if not client.add(key, value, expire, noreply=False):
                return False
            # A delete may have run between the read and the add (its tombstone first, then
            # the delete of a key not yet there): look again, and take the copy back, only if
            # it is still ours, by cas with a negative exptime (protocol.txt: expired at once).
            tomb = client.get(tomb_key)
            if tomb is not None and not supersedes(value, None, tomb):
                now, cas_token = client.gets(key)
                if now == value:
                    client.cas(key, value, cas_token, -1, noreply=False)
                return False
            return True

        return self._call(action)

    def bury(self, key: bytes, tombstone: bytes, ttl_s: float) -> bool:
        """Keep `tombstone` beside `key` for `ttl_s`, then delete `key` unless it is newer.

        The tombstone first: a repair that reads in between sees it and stands down. The
        tombstone's ``set`` and the key's ``gets`` are pipelined (one round trip; memcached
        answers a connection's requests in order). The delete is a ``cas`` with a negative
        exptime (expired at once), so a write that lands between the ``gets`` and it survives.
        Returns True if the key went.
        """
        expire = memcached_exptime(ttl_s, time.time(), str(self.url))
        tomb_key = tombstone_key(key)
        request = b"set %s 0 %d %d\r\n%s\r\ngets %s\r\n" % (
            tomb_key,
            expire,
            len(tombstone),
            tombstone,
            key,
        )

        def action(client: Any) -> bool:
            there, token = self._pipelined(client, request, 1).get(key, (None, b""))
            if not buries(tombstone, there):
                return False
            return bool(client.cas(key, there, token, -1, noreply=False))

        return self._call(action)

    def bury_many(self, tombstones: Mapping[bytes, bytes], ttl_s: float) -> list[bytes]:
        """:meth:`bury` each key; memcached has no batched ``cas``, so key after key."""
        return [key for key, tomb in tombstones.items() if self.bury(key, tomb, ttl_s)]

    def incr(self, key: bytes, delta: int) -> int | None:
        not_integer = object()

        def action(client: Any) -> Any:
            try:
                if delta >= 0:
                    return client.incr(key, delta, noreply=False)
                return client.decr(key, -delta, noreply=False)
            except self._client_error:
                # CLIENT_ERROR here is about the value, not the server: do not fail over.
                return not_integer

        result = self._call(action)
        if result is not_integer:
            raise _not_integer(key)
        return None if result is None else int(result)

    def touch(self, key: bytes, ttl_s: float) -> bool:
        expire = memcached_exptime(ttl_s, time.time(), str(self.url))
        return bool(self._call(lambda client: client.touch(key, expire, noreply=False)))

    def ttl_left(self, key: bytes) -> float | None:
        """Return the seconds `key` has left (the meta get's ``t`` flag, memcached >= 1.6).

        A memcached without meta commands answers ERROR: no TTL known (the server is fine).
        """
        unknown = self._unknown_command

        def action(client: Any) -> bytes:
            try:
                line: bytes = client.raw_command(b"mg " + key + b" t")
            except unknown:
                return b"ERROR"
            return line

        return ttl_of_meta(self._call(action))

    def ping(self) -> None:
        self._call(lambda client: client.version())

    def flush(self) -> None:
        self._call(lambda client: client.flush_all(noreply=False))

    def close(self) -> None:
        with self._opened_lock:
            opened, self._opened = self._opened, []
        for client in opened:
            client.close()
        self._local = threading.local()


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
    kinds = {"memcached": MemcachedBackend, "redis": RedisBackend, "rediss": RedisBackend}
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
