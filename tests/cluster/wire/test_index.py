"""The key index stays bounded by the live keys.

Every key ringkit writes on Redis gets an entry in the index's buckets. Keys that
expire or are evicted used to leave their entries behind for ever (0 live keys, 100,000 entries),
and the index, which has no TTL, then pushed real data out under a ``volatile-*`` policy. Now a
range read drops the dead entries it meets, writes sweep a bounded step of the index as they go,
and ``client.sweep_index()`` sweeps it all.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis

from ringkit import HashRing
from ringkit.cluster import ShardedClient
from ringkit.errors import ConfigError
from tests.cluster.helpers import index_entries, new_client
from tests.servers import Server, redis_server


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with redis_server() as started:
        yield started


@pytest.fixture
def raw(server: Server) -> Iterator[redis.Redis]:
    connection = redis.Redis(host=server.host, port=server.port)
    connection.flushdb()
    yield connection
    connection.config_set("maxmemory", 0)
    connection.config_set("maxmemory-policy", "noeviction")
    connection.close()


def _client(server: Server) -> ShardedClient:
    # A generous timeout: 2,000-key writes with their index and sweep on a loaded machine.
    return ShardedClient(HashRing(["s1"]), {"s1": f"redis://{server.address}/0"}, timeout_s=30.0)


def _expired(client: ShardedClient, raw: redis.Redis, count: int) -> None:
    """Write `count` keys with a 1 s TTL and wait until every one has expired."""
    for start in range(0, count, 2_000):
        batch = range(start, min(count, start + 2_000))
        client.set_many({f"session:{i}": {"n": i} for i in batch}, ttl_s=1)
    time.sleep(1.1)
    while raw.exists(f"session:{count - 1}", "session:0"):  # expiry is to the millisecond
        time.sleep(0.05)


def test_sweep_drops_the_entries_of_expired_keys(server: Server, raw: redis.Redis) -> None:
    client = _client(server)
    _expired(client, raw, 20_000)
    assert client.sweep_index() > 0
    assert len(index_entries(raw)) == 0
    client.close()


def test_writes_keep_the_index_bounded_by_live_keys(server: Server, raw: redis.Redis) -> None:
    client = _client(server)
    _expired(client, raw, 20_000)
    for start in range(0, 10_000, 50):  # ordinary writes, no explicit sweep
        client.set_many({f"cart:{i}": i for i in range(start, start + 50)})
    live = 10_000
    assert len(index_entries(raw)) <= live + 1_000, "dead entries were not swept by the writes"
    client.close()


def test_entries_of_evicted_keys_are_swept(server: Server, raw: redis.Redis) -> None:
    client = _client(server)
    raw.config_set("maxmemory-policy", "volatile-lru")
    raw.config_set("maxmemory", int(raw.info("memory")["used_memory"]) + 6_000_000)
    value = "x" * 400
    for start in range(0, 20_000, 500):
        client.set_many({f"page:{i}": value for i in range(start, start + 500)}, ttl_s=3600)
    stored = raw.dbsize()
    assert stored < 15_000, "nothing was evicted: raise the key count"
    client.sweep_index()
    assert len(index_entries(raw)) <= stored  # bookkeeping keys aside, one entry per live key
    assert client.get_many([f"page:{i}" for i in range(20_000)])  # the live keys read back
    client.close()


@pytest.mark.parametrize("flavor", ["sync", "async"])
def test_sweep_index_keeps_live_entries(server: Server, raw: redis.Redis, flavor: str) -> None:
    client = new_client(flavor, HashRing(["s1"]), {"s1": f"redis://{server.address}/0"})
    client.set_many({f"seat:{i}": i for i in range(300)}, ttl_s=1)
    client.set_many({f"fare:{i}": i for i in range(300)})
    time.sleep(1.1)
    while raw.exists("seat:0", "seat:299"):
        time.sleep(0.05)
    assert client.sweep_index() == 300
    assert len(index_entries(raw)) == 300
    client.close()


@pytest.mark.parametrize("gone_every", [50, 2])
def test_a_sweep_finds_every_dead_entry_in_few_commands(
    server: Server, raw: redis.Redis, gone_every: int
) -> None:
    """The sweep asks EXISTS of many keys at once, and of fewer only where some are gone.

    Keys deleted behind ringkit's back (as expiry and eviction do) leave their entries; the
    sweep drops exactly those, with about one command per thousand live entries and a few per
    dead one when few are gone (one per entry before), and never many more than one per entry
    when half are gone.
    """
    client = _client(server)
    keys = [f"fare:{i}" for i in range(3_000)]
    client.set_many(dict.fromkeys(keys, 1))
    gone = keys[::gone_every]
    raw.delete(*gone)
    raw.config_resetstat()
    assert client.sweep_index() == len(gone)
    assert set(index_entries(raw)) == {key.encode() for key in keys} - {k.encode() for k in gone}
    asked = int(raw.info("commandstats")["cmdstat_exists"]["calls"])
    if gone_every == 50:  # 60 gone in 3,000
        assert asked < len(keys) / 4
    else:
        assert asked <= 1.1 * len(keys)
    client.close()


def test_a_range_read_drops_the_dead_entries_it_meets(server: Server, raw: redis.Redis) -> None:
    client = _client(server)
    client.set_many({f"seat:{i}": i for i in range(200)}, ttl_s=1)
    client.set_many({f"fare:{i}": i for i in range(100)})
    time.sleep(1.1)
    while raw.exists("seat:0", "seat:199"):
        time.sleep(0.05)
    index = client.server("s1").backend.index
    space = 2**64
    read = [record for keys in index.pages(0, 0, space, 50) for record in index.dump(keys)]
    assert len(read) == 100  # the whole circle: only the live keys are read
    assert len(index_entries(raw)) == 100
    client.close()


def test_index_keys_is_an_option_of_the_constructor(server: Server, raw: redis.Redis) -> None:
    url = f"redis://{server.address}/0"
    client = ShardedClient(HashRing(["a"]), {"a": url}, index_keys=False)
    assert client.index_keys is False
    client.set_many({f"k{i}": i for i in range(20)})
    client.set("one", 1)
    assert not index_entries(raw)  # no write indexed its key
    client.close()
    indexing = ShardedClient(HashRing(["a"]), {"a": url})
    indexing.set("two", 2)
    assert len(index_entries(raw)) == 1
    indexing.close()
    with pytest.raises(ConfigError, match="index_keys must be True or False, got 'no'"):
        ShardedClient(HashRing(["a"]), {"a": url}, index_keys="no")  # type: ignore[arg-type]
