"""etcd restored empty under running stores: epochs only go forward, one ring per epoch.

The etcd (one member, or all three of a cluster) is SIGKILLed and started again on empty data
dirs with the same flags (it keeps its cluster id and counts revisions from 1 again), as after
a restore. The running stores notice
when their watch is created again, raise the epoch base above every epoch they held, and move
on as one change; a store that connects afterwards agrees with them at every epoch.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

import ringkit.live
from ringkit.live import Change, Snapshot, Store
from ringkit.live.backend import Backend, Record
from ringkit.live.memory import MemoryBackend
from ringkit.live.opening import open_store_backend
from ringkit.live.restore import restore_reason
from tests.live.test_records import member_json
from tests.servers import EtcdCluster, etcd_cluster, restart_etcd_members

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(params=[1, 3], ids=["1-member", "3-member"])
def etcd_alone(request: pytest.FixtureRequest) -> Iterator[EtcdCluster]:
    """An etcd of its own (it is restored empty): one member, or three restored together."""
    with etcd_cluster(request.param) as cluster:
        yield cluster


class History:
    """Every snapshot a store moved to, in order."""

    def __init__(self, store: Store) -> None:
        self.snapshots: list[Snapshot] = [store.snapshot()]
        self._lock = threading.Lock()
        store.subscribe(self._record)

    def _record(self, change: Change) -> None:
        with self._lock:
            self.snapshots.append(change.new)


def test_a_restore_to_an_empty_etcd_never_moves_an_epoch_back(etcd_alone: EtcdCluster) -> None:
    url = etcd_alone.url("restored")
    stores = [ringkit.live.connect(url) for _ in range(3)]
    histories = [History(store) for store in stores]
    members = [stores[0].join("w1", ttl_s=2), stores[1].join("w2", ttl_s=2)]
    for i in range(6):  # revisions to lose: the restored etcd starts again below them
        stores[2].join(f"gone-{i}", ttl_s=2).leave()
    held = max(store.wait_for(lambda s: set(s.members) == {"w1", "w2"}).epoch for store in stores)

    restart_etcd_members(etcd_alone, list(range(len(etcd_alone.processes))), empty=True)

    # Members find their leases gone and register again; every store follows the new etcd.
    after = [
        store.wait_for(lambda s: s.epoch > held and set(s.active) == {"w1", "w2"}, timeout_s=30)
        for store in stores
    ]
    with ringkit.live.connect(url) as fresh:
        histories.append(History(fresh))
        newest = max(snap.revision for snap in after)
        reached = fresh.wait_for(lambda s: s.revision >= newest).revision
        for store in stores:
            store.wait_for(lambda s: s.revision >= reached)
        # Every store reaches the newest epoch any of them holds (the ring there is checked
        # against the others' below, with every epoch each of them passed through).
        final = max(store.snapshot().epoch for store in [*stores, fresh])
        for store in [*stores, fresh]:
            store.wait_for(lambda s: s.epoch >= final)
    rings: dict[int, object] = {}
    for history in histories:
        epochs = [snap.epoch for snap in history.snapshots]
        assert epochs == sorted(set(epochs)), epochs  # never backwards, never repeated
        for snap in history.snapshots:
            # No two processes hold one epoch with different rings.
            assert rings.setdefault(snap.epoch, snap.ring) == snap.ring, snap
    for member in members:
        member.close()
    for store in stores:
        store.close()


def test_ring_restore_raises_the_epoch_base_for_every_store(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``ringkit ring restore --epoch-above N``: after an offline restore, epochs pass N."""
    from ringkit.cli import main

    with ringkit.live.connect(store_url) as running, running.join("a", ttl_s=5):
        before = running.snapshot()
        assert main(["ring", "restore", "--store", store_url, "--epoch-above", "1000"]) == 0
        assert "the ring is at epoch" in capsys.readouterr().out
        after = running.wait_for(lambda s: s.epoch > 1000)
        assert after.ring == before.ring and after.revision > before.revision
        # Asking for a lower one changes nothing: the base never goes down.
        assert main(["ring", "restore", "--store", store_url, "--epoch-above", "5"]) == 0
        capsys.readouterr()
        with ringkit.live.connect(store_url) as fresh:
            assert fresh.snapshot().epoch > 1000 and fresh.snapshot().ring == after.ring


class RestorableMemory(MemoryBackend):
    """memory:// that can be restored from a backup as etcd is: other records, revisions anew.

    Watches already open are not told (etcd's stay silent until the new revision passes
    theirs), and the cluster id stays the same, as for an etcd re-bootstrapped with its flags.
    """

    def restore(self, records: dict[str, bytes]) -> None:
        with self._lock:
            self._revision, self._keys, self._by_revision = 0, {}, {}
            self._leases = {}
            for key, value in records.items():
                self._write(key, value, 0)


def restorable_ring_of_a_and_b(name: str, prefix: str) -> tuple[RestorableMemory, Store, Snapshot]:
    """A restorable memory:// with members a and b, and a store that holds them."""
    backend = RestorableMemory(name)
    store = Store(backend, prefix, current_within_s=0.4)
    for member in ("a", "b"):
        lease, _ = backend.grant(60)
        assert backend.create(f"{prefix}members/{member}", member_json(member), lease)[0]
    return backend, store, store.wait_for(lambda s: set(s.members) == {"a", "b"})


def test_a_restored_etcd_at_the_stores_revision_does_not_confirm_its_old_records() -> None:
    """The restored etcd answers at the store's own revision, with other records.

    Its revision is no lower than the store's and its cluster id is the same, so only the
    records tell; a store that counted having applied that revision as a confirmation stayed
    current on the lost history, and its members owned (with their old fencing tokens) keys
    that the stores which noticed the restore gave to others.
    """
    backend, store, held = restorable_ring_of_a_and_b("restored-at-the-same-revision", "/r/")
    try:
        assert store.wait_current(timeout_s=5) and held.revision == 2
        # The backup holds only c, at revision 2 too (a record the ring does not follow first).
        backend.restore({"/r/cluster/view": b"{}", "/r/members/c": member_json("c")})
        after = store.wait_for(lambda s: s.epoch > held.epoch, timeout_s=10)
        assert set(after.members) == {"c"}
        assert store.wait_current(timeout_s=5)
    finally:
        store.close()


def test_holding_a_revision_confirms_only_records_that_agree_with_it() -> None:
    with Store(MemoryBackend.named("holds-agree"), "/h/") as store:
        for name in ("a", "b"):
            store.backend.put_unless_newer(f"/h/members/{name}", member_json(name), 2**62)
        store.wait_for(lambda s: s.revision == 2)
        a, b = "/h/members/a", "/h/members/b"
        assert store.holds(2, {a: 1, b: 2}, 1.0)  # the same records
        assert store.holds(1, {a: 1}, 1.0)  # before b was written: the store is ahead
        assert not store.holds(2, {a: 2, b: 1}, 0.1)  # same revision, other history
        assert not store.holds(2, {a: 1}, 0.1)  # b gone at the revision the store holds
        assert not store.holds(1, {}, 0.1)  # a was there at revision 1
        assert not store.holds(3, {a: 1, b: 2, "/h/members/c": 3}, 0.1)  # not applied yet


def test_records_written_again_at_the_same_revisions_under_new_leases_are_a_restore() -> None:
    """Members that register again after a restore, in their first order, repeat the history.

    Their records come back with the same values at the same revisions (and the cluster id is
    the same), so only the leases tell the restored etcd from the one the store followed: etcd
    never grants a lease id twice, across restarts too.
    """

    def register(backend: Backend, prefix: str) -> list[Record]:
        for name in ("a", "b"):
            lease, _ = backend.grant(60)
            assert backend.create(f"{prefix}members/{name}", member_json(name), lease)[0]
        return backend.get_prefix(prefix)[1]

    with etcd_cluster(1) as cluster:
        backend, prefix = open_store_backend(cluster.url("same-revisions"))
        try:
            held = register(backend, prefix)
            restart_etcd_members(cluster, [0], empty=True)
            again = register(backend, prefix)
            assert [(r.key, r.value, r.mod_revision) for r in again] == [
                (r.key, r.value, r.mod_revision) for r in held
            ]
            revision = max(r.mod_revision for r in held)
            reason = restore_reason(
                backend, prefix, revision, {r.key: r for r in held}, lambda key: True
            )
            assert reason is not None and f"{prefix}members/a" in reason, reason
            # Records equal in their leases too are the state the store holds: no restore.
            same = {r.key: r for r in again}
            assert restore_reason(backend, prefix, revision, same, lambda key: True) is None
        finally:
            backend.close()


def test_after_a_restore_to_an_empty_etcd_gainers_wait_out_the_old_rings_leases() -> None:
    """The restored etcd has no members, but the old ring's may still act on the lost history.

    Their stores keep owning until a read of theirs notices the restore (up to
    ``current_within_s``); a store that waited only for the new ring's leases waited for none,
    and its members owned those keys at once: two owners for up to 368 ms in the ownership
    checker's ``restore`` runs.
    """
    backend, store, held = restorable_ring_of_a_and_b("blind-after-an-empty-restore", "/b/")
    try:
        backend.restore({})
        after = store.wait_for(lambda s: s.epoch > held.epoch, timeout_s=10)
        assert not after.members
        # member_json's ttl_s is 5 s: the wait covers it (less the moments since the jump).
        assert store.blind_s() > 3.0, store.blind_s()
    finally:
        store.close()
