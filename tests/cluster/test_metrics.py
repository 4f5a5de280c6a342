"""The cache client's Prometheus metrics, scraped over HTTP while it runs against real servers."""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import Callable, Iterator

import pytest
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.parser import text_string_to_metric_families

from ringkit import HashRing
from ringkit.cluster import AsyncShardedClient, HotKeys, NearCache, ShardedClient
from ringkit.errors import ConfigError
from tests.cluster.helpers import NAMES, memory_urls, server_urls
from tests.servers import Server, free_port, redis_server, stop

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
Scrape = Callable[[], tuple[str, Samples]]


@pytest.fixture
def scrape() -> Iterator[tuple[CollectorRegistry, Scrape]]:
    """A registry exposed on a loopback port, and a function that scrapes it over HTTP."""
    registry = CollectorRegistry()
    port = free_port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=registry)

    def read() -> tuple[str, Samples]:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            text = response.read().decode()
        samples: Samples = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                samples[sample.name, frozenset(sample.labels.items())] = sample.value
        return text, samples

    yield registry, read
    server.shutdown()
    thread.join(timeout=5)


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def total(samples: Samples, name: str, **labels: str) -> float:
    """Sum the samples of `name` whose labels include `labels`."""
    wanted = set(labels.items())
    return sum(v for (n, have), v in samples.items() if n == name and wanted <= have)


@pytest.mark.parametrize("kind", ["redis", "memcached"])
def test_calls_outcomes_and_latency_per_server_and_operation_are_scraped(
    kind: str, request: pytest.FixtureRequest, scrape: tuple[CollectorRegistry, Scrape]
) -> None:
    registry, read = scrape
    urls = server_urls(kind, request.getfixturevalue(f"{kind}_trio"))
    with ShardedClient(
        HashRing(list(urls)), urls, metrics_registry=registry, metrics_name="web"
    ) as client:
        client.flush()
        for i in range(30):
            client.set(f"user:{i}", i)
        hits = sum(client.get(f"user:{i}") is not None for i in range(30))
        misses = sum(client.get(f"absent:{i}") is None for i in range(20))
        _, samples = read()

    assert (hits, misses) == (30, 20)
    assert total(samples, "ringkit_cache_calls_total", client="web", op="get", outcome="hit") == 30
    assert total(samples, "ringkit_cache_calls_total", client="web", op="get", outcome="miss") == 20
    writes = sum(
        total(samples, "ringkit_cache_calls_total", client="web", op=op, outcome="ok")
        for op in ("set", "set_many")
    )
    assert writes == 30
    # One latency observation per call, per server and verb: the histogram counts match.
    for name in NAMES:
        calls = total(samples, "ringkit_cache_calls_total", client="web", server=name, op="get")
        observed = value(
            samples, "ringkit_cache_call_duration_seconds_count", client="web", server=name,
            op="get",
        )  # fmt: skip
        assert observed == calls
        assert value(samples, "ringkit_cache_server_up", client="web", server=name) == 1.0
    assert value(samples, "ringkit_cache_view_epoch", client="web") >= 1


def test_a_server_down_shows_as_down_with_its_hints_and_errors(
    scrape: tuple[CollectorRegistry, Scrape],
) -> None:
    registry, read = scrape
    with redis_server() as s1, redis_server() as s2, redis_server(password="s3cret") as s3:
        trio: list[Server] = [s1, s2, s3]
        urls = server_urls("redis", trio)
        urls["s3"] = f"redis://:s3cret@{s3.address}/0"
        client = ShardedClient(
            HashRing(list(urls)), urls, replicas=2, metrics_registry=registry,
            dead_timeout_s=60.0, timeout_s=0.5,
        )  # fmt: skip
        with client:
            stop(s2.process)
            for i in range(40):
                client.set(f"k{i}", i)
            text, samples = read()
            assert client.down_servers == ["s2"]
            name = client.metrics.name if client.metrics is not None else ""
            assert value(samples, "ringkit_cache_server_up", client=name, server="s2") == 0.0
            assert value(samples, "ringkit_cache_server_up", client=name, server="s1") == 1.0
            errors = total(samples, "ringkit_cache_calls_total", server="s2", outcome="error")
            assert errors >= 1
            # Hints for s2 went to the servers that took its writes, not to this client's memory.
            assert value(samples, "ringkit_cache_hints_pending", client=name, server="s2") == 0
    # Servers are labelled by node name: neither the password nor an address is scraped.
    assert "s3cret" not in text
    assert s3.address not in text


def test_near_cache_and_split_counter_statistics_are_scraped(
    scrape: tuple[CollectorRegistry, Scrape],
) -> None:
    registry, read = scrape
    urls = memory_urls()
    near = NearCache(max_items=100, ttl_s=30.0)
    hot = HotKeys(remedy="split", parts=3)
    with ShardedClient(
        HashRing(list(urls)), urls, near_cache=near, hot_keys=hot, metrics_registry=registry,
        metrics_name="counters",
    ) as client:  # fmt: skip
        client.set("page", "v")
        for _ in range(5):
            client.get("page")
        client.set("views", 0)
        hot.split("views")
        for _ in range(6):
            client.incr("views")
        assert client.get("views") == 6
        _, samples = read()
    stats = near.stats()
    assert value(samples, "ringkit_cache_near_hits_total", client="counters") == stats.hits > 0
    assert value(samples, "ringkit_cache_near_entries", client="counters") == stats.size
    split = hot.split_stats()
    assert split.keys_split == 1
    assert value(samples, "ringkit_cache_split_keys_split_total", client="counters") == 1
    assert value(samples, "ringkit_cache_split_sums_total", client="counters") == split.sums


def test_two_clients_share_a_registry_and_a_closed_one_stops_reporting_state(
    scrape: tuple[CollectorRegistry, Scrape],
) -> None:
    registry, read = scrape
    first_urls, second_urls = memory_urls(), memory_urls()
    first = ShardedClient(HashRing(list(first_urls)), first_urls, metrics_registry=registry)
    second = ShardedClient(HashRing(list(second_urls)), second_urls, metrics_registry=registry)
    assert first.metrics is not None and second.metrics is not None
    assert first.metrics.name != second.metrics.name
    first.set("a", 1)
    second.set("b", 2)
    second.close()
    _, samples = read()
    first.close()
    assert value(samples, "ringkit_cache_view_epoch", client=first.metrics.name) >= 1
    assert ("ringkit_cache_view_epoch", frozenset({("client", second.metrics.name)})) not in samples
    # The event counts of the closed client stay: a counter never goes back.
    assert total(samples, "ringkit_cache_calls_total", client=second.metrics.name) >= 1


def test_the_async_client_reports_the_same_metrics(
    scrape: tuple[CollectorRegistry, Scrape],
) -> None:
    registry, read = scrape
    urls = memory_urls()

    async def run() -> None:
        client = AsyncShardedClient(
            HashRing(list(urls)), urls, metrics_registry=registry, metrics_name="aio"
        )
        await client.set("k", 1)
        assert await client.get("k") == 1
        await client.close()

    asyncio.run(run())
    _, samples = read()
    assert total(samples, "ringkit_cache_calls_total", client="aio", op="get", outcome="hit") == 1


def test_a_bad_metrics_name_is_refused_by_name() -> None:
    urls = memory_urls()
    with pytest.raises(ConfigError, match="metrics_name"):
        ShardedClient(
            HashRing(list(urls)), urls, metrics_registry=CollectorRegistry(), metrics_name=""
        )
