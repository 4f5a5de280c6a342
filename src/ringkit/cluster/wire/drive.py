"""Run one server operation, written once as a generator, over a blocking or an asyncio transport.

Every server operation of the wire (a read, a fenced write, the fence's epoch read, a
compare-and-swap loop, a script with its ``NOSCRIPT`` fallback) is a generator that *yields* a
request in its server kind's terms (memcached: the bytes to send and how many replies to read;
Redis: the commands of one pipeline) and is *sent* the reply. It does no I/O, so the same code
serves both clients; the sans-I/O design of h11 and httpcore's protocol layer. A transport knows
bytes and connections only; these two functions are the only code that knows which kind of I/O
runs. A transport's failure (:class:`~ringkit.errors.BackendError`) is thrown into the
generator at the request that failed, where the operation decides what it means (a retry, a
fallback, the real cause in the error it raises).

>>> def twice() -> Wire[int]:
...     first = yield "ask"
...     second = yield "ask again"
...     return first + second
>>> class Echo:
...     def exchange(self, request: str) -> int:
...         return len(request)
>>> drive_sync(twice(), Echo())
12
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, Protocol, TypeVar

from ringkit.errors import BackendError

__all__ = ["AsyncTransport", "SyncTransport", "Wire", "drive_async", "drive_sync"]

T = TypeVar("T")
# An operation: yields requests of its server kind, is sent their replies, returns its answer.
Wire = Generator[Any, Any, T]


class SyncTransport(Protocol):
    """Send one request, block for its reply (a BackendError when the server fails)."""

    def exchange(self, request: Any) -> Any: ...


class AsyncTransport(Protocol):
    """Send one request, await its reply (a BackendError when the server fails)."""

    async def exchange(self, request: Any) -> Any: ...


def drive_sync(operation: Wire[T], transport: SyncTransport) -> T:
    """Run `operation` over a blocking `transport`; return what it returns."""
    reply: Any = None
    failure: BackendError | None = None
    while True:
        try:
            request = operation.send(reply) if failure is None else operation.throw(failure)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        try:
            reply, failure = transport.exchange(request), None
        except BackendError as error:
            reply, failure = None, error


async def drive_async(operation: Wire[T], transport: AsyncTransport) -> T:
    """Run `operation` over an asyncio `transport`; return what it returns."""
    reply: Any = None
    failure: BackendError | None = None
    while True:
        try:
            request = operation.send(reply) if failure is None else operation.throw(failure)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        try:
            reply, failure = await transport.exchange(request), None
        except BackendError as error:
            reply, failure = None, error
