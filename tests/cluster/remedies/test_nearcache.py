"""The near-cache: bounded by size and TTL, dropped by the client's own writes.

A hot key read through a client with ``near_cache=NearCache(...)`` is answered from memory with
no server call; every write of that client (acknowledged, failed or unknown) drops its keys; a
write acknowledged by another process is seen by every read that begins more than `ttl_s` after
it (checked with two processes on the machine-wide monotonic clock).
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringkit import HashRing
from ringkit.cluster import HotKeys, NearCache, ShardedClient, memory_store
from ringkit.cluster.remedies import nearcache as nearcache_module
from ringkit.errors import BackendError, ConfigError
from tests.cluster.helpers import memory_urls, server_urls
from tests.cluster.processes import workers
from tests.servers import memcached_server, redis_server


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_items": 0, "ttl_s": 1}, "max_items must be an int >= 1, got 0"),
        ({"max_items": -5, "ttl_s": 1}, "max_items must be an int >= 1, got -5"),
        ({"max_items": "10", "ttl_s": 1}, "max_items must be an int >= 1, got '10'"),
        ({"max_items": 2.5, "ttl_s": 1}, "max_items must be an int >= 1, got 2.5"),
        ({"max_items": True, "ttl_s": 1}, "max_items must be an int >= 1, got True"),
        ({"max_items": 10, "ttl_s": 0}, "ttl_s must be a number > 0, got 0"),
        ({"max_items": 10, "ttl_s": -1.5}, r"ttl_s must be a number > 0, got -1.5"),
        ({"max_items": 10, "ttl_s": "1"}, "ttl_s must be a number > 0, got '1'"),
        ({"max_items": 10, "ttl_s": math.nan}, "ttl_s must be a number > 0, got nan"),
        ({"max_items": 10, "ttl_s": math.inf}, "ttl_s must be a number > 0, got inf"),
        (
            {"max_items": 10, "ttl_s": 1, "hot_only": "yes"},
            "hot_only must be True or False, got 'yes'",
        ),
    ],
)
def test_bad_near_cache_options_are_named(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        NearCache(**options)


def test_client_refuses_a_near_cache_that_is_not_one() -> None:
    urls = memory_urls(1)
    with pytest.raises(ConfigError, match="near_cache must be a NearCache or None, got 1000"):
        ShardedClient(HashRing(list(urls)), urls, near_cache=1000)  # type: ignore[arg-type]


@given(st.lists(st.integers(0, 20), max_size=200), st.integers(1, 8))
def test_near_cache_is_an_lru_of_at_most_max_items(keys: list[int], max_items: int) -> None:
    near = NearCache(max_items=max_items, ttl_s=3600)
    model: OrderedDict[bytes, int] = OrderedDict()
    for key in keys:
        data = b"k%d" % key
        hit, value = near.lookup(data)
        assert (hit, value) == ((True, model[data]) if data in model else (False, None))
        if hit:
            model.move_to_end(data)
        else:
            near.fill(data, key, near.fill_token())
            model[data] = key
            if len(model) > max_items:
                model.popitem(last=False)
        near._check()
        assert len(near) == len(model)
    stats = near.stats()
    assert stats.hits + stats.misses == len(keys)
    assert stats.evictions == stats.misses - len(model)


def test_entries_expire_ttl_s_after_their_read_began(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(nearcache_module.time, "monotonic", lambda: now[0])
    near = NearCache(max_items=10, ttl_s=2.0)
    token = near.fill_token()  # the read begins at 100.0 ...
    now[0] = 101.5  # ... and ends 1.5 s later: the entry has 0.5 s left, not 2
    near.fill(b"k", "v", token)
    now[0] = 101.99
    assert near.lookup(b"k") == (True, "v")
    now[0] = 102.0
    assert near.lookup(b"k") == (False, None)
    assert near.stats().expirations == 1
    assert len(near) == 0


def test_a_read_that_overlapped_an_own_write_never_fills() -> None:
    near = NearCache(max_items=10, ttl_s=60)
    token = near.fill_token()  # a read begins, then this client writes the key
    near.invalidate([b"k"])
    near.fill(b"k", "old", token)  # the read ends with what it found before the write
    assert near.lookup(b"k") == (False, None)


def _near(**options: Any) -> NearCache:
    return NearCache(max_items=options.pop("max_items", 100), ttl_s=3600, **options)


def test_a_cached_read_makes_no_server_call(make_client: Callable[..., Any]) -> None:
    near = _near()
    client = make_client(near_cache=near)
    client.set("hot", {"n": 1})
    assert client.get("hot") == {"n": 1}
    calls = sum(snapshot.calls for snapshot in client.stats().values())
    for _ in range(20):
        assert client.get("hot") == {"n": 1}
    assert client.get_many(["hot"]) == {"hot": {"n": 1}}
    assert sum(snapshot.calls for snapshot in client.stats().values()) == calls
    assert near.stats().hits == 21
    assert client.near_cache is near


WRITES: list[tuple[str, Callable[[Any], object], object]] = [
    ("set", lambda c: c.set("k", 7), 7),
    ("set_many", lambda c: c.set_many({"k": 8, "other": 1}), 8),
    ("delete", lambda c: c.delete("k"), None),
    ("delete_many", lambda c: c.delete_many(["other", "k"]), None),
    ("incr", lambda c: c.incr("k", 5), 7),
    ("decr", lambda c: c.decr("k"), 1),
    ("touch", lambda c: c.touch("k", 60), 2),
    ("add after delete", lambda c: (c.delete("k"), c.add("k", 9)), 9),
]


@pytest.mark.parametrize(("verb", "write", "expected"), WRITES, ids=[w[0] for w in WRITES])
def test_own_writes_drop_the_cached_value(
    make_client: Callable[..., Any],
    verb: str,
    write: Callable[[Any], object],
    expected: object,
) -> None:
    near = _near()
    client = make_client(near_cache=near)
    other = make_client()  # another client without a near-cache: its writes are not seen ...
    client.set("k", 1)
    assert client.get("k") == 1
    other.set("k", 2)
    assert client.get("k") == 1  # ... until the entry expires (ttl_s is an hour here)
    write(client)
    assert client.get("k") == expected
    assert near.stats().invalidations >= 1


def test_a_failed_write_drops_the_cached_value() -> None:
    urls = memory_urls(1)
    near = _near()
    client = ShardedClient(HashRing(list(urls)), urls, near_cache=near, dead_timeout_s=0.01)
    client.set("k", "old")
    assert client.get("k") == "old"
    store = memory_store(urls["s1"].removeprefix("memory://"))
    store.unavailable = True
    with pytest.raises(BackendError):
        client.set("k", "new")  # the outcome is unknown: the entry must not outlive it
    assert len(near) == 0
    with pytest.raises(BackendError):
        client.get("k")  # read from the server, not from the cache
    store.unavailable = False


def test_hot_only_caches_pinned_and_hot_keys() -> None:
    urls = memory_urls(2)
    near = _near(hot_only=True)
    hot = HotKeys(top=1, spread=1, refresh_every=10_000)
    client = ShardedClient(HashRing(list(urls)), urls, near_cache=near, hot_keys=hot)
    client.set_many({"cold": 1, "pinned": 2, "viral": 3})
    near.pin("pinned")
    for _ in range(5):
        client.get("viral")
    client.get("cold")
    client.get("pinned")
    assert set(near._entries) == {b"pinned"}
    hot.refresh()
    client.get("viral")
    assert set(near._entries) == {b"pinned", b"viral"}
    near.unpin("pinned")
    assert set(near._entries) == {b"viral"}


def test_lru_bound_through_the_client(make_client: Callable[..., Any]) -> None:
    near = _near(max_items=3)
    client = make_client(near_cache=near)
    client.set_many({f"k{i}": i for i in range(6)})
    assert client.get_many([f"k{i}" for i in range(6)]) == {f"k{i}": i for i in range(6)}
    assert len(near) == 3
    assert near.stats().evictions == 3
    assert client.get("k5") == 5 and near.stats().hits == 1


START = {"redis": redis_server, "memcached": memcached_server}
TTL_S = 0.3


@pytest.mark.timeout(120)
@pytest.mark.parametrize("flavor", ["sync", "async"])
@pytest.mark.parametrize("kind", ["redis", "memcached"])
def test_stale_reads_never_outlast_ttl_s_after_another_process_ack(kind: str, flavor: str) -> None:
    with ExitStack() as stack:
        trio = [stack.enter_context(START[kind]()) for _ in range(3)]
        urls = server_urls(kind, trio)
        start = stack.enter_context(workers())
        cached = start(flavor, urls, {"near_cache": {"max_items": 10, "ttl_s": TTL_S}})
        writer = start(flavor, urls, {})
        writer("flush")
        checked = 0
        for version in range(1, 6):
            writer("set", "hot", version)
            acked = time.monotonic()  # CLOCK_MONOTONIC is machine-wide: the same in workers
            while True:
                began = time.monotonic()
                found = cached("get", "hot")
                if began > acked + TTL_S:  # past the stated bound: the write must be seen
                    assert found == version, (version, found, began - acked)
                    checked += 1
                    break
                assert found in (version - 1, version, None)
        assert checked == 5
