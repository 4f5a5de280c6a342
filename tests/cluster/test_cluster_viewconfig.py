"""The view is the one source of configuration; fencing survives restarts; refusals publish nothing.

Issue 16, items 2, 6 and 8: the first client of an empty pool publishes epoch 1, later clients
adopt it or are refused naming both values; ``ringkit rebalance`` takes the replica count from
the view; a server restarted empty accepts no write until it is re-stamped; a rebalance that
memcached cannot run is refused before anything is published.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest
import redis

from ringkit import HashRing
from ringkit.cli import main
from ringkit.cluster import ShardedClient
from ringkit.cluster.backends import open_backend
from ringkit.cluster.urls import parse_url
from ringkit.errors import ConfigError, UnsupportedError
from tests.cluster.helpers import memory_urls
from tests.servers import Server, memcached_server, redis_server

New = Callable[..., Any]


@pytest.fixture
def memcached_pair() -> Iterator[dict[str, str]]:
    with ExitStack() as stack:
        servers = [stack.enter_context(memcached_server()) for _ in range(3)]
        yield {f"s{i + 1}": f"memcached://{s.address}" for i, s in enumerate(servers)}


def _held_view(url: str) -> bytes | None:
    backend = open_backend(parse_url(url), timeout_s=2.0)
    try:
        return backend.get_many([b"ringkit:view"]).get(b"ringkit:view")
    finally:
        backend.close()


def test_item_08_refused_memcached_rebalance_publishes_nothing(
    memcached_pair: dict[str, str], new: New
) -> None:
    base = {name: memcached_pair[name] for name in ("s1", "s2")}
    client = new(HashRing(list(base)), base, replicas=2)
    client.set_many({f"k{i}": i for i in range(50)})
    before = {name: _held_view(url) for name, url in base.items()}
    with pytest.raises(UnsupportedError, match="cannot list its keys"):
        client.add_server("s3", memcached_pair["s3"])
    # Nothing was published: the servers hold the view they held, the new one holds none.
    assert {name: _held_view(url) for name, url in base.items()} == before
    assert _held_view(memcached_pair["s3"]) is None
    assert client.view.state == "stable" and "s3" not in client.placement
    other = new(HashRing(list(base)), base, replicas=2)
    assert other.get_many([f"k{i}" for i in range(50)]) == {f"k{i}": i for i in range(50)}
    other.set("after", "refusal")
    assert client.get("after") == "refusal"
    # Nothing is stuck: resume has nothing to do, rollback has nothing to undo, a new add is
    # refused the same clear way.
    listing = ",".join(f"{name}={url}" for name, url in base.items())
    assert main(["rebalance", "--servers", listing, "--resume", "--json"]) == 0
    assert main(["rebalance", "--servers", listing, "--rollback"]) == 1
    with pytest.raises(UnsupportedError, match="cannot list its keys"):
        other.add_server("s3", memcached_pair["s3"])
    assert other.view.state == "stable"
