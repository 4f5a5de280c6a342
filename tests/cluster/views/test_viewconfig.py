"""The view is the one source of configuration; fencing survives restarts; refusals publish nothing.

The first client of an empty pool publishes epoch 1, later clients adopt it or are refused naming
both values; ``ringkit rebalance`` takes the replica count from the view; a server restarted empty
accepts no write until it is re-stamped; a rebalance that memcached cannot run is refused before
anything is published.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest
import redis

from ringkit import HashRing
from ringkit.cli import main
from ringkit.cluster import ShardedClient
from ringkit.cluster.views.view import ClusterView
from ringkit.cluster.wire import fence as fence_module
from ringkit.cluster.wire.backends import open_backend
from ringkit.cluster.wire.handles import fence
from ringkit.cluster.wire.urls import parse_url
from ringkit.errors import BackendError, ConfigError, EpochLostError, UnsupportedError
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


def test_refused_memcached_rebalance_publishes_nothing(
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
    assert main(["rebalance", "--servers", listing, "--add", f"s3={memcached_pair['s3']}"]) == 1
    assert {name: _held_view(url) for name, url in base.items()} == before
    assert other.refresh_view().state == "stable" and other.epoch == 1


# -- the view is the one source of configuration -------------------------------------------------


def test_view_is_the_one_source_the_first_client_publishes_epoch_1(new: New) -> None:
    urls = memory_urls()
    first = new(HashRing(list(urls)), urls, replicas=2, serializer="pickle")
    assert first.get("anything") is None  # the first call settles the view
    assert (first.epoch, first.view.replicas, first.view.serializer) == (1, 2, "pickle")
    for url in urls.values():
        held = ClusterView.from_json(_held_view(url) or b"")
        assert (held.epoch, held.replicas, held.serializer) == (1, 2, "pickle")
        assert held.placement == first.placement
    later = new(HashRing(list(urls)), urls, replicas=2, serializer="pickle")
    later.set("k", {"v": 1})
    assert later.epoch == 1 and first.get("k") == {"v": 1}


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"replicas": 1}, "replicas must match .* configured 1, published 2"),
        ({"serializer": "json"}, "serializer must match .* configured 'json', published 'pickle'"),
        ({"placement": HashRing(["s1", "s2", "s3"], vnodes=8)}, "configured 8, published 160"),
        ({"placement": HashRing(["s1", "s2", "s3"], hasher="md5")}, "configured 'md5'"),
        ({"placement": HashRing(["s1", "s2"])}, r"configured \['s1', 's2'\], published"),
    ],
)
def test_view_is_the_one_source_a_mismatching_client_is_refused(
    new: New, options: dict[str, Any], named: str
) -> None:
    urls = memory_urls()
    published = new(HashRing(list(urls)), urls, replicas=2, serializer="pickle")
    published.set("k", "v")
    settings: dict[str, Any] = {"replicas": 2, "serializer": "pickle", **options}
    placement = settings.pop("placement", HashRing(list(urls)))
    servers = {node.name: urls[node.name] for node in placement.nodes}
    other = new(placement, servers, **settings)
    with pytest.raises(ConfigError, match=named):
        other.set("k", "overwritten by a misconfigured client")
    with pytest.raises(ConfigError, match=named):
        other.get("k")
    assert published.get("k") == "v"


def test_view_is_the_one_source_membership_of_a_later_epoch_is_adopted(new: New) -> None:
    urls = memory_urls(4)
    base = {name: urls[name] for name in ("s1", "s2", "s3")}
    admin = new(HashRing(list(base)), base, replicas=2)
    admin.set_many({f"k{i}": i for i in range(100)})
    admin.add_server("s4", urls["s4"])
    assert admin.epoch == 3  # first 1, moving 2, final 3
    old = new(HashRing(list(base)), base, replicas=2)  # configured before the change
    assert old.get_many([f"k{i}" for i in range(100)]) == {f"k{i}": i for i in range(100)}
    assert old.epoch == 3 and "s4" in old.placement
    assert admin.view.serializer == "json"  # the configuration travels with every view
    with pytest.raises(ConfigError, match="configured 'pickle', published 'json'"):
        new(HashRing(list(base)), base, replicas=2, serializer="pickle").get("k1")


# -- ringkit rebalance takes the replica count from the view -------------------------------------


def _copies(servers: list[Server], keys: list[str]) -> dict[str, int]:
    raw = [redis.Redis(host=s.host, port=s.port) for s in servers]
    try:
        return {key: sum(int(r.exists(key)) for r in raw) for key in keys}
    finally:
        for r in raw:
            r.close()


def test_cli_rebalance_keeps_the_clients_replicas(
    capsys: pytest.CaptureFixture[str],
) -> None:
    keys = [f"seat:{i}" for i in range(3000)]
    with ExitStack() as stack:
        servers = [stack.enter_context(redis_server()) for _ in range(3)]
        urls = {f"s{i + 1}": f"redis://{s.address}/0" for i, s in enumerate(servers)}
        base = {name: urls[name] for name in ("s1", "s2")}
        with ShardedClient(HashRing(list(base)), base, replicas=2) as client:
            client.set_many({key: key for key in keys})
        listing = ",".join(f"{name}={url}" for name, url in base.items())
        add = ["--add", f"s3={urls['s3']}", "--no-progress", "--json"]
        assert main(["rebalance", "--servers", listing, *add]) == 0  # the documented command
        capsys.readouterr()
        copies = _copies(servers, keys)
        assert sorted(set(copies.values())) == [2], "every key keeps its 2 copies"
        # A --replicas that contradicts the view is refused, naming both values.
        remove = ["--remove", "s3", "--no-progress"]
        assert main(["rebalance", "--servers", listing, "--replicas", "1", *remove]) == 1
        assert "configured 1, published 2" in capsys.readouterr().err
        servers[0].process.kill()  # one server fails: nothing acknowledged is lost
        servers[0].process.wait()
        with ShardedClient(HashRing(list(urls)), urls, replicas=2) as survivor:
            assert survivor.get_many(keys) == {key: key for key in keys}


def test_cli_rebalance_without_a_view_needs_the_replica_count(
    capsys: pytest.CaptureFixture[str],
) -> None:
    urls = memory_urls(3)
    listing = f"s1={urls['s1']},s2={urls['s2']}"
    assert main(["rebalance", "--servers", listing, "--add", f"s3={urls['s3']}"]) == 1
    assert "give --replicas" in capsys.readouterr().err
    code = ["rebalance", "--servers", listing, "--replicas", "2", "--add", f"s3={urls['s3']}"]
    assert main([*code, "--no-progress"]) == 0
    held = ClusterView.from_json(_held_view(urls["s3"]) or b"")
    assert (held.epoch, held.replicas) == (2, 2)


# -- a server restarted empty takes no write until it is re-stamped ------------------------------


def test_server_restarted_empty_is_restamped_before_a_stale_write(new: New) -> None:
    with ExitStack() as stack:
        servers = [stack.enter_context(redis_server()) for _ in range(4)]
        urls = {f"s{i + 1}": f"redis://{s.address}/0" for i, s in enumerate(servers)}
        base = {name: urls[name] for name in ("s1", "s2", "s3")}
        ring = HashRing(list(base))
        stale = new(ring, base, dead_timeout_s=0.01)  # sync or async: one core
        admin = stack.enter_context(ShardedClient(ring, base))
        keys = [f"k{i}" for i in range(300)]
        admin.set_many({key: "old" for key in keys})
        assert stale.get(keys[0]) == "old" and stale.epoch == 1
        admin.add_server("s4", urls["s4"])
        grown = admin.placement
        key = next(k for k in keys if grown.node_for(k.encode()) == "s4")
        owner = ring.node_for(key.encode())  # the old owner, where the stale client writes
        index = int(owner[1:]) - 1
        servers[index].process.kill()  # kill -9, then restart empty on the same port
        servers[index].process.wait()
        stack.enter_context(redis_server(port=servers[index].port))
        for _ in range(200):  # the stale client notices the restart, then writes
            try:
                stale.set(key, "new")
                break
            except BackendError:
                time.sleep(0.02)
        else:
            pytest.fail("the stale client never wrote")
        assert admin.get(key) == "new"  # acknowledged where up-to-date clients read
        assert stale.epoch == admin.epoch == 3
        restarted = redis.Redis(host=servers[index].host, port=servers[index].port)
        assert restarted.get(key) is None
        assert int(restarted.get("ringkit:epoch") or 0) == 3  # re-stamped from the others
        restarted.close()


@pytest.mark.parametrize("kind", ["memory", "memcached"])
def test_write_to_a_server_without_epoch_is_refused_then_restamped(
    new: New, kind: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    # memcached's gate reads the epoch at most every 0.5 s (best effort): read it every call.
    monkeypatch.setattr(fence_module, "MEMCACHED_FENCE_CHECK_S", 0.0)
    urls = memory_urls() if kind == "memory" else request.getfixturevalue("memcached_pair")
    client = new(HashRing(list(urls)), urls, replicas=3)
    client.set("k", "before")
    # s2 restarts empty: its epoch and view are gone.
    raw = open_backend(parse_url(urls["s2"]), timeout_s=2.0)
    raw.flush()
    assert raw.get_many([b"ringkit:epoch"]) == {}
    with pytest.raises(EpochLostError, match="holds no cluster view"):
        fenced = fence(raw, lambda: 1, lambda key: 0)
        fenced.set_many({b"k": b"x"}, None)
    client.set("k", "after")  # refused on s2, which is re-stamped, then written
    assert raw.get_many([b"ringkit:epoch"]) == {b"ringkit:epoch": b"1"}
    assert raw.get_many([b"k"]) != {}
    raw.close()
