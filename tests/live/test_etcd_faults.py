"""A three-member etcd cluster losing its leader while members come and go, and a write
whose answer such a loss swallowed."""

from __future__ import annotations

import itertools
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator

import pytest

import ringkit.live
from ringkit.errors import BackendError
from ringkit.live import Snapshot, Store
from ringkit.live.backend import Record, SwapAnswer
from ringkit.live.etcd import RPC_TIMEOUT_S
from ringkit.live.memory import MemoryBackend
from tests.servers import EtcdCluster, etcd_cluster, etcd_server, sigstop, stop

pytestmark = pytest.mark.timeout(240)
TTL_S = 2
#: How long a wait may take before the test fails: generous, for a machine shared by many
#: suites (a condition reached sooner ends the wait sooner).
WAIT_S = 60.0


@pytest.fixture
def cluster() -> Iterator[EtcdCluster]:
    with etcd_cluster(3) as running:
        yield running


def wait_until(condition: Callable[[], bool], what: Callable[[], str]) -> None:
    """Poll `condition` until it holds; fail naming `what` after ``WAIT_S``."""
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"not within {WAIT_S:g} s: {what()}"
        time.sleep(0.05)


def leader_or_none(cluster: EtcdCluster) -> int | None:
    """The leader's index, or None while none answers (electing, or too slow to answer)."""
    try:
        return cluster.leader()
    except RuntimeError:
        return None


def wait_for_leader(cluster: EtcdCluster) -> int:
    """The leader's index, once one answers (within ``WAIT_S``)."""
    found: list[int | None] = [None]

    def answered() -> bool:
        found[0] = leader_or_none(cluster)
        return found[0] is not None

    wait_until(answered, lambda: "an etcd member to answer as the leader")
    assert found[0] is not None
    return found[0]


def test_killing_the_leader_under_churn_drops_no_live_member(cluster: EtcdCluster) -> None:
    url = cluster.url("faults")
    stores = [ringkit.live.connect(url) for _ in range(3)]
    observer = ringkit.live.connect(url)
    seen: list[Snapshot] = []
    observer.subscribe(lambda change: seen.append(change.new))
    members = [store.join(f"m{i}", ttl_s=TTL_S) for i, store in enumerate(stores)]
    observer.wait_for(lambda s: len(s.ring) == 3)
    stop_churn = threading.Event()
    churned: list[int] = []

    def churn() -> None:
        store = ringkit.live.connect(url)
        names = itertools.count()
        while not stop_churn.is_set():
            try:
                member = store.join(f"churn-{next(names)}", ttl_s=TTL_S)
            except ringkit.errors.RingkitError:
                time.sleep(0.05)  # the cluster is electing: try again
                continue
            try:
                member.leave()
                churned.append(1)
            except ringkit.errors.RingkitError:
                # Its "leaving" write failed in the election: end the lease (or let it run
                # out) and go on under a new name rather than wait for this one.
                member.close()
        store.close()

    churner = threading.Thread(target=churn)
    churner.start()
    # Conditions, not sleeps: on a machine shared by other suites a status call or a join can
    # take seconds (cluster.leader() finds no leader when every status call times out).
    wait_until(lambda: len(churned) >= 1, lambda: f"a first churn join and leave ({churned})")
    stop(cluster.processes[wait_for_leader(cluster)])
    killed_at, before = time.monotonic(), len(churned)
    # The members are watched until churn has gone on through the election and past it, and
    # for two TTLs and more after the kill: a member whose renewals had stopped would be gone.
    wait_until(
        lambda: (
            len(churned) >= before + 2
            and time.monotonic() - killed_at > 2 * TTL_S + 1
            and leader_or_none(cluster) is not None
        ),
        lambda: f"a new leader and two churns after the kill ({len(churned) - before} made)",
    )
    stop_churn.set()
    churner.join()
    observer.wait_for(lambda s: set(s.active) == {"m0", "m1", "m2"}, timeout_s=WAIT_S)
    epochs = [snapshot.epoch for snapshot in seen]
    assert epochs == sorted(epochs) and len(set(epochs)) == len(epochs)  # never backwards
    trio = {"m0", "m1", "m2"}
    first = next(i for i, snapshot in enumerate(seen) if trio <= set(snapshot.active))
    for snapshot in seen[first:]:  # once all three were in, none was ever dropped
        assert trio <= set(snapshot.active), snapshot
    assert [m.dropped_count for m in members] == [0, 0, 0]
    # owns() is False while a member's last confirmed renewal is older than its TTL, or its
    # store's last confirmation older than current_within_s, which a leader election on a
    # loaded machine can cause for a while; what matters is that every member, never dropped,
    # owns again once renewals and confirmations go through.
    wait_until(
        lambda: all(m.owns("k", replicas=3) for m in members),
        lambda: (
            "every member to own again: "
            + ", ".join(
                f"{m.name} {m.state}, store current {st.is_current()} "
                f"(confirmed {st.confirmed_age_s():.2f} s ago)"
                for m, st in zip(members, stores, strict=True)
            )
        ),
    )
    for member in members:
        member.close()
    for store in [*stores, observer]:
        store.close()


class LostAnswers(MemoryBackend):
    """memory:// whose next compare-and-swap is committed and then sent again, as etcd's client
    sends a call again on another endpoint when the leader died before answering it."""

    lose_next = False

    def swap(self, key: str, value: bytes, lease: int, mod_revision: int) -> tuple[bool, Record]:
        if self.lose_next:
            self.lose_next = False
            super().swap(key, value, lease, mod_revision)  # committed; its answer is lost
        return super().swap(key, value, lease, mod_revision)


def test_a_leave_whose_answer_was_lost_in_an_election_still_leaves() -> None:
    """The write sent again fails its compare on its own result: the member has left.

    Reported as a lost lease instead, the leave raised and the member's heartbeat went on
    holding its name, so the same name could not join again until the process ended.
    """
    backend = LostAnswers("lost-answer")
    with Store(backend, "/lost/") as store:
        member = store.join("a", ttl_s=5)
        store.wait_for(lambda s: "a" in s.active)
        backend.lose_next = True
        member.leave()
        store.wait_for(lambda s: "a" not in s.members)
        store.join("a", ttl_s=5).close()  # the name is free again


def test_a_swap_sent_to_an_etcd_that_stopped_answering_ends_in_an_error() -> None:
    """A release mark sent without waiting (one attempt) to a hung etcd is answered with a
    BackendError within the call's timeout, so the release thread can take over."""
    with etcd_server() as cluster, ringkit.live.connect(cluster.url("hung")) as store:
        answers: list[SwapAnswer] = []
        done = threading.Event()

        def answered(result: SwapAnswer) -> None:
            answers.append(result)
            done.set()

        sigstop(cluster.processes[0].pid)
        try:
            store.backend.start_swap(store.mark_key("m"), b"v", 0, 0, answered)
            assert done.wait(RPC_TIMEOUT_S + 5)
        finally:
            os.kill(cluster.processes[0].pid, signal.SIGCONT)
        assert len(answers) == 1 and isinstance(answers[0], BackendError), answers
