"""Clients in other processes, for the tests of guarantees that must hold across processes.

A :class:`Worker` is a sharded client in a spawned process, driven one call at a time over a
pipe with a bounded wait, and killed with SIGKILL at the end (or mid-test, to model a crash:
whatever it held in memory is gone).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from multiprocessing.connection import Connection
from typing import Any

from ringkit import HashRing
from ringkit.cluster import AsyncShardedClient, HotKeys, NearCache, ShardedClient
from tests.cluster.helpers import SyncFacade

_SPAWN = multiprocessing.get_context("spawn")
REPLY_S = 30.0


def client_in_this_process(flavor: str, urls: Mapping[str, str], options: Mapping[str, Any]) -> Any:
    """Return a sync client, or an async one behind a SyncFacade; `options` as keywords.

    ``hot_keys`` and ``near_cache`` may be given as the keywords of a :class:`HotKeys` and a
    :class:`NearCache` (a dict crosses processes).
    """
    options = dict(options)
    if isinstance(options.get("hot_keys"), dict):
        options["hot_keys"] = HotKeys(**options["hot_keys"])
    if isinstance(options.get("near_cache"), dict):
        options["near_cache"] = NearCache(**options["near_cache"])
    ring = HashRing(list(urls))
    if flavor == "async":
        return SyncFacade(AsyncShardedClient(ring, dict(urls), **options))
    return ShardedClient(ring, dict(urls), **options)


def _serve(conn: Connection, flavor: str, urls: dict[str, str], options: dict[str, Any]) -> None:
    """The worker process: run each (verb, args) received, send back its answer."""
    client = client_in_this_process(flavor, urls, options)
    while conn.poll(REPLY_S):
        verb, args = conn.recv()
        try:
            found = getattr(client, verb)
            conn.send(("ok", found(*args) if callable(found) else found))
        except Exception as error:  # sent back to the test, which fails with it
            conn.send(("error", repr(error)))


class Worker:
    """A client in another process; ``worker("get", key)`` runs ``client.get(key)`` there."""

    def __init__(self, flavor: str, urls: Mapping[str, str], options: Mapping[str, Any]) -> None:
        self._conn, child = _SPAWN.Pipe()
        self.process = _SPAWN.Process(
            target=_serve, args=(child, flavor, dict(urls), dict(options)), daemon=True
        )
        self.process.start()

    def __call__(self, verb: str, *args: Any) -> Any:
        self._conn.send((verb, args))
        if not self._conn.poll(REPLY_S):
            raise TimeoutError(f"worker gave no answer to {verb} in {REPLY_S} s")
        status, answer = self._conn.recv()
        assert status == "ok", answer
        return answer

    def kill(self) -> None:
        """SIGKILL the process: whatever it held in memory is gone."""
        if self.process.is_alive():
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.join(10)


@contextmanager
def workers() -> Iterator[Callable[..., Worker]]:
    """Yield ``start(flavor, urls, options)``; every worker started is killed at the end."""
    started: list[Worker] = []

    def start(flavor: str, urls: Mapping[str, str], options: Mapping[str, Any]) -> Worker:
        started.append(Worker(flavor, urls, options))
        return started[-1]

    try:
        yield start
    finally:
        for worker in started:
            worker.kill()
