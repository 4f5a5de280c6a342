"""How a server call fails, the same for every server kind: the errors the wire raises.

A server that fails (refused, reset, timed out, a protocol error) is a
:class:`~ringkit.errors.BackendError` naming the server and the real cause, which the client turns
into a failover; a request the server refuses as the caller's (a value too large for memcached, a
counter that is not one) is a :class:`~ringkit.errors.ConfigError` for that call, and never marks
the server down.
"""

from __future__ import annotations

from collections.abc import Mapping

from ringkit.cluster.wire.urls import ServerURL
from ringkit.errors import BackendError, ConfigError

__all__ = ["not_integer", "server_failed", "too_large"]


def not_integer(key: bytes) -> ConfigError:
    """The error of incr/decr on a value that is not a counter, the same on every backend."""
    return ConfigError(
        f"value of key {key!r} is not a decimal integer in [0, 2**64 - 1]; incr/decr need one "
        f"(memcached's counters; Redis counts up to 2**63 - 1)"
    )


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
    while not _is_reply(cause):
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


def _is_reply(error: BaseException) -> bool:
    """Return True if `error` is the server's own error reply, which is the cause itself.

    Its context says nothing of it: redis-py's ``Script`` sends EVALSHA, loads the script on
    NOSCRIPT and sends it again while handling that NoScriptError, so the reply of the second
    send (a failing RESTORE, say) carries the first one's NOSCRIPT as its context.
    """
    return any(kind.__name__ == "ResponseError" for kind in type(error).__mro__)


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
