"""Fixtures for the cluster tests: real server trios (started once per module) and clients."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest

from ringkit import HashRing
from ringkit.cluster import ShardedClient
from tests.cluster.helpers import FLAVORS, NAMES, memory_urls, new_client, server_urls
from tests.servers import EtcdCluster, Server, etcd_server, memcached_server, redis_server

_prefixes = itertools.count()


@pytest.fixture(scope="module")
def redis_trio() -> Iterator[list[Server]]:
    with ExitStack() as stack:
        yield [stack.enter_context(redis_server()) for _ in NAMES]


@pytest.fixture(scope="module")
def memcached_trio() -> Iterator[list[Server]]:
    with ExitStack() as stack:
        yield [stack.enter_context(memcached_server()) for _ in NAMES]


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


@pytest.fixture(params=FLAVORS)
def flavor(request: pytest.FixtureRequest) -> str:
    """The client under test: ``sync`` (ShardedClient) or ``async`` (behind a SyncFacade)."""
    kind: str = request.param
    return kind


@pytest.fixture
def new(flavor: str) -> Iterator[Callable[..., Any]]:
    """Build clients of the flavor under test, ``new(placement, urls, **options)``; closed after."""
    made: list[Any] = []

    def make(placement: Any, servers: dict[str, str], **options: Any) -> Any:
        client = new_client(flavor, placement, servers, **options)
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


@pytest.fixture
def make_client(urls: dict[str, str], new: Callable[..., Any]) -> Callable[..., Any]:
    """Build clients of the flavor under test over the three servers of `urls`."""

    def make(**options: Any) -> Any:
        return new(HashRing(list(urls)), urls, **options)

    return make


@pytest.fixture(scope="module")
def etcd() -> Iterator[EtcdCluster]:
    """One real etcd per module (skipped locally without the binary, a failure under CI)."""
    with etcd_server() as cluster:
        yield cluster


@pytest.fixture
def etcd_url(etcd: EtcdCluster, request: pytest.FixtureRequest) -> str:
    """An ``etcd://`` view-store URL with a prefix of its own for this test."""
    name = f"views-{next(_prefixes)}-{request.node.name}"
    return etcd.url("".join(c if c.isalnum() or c in "-_" else "-" for c in name))
