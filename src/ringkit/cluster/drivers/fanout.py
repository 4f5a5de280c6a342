"""FanOut: the threads a blocking client sends the calls of one round with, all servers at once.

The core speaks in rounds (:mod:`ringkit.cluster.drivers.steps`): a ``get_many`` over S servers is
one round of S per-server batches, and so are ``set_many``, ``delete_many`` and every fallback
round. The async client awaits a round's calls together (``asyncio.gather``); the blocking client
gives all but the first to a small pool of threads and makes the first itself, so S servers cost
about one round trip instead of S in sequence (what a pipelined multi-get of libmemcached's
``memcached_mget`` or Dynamo's coordinator does with its own I/O). The calls of one server stay in
sequence (a round holds at most one connection per server, as a calling thread alone did, so no
connection pool overflows). A round with one call, or whose calls need no network (``memory://``
stores), runs in the calling thread: a thread handoff costs more than such a call.

The pool starts its threads only when a round needs them and never more than
`max_threads` (the per-server connection pool size: one thread per connection the client may
hold to a server). Each call runs in a copy of the caller's context (as ``asyncio.to_thread``),
so the context variables the caller set (:func:`~ringkit.cluster.wire.fence.routed_by`) are
the caller's.
After a fork the child starts a pool of its own (the parent's threads are not in it);
:meth:`close` stops the threads, and the rounds after it run in turn.
"""

from __future__ import annotations

import contextvars
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from ringkit.cluster.checks import positive_int

__all__ = ["FanOut"]

# The name every fan-out thread starts with (seen in thread dumps and py-spy).
THREAD_NAME_PREFIX = "ringkit-fanout"


class FanOut:
    """A lazily started pool of at most `max_threads` threads that runs a round's calls at once.

    Running: ``run`` (one round). Stopping: ``close``; ``closed``.
    """

    def __init__(self, *, max_threads: int) -> None:
        self.max_threads = positive_int("max_threads", max_threads)
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._pid = os.getpid()
        self.closed = False

    def _executor(self) -> ThreadPoolExecutor | None:
        with self._lock:
            if self.closed:
                return None
            if self._pid != os.getpid():
                # Forked: the parent's threads did not come along; its pool is not ours to stop.
                self._pool, self._pid = None, os.getpid()
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    max_workers=self.max_threads, thread_name_prefix=THREAD_NAME_PREFIX
                )
            return self._pool

    def run(
        self, requests: Sequence[Any], perform: Callable[[Any], Any], *, lanes: Sequence[str | None]
    ) -> list[Any] | Exception:
        """Perform every request of a round; return their outcomes in order, or the first error.

        `lanes` names each request's server (None: no network, run here). The requests of one
        server run one after the other, in round order, so a round never holds more than one
        connection to a server, as many as the calling thread alone did; the servers run at
        once, all but the first in the pool. Every request runs to its end even when another
        raised, as with ``asyncio.gather``: the error returned is the first in round order, so
        which one the core is given does not depend on timing.
        """
        outcomes: list[Any] = [None] * len(requests)
        errors: list[Exception | None] = [None] * len(requests)

        def perform_lane(positions: list[int]) -> None:
            for at in positions:
                try:
                    outcomes[at] = perform(requests[at])
                except Exception as raised:
                    errors[at] = raised

        by_server: dict[str, list[int]] = {}
        here: list[int] = []
        for at, lane in enumerate(lanes):
            (here if lane is None else by_server.setdefault(lane, [])).append(at)
        pool = self._executor() if len(by_server) > 1 else None
        futures: list[Future[None]] = []
        if pool is not None:
            first, *away = by_server.values()
            here.extend(first)
            for positions in away:
                try:
                    futures.append(
                        pool.submit(contextvars.copy_context().run, perform_lane, positions)
                    )
                except RuntimeError:  # closed meanwhile: this thread makes the calls itself
                    here.extend(positions)
        else:
            here = list(range(len(requests)))
        perform_lane(sorted(here))
        for future in futures:
            future.result()
        first_error = next((error for error in errors if error is not None), None)
        return outcomes if first_error is None else first_error

    def close(self) -> None:
        """Stop the threads once their calls are done; later rounds run in the calling thread."""
        with self._lock:
            self.closed = True
            pool, self._pool = self._pool, None
            mine = self._pid == os.getpid()
        if pool is not None and mine:
            pool.shutdown(wait=True)
