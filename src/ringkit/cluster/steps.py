"""The client's one decision core speaks in steps: requests out, outcomes in, no I/O.

Every decision of the cache client (routing, fallback order, quorum, read repair, hints and
re-admission, epochs, refusal and retry) is written once, as a generator that *yields* a round
of :class:`Call` requests and is *sent* back their outcomes, a value or a :class:`Failed`. Two
small drivers run the same generator: :func:`run_sync` with blocking backends, one call after
the other, and :func:`run_async` with awaited backends, the calls of a round at once
(``asyncio.gather``). This is the sans-I/O design of h11 and hyper-h2 (Benfield, "Building
Protocol Libraries The Right Way", PyCon 2016) rather than httpcore's unasync, which generates
the sync code from the async code: a generated twin still holds every decision twice in the
installed package, and the drivers here are the only code that knows which kind of I/O runs.

Any error other than :class:`~ringkit.errors.BackendError` (a refusal by a newer epoch, a value
that is not an integer) is thrown into the generator where the call was made, so the core's own
``try`` / ``except`` decides (the fenced retry catches :class:`~ringkit.errors.StaleViewError`).

>>> def double(name: str) -> Steps[int]:
...     [answer] = yield (Call(name, "incr", (b"k", 2), epoch=0),)
...     return 0 if isinstance(answer, Failed) else int(answer) * 2
>>> class Counter:
...     def incr(self, key: bytes, delta: int) -> int:
...         return 40 + delta
>>> run_plain(double("a"), {"a": Counter()})
84
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from ringkit.cluster.fencing import routed_by
from ringkit.errors import BackendError

if TYPE_CHECKING:
    from ringkit.cluster.servers import Server

__all__ = [
    "Blocking",
    "Call",
    "Failed",
    "Request",
    "Steps",
    "failed_any",
    "run_async",
    "run_plain",
    "run_sync",
]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Call:
    """Call backend method `method(*args)` on server `server`, routed by view `epoch`.

    `op` names the call in counters and hooks (defaults to `method`); a ``get_many`` counts
    its hits and misses.
    """

    server: str
    method: str
    args: tuple[Any, ...] = ()
    epoch: int = 0
    op: str = ""


@dataclass(frozen=True, slots=True)
class Blocking:
    """Run `run()`, which blocks (a file, a coordination service): in a thread when async."""

    run: Callable[[], Any]


@dataclass(frozen=True, slots=True)
class Failed:
    """The outcome of a call whose server failed (it is marked down already)."""

    error: BackendError = field(repr=False)


Request = Call | Blocking
Steps = Generator[tuple[Request, ...], list[Any], T]
Lookup = Callable[[str], "Server[Any]"]


def _hits(call: Call, result: Any) -> tuple[int, int] | None:
    if call.method != "get_many":
        return None
    found = len(result)
    return found, len(call.args[0]) - found


def _finish(call: Call, server: Server[Any], start: float, result: Any) -> Any:
    """Count the call on its server; a failure marks the server down and becomes Failed."""
    elapsed = time.perf_counter() - start
    op = call.op or call.method
    if isinstance(result, BackendError):
        server.failed(op, elapsed, result)
        return Failed(result)
    server.answered(op, elapsed, _hits(call, result))
    return result


def _call_sync(call: Call, server: Server[Any]) -> Any:
    start = time.perf_counter()
    try:
        with routed_by(call.epoch):
            result = getattr(server.backend, call.method)(*call.args)
    except BackendError as error:
        result = error
    return _finish(call, server, start, result)


async def _call_async(call: Call, server: Server[Any]) -> Any:
    start = time.perf_counter()
    try:
        with routed_by(call.epoch):
            result = await server.backend.serve(call.method, *call.args)
    except BackendError as error:
        result = error
    return _finish(call, server, start, result)


@dataclass(frozen=True, slots=True)
class _Done:
    value: Any


def _advance(steps: Steps[T], outcomes: list[Any] | None, error: BaseException | None) -> Any:
    """Send `outcomes` (or throw `error`) into `steps`; return its next round or a _Done."""
    try:
        if error is not None:
            return steps.throw(error)
        return steps.send(outcomes)  # type: ignore[arg-type]  # None primes the generator
    except StopIteration as stop:
        return _Done(stop.value)


def _drive(steps: Steps[T], perform: Callable[[Request], Any]) -> T:
    """Run `steps`, performing each request of a round in turn (the blocking drivers)."""
    outcomes: list[Any] | None = None
    error: BaseException | None = None
    while True:
        step = _advance(steps, outcomes, error)
        if isinstance(step, _Done):
            return step.value  # type: ignore[no-any-return]
        outcomes, error = [], None
        for request in step:
            try:
                outcomes.append(perform(request))
            except Exception as raised:  # thrown into the core, which decides
                error = raised
                break


def run_sync(steps: Steps[T], lookup: Lookup) -> T:
    """Drive `steps` with blocking backends: each call of a round in turn."""

    def perform(request: Request) -> Any:
        if isinstance(request, Blocking):
            return request.run()
        return _call_sync(request, lookup(request.server))

    return _drive(steps, perform)


async def run_async(steps: Steps[T], lookup: Lookup) -> T:
    """Drive `steps` with awaited backends: the calls of a round run concurrently."""

    async def one(request: Request) -> Any:
        if isinstance(request, Blocking):
            return await asyncio.to_thread(request.run)
        return await _call_async(request, lookup(request.server))

    outcomes: list[Any] | None = None
    error: BaseException | None = None
    while True:
        step = _advance(steps, outcomes, error)
        if isinstance(step, _Done):
            return step.value  # type: ignore[no-any-return]
        error = None
        try:
            if len(step) == 1:
                outcomes = [await one(step[0])]
            else:
                outcomes = list(await asyncio.gather(*(one(request) for request in step)))
        except Exception as raised:  # thrown into the core, which decides
            error = raised


def run_plain(steps: Steps[T], backends: Mapping[str, Any]) -> T:
    """Drive `steps` on bare backends (no counters, no health): the coordinator's reads."""

    def perform(request: Request) -> Any:
        if isinstance(request, Blocking):
            return request.run()
        try:
            with routed_by(request.epoch):
                return getattr(backends[request.server], request.method)(*request.args)
        except BackendError as failed:
            return Failed(failed)

    return _drive(steps, perform)


def failed_any(outcomes: Sequence[Any]) -> bool:
    """Return True if any outcome of a round is a :class:`Failed`."""
    return any(isinstance(outcome, Failed) for outcome in outcomes)
