"""A store knows when it is current: a silent watch never keeps a member answering from an old ring.

The regression runs on a three-member etcd: the member a worker's URL lists first is stopped
(SIGSTOP, as a hung VM or a network that drops packets without a reset), so the worker's watch
stream goes silent while its lease renewals fail over to another member. Another worker joins;
the stalled one must stop answering ``owns`` from the old ring within ``current_within_s``.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest

import ringkit.live
from ringkit.errors import ConfigError
from ringkit.live.currency import Confirmer
from tests.servers import EtcdCluster, etcd_cluster, sigstop

pytestmark = pytest.mark.timeout(120)

KEYS = [f"tenant-{i}" for i in range(200)]


@pytest.fixture
def cluster() -> Iterator[EtcdCluster]:
    with etcd_cluster(3) as running:
        yield running


def _url(cluster: EtcdCluster, first: int, prefix: str) -> str:
    """An etcd:// URL of every member, member `first` listed first."""
    order = [first, *(i for i in range(len(cluster.client_ports)) if i != first)]
    hosts = ",".join(f"127.0.0.1:{cluster.client_ports[i]}" for i in order)
    return f"etcd://{hosts}/{prefix}"


def test_a_stopped_etcd_member_does_not_keep_a_worker_on_the_old_ring(
    cluster: EtcdCluster,
) -> None:
    """Regression: the watch on a SIGSTOPped member went silent, owns() stayed True for 10 s."""
    leader = cluster.leader()
    stalled = next(i for i in range(3) if i != leader)  # a follower, as in the field report
    within_s = 1.0
    # ttl_s 6: a renewal stuck on the stopped member (2 s RPC timeout) must not end the lease,
    # or the worker would stop owning for another reason than the one under test.
    store_a = ringkit.live.connect(_url(cluster, stalled, "currency"), current_within_s=within_s)
    store_b = ringkit.live.connect(_url(cluster, leader, "currency"))
    worker_a = store_a.join("a", ttl_s=6)
    samples: list[tuple[float, str]] = []  # (monotonic time before the call, key) owned by a
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            for key in KEYS:
                started = time.monotonic()
                if worker_a.owns(key):
                    samples.append((started, key))
            time.sleep(0.005)

    sampler = threading.Thread(target=sample)
    try:
        sigstop(cluster.processes[stalled].pid)
        time.sleep(2 * within_s)  # the stalled worker's reads and renewals move elsewhere
        sampler.start()
        joined_at = time.monotonic()
        worker_b = store_b.join("b", ttl_s=6)
        moved = {key for key in KEYS if store_b.snapshot().ring.node_for(key) == "b"}
        # The stalled worker's store catches up: its watch was opened again elsewhere.
        store_a.wait_for(lambda s: "b" in s.ring, timeout_s=15)
        time.sleep(0.2)
    finally:
        stop.set()
        if sampler.is_alive():
            sampler.join()
        os.kill(cluster.processes[stalled].pid, signal.SIGCONT)
    assert moved, "the joining worker took no key: the test proves nothing"
    stale = [(t - joined_at, key) for t, key in samples if key in moved and t > joined_at]
    late = [(round(offset, 3), key) for offset, key in stale if offset > within_s]
    assert not late, f"answered from the old ring after {within_s} s: {late[:5]}"
    # Once caught up it is current again and owns what it kept.
    assert store_a.wait_current(timeout_s=5)
    assert worker_a.owns(next(key for key in KEYS if key not in moved))
    worker_b.close()
    worker_a.close()
    store_a.close()
    store_b.close()


def test_current_within_s_defaults_to_half_the_shortest_ttl() -> None:
    with ringkit.live.connect("memory://currency-default") as store:
        assert store.current_within_s() == 5.0  # no members yet
        member = store.join("a", ttl_s=4)
        store.join("b", ttl_s=3)
        assert store.current_within_s() == 1.5
        assert store.is_current() and member.owns("k", replicas=2)
        assert 0 <= store.confirmed_age_s() <= 1.5


def test_a_store_that_is_not_confirmed_owns_nothing() -> None:
    with ringkit.live.connect("memory://currency-stale", current_within_s=0.4) as store:
        member = store.join("a", ttl_s=5)
        assert member.owns("k")
        # A confirmer that reads nothing: the last confirmation ages past the bound.
        store._confirmer.close()
        time.sleep(0.5)
        assert not store.is_current() and not member.owns("k")
        assert store.confirmed_age_s() > 0.4


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), True, "1"])
def test_a_bad_current_within_s_is_refused(bad: object) -> None:
    with pytest.raises(ConfigError, match="current_within_s must be"):
        ringkit.live.connect("memory://currency-bad", current_within_s=bad)  # type: ignore[arg-type]


class _LaggingOnce:
    """A store whose watch has not delivered the first read's revision, then has."""

    def __init__(self) -> None:
        self.reads = 0
        self.rewatches = 0

    def read_revisions(self, timeout_s: float) -> tuple[int, dict[str, int]]:
        self.reads += 1
        return 7, {}

    def holds(self, revision: int, found: dict[str, int], timeout_s: float) -> bool:
        return self.reads > 1

    def rewatch(self) -> None:
        self.rewatches += 1


def test_a_watch_that_lags_once_is_opened_again_and_read_again_at_once() -> None:
    """Regression: the next read waited for the next round, within_s after the last confirmed
    one, so a watch lagging by within_s / 4 once made the store lapse (and every owner's
    fencing token start again)."""
    store = _LaggingOnce()
    confirmer = Confirmer(store, lambda: 3600.0)  # a next round would come 30 min later
    confirmer.start()
    try:
        assert confirmer.wait_current(timeout_s=30)
        assert (store.reads, store.rewatches) == (2, 1)
    finally:
        confirmer.close()
