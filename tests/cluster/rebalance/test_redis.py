"""Online rebalancing on real redis-server processes: nothing lost under load, resume, rollback."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from ringkit import HashRing, Transfer, diff
from ringkit.cluster import ShardedClient
from ringkit.cluster.rebalance.coordinator import RebalanceOptions, Rebalancer
from ringkit.cluster.values.keys import EPOCH_KEY, route_key
from ringkit.cluster.wire.handles import fence
from ringkit.errors import StaleViewError, ViewConflictError
from tests.cluster.helpers import Load, flushed_redis_urls, index_entries, redis_servers
from tests.servers import Server, redis_server

NAMES = ("s1", "s2", "s3", "s4")
KEYS = [f"booking:{i}" for i in range(1500)]


@pytest.fixture(scope="module")
def quartet() -> Iterator[list[Server]]:
    with redis_servers(len(NAMES)) as servers:
        yield servers


@pytest.fixture
def urls(quartet: list[Server]) -> dict[str, str]:
    return flushed_redis_urls(NAMES, quartet)


New = Callable[..., Any]


def _client(
    make: New, urls: dict[str, str], names: tuple[str, ...], **options: Any
) -> ShardedClient:
    """Return a client of `make` (the flavor under test, or ShardedClient) over `names`."""
    chosen = {name: urls[name] for name in names}
    client: ShardedClient = make(HashRing(list(chosen)), chosen, **options)
    return client


def _raw(url: str) -> redis.Redis:
    host, port = url.removeprefix("redis://").removesuffix("/0").split(":")
    return redis.Redis(host=host, port=int(port))


def _check_all(urls: dict[str, str], names: tuple[str, ...], latest: dict[str, int]) -> None:
    fresh = _client(ShardedClient, urls, names)  # the checker is the sync client, for both
    found = fresh.get_many(KEYS)
    missing = [key for key in KEYS if key not in found]
    assert missing == [], f"{len(missing)} keys lost, first {missing[:3]}"
    for key, step in latest.items():
        assert found[key] == {"key": key, "n": step}, key
    fresh.close()


def _seed(make: New, urls: dict[str, str], names: tuple[str, ...]) -> ShardedClient:
    client = _client(make, urls, names)
    client.set_many({key: {"key": key, "n": -1} for key in KEYS})
    return client


def test_add_then_remove_under_load_loses_nothing(urls: dict[str, str], new: New) -> None:
    admin = _seed(new, urls, ("s1", "s2", "s3"))
    load_client = _client(new, urls, ("s1", "s2", "s3"))
    old = admin.view.placement
    slow = RebalanceOptions(keys_per_s=2000)  # a move long enough for the load to meet it
    with Load(load_client, KEYS) as load:
        added = admin.add_server("s4", urls["s4"], options=slow)
        middle = admin.view.placement
        removed = admin.remove_server("s1", options=slow)
        time.sleep(0.2)
    assert load.errors == []
    assert load.failed_reads == []
    assert len(load.latest) > 50
    assert "moving" in load.states  # the load ran while keys moved
    assert added.keys_streamed == diff(old, middle).plan(keys=KEYS).total_keys
    assert removed.keys_streamed == diff(middle, admin.view.placement).plan(keys=KEYS).total_keys
    assert added.keys_deleted == added.keys_streamed
    assert (admin.epoch, admin.view.state) == (5, "stable")  # first 1, then 2 and 2 more
    assert load_client.epoch == 5  # the load's stale client converged
    _check_all(urls, ("s2", "s3", "s4"), load.latest)
    assert _raw(urls["s1"]).dbsize() <= 4  # only ringkit's bookkeeping keys are left


def test_killed_coordinator_resumes_and_nothing_is_lost(urls: dict[str, str], new: New) -> None:
    admin = _seed(new, urls, ("s1", "s2", "s3"))

    class Killed(Exception):
        pass

    def kill(transfer: Transfer, done: int) -> None:
        if done == 10:
            raise Killed

    load_client = _client(new, urls, ("s1", "s2", "s3"))
    old = admin.view.placement
    with Load(load_client, KEYS) as load:
        with pytest.raises(Killed):
            admin.add_server(
                "s4", urls["s4"], options=RebalanceOptions(on_transfer=kill, checkpoint_s=0)
            )
        assert admin.view.state == "moving"
        with pytest.raises(Exception, match="in progress"):
            admin.add_server("s5", urls["s4"])
        # A new coordinator (another process) starts from the servers' view.
        report = Rebalancer(_client(new, urls, ("s1",)).view).resume()
    assert load.errors == [] and load.failed_reads == []
    assert report.outcome == "done" and report.transfers_skipped == 10
    planned = diff(old, old.add("s4")).plan(keys=KEYS).total_keys
    assert report.keys_streamed < planned
    _check_all(urls, NAMES, load.latest)


def test_rollback_keeps_writes_made_during_the_move(urls: dict[str, str], new: New) -> None:
    admin = _seed(new, urls, ("s1", "s2", "s3"))

    def stop(transfer: Transfer, done: int) -> None:
        if done == 5:
            raise RuntimeError("injected failure")

    with pytest.raises(RuntimeError, match="injected"):
        admin.add_server("s4", urls["s4"], options=RebalanceOptions(on_transfer=stop))
    admin.set_many({key: {"key": key, "n": 7} for key in KEYS[:300]})  # lands on new owners
    report = Rebalancer(admin.view).rollback()
    assert report.outcome == "rolled_back"
    _check_all(urls, ("s1", "s2", "s3"), {key: 7 for key in KEYS[:300]})
    assert _raw(urls["s4"]).dbsize() <= 4  # the abandoned server holds no data


def test_failed_server_is_rebuilt_from_surviving_replicas(quartet: list[Server], new: New) -> None:
    with redis_server() as doomed:
        urls = {name: f"redis://{s.address}/0" for name, s in zip(NAMES, quartet, strict=True)}
        urls["s4"] = f"redis://{doomed.address}/0"
        for server in quartet:
            redis.Redis(host=server.host, port=server.port).flushdb()
        admin = _client(new, urls, NAMES, replicas=2)
        admin.set_many({key: key for key in KEYS})
        doomed.process.kill()
        doomed.process.wait()
        report = admin.remove_server("s4")
    assert report.keys_copied > 0
    survivors = ("s1", "s2", "s3")
    fresh = _client(new, urls, survivors, replicas=2)
    fresh.refresh_view()
    for key in KEYS[:300]:
        for name in fresh.replicas_for(key):
            assert fresh.server(name).backend.get_many([key.encode()]), (key, name)
    assert fresh.get_many(KEYS) == {key: key for key in KEYS}


def test_stale_write_after_the_switch_is_redirected(urls: dict[str, str], new: New) -> None:
    admin = _seed(new, urls, ("s1", "s2", "s3"))
    stale = _client(new, urls, ("s1", "s2", "s3"))
    assert stale.get(KEYS[0]) is not None and stale.epoch == 1
    admin.add_server("s4", urls["s4"])
    moved = next(key for key in KEYS if admin.replicas_for(key) == ["s4"])
    stale.set(moved, "after the switch")
    assert stale.epoch == admin.epoch == 3
    assert _client(new, urls, NAMES).get(moved) == "after the switch"
    old_owner = HashRing(["s1", "s2", "s3"]).node_for(route_key(moved.encode()))
    assert _raw(urls[old_owner]).get(moved) is None


def test_server_refuses_a_call_routed_by_an_older_epoch(urls: dict[str, str], new: New) -> None:
    admin = _seed(new, urls, ("s1", "s2", "s3"))
    admin.add_server("s4", urls["s4"])
    stale = fence(_client(new, urls, ("s1",)).server("s1").backend, lambda: 1, lambda key: 0)
    with pytest.raises(StaleViewError, match="at epoch 3, the call was routed by epoch 1"):
        stale.set_many({b"x": b"y"}, None)
    assert _raw(urls["s1"]).get(b"x") is None
    assert int(_raw(urls["s1"]).get(EPOCH_KEY)) == 3
    with pytest.raises(ViewConflictError, match="holds another view at epoch 3"):
        stale.publish(3, b"{}")  # a second coordinator with another view at the same epoch
    assert stale.publish(1, b"{}") == 3  # an older view never moves a server back


def test_reads_converge_with_a_periodic_check(
    urls: dict[str, str], monkeypatch: pytest.MonkeyPatch, new: New
) -> None:
    admin = _seed(new, urls, ("s1", "s2", "s3"))
    reader = _client(new, urls, ("s1", "s2", "s3"))
    assert reader.get(KEYS[0]) is not None and reader.epoch == 1  # settled on the first view
    reader.view_check_s = 0.01
    refreshes: list[int] = []
    read = reader.view_store.read

    def counted(servers: list[str], at_least: int) -> Any:
        refreshes.append(at_least)  # 0: a periodic check; the epoch a server announced: a refusal
        return read(servers, at_least)

    monkeypatch.setattr(reader.view_store, "read", counted)
    admin.add_server("s4", urls["s4"])
    time.sleep(0.02)
    assert reader.get(KEYS[0]) is not None
    assert refreshes == [0]  # the check found the new view before any server had to refuse
    assert reader.epoch == 3 and "s4" in reader.view.placement


def test_ttl_and_foreign_keys_move(urls: dict[str, str], new: New) -> None:
    admin = _client(new, urls, ("s1", "s2", "s3"))
    admin.set_many({key: key for key in KEYS[:400]}, ttl_s=100)
    ring = HashRing(["s1", "s2", "s3", "s4"])
    foreign = next(key for key in KEYS[400:] if ring.node_for(key.encode()) == "s4")
    old_owner = HashRing(["s1", "s2", "s3"]).node_for(foreign.encode())
    _raw(urls[old_owner]).rpush(foreign, b"a", b"b")  # no index entry, not a string
    admin.add_server("s4", urls["s4"])
    new = _raw(urls["s4"])
    moved = [key for key in KEYS[:400] if admin.replicas_for(key) == ["s4"]]
    assert moved and all(0 < new.pttl(key) <= 100_000 for key in moved)
    assert new.lrange(foreign, 0, -1) == [b"a", b"b"]
    assert _raw(urls[old_owner]).exists(foreign) == 0


def test_audit_log_records_every_view_and_plan(
    urls: dict[str, str], tmp_path: Any, new: New
) -> None:
    admin = _seed(new, urls, ("s1", "s2", "s3"))
    path = tmp_path / "audit.jsonl"
    admin.add_server("s4", urls["s4"], options=RebalanceOptions(audit_path=str(path)))
    kinds = [line.split('"kind":"')[1].split('"')[0] for line in path.read_text().splitlines()]
    assert kinds == ["view", "plan", "view", "done"]
    assert len(_raw(urls["s4"]).lrange(b"ringkit:audit", 0, -1)) == 2  # both views


def test_without_the_index_a_rebalance_finds_keys_by_scan(urls: dict[str, str], new: New) -> None:
    admin = _client(new, urls, ("s1", "s2", "s3"))
    admin.index_keys = False
    admin.set_many({key: key for key in KEYS})
    assert not any(index_entries(_raw(urls[name])) for name in ("s1", "s2", "s3"))
    old = admin.view.placement
    report = admin.add_server("s4", urls["s4"])
    assert report.keys_streamed == diff(old, admin.view.placement).plan(keys=KEYS).total_keys
    assert _client(new, urls, NAMES).get_many(KEYS) == {key: key for key in KEYS}
    assert admin.server("s4").backend.index_keys is False  # type: ignore[attr-defined]
