"""The client's one decision core speaks in steps: requests out, outcomes in, no I/O.

Every decision of the cache client (routing, fallback order, quorum, read repair, hints and
re-admission, epochs, refusal and retry) is written once, as a generator that *yields* a round
of :class:`Call` requests and is *sent* back their outcomes, a value or a :class:`Failed`. Two
small drivers run the same generator: :func:`run_sync` with blocking backends, the calls of a
round at once in threads (:class:`~ringkit.cluster.drivers.fanout.FanOut`; one after the other
without one), and :func:`run_async` with awaited backends, the calls of a round at once
(``asyncio.gather``). This is the sans-I/O design of h11 and hyper-h2 (Benfield, "Building Protocol
Libraries The Right Way", PyCon 2016) rather than httpcore's unasync, which generates the sync code
from the async code: a generated twin still holds every decision twice in the installed package, and
the drivers here are the only code that knows which kind of I/O runs.

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
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, Protocol, TypeVar

from ringkit.cluster.wire.fence import routed_by
from ringkit.cluster.wire.urls import ServerURL
from ringkit.errors import BackendError

if TYPE_CHECKING:
    from ringkit.cluster.drivers.fanout import FanOut

__all__ = [
    "Blocking",
    "Call",
    "Failed",
    "Request",
    "Steps",
    "call_async",
    "call_sync",
    "failed_any",
    "run_async",
    "run_plain",
    "run_sync",
]

T = TypeVar("T")


class Call(NamedTuple):
    """Call backend method `method(*args)` on server `server`, routed by view `epoch`.

    `op` names the call in counters and hooks (defaults to `method`); a ``get_many`` counts
    its hits and misses. A named tuple rather than a frozen dataclass: every single-key call
    builds one, and a frozen dataclass's ``__init__`` (an ``object.__setattr__`` per field)
    costs three times as much; it is as immutable.
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


class Server(Protocol):
    """What a driver needs of a server: its backend and URL, and where to count each call.

    The backend is a fenced handle (:mod:`ringkit.cluster.wire.handles`): a call is its
    ``serve_at(epoch, method, args)``, with the epoch the call carries.

    :class:`ringkit.cluster.core.servers.Server` is the one the clients use; the drivers name
    only this much of it, so the core may import the drivers and never the other way round.
    """

    @property
    def backend(self) -> Any: ...

    @property
    def url(self) -> ServerURL: ...

    def answered(self, op: str, elapsed_s: float, hits: tuple[int, int] | None) -> None: ...

    def failed(self, op: str, elapsed_s: float, error: Exception) -> None: ...


Lookup = Callable[[str], Server]


def _finish(call: Call, server: Server, start: float, result: Any) -> Any:
    """Count the call on its server; a failure marks the server down and becomes Failed.

    A ``get_many`` counts its hits and misses (the keys found, the keys asked but not found).
    """
    elapsed = time.perf_counter() - start
    op = call.op or call.method
    if isinstance(result, BackendError):
        server.failed(op, elapsed, result)
        return Failed(result)
    hits = None
    if call.method == "get_many":
        found = len(result)
        hits = found, len(call.args[0]) - found
    server.answered(op, elapsed, hits)
    return result


def call_sync(call: Call, server: Server) -> Any:
    """Make `call` on `server`, counted; a failure is marked and returned as :class:`Failed`."""
    start = time.perf_counter()
    try:
        result = server.backend.serve_at(call.epoch, call.method, call.args)
    except BackendError as error:
        result = error
    return _finish(call, server, start, result)


# The name the core's own tests knew it by, before the client's direct read made it public.
_call_sync = call_sync


async def call_async(call: Call, server: Server) -> Any:
    """Await `call` on `server`, counted; a failure is marked and returned as :class:`Failed`."""
    start = time.perf_counter()
    try:
        result = await server.backend.serve_at(call.epoch, call.method, call.args)
    except BackendError as error:
        result = error
    return _finish(call, server, start, result)


class _Stepper(Generic[T]):
    """One run of a core generator: resume it with a round's outcomes, or with an error."""

    def __init__(self, steps: Steps[T]) -> None:
        self._steps = steps
        self.result: list[Any] | BaseException | None = None
        self.value: T | None = None

    def resume(self) -> tuple[Request, ...] | None:
        """Send the last result in (an error is thrown); return the next round, None when done."""
        result, self.result = self.result, None
        try:
            if isinstance(result, BaseException):
                return self._steps.throw(result)
            return self._steps.send(result)  # type: ignore[arg-type]  # None primes it
        except StopIteration as stop:
            self.value = stop.value
            return None


def _perform_all(step: tuple[Request, ...], perform: Callable[[Request], Any]) -> Any:
    """Perform a round's requests in turn; an error stops the round and is returned."""
    outcomes: list[Any] = []
    try:
        for request in step:
            outcomes.append(perform(request))
    except Exception as raised:  # thrown into the core, which decides
        return raised
    return outcomes


def _drive(steps: Steps[T], perform: Callable[[Request], Any]) -> T:
    """Run `steps`, performing each request of a round in turn (the blocking drivers)."""
    stepper = _Stepper(steps)
    while (step := stepper.resume()) is not None:
        stepper.result = _perform_all(step, perform)
    return stepper.value  # type: ignore[return-value]  # set when the generator returned


def _lane(request: Request, lookup: Lookup) -> str | None:
    """Return the server `request` goes to over the network, None if it needs no network."""
    if isinstance(request, Call) and lookup(request.server).url.scheme != "memory":
        return request.server
    return None


def run_sync(steps: Steps[T], lookup: Lookup, fan_out: FanOut | None = None) -> T:
    """Drive `steps` with blocking backends: a round's calls at once on `fan_out`, else in turn.

    A round of one request (a single-key read, a probe) runs in this thread either way.
    """

    def perform(request: Request) -> Any:
        if isinstance(request, Blocking):
            return request.run()
        return call_sync(request, lookup(request.server))

    if fan_out is None:
        return _drive(steps, perform)
    stepper = _Stepper(steps)
    while (step := stepper.resume()) is not None:
        if len(step) == 1:
            stepper.result = _perform_all(step, perform)
        else:
            lanes = [_lane(request, lookup) for request in step]
            stepper.result = fan_out.run(step, perform, lanes=lanes)
    return stepper.value  # type: ignore[return-value]  # set when the generator returned


async def _gather(step: tuple[Request, ...], lookup: Lookup) -> Any:
    """Await a round's requests at once; an error is returned, to be thrown into the core."""

    async def one(request: Request) -> Any:
        if isinstance(request, Blocking):
            return await asyncio.to_thread(request.run)
        return await call_async(request, lookup(request.server))

    try:
        if len(step) == 1:
            return [await one(step[0])]
        return list(await asyncio.gather(*(one(request) for request in step)))
    except Exception as raised:  # thrown into the core, which decides
        return raised


async def run_async(steps: Steps[T], lookup: Lookup) -> T:
    """Drive `steps` with awaited backends: the calls of a round run concurrently."""
    stepper = _Stepper(steps)
    while (step := stepper.resume()) is not None:
        stepper.result = await _gather(step, lookup)
    return stepper.value  # type: ignore[return-value]  # set when the generator returned


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
