"""The key index's layout on a real redis-server: point buckets split by linear hashing.

What a move relies on: every key written has exactly one entry, in the bucket its point's top
bits name; splitting buckets as the keys grow loses none; the keys an arc's range reads return
are exactly the keys whose points lie on the arc; and the buckets stay listpack-encoded (the
memory they were made for) for keys up to 64 bytes, a longer key going to a twin bucket.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ringkit import HashRing
from ringkit.cluster import ShardedClient
from ringkit.cluster.rebalance.coordinator import RebalanceOptions
from ringkit.cluster.values.buckets import TOP_BITS, top_of
from ringkit.cluster.values.keys import INDEX_KEY, LEGACY_INDEX_KEY, route_key
from ringkit.cluster.wire.index import _in_arc, member
from tests.cluster.helpers import index_entries
from tests.servers import Server, redis_server

SPACE = 1 << 64
POINTS = st.one_of(st.integers(0, SPACE - 1), st.sampled_from([0, 1, 2**40, SPACE - 1]))
_BUCKET = re.compile(rb"ringkit:ix:(\d+):(\d+)(\+?)")


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[Server, Server]]:
    with redis_server() as first, redis_server() as second:
        yield first, second


def _raw(server: Server) -> redis.Redis:
    return redis.Redis(host=server.host, port=server.port)


def _keys(seed: int, count: int) -> list[str]:
    """Return `count` distinct keys: short, tagged (one point for many) and longer than 64."""
    rng = random.Random(seed)
    keys: set[str] = set()
    while len(keys) < count:
        shape = rng.random()
        if shape < 0.1:
            keys.add(f"{{order:{rng.randrange(5)}}}:line:{rng.randrange(10**6)}")
        elif shape < 0.15:
            keys.add("long:" + "x" * rng.randrange(60, 200) + str(rng.randrange(10**6)))
        else:
            keys.add(f"k:{rng.randrange(10**9)}")
    return sorted(keys)


def _check_layout(raw: redis.Redis) -> None:
    """Assert the linear-hashing invariants: each bucket where the layout says, entries counted."""
    level, split, entries = (int(v or 0) for v in raw.hmget(INDEX_KEY, "level", "split", "entries"))
    assert 0 <= split < 2**level
    total = 0
    for name in raw.scan_iter(match=b"ringkit:ix:*", count=1000):
        found = _BUCKET.fullmatch(name)
        assert found, name
        at, prefix = int(found[1]), int(found[2])
        # Level-L buckets from the split pointer on; level-(L + 1) buckets below twice it.
        assert (at == level and prefix >= split) or (at == level + 1 and prefix < 2 * split)
        if found[3]:  # the long-key twin: a list of top bits (3 bytes) + key
            held = {item[3:]: int.from_bytes(item[:3], "big") for item in raw.lrange(name, 0, -1)}
        else:
            held = {
                key: int(value) + 2 ** (TOP_BITS - 1) for key, value in raw.hgetall(name).items()
            }
        assert all((len(key) > 64) == bool(found[3]) for key in held)
        assert all(top >> (TOP_BITS - at) == prefix for top in held.values())
        total += len(held)
    assert total == entries


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    seed=st.integers(0, 2**32),
    count=st.integers(0, 1500),
    arcs=st.lists(st.tuples(POINTS, POINTS), min_size=1, max_size=4),
)
def test_every_key_is_found_by_the_arc_that_holds_its_point(
    servers: tuple[Server, Server], seed: int, count: int, arcs: list[tuple[int, int]]
) -> None:
    raw = _raw(servers[0])
    raw.flushdb()
    ring = HashRing(["s1"])
    client = ShardedClient(ring, {"s1": f"redis://{servers[0].address}/0"}, timeout_s=30.0)
    keys = _keys(seed, count)
    for at in range(0, len(keys), 400):  # several scripts, so that splits run between them
        client.set_many({key: 1 for key in keys[at : at + 400]})
    for key in keys[: count // 10]:  # deletes drop their entries, in whatever bucket
        client.delete(key)
    live = keys[count // 10 :]
    point = {key.encode(): ring.point_for(route_key(key.encode())) for key in live}
    assert set(index_entries(raw)) == set(point)  # splitting lost nothing, kept nothing dead
    _check_layout(raw)
    index = client.server("s1").backend.index
    for start, end in arcs:
        expected = {key for key, p in point.items() if _in_arc(p, start, end)}
        read = [key for page in index.pages(start, end, SPACE, 100) for key in page]
        assert len(read) == len(set(read)) and set(read) == expected
        assert index.count(start, end, SPACE) == len(expected)
    client.close()


@pytest.mark.parametrize("key_bytes", [16, 40, 64])
def test_buckets_stay_listpack_for_keys_up_to_64_bytes(
    servers: tuple[Server, Server], key_bytes: int
) -> None:
    raw = _raw(servers[0])
    raw.flushdb()
    url = f"redis://{servers[0].address}/0"
    client = ShardedClient(HashRing(["s1"]), {"s1": url}, timeout_s=30.0)  # a loaded machine
    keys = [f"user:{i:0{key_bytes - 5}d}" for i in range(20_000)]
    for at in range(0, len(keys), 500):
        client.set_many({key: "v" for key in keys[at : at + 500]})
    client.set("user:" + "y" * 95, "a long key goes to a twin bucket")  # 100 bytes
    buckets = list(raw.scan_iter(match=b"ringkit:ix:*", count=1000))
    plain = [name for name in buckets if not name.endswith(b"+")]
    assert len(plain) > 200  # split as the keys grew: 20,000 keys, about 48 per bucket
    assert {raw.object("encoding", name) for name in plain} == {b"listpack"}
    assert {raw.type(name) for name in buckets if name not in plain} == {b"list"}
    assert len(buckets) == len(plain) + 1
    assert len(index_entries(raw)) == 20_001
    client.close()


def _emptied(servers: tuple[Server, Server]) -> tuple[redis.Redis, redis.Redis, dict[str, str]]:
    """Both servers flushed, their raw clients and their URLs as s1 and s2."""
    first, second = _raw(servers[0]), _raw(servers[1])
    first.flushdb()
    second.flushdb()
    urls = {"s1": f"redis://{servers[0].address}/0", "s2": f"redis://{servers[1].address}/0"}
    return first, second, urls


def test_an_index_left_by_the_sorted_set_layout_is_migrated_by_the_move(
    servers: tuple[Server, Server],
) -> None:
    first, _, urls = _emptied(servers)
    ring = HashRing(["s1"])
    writer = ShardedClient(ring, {"s1": urls["s1"]}, index_keys=False, timeout_s=30.0)
    keys = [f"fare:{i}" for i in range(2_000)]
    writer.set_many({key: key for key in keys})
    # The entries an older ringkit wrote: one sorted set, point (8 bytes) + key, score 0.
    old = {member(ring.point_for(key.encode()), key.encode()): 0 for key in keys}
    first.zadd(LEGACY_INDEX_KEY, old)
    report = writer.add_server("s2", urls["s2"], options=RebalanceOptions(scan=False))
    grown = writer.view.placement
    assert report.keys_streamed == sum(grown.node_for(key.encode()) == "s2" for key in keys)
    assert first.exists(LEGACY_INDEX_KEY) == 0
    assert writer.get_many(keys) == {key: key for key in keys}
    assert set(index_entries(first)) == {
        key.encode() for key in keys if grown.node_for(key.encode()) == "s1"
    }
    writer.close()


def _calls(raw: redis.Redis, *commands: str) -> int:
    stats = raw.info("commandstats")
    return sum(int(stats.get(f"cmdstat_{command}", {}).get("calls", 0)) for command in commands)


def test_a_move_lands_and_leaves_its_index_entries_a_page_at_a_time(
    servers: tuple[Server, Server],
) -> None:
    first, second, urls = _emptied(servers)
    writer = ShardedClient(HashRing(["s1"]), {"s1": urls["s1"]}, timeout_s=30.0)
    keys = [f"seat:{i:011d}" for i in range(6_000)] + [f"long:{'z' * 70}{i}" for i in range(40)]
    writer.set_many({key: key for key in keys})
    for raw in (first, second):
        raw.config_resetstat()
    report = writer.add_server("s2", urls["s2"], options=RebalanceOptions(scan=False))
    grown = writer.view.placement
    moved = {key.encode() for key in keys if grown.node_for(key.encode()) == "s2"}
    assert report.keys_streamed == len(moved) > 1000
    assert set(index_entries(second)) == moved
    assert set(index_entries(first)) == {key.encode() for key in keys} - moved
    for raw in (first, second):
        _check_layout(raw)  # the splits a page's count called for, all made
    landed = [n for n in second.scan_iter(match=b"ringkit:ix:*") if not n.endswith(b"+")]
    assert {second.object("encoding", name) for name in landed} == {b"listpack"}
    # One HSET or HDEL per bucket and one HINCRBY of the count per page, where one entry at a
    # time cost about four of them per key moved.
    bookkeeping = sum(_calls(raw, "hset", "hdel", "hincrby") for raw in (first, second))
    assert bookkeeping < 0.5 * len(moved)
    assert writer.get_many(keys) == {key: key for key in keys}
    writer.close()


def test_a_batch_write_indexes_its_keys_as_single_writes_do_a_bucket_at_a_time(
    servers: tuple[Server, Server],
) -> None:
    """``set_many`` leaves the index single sets leave, with one HSET per bucket per batch.

    Each server is written the same keys as the only server of its own client: one key per
    ``set`` on the first, 400 per ``set_many`` on the second.
    """
    first, second, urls = _emptied(servers)
    keys = [f"fare:{i:06d}" for i in range(2_000)] + [f"long:{'q' * 70}{i}" for i in range(20)]
    singles = ShardedClient(HashRing(["s1"]), {"s1": urls["s1"]}, timeout_s=30.0)
    batches = ShardedClient(HashRing(["s1"]), {"s1": urls["s2"]}, timeout_s=30.0)
    for raw in (first, second):
        raw.config_resetstat()
    for key in keys:
        singles.set(key, key)
    for at in range(0, len(keys), 400):
        batches.set_many({key: key for key in keys[at : at + 400]})
    assert index_entries(second) == index_entries(first)
    assert set(index_entries(second)) == {key.encode() for key in keys}
    layout = ("level", "split", "entries")
    assert second.hmget(INDEX_KEY, *layout) == first.hmget(INDEX_KEY, *layout)
    _check_layout(second)
    # One entry at a time cost an HSET and an HINCRBY per key; a batch, one HSET per bucket
    # it meets (about 40 buckets here) and one HINCRBY, plus the splits' HSETs.
    assert _calls(first, "hset", "hincrby") > 2 * len(keys)
    assert _calls(second, "hset", "hincrby") < 0.25 * len(keys)
    assert batches.get_many(keys) == {key: key for key in keys}
    singles.close()
    batches.close()


def test_top_bits_keep_point_order() -> None:
    assert top_of(0) == 0 and top_of(SPACE - 1) == 2**TOP_BITS - 1
    assert top_of(2**40 - 1) < top_of(2**40)


@pytest.mark.parametrize(
    "arc",
    [
        (SPACE - 2**39, 5),  # starts inside the last window: no whole window after it
        (SPACE - 2, 2**40),  # starts one point before the top
        (2**40 + 7, 2**40 + 9),  # inside one window
        (5, 5),  # the whole circle
    ],
)
def test_an_arc_at_the_edges_of_the_windows_is_read_and_deleted_exactly(
    servers: tuple[Server, Server], arc: tuple[int, int]
) -> None:
    raw = _raw(servers[0])
    raw.flushdb()
    ring = HashRing(["s1"])
    client = ShardedClient(ring, {"s1": f"redis://{servers[0].address}/0"}, timeout_s=30.0)
    keys = _keys(7, 600)
    client.set_many({key: 1 for key in keys})
    point = {key.encode(): ring.point_for(route_key(key.encode())) for key in keys}
    start, end = arc
    on_arc = {key for key, p in point.items() if _in_arc(p, start, end)}
    index = client.server("s1").backend.index
    assert {key for page in index.pages(start, end, SPACE, 50) for key in page} == on_arc
    assert index.count(start, end, SPACE) == len(on_arc)
    assert index.delete_arc(start, end, SPACE, 50) == len(on_arc)
    assert set(index_entries(raw)) == set(point) - on_arc
    assert raw.exists(*on_arc) == 0 if on_arc else True
    client.close()
