"""The etcd view store itself on a real etcd: compare-and-swap, keys, bad input, the CLI.

The rebalances under load are in tests/cluster/rebalance/test_etcd.py; the processes in
tests/cluster/views/test_etcd_processes.py.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import redis

import ringkit.live
from ringkit import HashRing
from ringkit.cli import main
from ringkit.cluster import ClusterView, EtcdViewStore, ShardedClient, open_view_store
from ringkit.cluster.values.keys import EPOCH_KEY
from ringkit.cluster.views.stores import AuthoritativeViewStore, FollowedViewStore
from ringkit.errors import BackendError, ConfigError, ViewConflictError
from tests.cluster.helpers import memory_urls
from tests.servers import Server, free_port, redis_server

pytestmark = pytest.mark.timeout(60)


def _view(epoch: int, names: str = "ab", state: str = "stable") -> ClusterView:
    servers = {name: f"memory://etcd-views-{name}" for name in names}
    previous = None if state == "stable" else HashRing(list(names[:-1]))
    return ClusterView(epoch, HashRing(list(names)), servers, previous=previous, state=state)


def test_the_store_is_registered_for_etcd_urls_and_is_authoritative(etcd_url: str) -> None:
    store = open_view_store(etcd_url)
    try:
        assert isinstance(store, EtcdViewStore)
        assert isinstance(store, AuthoritativeViewStore)
        assert isinstance(store, FollowedViewStore)
        assert store.key.endswith("/cluster/view") and store.lock_key.endswith("/cluster/lock")
        assert store.load() is None
    finally:
        store.close()


def test_publish_is_a_compare_and_swap_on_a_growing_epoch(etcd_url: str) -> None:
    store = EtcdViewStore(etcd_url)
    store.publish(_view(3))
    store.publish(_view(3))  # the same view again: a resumed coordinator does that
    assert store.load() == _view(3)
    with pytest.raises(ViewConflictError, match="must hold an older view to publish epoch 2, got"):
        store.publish(_view(2))
    with pytest.raises(ViewConflictError, match="got epoch 3") as conflict:
        store.publish(_view(3, "abc"))
    assert conflict.value.epoch == 3 and conflict.value.server is None
    store.publish(_view(3, "abc"), replace=True)
    store.publish(_view(4, "ab", "moving"))
    held = store.load()
    assert held is not None and (held.epoch, held.state) == (4, "moving")
    store.close()


def test_a_key_that_is_not_a_ringkit_view_is_refused_by_name(etcd_url: str) -> None:
    store = EtcdViewStore(etcd_url)
    store.backend.swap(store.key, b"not json at all", 0, 0)
    with pytest.raises(ConfigError, match=r"cluster/view' on etcd at .* must hold a ringkit"):
        store.load()
    with pytest.raises(ConfigError, match="must hold a ringkit cluster view"):
        store.publish(_view(1))
    urls = memory_urls(2)
    # A client follows it anyway: the bad value is skipped (logged), it keeps its own view.
    client = ShardedClient(HashRing(list(urls)), urls, view_store=etcd_url)
    assert client.epoch == 0
    with pytest.raises(ConfigError, match="must hold a ringkit cluster view"):
        client.refresh_view()
    client.close()
    store.close()


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("etcd://", "needs at least one HOST:PORT"),
        ("etcd://h1:99999/views", "needs a port in"),
        ("etcd://ops@h1:2379/views", "credentials must be user:password"),
        ("etcdx://h1:2379/views", "view store scheme must be one of"),
    ],
)
def test_a_malformed_etcd_url_is_refused(url: str, problem: str) -> None:
    urls = memory_urls(2)
    with pytest.raises(ConfigError, match=problem):
        ShardedClient(HashRing(list(urls)), urls, view_store=url)


def test_a_memory_url_is_not_an_etcd_view_store() -> None:
    with pytest.raises(ConfigError, match="etcd view store URL scheme must be one of etcd, etcds"):
        EtcdViewStore("memory://views")


def test_an_unreachable_etcd_is_a_backend_error_naming_the_host_in_bounded_time() -> None:
    port = free_port()
    urls = memory_urls(2)
    started = time.monotonic()
    with pytest.raises(BackendError, match=rf"etcd at 127\.0\.0\.1:{port} is unreachable"):
        ShardedClient(HashRing(list(urls)), urls, view_store=f"etcd://127.0.0.1:{port}/views")
    assert time.monotonic() - started < 10


def test_a_live_ring_and_a_cache_view_share_one_prefix_without_colliding(
    etcd_url: str,
) -> None:
    live = ringkit.live.connect(etcd_url)
    member = live.join("worker-1", ttl_s=5)
    store = EtcdViewStore(etcd_url)
    store.publish(_view(2))
    before = live.snapshot()
    member2 = live.join("worker-2", ttl_s=5)
    snapshot = live.wait_for(lambda s: "worker-2" in s.ring)
    assert sorted(snapshot.ring) == ["worker-1", "worker-2"]
    assert before.epoch < snapshot.epoch
    assert store.load() == _view(2)
    with store.lock():
        assert sorted(live.snapshot().members) == ["worker-1", "worker-2"]
    for each in (member, member2):
        each.leave()
    live.close()
    store.close()


def test_a_follower_gets_each_new_view_and_stops_when_cancelled(etcd_url: str) -> None:
    store = EtcdViewStore(etcd_url)
    store.publish(_view(1))
    seen: list[int] = []
    following = store.follow(lambda view: seen.append(view.epoch))
    for epoch in (2, 3):
        store.publish(_view(epoch))
    deadline = time.monotonic() + 5
    while seen != [1, 2, 3] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert seen == [1, 2, 3]
    following.cancel()
    store.publish(_view(4))
    time.sleep(0.3)
    assert seen == [1, 2, 3]
    store.close()


# -- ringkit rebalance --view-store ---------------------------------------------------------------


@pytest.fixture(scope="module")
def trio() -> Any:
    from contextlib import ExitStack

    with ExitStack() as stack:
        yield [stack.enter_context(redis_server()) for _ in range(3)]


def _urls(trio: list[Server]) -> dict[str, str]:
    for server in trio:
        redis.Redis(host=server.host, port=server.port).flushdb()
    return {f"s{i + 1}": f"redis://{s.address}/0" for i, s in enumerate(trio)}


def _listing(urls: dict[str, str], names: tuple[str, ...]) -> str:
    return ",".join(f"{name}={urls[name]}" for name in names)


def _cli(*args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(["rebalance", *args, "--no-progress"])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_import_from_servers_round_trip_then_rebalance_from_etcd(
    trio: list[Server], etcd_url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    urls = _urls(trio)
    two = {name: urls[name] for name in ("s1", "s2")}
    client = ShardedClient(HashRing(list(two)), two)  # servers:// (the default store)
    client.set_many({f"k{i}": i for i in range(300)})
    client.remove_server("s2")  # the servers now hold a view at epoch 3 (the first was 1)
    client.close()
    servers = _listing(urls, ("s1", "s2"))
    # Without the import, etcd refuses to start behind the servers.
    status, _, err = _cli(
        "--servers", servers, "--view-store", etcd_url, "--add", f"s3={urls['s3']}",
        capsys=capsys,
    )  # fmt: skip
    assert status == 1 and "import it with" in err and "epoch 3 on the servers" in err
    status, out, _ = _cli(
        "--servers", servers, "--view-store", etcd_url, "--import-from-servers", "--json",
        capsys=capsys,
    )  # fmt: skip
    assert status == 0 and json.loads(out) == {
        "imported": True, "epoch": 3, "view_store": etcd_url,
    }  # fmt: skip
    status, out, _ = _cli(
        "--servers", servers, "--view-store", etcd_url, "--import-from-servers", capsys=capsys
    )
    assert status == 0 and out.startswith("already held: the servers' view at epoch 3")
    # From now on etcd is the authority: no --servers needed.
    status, out, _ = _cli("--view-store", etcd_url, "--add", f"s3={urls['s3']}", capsys=capsys)
    assert status == 0 and out.startswith("done: epoch 5")
    status, out, _ = _cli("--view-store", etcd_url, "--status", "--json", capsys=capsys)
    shown = json.loads(out)
    assert (shown["epoch"], sorted(shown["servers"])) == (5, ["s1", "s3"])
    for name in ("s1", "s3"):
        assert redis.Redis.from_url(urls[name]).get(EPOCH_KEY) == b"5"
    reader = ShardedClient(HashRing(["s1"]), {"s1": urls["s1"]}, view_store=etcd_url)
    assert reader.epoch == 5 and reader.get_many([f"k{i}" for i in range(300)]) == {
        f"k{i}": i for i in range(300)
    }
    reader.close()
    # etcd holds a newer view than the servers: importing theirs is refused.
    store = EtcdViewStore(etcd_url)
    newer = store.load()
    assert newer is not None
    store.publish(ClusterView(9, newer.placement, newer.servers))
    store.close()
    status, _, err = _cli("--view-store", etcd_url, "--import-from-servers", capsys=capsys)
    assert status == 1
    assert "must be at least etcd's epoch 9" in err and "got the servers' epoch 5" in err


def test_the_cli_refuses_an_import_without_an_etcd_store_or_a_view(
    trio: list[Server], etcd_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    urls = _urls(trio)
    servers = _listing(urls, ("s1", "s2"))
    status, _, err = _cli("--servers", servers, "--import-from-servers", capsys=capsys)
    assert status == 1 and "--import-from-servers needs --view-store etcd://" in err
    status, _, err = _cli(
        "--servers", servers, "--view-store", etcd_url, "--import-from-servers", capsys=capsys
    )
    assert status == 1 and "the servers hold no cluster view to import" in err
    status, _, err = _cli("--view-store", etcd_url, "--add", f"s3={urls['s3']}", capsys=capsys)
    assert status == 1 and "holds no cluster view; give --servers" in err


def test_a_lock_whose_lease_is_gone_says_so_before_the_next_step(etcd_url: str) -> None:
    store = EtcdViewStore(etcd_url, lock_ttl_s=2)
    lock = store.lock("stalled-coordinator").acquire()
    lock.check()
    store.backend.revoke(lock._lease)  # what etcd does when a stalled holder's lease runs out
    deadline = time.monotonic() + 5
    while lock.held and time.monotonic() < deadline:
        time.sleep(0.05)
    with pytest.raises(ConfigError, match=r"cluster/lock' must be held .* got it lost"):
        lock.check()
    lock.release()
    with store.lock("next-coordinator") as again:
        assert again.held
    store.close()
