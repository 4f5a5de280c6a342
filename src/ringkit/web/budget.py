"""A cap on the JSON API's concurrent computations, and a time budget for each.

Every request that computes (``/api/ring``, ``/api/lookup``) runs in a pool of its own, one
worker per core by default, so however many arrive at once only that many rings are built at a
time and memory stays bounded; the event loop keeps answering cheap requests (``/api/meta``,
the page). The pool is threads by default; ``processes=True`` (what ``ringkit serve`` runs)
makes it worker processes. A computation is mostly Python code holding the GIL (a maximal ring
hashes 265,000 vnode labels), so on threads two of them leave the event loop a slice of the
GIL between theirs: with 40 maximal requests in flight, ``/api/meta`` took 39-45 ms at the
median and up to 1 s; in worker processes the server's own interpreter only serves.

A request that cannot start *and* finish within the budget is answered ``503 Service Unavailable``
with a ``Retry-After`` header (RFC 9110, sections 15.6.4 and 10.2.3): shedding load instead of
queueing it without end, as a load balancer's overload manager does (Envoy's "overload manager";
Google SRE book, chapter 21, "Handling Overload").

A computation that already started is not stopped: it finishes in the background and holds its
worker until then, which is what keeps the cap honest. One that had not started yet is dropped
from the queue.

>>> gate = ComputeGate(workers=1, budget_s=5.0)
>>> gate.workers, gate.retry_after_s, gate.processes
(1, 5, False)
>>> gate.close()
"""

from __future__ import annotations

import asyncio
import functools
import math
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import BrokenExecutor, Executor, ProcessPoolExecutor, ThreadPoolExecutor
from typing import TypeVar

from starlette.exceptions import HTTPException

from ringkit.errors import ConfigError

__all__ = ["DEFAULT_BUDGET_S", "ComputeGate", "default_workers"]

# Long enough for the largest request the parameter limits allow (~0.5 s on one core), short
# enough that a flood is shed before clients give up on their own.
DEFAULT_BUDGET_S = 10.0

T = TypeVar("T")


def default_workers() -> int:
    """Return the default number of concurrent computations: the CPU count (at least 1)."""
    return os.cpu_count() or 1


class ComputeGate:
    """At most `workers` computations at once, each given `budget_s` seconds, waiting included.

    ``run(function, *args)`` awaits ``function(*args)`` run by one of the gate's workers and
    raises a 503 ``HTTPException`` with ``Retry-After`` past the budget; ``warm()`` starts the
    workers before the first request needs them; ``close()`` stops them. With `processes`, the
    workers are processes (started with ``spawn``, so they inherit no lock or thread of the
    server): `function`, its arguments and its result must pickle, a worker that dies (the OOM
    killer, say) fails its own request only, and a worker exits when the server's process is
    gone, even after a ``kill -9``.
    """

    def __init__(
        self,
        *,
        workers: int | None = None,
        budget_s: float = DEFAULT_BUDGET_S,
        processes: bool = False,
    ) -> None:
        count = default_workers() if workers is None else workers
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ConfigError(f"workers must be an int >= 1, got {workers!r}")
        if not isinstance(budget_s, (int, float)) or not 0 < budget_s < math.inf:
            raise ConfigError(f"budget_s must be a finite number > 0, got {budget_s!r}")
        if not isinstance(processes, bool):
            raise ConfigError(f"processes must be a bool, got {processes!r}")
        self.workers, self.budget_s, self.processes = count, float(budget_s), processes
        self.retry_after_s = max(1, math.ceil(budget_s))
        self._closed = False
        self._executor = self._new_executor()

    def _new_executor(self) -> Executor:
        if not self.processes:
            return ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="ringkit-api")
        return ProcessPoolExecutor(
            max_workers=self.workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_serve_parent,
            initargs=(os.getpid(),),
        )

    def warm(self) -> None:
        """Start every worker process now (each imports the library: about a second).

        Threads start in no time: for them this does nothing.
        """
        if self.processes:
            # Submitted together, none finds an idle worker, so each starts one. Nobody waits
            # for them: a request that comes first queues behind them.
            for _ in range(self.workers):
                self._executor.submit(_imported)

    async def run(self, function: Callable[..., T], /, *args: object) -> T:
        """Return ``function(*args)``, computed by the gate's workers within the budget.

        :raises HTTPException: 503 with ``Retry-After`` when it could not start and finish
            within ``budget_s``, or when the gate is closing
        :raises BrokenExecutor: when the worker process computing it died; the next request
            gets a new pool
        """
        loop = asyncio.get_running_loop()
        executor = self._executor
        future = loop.run_in_executor(executor, functools.partial(function, *args))
        try:
            # On timeout wait_for cancels the future: a computation still queued never starts.
            return await asyncio.wait_for(future, self.budget_s)
        except TimeoutError:
            message = (
                f"the server is busy: the request did not finish within its {self.budget_s:g} s"
                f" budget; retry after {self.retry_after_s} s"
            )
            raise self._unavailable(message) from None
        except BrokenExecutor:
            if self._closed:
                raise self._unavailable("the server is shutting down") from None
            if self._executor is executor:  # the first request to see it replaces the pool
                self._executor = self._new_executor()
            raise

    def _unavailable(self, message: str) -> HTTPException:
        return HTTPException(503, detail=message, headers={"Retry-After": str(self.retry_after_s)})

    def close(self) -> None:
        """Drop the queued computations; threads end when their work is done, processes now.

        A process, unlike a thread, can be stopped: a server shutting down then waits for no
        computation, nor for a worker still importing the library.
        """
        self._closed = True
        # concurrent.futures keeps its workers private (Python 3.14 adds terminate_workers())
        # and forgets them on shutdown: taken first.
        workers = list((getattr(self._executor, "_processes", None) or {}).values())
        self._executor.shutdown(wait=False, cancel_futures=True)
        for process in workers:
            process.terminate()


def _imported() -> None:
    """Import what the API's computations use (a worker's warm-up)."""
    import ringkit.web.api  # noqa: F401


_PARENT_POLL_S = 1.0


def _serve_parent(parent_pid: int) -> None:
    """Set up a worker process: Ctrl+C is the server's to handle; exit when the server is gone.

    A terminal's Ctrl+C reaches every process of its group: the server shuts its pool down, and
    workers printing a KeyboardInterrupt each would only bury its message. A server killed with
    SIGKILL shuts nothing down, and a worker waiting for work would wait forever: a thread
    watches the parent's id (a dead parent's children are given another) and ends the worker.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(_PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="ringkit-parent-watch", daemon=True).start()
