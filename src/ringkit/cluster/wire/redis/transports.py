"""Redis's two transports: redis-py's connection pools, used at the connection level.

A request is the commands of one pipeline (:class:`Commands`), sent at once; the reply is one
answer per command, an error reply (``NOSCRIPT``, a script's ``STALEVIEW``) in its place as the
exception redis-py parses it into, for the operation to judge. redis-py's connections give the
RESP parser (hiredis when installed), TLS, AUTH and the pool checks; its ``Redis`` client, the
pipeline object, the command callbacks and the retry wrapper are not on the path. Neither
transport knows a script, an epoch or a key.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ringkit.cluster.wire.failures import server_failed
from ringkit.cluster.wire.idle import IdleConnections
from ringkit.cluster.wire.urls import ServerURL
from ringkit.errors import ConfigError

__all__ = ["AsyncPoolTransport", "Commands", "PoolTransport", "redis_options", "require_redis"]


@dataclass(frozen=True, slots=True)
class Commands:
    """Send `commands` (each a tuple of arguments) as one pipeline; read one reply each."""

    commands: tuple[tuple[Any, ...], ...]


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


def _pool_options(
    redis: Any, url: ServerURL, connection_class: Any, **given: Any
) -> dict[str, Any]:
    options = redis_options(url, **given)
    if options.pop("ssl"):
        options["connection_class"] = connection_class
    # No retries: a timeout is reported after timeout_s, not after several.
    options["retry"] = redis.retry.Retry(redis.backoff.NoBackoff(), 0)
    return options


class PoolTransport:
    """Blocking pipelines to one Redis server over redis-py's connections (thread-safe).

    redis-py's pool opens, authenticates and counts the connections; between two calls a
    connection waits here, in an :class:`~ringkit.cluster.wire.idle.IdleConnections`, rather
    than going back to the pool, whose check-out and check-in (a lock, two ``getpid``, its
    metrics) cost more than the rest of a ``GET`` on the client. A connection is read whole
    or disconnected, so the one check kept is the pool's own: an idle connection that has
    something to read was closed by the server (a restart, its ``timeout``), and is opened
    again before the call rather than failing it.
    """

    def __init__(
        self, url: ServerURL, *, timeout_s: float, connect_timeout_s: float, max_connections: int
    ) -> None:
        redis = require_redis(url)
        self.url = url
        self._response_error: type[Exception] = redis.ResponseError
        self._errors: tuple[type[Exception], ...] = (redis.RedisError, OSError)
        options = _pool_options(
            redis,
            url,
            redis.SSLConnection,
            timeout_s=timeout_s,
            connect_timeout_s=connect_timeout_s,
            max_connections=max_connections,
        )
        self.pool = redis.ConnectionPool(**options)
        self._idle = IdleConnections[Any](max_idle=max_connections)

    def exchange(self, request: Commands) -> list[Any]:
        """Send `request`'s commands at once; return their replies (error replies in place).

        :raises BackendError: when the connection fails or a reply takes over the timeout
        """
        connection = self._idle.take()
        try:
            if connection is None:
                connection = self.pool.get_connection()
            elif self._closed_while_idle(connection):
                connection.disconnect()
                connection.connect()
            connection.send_packed_command(connection.pack_commands(request.commands), False)
            replies: list[Any] = []
            for _ in request.commands:
                try:
                    replies.append(connection.read_response())
                except self._response_error as refused:  # read whole: still in step
                    replies.append(refused)
        except self._errors as error:
            if connection is not None:
                connection.disconnect()
                self.pool.release(connection)
            raise server_failed(self.url, error) from None
        except BaseException:  # interrupted mid-reply: never reuse the connection out of step
            if connection is not None:
                connection.disconnect()
                self.pool.release(connection)
            raise
        if not self._idle.give(connection):
            self.pool.release(connection)
        return replies

    def _closed_while_idle(self, connection: Any) -> bool:
        # Something to read before a request was sent: the server's end of a closed
        # connection (redis-py reads it as an error), or data that is no reply of ours.
        try:
            return bool(connection.can_read())
        except self._errors:
            return True

    def close(self) -> None:
        for connection in self._idle.drain():
            self.pool.release(connection)
        self.pool.disconnect()


class AsyncPoolTransport:
    """Awaited pipelines to one Redis server over a ``redis.asyncio`` blocking pool.

    A blocking pool, not ``redis.asyncio``'s default one, which raises "Too many connections"
    at once when a round of concurrent calls (a re-admitted server's hint deletes, a wide
    multi-get) outnumbers max_connections; here the extra calls wait for a free connection, at
    most timeout_s.
    """

    def __init__(
        self, url: ServerURL, *, timeout_s: float, connect_timeout_s: float, max_connections: int
    ) -> None:
        redis = require_redis(url)
        self.url = url
        self._response_error: type[Exception] = redis.ResponseError
        self._errors: tuple[type[Exception], ...] = (redis.RedisError, OSError, TimeoutError)
        options = _pool_options(
            redis,
            url,
            redis.asyncio.SSLConnection,
            timeout_s=timeout_s,
            connect_timeout_s=connect_timeout_s,
            max_connections=max_connections,
        )
        self.pool = redis.asyncio.BlockingConnectionPool(timeout=timeout_s, **options)

    async def exchange(self, request: Commands) -> list[Any]:
        """Send `request`'s commands at once; await their replies (error replies in place).

        :raises BackendError: when the connection fails or a reply takes over the timeout
        """
        connection = None
        try:
            connection = await self.pool.get_connection()
            await connection.send_packed_command(connection.pack_commands(request.commands), False)
            replies: list[Any] = []
            for _ in request.commands:
                try:
                    replies.append(await connection.read_response())
                except self._response_error as refused:  # read whole: still in step
                    replies.append(refused)
        except self._errors as error:
            if connection is not None:
                await connection.disconnect()
            raise server_failed(self.url, error) from None
        except BaseException:  # cancelled mid-reply: never reuse the connection out of step
            if connection is not None:
                await connection.disconnect(nowait=True)
            raise
        finally:
            if connection is not None:
                await self.pool.release(connection)
        return replies

    async def close(self) -> None:
        await self.pool.disconnect()


def commands(*commands: Sequence[Any]) -> Commands:
    """Return the request of `commands`, in order."""
    return Commands(tuple(tuple(command) for command in commands))
