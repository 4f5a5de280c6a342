"""Fixtures for the cluster tests: real server trios (started once per module) and clients."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest

from ringkit import HashRing
from ringkit.cluster import ShardedClient, memory_store
from servers import Server, memcached_server, redis_server

NAMES = ("s1", "s2", "s3")
_memory_ids = itertools.count()


@pytest.fixture(scope="module")
def redis_trio() -> Iterator[list[Server]]:
    with ExitStack() as stack:
        yield [stack.enter_context(redis_server()) for _ in NAMES]


@pytest.fixture(scope="module")
def memcached_trio() -> Iterator[list[Server]]:
    with ExitStack() as stack:
        yield [stack.enter_context(memcached_server()) for _ in NAMES]


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
    scheme = "redis" if kind == "redis" else "memcached"
    suffix = "/0" if kind == "redis" else ""
    return {
        name: f"{scheme}://{server.address}{suffix}"
        for name, server in zip(NAMES, trio, strict=True)
    }


@pytest.fixture(params=["memory", "redis", "memcached"])
def backend(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


@pytest.fixture
def urls(backend: str, request: pytest.FixtureRequest) -> dict[str, str]:
    """URLs of three empty servers of the parametrised backend kind."""
    if backend == "memory":
        return memory_urls()
    trio = request.getfixturevalue(f"{backend}_trio")
    result = server_urls(backend, trio)
    flusher = ShardedClient(HashRing(list(result)), result)
    flusher.flush()
    flusher.close()
    return result


@pytest.fixture
def make_client(urls: dict[str, str]) -> Iterator[Callable[..., ShardedClient]]:
    """Build clients over the three servers of `urls` (closed after the test)."""
    made: list[ShardedClient] = []

    def make(**options: Any) -> ShardedClient:
        client = ShardedClient(HashRing(list(urls)), urls, **options)
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()
