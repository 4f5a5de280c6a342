"""Adapters: ringkit's ring inside pymemcache's HashClient, and the redis-py router."""

from __future__ import annotations

from functools import partial

import pytest
from pymemcache.client.base import Client
from pymemcache.client.hash import HashClient

from ringkit import HashRing, Modulo
from ringkit.cluster import ShardedClient
from ringkit.cluster.adapters import KetamaHasher, PlacementHasher, RedisRouter
from ringkit.errors import ConfigError, UnknownNodeError
from tests.servers import Server


def test_hashclient_with_ringkit_hasher_puts_keys_where_the_ring_says(
    memcached_trio: list[Server],
) -> None:
    addresses = [server.address for server in memcached_trio]
    for server in memcached_trio:
        Client((server.host, server.port)).flush_all(noreply=False)
    client = HashClient([(s.host, s.port) for s in memcached_trio], hasher=PlacementHasher)
    keys = [f"booking:{i}" for i in range(60)]
    client.set_many({key: f"v{key}" for key in keys}, noreply=False)
    ring = HashRing(addresses)
    for server in memcached_trio:
        direct = Client((server.host, server.port))
        held = set(direct.get_many(keys))
        assert held == {key for key in keys if ring.node_for(key) == server.address}
    # A ShardedClient over the same ring reads what HashClient wrote (as raw bytes).
    sharded = ShardedClient(ring, {a: f"memcached://{a}" for a in addresses})
    assert sharded.get("booking:7") == b"vbooking:7"
    sharded.close()


def test_placement_hasher_takes_any_placement_and_names_unknown_nodes() -> None:
    hasher = partial(PlacementHasher, placement=Modulo())()
    hasher.add_node("a:1")
    hasher.add_node("b:1")
    hasher.add_node("b:1")
    assert hasher.get_node("k") == Modulo(["a:1", "b:1"]).node_for("k")
    with pytest.raises(UnknownNodeError, match="node 'c:1' is not in the"):
        hasher.remove_node("c:1")
    hasher.remove_node("a:1")
    assert hasher.get_node("k") == "b:1"


def test_redis_router_groups_multi_key_calls_per_node(redis_trio: list[Server]) -> None:
    urls = {f"r{i}": f"redis://{s.address}/0" for i, s in enumerate(redis_trio)}
    ring = HashRing(list(urls))
    router = RedisRouter.from_urls(ring, urls)
    for client in router.clients.values():
        client.flushdb()
    mapping = {f"user:{{{i % 4}}}:cart": f"c{i}" for i in range(40)}
    router.mset(mapping)
    assert router.mget([*mapping, "absent"]) == [v.encode() for v in mapping.values()] + [None]
    assert router.client_for("user:{2}:cart") is router.clients[ring.node_for(b"2")]
    assert (
        router.client_for("user:{2}:cart").get("user:{2}:cart") == mapping["user:{2}:cart"].encode()
    )
    router.close()


def test_redis_router_refuses_bad_maps() -> None:
    ring = HashRing(["a", "b"])
    with pytest.raises(ConfigError, match="node 'b' has no redis client"):
        RedisRouter(ring, {"a": object()})
    with pytest.raises(UnknownNodeError, match="client 'z' is not a node of the placement"):
        RedisRouter(ring, {"a": object(), "b": object(), "z": object()})
    with pytest.raises(ConfigError, match="needs redis:// URLs, got 'memcached://h:1'"):
        RedisRouter.from_urls(ring, {"a": "memcached://h:1", "b": "memcached://h:2"})


def test_ketama_hasher_matches_libmemcached_ketama() -> None:
    from ringkit.compat.ketama import ketama

    servers = ["10.0.1.1:11211", "10.0.1.2:11211", "10.0.1.3:11212"]
    hasher = KetamaHasher()
    for server in servers:
        hasher.add_node(server)
    layout = ketama(servers, variant="libmemcached")
    keys = [f"booking:{i}" for i in range(500)]
    assert [hasher.get_node(key) for key in keys] == layout.node_for_many(keys)
    hasher.remove_node("10.0.1.2:11211")
    assert hasher.get_node("booking:1") == ketama(
        ["10.0.1.1:11211", "10.0.1.3:11212"], variant="libmemcached"
    ).node_for("booking:1")
    with pytest.raises(UnknownNodeError, match=r"node '10\.0\.1\.2:11211' is not in the continuum"):
        hasher.remove_node("10.0.1.2:11211")
    spy = partial(KetamaHasher, variant="spy")()
    spy.add_node("a:1")
    assert spy.get_node("k") == "a:1"
    assert KetamaHasher().get_node("k") is None


def test_hashclient_with_ketama_hasher_on_real_memcached(memcached_trio: list[Server]) -> None:
    from ringkit.compat.ketama import ketama

    client = HashClient([(s.host, s.port) for s in memcached_trio], hasher=KetamaHasher)
    client.set("seat:12A", b"taken", noreply=False)
    owner = ketama([s.address for s in memcached_trio]).node_for("seat:12A")
    holder = next(s for s in memcached_trio if s.address == owner)
    assert Client((holder.host, holder.port)).get("seat:12A") == b"taken"
