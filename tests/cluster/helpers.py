"""Helpers shared by the cluster tests: server URLs, and the sync and async clients alike."""

from __future__ import annotations

import asyncio
import inspect
import itertools
import random
import threading
import time
from collections.abc import Coroutine, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any, TypeVar

import redis

from ringkit.cluster import AsyncShardedClient, ShardedClient, memory_store
from ringkit.cluster.wire.backends import open_backend
from ringkit.cluster.wire.handles import fence
from ringkit.cluster.wire.urls import ServerURL, parse_url
from ringkit.placement import Placement
from tests.servers import Server, redis_server

T = TypeVar("T")

NAMES = ("s1", "s2", "s3")
_memory_ids = itertools.count()


def memory_urls(count: int = len(NAMES)) -> dict[str, str]:
    """Return URLs of fresh, empty memory stores named after this test run."""
    run = next(_memory_ids)
    urls = {f"s{i + 1}": f"memory://test-{run}-{i}" for i in range(count)}
    for url in urls.values():
        store = memory_store(url.removeprefix("memory://"))
        store.unavailable = False
        store.data.clear()
    return urls


def server_urls(kind: str, trio: list[Server]) -> dict[str, str]:
    """Return ``{s1: url, s2: url, s3: url}`` for three running servers of `kind`."""
    scheme = "redis" if kind == "redis" else "memcached"
    suffix = "/0" if kind == "redis" else ""
    return {
        name: f"{scheme}://{server.address}{suffix}"
        for name, server in zip(NAMES, trio, strict=True)
    }


class _ServerView:
    """A server of an async client as the sync tests see it: a blocking backend on its URL."""

    def __init__(self, client: AsyncShardedClient, name: str) -> None:
        real = client.server(name)
        self.name, self.health, self.stats = name, real.health, real.stats
        self.backend = fence(
            open_backend(real.url, timeout_s=1.0),
            lambda: client.epoch,
            client._point_of,
        )
        self.backend.index_keys = real.backend.index_keys

    @property
    def url(self) -> ServerURL:
        return self.backend.url


class SyncFacade:
    """An AsyncShardedClient behind the sync client's interface, so one test runs on both.

    Its coroutines run on an event loop of its own, in a thread; callers in any thread block on
    the result (``run_coroutine_threadsafe``), so the multi-threaded tests run unchanged.
    Attributes read and set pass through to the async client.
    """

    def __init__(self, client: AsyncShardedClient) -> None:
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, daemon=True)
        thread.start()
        object.__setattr__(self, "_state", (client, loop, thread))

    @property
    def wrapped(self) -> AsyncShardedClient:
        client: AsyncShardedClient = self._state[0]
        return client

    def _await(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._state[1]).result()

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.wrapped, name)
        if inspect.iscoroutinefunction(value):
            return lambda *args, **kwargs: self._await(value(*args, **kwargs))
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self.wrapped, name, value)

    def server(self, name: str) -> _ServerView:
        return _ServerView(self.wrapped, name)

    def close(self) -> None:
        client, loop, thread = self._state
        if not loop.is_closed():
            self._await(client.close())
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
            loop.close()

    def __enter__(self) -> SyncFacade:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return repr(self.wrapped)


def one_of_each_backend(redis_trio: list[Any], memcached_trio: list[Any]) -> dict[str, Any]:
    """A raw connection to one server of each kind (memory, redis, memcached), by kind."""
    return {
        "memory": open_backend(parse_url(memory_urls(1)["s1"]), timeout_s=1.0),
        "redis": open_backend(parse_url(server_urls("redis", redis_trio)["s1"]), timeout_s=1.0),
        "memcached": open_backend(
            parse_url(server_urls("memcached", memcached_trio)["s1"]), timeout_s=1.0
        ),
    }


FLAVORS = ("sync", "async")


def new_client(flavor: str, placement: Placement, urls: Mapping[str, str], **options: Any) -> Any:
    """Return a ShardedClient, or an AsyncShardedClient behind a :class:`SyncFacade`."""
    if flavor == "sync":
        return ShardedClient(placement, urls, **options)
    return SyncFacade(AsyncShardedClient(placement, urls, **options))


class Load:
    """Bounded readers and writers over `keys`: each writer owns the keys i % writers == its number.

    Each thread reads a random key (a miss is a failed read: every key was written before) and
    every third step writes one of its own keys; it stops after `steps` steps or `deadline_s`.
    """

    def __init__(
        self,
        client: Any,
        keys: list[str],
        *,
        writers: int = 2,
        steps: int = 20_000,
        deadline_s: float = 30.0,
    ) -> None:
        self.client, self.keys, self.writers = client, keys, writers
        self.steps, self.deadline_s = steps, deadline_s
        self.latest: dict[str, int] = {}
        self.failed_reads: list[str] = []
        self.errors: list[BaseException] = []
        self.states: set[str] = set()  # the view states the load ran under
        self.stop = threading.Event()
        self.threads = [
            threading.Thread(target=self._run, args=(n,), daemon=True) for n in range(writers)
        ]

    def _run(self, number: int) -> None:
        rng = random.Random(number)
        mine = [key for i, key in enumerate(self.keys) if i % self.writers == number]
        deadline = time.monotonic() + self.deadline_s  # bounded in time and in count
        for step in range(self.steps):
            if self.stop.is_set() or time.monotonic() > deadline:
                return
            try:
                key = rng.choice(self.keys)
                self.states.add(self.client.view.state)
                if self.client.get(key) is None:
                    self.failed_reads.append(key)
                if step % 3 == 0:
                    target = rng.choice(mine)
                    self.client.set(target, {"key": target, "n": step})
                    self.latest[target] = step
            except Exception as error:  # any failure is a test failure, reported below
                self.errors.append(error)
                return

    def __enter__(self) -> Load:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=30)


@contextmanager
def redis_servers(count: int) -> Iterator[list[Server]]:
    """Start `count` redis-servers on free loopback ports; stop them on exit."""
    with ExitStack() as stack:
        yield [stack.enter_context(redis_server()) for _ in range(count)]


def flushed_redis_urls(names: Sequence[str], servers: Sequence[Server]) -> dict[str, str]:
    """Return ``{name: redis URL}`` for `servers`, each emptied first (a fresh test's state)."""
    for server in servers:
        redis.Redis(host=server.host, port=server.port).flushdb()
    return {name: f"redis://{s.address}/0" for name, s in zip(names, servers, strict=True)}


def index_entries(server: redis.Redis) -> dict[bytes, int]:
    """Return the key index's entries on a Redis server: each key and its point's top 24 bits.

    A bucket is a hash (key: top bits, offset by 2**23); its long-key twin, named with a ``+``,
    a list of (top bits, 3 bytes) + key.
    """
    entries: dict[bytes, int] = {}
    for bucket in server.scan_iter(match=b"ringkit:ix:*", count=1000):
        if bytes(bucket).endswith(b"+"):
            for item in server.lrange(bucket, 0, -1):
                entries[bytes(item[3:])] = int.from_bytes(item[:3], "big")
        else:
            for key, value in server.hgetall(bucket).items():
                entries[key if isinstance(key, bytes) else key.encode()] = int(value) + 2**23
    return entries
