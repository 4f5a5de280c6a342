"""A cap on the JSON API's concurrent computations, and a time budget for each.

Every request that computes (``/api/ring``, ``/api/lookup``) runs in a thread pool of its own,
one thread per core by default, so however many arrive at once only that many rings are built
at a time and memory stays bounded; the event loop keeps answering cheap requests
(``/api/meta``, the page). A request that cannot start *and* finish within the budget is
answered ``503 Service Unavailable`` with a ``Retry-After`` header (RFC 9110, sections 15.6.4
and 10.2.3): shedding load instead of queueing it without end, as a load balancer's overload
manager does (Envoy's "overload manager"; Google SRE book, chapter 21, "Handling Overload").

A computation that already started cannot be stopped (Python threads cannot be interrupted): it
finishes in the background and holds its thread until then, which is what keeps the cap honest.
One that had not started yet is dropped from the queue.

>>> gate = ComputeGate(workers=1, budget_s=5.0)
>>> gate.workers, gate.retry_after_s
(1, 5)
>>> gate.close()
"""

from __future__ import annotations

import asyncio
import functools
import math
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
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

    ``run(function, *args)`` awaits ``function(*args)`` run on one of the gate's threads and
    raises a 503 ``HTTPException`` with ``Retry-After`` past the budget; ``close()`` stops the
    threads.
    """

    def __init__(self, *, workers: int | None = None, budget_s: float = DEFAULT_BUDGET_S) -> None:
        count = default_workers() if workers is None else workers
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ConfigError(f"workers must be an int >= 1, got {workers!r}")
        if not isinstance(budget_s, (int, float)) or not 0 < budget_s < math.inf:
            raise ConfigError(f"budget_s must be a finite number > 0, got {budget_s!r}")
        self.workers, self.budget_s = count, float(budget_s)
        self.retry_after_s = max(1, math.ceil(budget_s))
        self._executor = ThreadPoolExecutor(max_workers=count, thread_name_prefix="ringkit-api")

    async def run(self, function: Callable[..., T], /, *args: object) -> T:
        """Return ``function(*args)``, computed on the gate's threads within the budget.

        :raises HTTPException: 503 with ``Retry-After`` when it could not start and finish
            within ``budget_s``
        """
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._executor, functools.partial(function, *args))
        try:
            # On timeout wait_for cancels the future: a computation still queued never starts.
            return await asyncio.wait_for(future, self.budget_s)
        except TimeoutError:
            message = (
                f"the server is busy: the request did not finish within its {self.budget_s:g} s"
                f" budget; retry after {self.retry_after_s} s"
            )
            headers = {"Retry-After": str(self.retry_after_s)}
            raise HTTPException(503, detail=message, headers=headers) from None

    def close(self) -> None:
        """Drop the queued computations and let the threads end when their work is done."""
        self._executor.shutdown(wait=False, cancel_futures=True)
