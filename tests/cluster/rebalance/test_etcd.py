"""The cluster view in etcd, on real redis-server processes: nothing lost, watched, locked.

The same load as tests/cluster/rebalance/test_redis.py (readers of every key, writers of their
own keys, each acknowledged write remembered), with ``view_store="etcd://…"``; both client
flavors. A second client that never calls anything must adopt each new epoch within 1 s of its
publication in etcd, from the watch alone (``view_check_s=None``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from ringkit import HashRing
from ringkit.cluster import ClusterView, EtcdViewStore, ShardedClient
from ringkit.cluster.drivers.steps import Steps
from ringkit.cluster.rebalance.coordinator import RebalanceOptions, Rebalancer
from ringkit.cluster.values.keys import EPOCH_KEY
from ringkit.errors import ConfigError
from tests.cluster.helpers import Load, flushed_redis_urls, redis_servers
from tests.servers import Server

pytestmark = pytest.mark.timeout(120)

NAMES = ("s1", "s2", "s3", "s4")
KEYS = [f"booking:{i}" for i in range(1200)]
ROOT = Path(__file__).resolve().parents[3]
New = Callable[..., Any]


@pytest.fixture(scope="module")
def quartet() -> Iterator[list[Server]]:
    with redis_servers(len(NAMES)) as servers:
        yield servers


@pytest.fixture
def urls(quartet: list[Server]) -> dict[str, str]:
    return flushed_redis_urls(NAMES, quartet)


def _raw(url: str) -> redis.Redis:
    host, port = url.removeprefix("redis://").removesuffix("/0").split(":")
    return redis.Redis(host=host, port=int(port))


def _pick(urls: dict[str, str], names: tuple[str, ...]) -> dict[str, str]:
    return {name: urls[name] for name in names}


class _TimedStore(EtcdViewStore):
    """An etcd view store that remembers when each epoch was published."""

    def __init__(self, url: str, **options: Any) -> None:
        super().__init__(url, **options)
        self.published: dict[int, float] = {}

    def publish(self, view: ClusterView, *, replace: bool = False) -> None:
        super().publish(view, replace=replace)
        self.published.setdefault(view.epoch, time.monotonic())


class _Watcher:
    """Records when a client first routes by each epoch (the client itself calls nothing)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.seen: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            self.seen.setdefault(self.client.epoch, time.monotonic())

    def __enter__(self) -> _Watcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        time.sleep(1.0)  # the last epoch gets its full second
        self._stop.set()
        self._thread.join()


def _check_all(urls: dict[str, str], etcd_url: str, latest: dict[str, int]) -> None:
    """Read every key with a fresh client that learns the view from etcd alone."""
    first = _pick(urls, ("s1",))
    fresh = ShardedClient(HashRing(list(first)), first, view_store=etcd_url)
    found = fresh.get_many(KEYS)
    fresh.close()
    missing = [key for key in KEYS if key not in found]
    assert missing == [], f"{len(missing)} keys lost, first {missing[:3]}"
    for key, step in latest.items():
        assert found[key] == {"key": key, "n": step}, key


def test_add_then_remove_under_load_with_the_view_in_etcd(
    urls: dict[str, str], etcd_url: str, new: New
) -> None:
    three = _pick(urls, ("s1", "s2", "s3"))
    store = _TimedStore(etcd_url)
    admin = new(HashRing(list(three)), three, view_store=store)
    admin.set_many({key: {"key": key, "n": -1} for key in KEYS})
    load_client = new(HashRing(list(three)), three, view_store=etcd_url)
    observer = new(HashRing(list(three)), three, view_store=etcd_url)
    assert observer.view_check_s is None  # periodic checks off: the watch alone
    slow = RebalanceOptions(keys_per_s=2500)  # a move long enough for the load to meet it
    with (
        _Watcher(observer) as watcher,
        Load(load_client, KEYS, steps=30_000, deadline_s=40.0) as load,
    ):
        admin.add_server("s4", urls["s4"], options=slow)
        admin.remove_server("s1", options=slow)
        time.sleep(0.2)
    store.close()
    assert load.errors == []
    assert load.failed_reads == []
    assert len(load.latest) > 50
    assert "moving" in load.states
    assert sorted(store.published) == [1, 2, 3, 4]
    for epoch, published in store.published.items():
        assert epoch in watcher.seen, f"the observer never routed by epoch {epoch}"
        assert watcher.seen[epoch] - published < 1.0, epoch
    assert observer.epoch == load_client.epoch == 4
    held = EtcdViewStore(etcd_url)
    view = held.load()
    held.close()
    assert view is not None and (view.epoch, view.state) == (4, "stable")
    assert sorted(view.servers) == ["s2", "s3", "s4"]
    for name in NAMES:  # the servers still learn every epoch: they fence by it
        assert _raw(urls[name]).get(EPOCH_KEY) == b"4", name
    _check_all(urls, etcd_url, load.latest)


class _ReadOnly:
    """The etcd store without its watch: a client that learns views only when refused."""

    def __init__(self, store: EtcdViewStore) -> None:
        self.store, self.url = store, store.url

    def read(self, servers: list[str], at_least: int) -> Steps[ClusterView | None]:
        return self.store.read(servers, at_least)


def test_a_stale_client_is_refused_by_a_server_and_reads_the_new_view_from_etcd(
    urls: dict[str, str], etcd_url: str, new: New
) -> None:
    two = _pick(urls, ("s1", "s2"))
    admin = new(HashRing(list(two)), two, view_store=etcd_url)
    admin.set_many({key: key for key in KEYS[:300]})
    store = EtcdViewStore(etcd_url)
    stale = new(HashRing(list(two)), two, view_store=_ReadOnly(store))
    admin.add_server("s3", urls["s3"])
    assert stale.epoch == 0  # it did not follow the watch
    stale.set_many({key: f"new-{key}" for key in KEYS[:300]})  # refused, refreshed, retried
    assert stale.epoch == 2
    assert admin.get_many(KEYS[:300]) == {key: f"new-{key}" for key in KEYS[:300]}
    store.close()


def _interrupt_after(count: int) -> Callable[[Any, int], None]:
    def hook(transfer: Any, done: int) -> None:
        if done >= count:
            raise RuntimeError("coordinator interrupted")

    return hook


def test_an_interrupted_rebalance_is_resumed_or_rolled_back_from_etcd(
    urls: dict[str, str], etcd_url: str
) -> None:
    two = _pick(urls, ("s1", "s2"))
    client = ShardedClient(HashRing(list(two)), two, view_store=etcd_url)
    client.set_many({key: key for key in KEYS})
    store = EtcdViewStore(etcd_url)
    cut = RebalanceOptions(checkpoint_s=0, on_transfer=_interrupt_after(5))
    with pytest.raises(RuntimeError, match="interrupted"):
        client.add_server("s3", urls["s3"], options=cut)
    held = store.load()
    assert held is not None and (held.epoch, held.state) == (1, "moving")
    assert store.backend.get_prefix(store.lock_key)[1] == []  # released on the way out
    # A new coordinator starts from etcd alone (its own view is the stale epoch-0 one).
    resumer = Rebalancer(ClusterView(0, HashRing(list(two)), two), view_store=store)
    report = resumer.resume()
    resumer.close()
    assert (report.outcome, report.epoch) == ("done", 2)
    assert report.transfers_skipped >= 5
    assert client.get_many(KEYS) == {key: key for key in KEYS}
    with pytest.raises(RuntimeError, match="interrupted"):
        client.add_server("s4", urls["s4"], options=cut)
    back = Rebalancer(ClusterView(0, HashRing(list(two)), two), view_store=store)
    report = back.rollback()
    back.close()
    assert (report.outcome, report.epoch) == ("rolled_back", 5)  # moving 3, back 4, 5
    final = store.load()
    assert final is not None and sorted(final.servers) == ["s1", "s2", "s3"]
    assert client.get_many(KEYS) == {key: key for key in KEYS}
    client.close()
    store.close()


def test_two_coordinators_at_once_one_gets_the_lock_the_other_is_told_who(
    urls: dict[str, str], etcd_url: str
) -> None:
    two = _pick(urls, ("s1", "s2"))
    seed = ShardedClient(HashRing(list(two)), two, view_store=etcd_url)  # nothing on servers
    seed.set_many({key: key for key in KEYS[:400]})
    seed.close()
    inside, leave = threading.Event(), threading.Event()

    def hold(transfer: Any, done: int) -> None:
        inside.set()
        leave.wait(30)

    first_store, second_store = EtcdViewStore(etcd_url), EtcdViewStore(etcd_url)
    first = Rebalancer(
        ClusterView(0, HashRing(list(two)), two),
        options=RebalanceOptions(on_transfer=hold),
        view_store=first_store,
    )
    second = Rebalancer(ClusterView(0, HashRing(list(two)), two), view_store=second_store)
    outcome: list[Any] = []
    thread = threading.Thread(target=lambda: outcome.append(first.add("s3", urls["s3"])))
    thread.start()
    try:
        assert inside.wait(20)
        holder = f"{os.uname().nodename}:{os.getpid()}"
        with pytest.raises(ConfigError, match=f"held by '{holder}' since") as refused:
            second.add("s4", urls["s4"])
        assert "cluster/lock" in str(refused.value)
        with pytest.raises(ConfigError, match="held by"):
            second.resume()
    finally:
        leave.set()
        thread.join()
    assert outcome[0].outcome == "done"
    assert first_store.backend.get_prefix(first_store.lock_key)[1] == []
    report = second.add("s4", urls["s4"])  # free again
    assert report.epoch == 4
    for item in (first, second, first_store, second_store):
        item.close()


_HOLD_LOCK = """
import sys, time
from ringkit.cluster import EtcdViewStore
store = EtcdViewStore(sys.argv[1], lock_ttl_s=2)
store.lock("doomed-coordinator").acquire()
print("locked", flush=True)
time.sleep(120)
"""


def test_the_lock_of_a_coordinator_that_died_expires_with_its_lease(etcd_url: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    process = subprocess.Popen(
        [sys.executable, "-c", _HOLD_LOCK, etcd_url], env=env, stdout=subprocess.PIPE
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == b"locked"
        store = EtcdViewStore(etcd_url, lock_ttl_s=2)
        with pytest.raises(ConfigError, match="held by 'doomed-coordinator'"):
            store.lock().acquire()
        os.kill(process.pid, signal.SIGKILL)
        killed = time.monotonic()
        while True:
            try:
                lock = store.lock().acquire()
                break
            except ConfigError:
                assert time.monotonic() - killed < 10, "the dead holder's lease never expired"
                time.sleep(0.2)
        assert lock.held
        lock.release()
        store.close()
    finally:
        process.kill()
        process.wait()
