"""Split counters: a write-hot counter kept as parts on distinct nodes, summed.

``HotKeys(remedy="split", parts=P)``: a hot counter (found by the sketch from its ``incr`` /
``decr``, or switched with ``hot.split(key)``) is counted into one of P parts at random, the key
itself being part 0, and ``get`` sums them. The key's count before the switch is never lost,
two clients switching at once agree on one set of parts, a delete removes every part, and the
sum is exact under concurrent increments from several processes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ringkit import HashRing
from ringkit.cluster import HotKeys, NearCache, ShardedClient
from ringkit.cluster.remedies.splits import choose_suffixes, marker_key, part_key
from ringkit.errors import ConfigError
from tests.cluster.helpers import memory_urls, server_urls
from tests.cluster.processes import workers
from tests.servers import memcached_server, redis_server


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"remedy": "copy"}, "remedy must be one of spread, split, got 'copy'"),
        ({"remedy": "split", "parts": 1}, r"parts must be an int in \[2, 256\], got 1"),
        ({"remedy": "split", "parts": 0}, r"parts must be an int in \[2, 256\], got 0"),
        ({"remedy": "split", "parts": 300}, r"parts must be an int in \[2, 256\], got 300"),
        ({"remedy": "split", "parts": "8"}, r"parts must be an int in \[2, 256\], got '8'"),
        ({"remedy": "split", "parts": True}, r"parts must be an int in \[2, 256\], got True"),
        ({"remedy": "split", "parts": 2.0}, r"parts must be an int in \[2, 256\], got 2.0"),
    ],
)
def test_bad_remedy_and_parts_are_named(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        HotKeys(**options)


def test_split_needs_the_split_remedy() -> None:
    with pytest.raises(ConfigError, match="split\\(\\) needs remedy='split', got remedy='spread'"):
        HotKeys().split("likes")
    with pytest.raises(TypeError, match="key must be str or bytes, got int"):
        HotKeys(remedy="split").split(42)  # type: ignore[arg-type]


def _ring(count: int) -> tuple[HashRing, dict[str, str]]:
    urls = memory_urls(count)
    return HashRing(list(urls)), urls


def test_parts_land_on_distinct_nodes_and_sum_keeps_the_count_before_the_switch() -> None:
    ring, urls = _ring(8)
    hot = HotKeys(remedy="split", parts=8)
    client = ShardedClient(ring, urls, hot_keys=hot)
    client.set("likes", 40)
    hot.split("likes")
    assert client.incr("likes", 2) == 42  # counted into the key itself, then split
    suffixes = choose_suffixes(client.router, b"likes", 8)
    parts = [b"likes", *(part_key(b"likes", n) for n in suffixes)]
    owners = {client.replicas_for(data)[0] for data in parts}
    assert len(owners) == 8
    for _ in range(200):
        client.incr("likes")
    client.decr("likes", 0)
    assert client.get("likes") == 242
    assert client.get_many(["likes", "none"]) == {"likes": 242}
    stats = hot.split_stats()
    assert stats.keys_split == 1 and stats.sums == 2
    assert 150 < stats.increments <= 201  # 7 of 8 parts are not the key itself
    counted = [
        client.server(name).backend.get_many([data])
        for data in (b"likes", *(part_key(b"likes", n) for n in suffixes))
        for name in client.replicas_for(data)
    ]
    assert all(counted)  # every part took some of the increments


def test_missing_counters_stay_missing_and_unsplit() -> None:
    ring, urls = _ring(4)
    hot = HotKeys(remedy="split", parts=4)
    client = ShardedClient(ring, urls, hot_keys=hot)
    hot.split("absent")
    assert client.incr("absent") is None
    assert client.get("absent") is None
    assert hot.split_stats().keys_split == 0


def test_two_clients_switching_at_once_agree_on_the_first_marker() -> None:
    ring, urls = _ring(8)
    first_hot = HotKeys(remedy="split", parts=3)
    second_hot = HotKeys(remedy="split", parts=8)
    first = ShardedClient(ring, urls, hot_keys=first_hot)
    second = ShardedClient(ring, urls, hot_keys=second_hot)
    first.set("likes", 10)
    first_hot.split("likes")
    second_hot.split("likes")
    first.incr("likes")  # publishes its marker: 3 parts
    second.incr("likes")  # finds the marker there and adopts those parts, not its own 8
    for _ in range(50):
        first.incr("likes")
        second.incr("likes")
    assert first.get("likes") == second.get("likes") == 112
    assert second_hot.split_stats().keys_split == 0
    plain = ShardedClient(ring, urls, hot_keys=HotKeys(remedy="split"))
    assert plain.get("likes") == 112  # learnt from the marker


def test_delete_removes_every_part_and_the_marker() -> None:
    ring, urls = _ring(8)
    hot = HotKeys(remedy="split", parts=8)
    client = ShardedClient(ring, urls, hot_keys=hot)
    other = ShardedClient(ring, urls, hot_keys=HotKeys(remedy="split", parts=8))
    client.set("likes", 1)
    hot.split("likes")
    for _ in range(30):
        client.incr("likes")
    assert other.delete("likes") is True
    stored = [
        key
        for name in urls
        for key in client.server(name).backend.kind.store.data  # type: ignore[attr-defined]
        if not key.startswith(b"ringkit:")
    ]
    assert stored == []
    assert client.get("likes") is None  # the marker is gone: the stale knowledge is dropped
    assert client.incr("likes") is None
    client.set("likes", "plain")
    assert client.get("likes") == "plain"
    assert other.delete("likes") is True


def test_delete_many_removes_every_part_and_the_marker() -> None:
    ring, urls = _ring(8)
    hot = HotKeys(remedy="split", parts=8)
    client = ShardedClient(ring, urls, hot_keys=hot)
    client.set_many({"likes": 1, "plain": "x"})
    hot.split("likes")
    for _ in range(30):
        client.incr("likes")
    assert client.delete_many(["likes", "plain", "absent"]) == 2
    stored = [
        key
        for name in urls
        for key in client.server(name).backend.kind.store.data  # type: ignore[attr-defined]
        if not key.startswith(b"ringkit:")
    ]
    assert stored == []  # no part and no marker left to sum the deleted counter back
    assert client.get_many(["likes", "plain"]) == {}


def test_a_part_lost_by_one_replica_is_counted_once_not_again_into_the_key() -> None:
    # A replica restarted empty has lost its copy of a part while the other replica still
    # counts it: the increment taken there must not also be counted into the key itself
    # (found by the chaos run, kill/redis/split: counter_high).
    ring, urls = _ring(3)
    hot = HotKeys(remedy="split", parts=3)
    client = ShardedClient(ring, urls, replicas=2, hot_keys=hot)
    client.set("likes", 0)
    hot.split("likes")
    client.incr("likes")
    suffixes = choose_suffixes(client.router, b"likes", 3)
    for part in (part_key(b"likes", n) for n in suffixes):
        first = client.replicas_for(part)[0]
        del client.server(first).backend.kind.store.data[part]  # type: ignore[attr-defined]
    for expected in range(2, 40):
        client.incr("likes")
        assert client.get("likes") == expected
    assert hot.split_stats().parts_missing == 0


def test_the_sketch_finds_a_write_hot_counter_and_splits_it() -> None:
    ring, urls = _ring(4)
    hot = HotKeys(remedy="split", parts=4, top=1, refresh_every=20)
    client = ShardedClient(ring, urls, hot_keys=hot)
    client.set_many({"likes": 0, "cold": 0})
    for _ in range(100):
        client.incr("likes")
    client.incr("cold")
    assert hot.hot == {b"likes"}
    assert hot.split_stats().keys_split == 1
    assert client.get("likes") == 100 and client.get("cold") == 1
    # Reads are not spread in split mode: no copies, no spread markers.
    assert not any(
        key.startswith(b"ringkit:spread:")
        for name in urls
        for key in client.server(name).backend.kind.store.data  # type: ignore[attr-defined]
    )


def test_split_counter_through_a_near_cache_is_dropped_by_own_counts() -> None:
    ring, urls = _ring(4)
    hot = HotKeys(remedy="split", parts=4)
    client = ShardedClient(ring, urls, hot_keys=hot, near_cache=NearCache(max_items=10, ttl_s=3600))
    client.set("likes", 0)
    hot.split("likes")
    for expected in range(1, 20):
        client.incr("likes")
        assert client.get("likes") == expected


def test_split_works_through_the_async_client(new: Callable[..., Any]) -> None:
    ring, urls = _ring(4)
    hot = HotKeys(remedy="split", parts=4)
    client = new(ring, urls, hot_keys=hot)
    client.set("likes", 5)
    hot.split("likes")
    for _ in range(40):
        client.incr("likes")
    assert client.get("likes") == 45
    assert client.delete("likes") is True
    assert client.get("likes") is None
    marker = marker_key(b"likes")
    assert marker is not None
    assert client.replicas_for(marker) == client.replicas_for(b"likes")  # read in one batch


def test_keys_whose_marker_cannot_route_with_them_are_never_split() -> None:
    ring, urls = _ring(4)
    hot = HotKeys(remedy="split", parts=4)
    client = ShardedClient(ring, urls, hot_keys=hot)
    assert marker_key(b"odd}key") is None
    client.set("odd}key", 1)
    hot.split("odd}key")
    for _ in range(10):
        client.incr("odd}key")
    assert client.get("odd}key") == 11
    assert hot.split_stats().keys_split == 0


START = {"redis": redis_server, "memcached": memcached_server}
PROCESSES, INCREMENTS = 3, 150


@pytest.mark.timeout(180)
@pytest.mark.parametrize("flavor", ["sync", "async"])
@pytest.mark.parametrize("kind", ["redis", "memcached"])
def test_split_sum_is_exact_under_concurrent_increments_from_processes(
    kind: str, flavor: str
) -> None:
    with ExitStack() as stack:
        trio = [stack.enter_context(START[kind]()) for _ in range(3)]
        urls = server_urls(kind, trio)
        seeding = ShardedClient(HashRing(list(urls)), urls)
        seeding.flush()
        seeding.set("likes", 1000)
        seeding.close()
        start = stack.enter_context(workers())
        # The sketch of each process finds the counter hot on its own, at its own moment.
        hot = {"remedy": "split", "parts": 3, "top": 1, "refresh_every": 8}
        counters = [start(flavor, urls, {"hot_keys": hot}) for _ in range(PROCESSES)]
        pending = [(worker, worker._conn) for worker in counters]
        for _worker, conn in pending:  # every process counts at once
            for _ in range(INCREMENTS):
                conn.send(("incr", ("likes",)))
        for _worker, conn in pending:
            for _ in range(INCREMENTS):
                assert conn.poll(60)
                status, answer = conn.recv()
                assert status == "ok" and isinstance(answer, int), answer
        reader = start(flavor, urls, {"hot_keys": {"remedy": "split"}})
        assert reader("get", "likes") == 1000 + PROCESSES * INCREMENTS
        plain = ShardedClient(HashRing(list(urls)), urls)  # no split remedy: sees the parts
        candidates = [b"likes", *(part_key(b"likes", n) for n in range(1, 40))]
        parts = plain.get_many(candidates)
        plain.close()
        assert len(parts) == 3  # the key itself and its two parts
        assert reader("delete", "likes") is True
        assert reader("get", "likes") is None


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 5), st.booleans()), max_size=60))
def test_the_sum_equals_every_count_made_by_either_client(
    steps: list[tuple[bool, int, bool]],
) -> None:
    ring, urls = _ring(4)
    splitting = HotKeys(remedy="split", parts=4)
    clients = [
        ShardedClient(ring, urls, hot_keys=splitting),
        ShardedClient(ring, urls, hot_keys=HotKeys(remedy="split", parts=4)),
    ]
    clients[0].set("likes", 3)
    splitting.split("likes")
    expected = 3
    for first, delta, read in steps:
        client = clients[0 if first else 1]
        client.incr("likes", delta)
        expected += delta
        if read:
            assert client.get("likes") == expected
    assert [client.get("likes") for client in clients] == [expected, expected]


def test_a_split_counter_with_a_ttl_ends_whole_and_the_next_window_counts_from_one(
    make_client: Callable[..., Any],
) -> None:
    """A rate limit's window: the parts and marker carry the key's TTL (they had none before,
    and the next window read the old window's count, 69-76 instead of 1)."""
    hot = HotKeys(remedy="split", parts=3)
    client = make_client(hot_keys=hot)
    client.set("rate", 0, ttl_s=2)
    hot.split("rate")
    for _ in range(40):
        client.incr("rate")
    assert client.get("rate") == 40 and hot.split_stats().keys_split == 1
    deadline = time.monotonic() + 15
    while client.get("rate") is not None:  # the window ends: the key, its parts and marker
        assert time.monotonic() < deadline, "the split counter outlived its TTL"
        time.sleep(0.1)
    assert client.add("rate", 0, ttl_s=30)
    client.incr("rate")
    client.incr("rate")
    assert client.get("rate") == 2
    # touch refreshes the parts and the marker with the key: the sum survives the first TTL.
    client.set("window", 0, ttl_s=2)
    hot.split("window")
    for _ in range(12):
        client.incr("window")
    assert client.touch("window", 30)
    time.sleep(3)  # past the first TTL: only a part or marker left without the touch would go
    assert client.get("window") == 12
