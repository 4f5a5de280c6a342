"""Every client operation on every backend (memory, real redis-server, real memcached)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from ringkit import HashRing, Modulo
from ringkit.cluster import OpEvent, ShardedClient
from ringkit.errors import BackendError, ConfigError
from ringkit.strategies.registry import STRATEGY_NAMES, build_placement
from tests.cluster.helpers import memory_urls

Make = Callable[..., ShardedClient]
New = Callable[..., Any]


def test_get_returns_what_was_stored_with_its_type(make_client: Make) -> None:
    client = make_client()
    values = {
        "bytes": b"\x00\xffraw",
        "str": "héllo",
        "int": 42,
        "negative": -7,
        "object": {"seat": "12A", "legs": [1, 2]},
        "list": [1, "two"],
        "float": 2.5,
        "none-like": [None],
        "digits-as-str": "123",
    }
    for key, value in values.items():
        client.set(key, value)
    for key, value in values.items():
        got = client.get(key)
        assert got == value and type(got) is type(value), key
    assert client.get("missing") is None


def test_get_many_and_set_many_make_one_round_trip_per_server(make_client: Make) -> None:
    client = make_client()
    client.refresh_view()  # settles the view first (its own calls)
    before = {name: snap.calls for name, snap in client.stats().items()}
    items = {f"booking:{i}": i * 10 for i in range(60)}
    client.set_many(items)
    assert {name: snap.calls - before[name] for name, snap in client.stats().items()} == {
        name: 1 for name in ("s1", "s2", "s3")
    }
    found = client.get_many([*items, "booking:missing"])
    assert found == items
    assert all(snap.calls - before[name] == 2 for name, snap in client.stats().items())
    assert sum(snap.hits for snap in client.stats().values()) == 60
    assert sum(snap.misses for snap in client.stats().values()) == 1


def test_set_with_ttl_expires(make_client: Make) -> None:
    client = make_client()
    client.set("short", "lived", ttl_s=1)
    client.set("long", "lived", ttl_s=3600)
    assert client.get("short") == "lived"
    deadline = time.monotonic() + 5
    while client.get("short") is not None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert client.get("short") is None
    assert client.get("long") == "lived"


def test_add_stores_only_when_absent(make_client: Make) -> None:
    client = make_client()
    assert client.add("lock", "first") is True
    assert client.add("lock", "second") is False
    assert client.get("lock") == "first"


def test_incr_decr_count_on_the_server_and_stop_at_zero(make_client: Make) -> None:
    client = make_client()
    assert client.incr("hits") is None
    client.set("hits", 10)
    assert client.incr("hits") == 11
    assert client.incr("hits", 5) == 16
    assert client.decr("hits", 6) == 10
    assert client.decr("hits", 100) == 0
    assert client.get("hits") == 0
    client.set("name", "gatepass")
    with pytest.raises(ValueError, match="b'name' is not a decimal integer"):
        client.incr("name")


def test_touch_and_delete(make_client: Make) -> None:
    client = make_client()
    assert client.touch("absent", 10) is False
    client.set("k", "v", ttl_s=1)
    assert client.touch("k", 3600) is True
    time.sleep(2.1)
    assert client.get("k") == "v"
    assert client.delete("k") is True
    assert client.delete("k") is False
    assert client.get("k") is None


def test_hash_tags_route_related_keys_together(make_client: Make) -> None:
    client = make_client(replicas=2)
    keys = [f"user:{{{7}}}:{part}" for part in ("cart", "profile", "session", "history")]
    assert len({tuple(client.replicas_for(key)) for key in keys}) == 1
    assert client.replicas_for(keys[0]) == client.placement.nodes_for("7", 2)


def test_replicated_write_lands_on_each_replica(make_client: Make) -> None:
    client = make_client(replicas=2, write_quorum=2)
    client.set("booking:42", "paid")
    holders = [
        name for name in ("s1", "s2", "s3") if client.server(name).backend.get_many([b"booking:42"])
    ]
    assert holders == sorted(client.replicas_for("booking:42"))


def test_hooks_see_every_server_call(make_client: Make) -> None:
    events: list[OpEvent] = []
    client = make_client(hooks=[events.append])
    client.refresh_view()  # the first call settles the view: read_view and publish calls
    assert {event.op for event in events} == {"read_view", "publish"}
    events.clear()
    client.set("a", 1)
    client.get("a")
    client.get("b")
    assert [(event.op, event.outcome) for event in events] == [
        ("set_many", "ok"),
        ("get", "hit"),
        ("get", "miss"),
    ]
    assert all(event.elapsed_s >= 0 and event.server in {"s1", "s2", "s3"} for event in events)


def test_bad_values_are_refused_before_anything_is_written(make_client: Make) -> None:
    client = make_client(max_value_bytes=1000)
    with pytest.raises(ConfigError, match="b'big' is 2008 bytes stored, more than max_value"):
        client.set_many({"small": "ok", "big": b"x" * 2000})
    with pytest.raises(TypeError, match="value of type object cannot be stored with the json"):
        client.set_many({"small": "ok", "odd": object()})
    with pytest.raises(ConfigError, match="ttl_s must be a number > 0 or None, got -1"):
        client.set("small", "ok", ttl_s=-1)
    assert client.get("small") is None


def test_bad_keys_are_refused(make_client: Make) -> None:
    client = make_client()
    with pytest.raises(ConfigError, match="no whitespace or control characters, got 'a b'"):
        client.set("a b", 1)
    with pytest.raises(ConfigError, match=r"key must be 1\.\.250 bytes, got 251 bytes"):
        client.get("k" * 251)
    with pytest.raises(TypeError, match="key must be str or bytes, got int"):
        client.get(5)  # type: ignore[arg-type]


@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
def test_every_registered_strategy_routes_with_replicas(strategy: str, new: New) -> None:
    urls = memory_urls()
    placement = build_placement(strategy, list(urls))
    with new(placement, urls, replicas=2, write_quorum=2) as client:
        items = {f"k{i}": i for i in range(40)}
        client.set_many(items)
        assert client.get_many(list(items)) == items
        for key in ("k1", "k7"):
            holders = [n for n in urls if client.server(n).backend.get_many([key.encode()])]
            assert sorted(holders) == sorted(placement.nodes_for(key, 2))


def test_a_ketama_continuum_routes_memcached_style_names(new: New) -> None:
    from ringkit.compat.ketama import ketama

    names = ["10.0.0.1:11211", "10.0.0.2:11211"]
    urls = dict(zip(names, memory_urls(2).values(), strict=True))
    with new(ketama(names), urls) as client:
        client.set("booking:42", "paid")
        assert client.replicas_for("booking:42") == [ketama(names).node_for("booking:42")]
        assert client.get("booking:42") == "paid"


def test_any_placement_routes(urls: dict[str, str], new: New) -> None:
    with new(Modulo(list(urls)), urls) as client:
        client.set_many({f"k{i}": i for i in range(30)})
        assert client.get_many([f"k{i}" for i in range(30)]) == {f"k{i}": i for i in range(30)}
        assert client.replicas_for("k1") == [Modulo(list(urls)).node_for("k1")]


def test_repr_and_errors_never_show_the_password(new: New) -> None:
    urls = {"a": "redis://:hunter2@127.0.0.1:1/0", "b": "memory://repr-b"}
    client = new(HashRing(list(urls)), urls)
    assert "hunter2" not in repr(client) and "redis://:***@127.0.0.1:1/0" in repr(client)
    with pytest.raises(ConfigError, match=r"got 'redis://\*\*\*@host/0'") as caught:
        new(HashRing(["a"]), {"a": "redis://:hunter2@host/0"})
    assert "hunter2" not in str(caught.value)


def test_redis_password_and_db_from_the_url(new: New) -> None:
    import redis

    from tests.servers import redis_server

    with redis_server() as server:
        admin = redis.Redis(host=server.host, port=server.port)
        admin.config_set("requirepass", "hunter2")
        url = f"redis://:hunter2@{server.address}/3"
        with new(HashRing(["a"]), {"a": url}) as client:
            client.set("k", "v")
            assert client.get("k") == "v"
        checker = redis.Redis(host=server.host, port=server.port, password="hunter2", db=3)
        assert checker.exists("k") == 1
        events: list[OpEvent] = []
        wrong = new(
            HashRing(["a"]), {"a": f"redis://:wrong-pw@{server.address}/3"}, hooks=[events.append]
        )
        with pytest.raises(BackendError, match=r"no replica of 1 keys") as caught:
            wrong.get("k")
        assert wrong.stats()["a"].errors == 1
        assert "wrong-pw" not in str(caught.value) and "wrong-pw" not in repr(wrong)
        assert events[0].outcome == "error" and "redis://:***@" in str(events[0].error)
        assert "wrong-pw" not in str(events)
