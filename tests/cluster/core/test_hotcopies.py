"""Hot-key copies stay coherent across clients: no read from a copy is older than an ack.

One client finds a key hot and spreads it (copies beyond its replicas, reads rotated over them);
another client, in another process and with no hot-key policy at all, updates the key. Every later
read from the hot client must see the update (before, 6 of 8 reads returned the old value). The
writer learns that the key is spread from a marker on its replicas, read in the same round trip as
its write, and updates or invalidates the copies, version-checked, before it acknowledges.
"""

from __future__ import annotations

import time
from contextlib import ExitStack

import pytest
import redis

from ringkit import HashRing
from ringkit.cluster import HotKeys, ShardedClient, memory_store
from ringkit.cluster.values.codec import JSON, Codec
from ringkit.cluster.wire.redis.handoff import copy_is_newer, copy_tombstone, is_copy_tombstone
from tests.cluster.helpers import memory_urls, server_urls
from tests.cluster.processes import client_in_this_process, workers
from tests.servers import memcached_server, redis_server

START = {"redis": redis_server, "memcached": memcached_server}
HOT = {"top": 2, "spread": 3, "refresh_every": 4}
READS = 8


def _hot_options() -> dict[str, object]:
    return {"replicas": 1, "hot_keys": dict(HOT)}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("flavor", ["sync", "async"])
@pytest.mark.parametrize("kind", ["redis", "memcached"])
def test_reads_from_spread_copies_see_another_process_update(kind: str, flavor: str) -> None:
    with ExitStack() as stack:
        trio = [stack.enter_context(START[kind]()) for _ in range(3)]
        urls = server_urls(kind, trio)
        seeding = ShardedClient(HashRing(list(urls)), urls)
        seeding.flush()
        seeding.set("viral", "old")
        seeding.close()
        start = stack.enter_context(workers())
        hot = start(flavor, urls, _hot_options())
        other = start(flavor, urls, {"replicas": 1})  # no hot-key policy at all
        for _ in range(3 * READS):
            assert hot("get", "viral") == "old"
        assert hot("get_many", ["viral"]) == {"viral": "old"}
        for update in ("new", "newer"):
            other("set", "viral", update)
            assert [hot("get", "viral") for _ in range(READS)] == [update] * READS
        other("delete", "viral")
        assert [hot("get", "viral") for _ in range(READS)] == [None] * READS
        other("set", "viral", 5)
        other("incr", "viral", 2)
        assert [hot("get", "viral") for _ in range(READS)] == [7] * READS
        assert hot("get_many", ["viral"]) == {"viral": 7}


@pytest.mark.parametrize("flavor", ["sync", "async"])
def test_the_hot_client_own_update_reaches_every_copy(flavor: str) -> None:
    urls = memory_urls()
    client = client_in_this_process(flavor, urls, _hot_options())
    other = client_in_this_process(flavor, urls, {"replicas": 1})
    client.set("viral", "v1")
    for _ in range(3 * READS):
        assert client.get("viral") == "v1"
    for writer, value in ((client, "v2"), (other, "v3"), (client, "v4")):
        writer.set("viral", value)
        assert [client.get("viral") for _ in range(READS)] == [value] * READS
    # A counter has no version: its copies are invalidated, never version-checked against.
    client.set("counter", 5)
    for _ in range(3 * READS):
        assert client.get("counter") == 5
    for writer, value in ((other, 9), (client, 11)):
        writer.set("counter", value)
        assert [client.get("counter") for _ in range(READS)] == [value] * READS
    client.close()
    other.close()


def test_an_old_copy_never_overwrites_a_newer_one() -> None:
    codec = Codec(JSON)
    old = codec.encode("a", version=1, expires_at_ms=0)
    new = codec.encode("b", version=2, expires_at_ms=0)
    assert copy_is_newer(None, old)
    assert copy_is_newer(old, new)
    assert not copy_is_newer(new, old)
    assert not copy_is_newer(copy_tombstone(3), new)
    assert copy_is_newer(copy_tombstone(1), new)
    assert is_copy_tombstone(copy_tombstone(9)) and not is_copy_tombstone(new)
    assert HotKeys(top=1).spread == 3


def test_a_writer_reads_the_marker_from_another_replica_when_the_first_fails() -> None:
    urls = memory_urls()
    options = {"replicas": 2, "dead_timeout_s": 60.0}
    client = client_in_this_process("sync", urls, {**options, "hot_keys": dict(HOT)})
    other = client_in_this_process("sync", urls, options)
    client.set("viral", "v1")
    for _ in range(3 * READS):
        assert client.get("viral") == "v1"
    first = client.replicas_for("viral")[0]
    memory_store(urls[first].removeprefix("memory://")).unavailable = True
    other.set("viral", "v2")  # the first replica fails: the marker is read from the second
    assert other.down_servers == [first]
    assert [client.get("viral") for _ in range(READS)] == ["v2"] * READS
    client.close()
    other.close()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["redis", "memcached"])
def test_spreading_is_a_view_change_that_a_writer_on_the_old_view_learns(kind: str) -> None:
    # Writes read no spread marker under a view that spreads no key (the default), so the
    # spreading client first publishes a view that allows copies, and copies only once every
    # writer must route by it: a writer still on the old view is refused, refreshes, and then
    # updates the copies (memcached: after the fence's check interval).
    with ExitStack() as stack:
        trio = [stack.enter_context(START[kind]()) for _ in range(3)]
        urls = server_urls(kind, trio)
        other = stack.enter_context(workers())("sync", urls, {"replicas": 1})
        other("set", "viral", "old")
        hot_keys = HotKeys(top=2, spread=3, refresh_every=4)
        hot = ShardedClient(HashRing(list(urls)), urls, hot_keys=hot_keys)
        assert hot.get("viral") == "old" and not hot.view.hot_copies
        deadline = time.monotonic() + 30
        while not hot_keys.active_spread(b"viral"):
            assert time.monotonic() < deadline, "the hot key was never spread"
            assert hot.get("viral") == "old"
            time.sleep(0.05)
        assert hot.view.hot_copies and hot.epoch == 2
        copies = hot.router.copy_names(b"viral", hot_keys.spread)
        assert copies and all(
            hot.server(name).backend.get_many([b"viral"]) for name in copies
        )  # the copies are in place
        other("set", "viral", "new")  # routed by epoch 1: refused, refreshed, copies updated
        assert [hot.get("viral") for _ in range(READS)] == ["new"] * READS
        hot.close()


def test_a_write_reads_no_spread_marker_while_no_key_may_be_spread() -> None:
    with redis_server() as server:
        url = f"redis://{server.address}/0"
        client = ShardedClient(HashRing(["a"]), {"a": url})
        client.set("warm", 1)
        raw = redis.Redis.from_url(url)
        before = raw.info("commandstats")
        for i in range(10):
            client.set(f"key:{i}", i)
        after = raw.info("commandstats")
        assert "cmdstat_mget" not in after or after["cmdstat_mget"] == before["cmdstat_mget"]
        assert after["cmdstat_evalsha"]["calls"] - before["cmdstat_evalsha"]["calls"] == 10
        client.close()
