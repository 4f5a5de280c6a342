"""The behaviour of a live store, the same for memory:// and etcd:// (both parametrized)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest

import ringkit.live
from ringkit.errors import ConfigError, DuplicateNodeError, ViewConflictError
from ringkit.live import Change, MemberChange
from ringkit.live.backend import Event
from ringkit.movement import diff
from ringkit.nodes import Node
from ringkit.ring import HashRing
from ringkit.strategies.fixed import FixedPartitions

pytestmark = pytest.mark.timeout(60)


def crash(member: ringkit.live.Member) -> None:
    """Stop heartbeating without revoking: the member dies as a SIGKILLed process would."""
    member._closed = True
    member._wake.set()


def test_snapshot_ring_equals_hashring_of_the_members(store_url: str) -> None:
    with ringkit.live.connect(store_url) as store:
        members = [
            store.join("a", ttl_s=2),
            store.join("b", weight=2.0, zone="z1", ttl_s=2),
            store.join("c", zone="z2", data={"addr": "10.0.0.3:80"}, ttl_s=2),
        ]
        snap = store.wait_for(lambda s: len(s.ring) == 3)
        expected = HashRing([Node("a"), Node("b", 2.0, "z1"), Node("c", zone="z2")])
        assert snap.ring == expected
        assert snap.members["c"].data == {"addr": "10.0.0.3:80"}
        assert snap.members["b"].weight == 2.0 and snap.members["b"].zone == "z1"
        for member in members:
            member.close()


def test_heartbeats_never_change_the_epoch(store_url: str) -> None:
    with ringkit.live.connect(store_url) as store:
        # ttl_s=2, not etcd's minimum of 1: a loaded CI machine can stall a renewal for a
        # second, and then the lease truly ends (a new epoch, rightly).
        member = store.join("a", ttl_s=2)
        epoch = store.wait_for(lambda s: "a" in s.ring).epoch
        time.sleep(2.2)  # three renewals (every ttl/3)
        assert store.snapshot().epoch == epoch and member.owns("k")
        member.close()


def test_a_renewal_that_failed_is_tried_again_soon(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not a third of the TTL later: the lease's deadline would pass, and owns() with it."""
    from ringkit.errors import BackendError
    from ringkit.live.member import RENEW_RETRY_S

    with ringkit.live.connect(store_url) as store:
        member = store.join("a", ttl_s=6)  # renewed every 2 s
        calls: list[float] = []
        keepalive = store.backend.keepalive

        def flaky(lease: int) -> float:
            calls.append(time.monotonic())
            if len(calls) == 1:
                raise BackendError("etcd at 127.0.0.1:1 did not answer in time")
            return keepalive(lease)

        monkeypatch.setattr(store.backend, "keepalive", flaky)
        member._wake.set()  # renew now
        deadline = time.monotonic() + 10
        while len(calls) < 2:
            assert time.monotonic() < deadline, calls
            time.sleep(0.01)
        assert calls[1] - calls[0] < RENEW_RETRY_S + 1.0 < 6 / 3
        assert member.owns("k")
        member.close()


def test_a_duplicate_name_is_refused_naming_the_holder(store_url: str) -> None:
    with ringkit.live.connect(store_url) as store, ringkit.live.connect(store_url) as other:
        member = store.join("a", ttl_s=2)
        with pytest.raises(DuplicateNodeError, match=r"member name 'a' must be free.*holder '"):
            other.join("a", ttl_s=2)
        member.close()


def test_a_crashed_members_name_is_refused_until_its_lease_expires(store_url: str) -> None:
    with ringkit.live.connect(store_url) as store:
        crash(store.join("a", ttl_s=1))
        with pytest.raises(DuplicateNodeError, match="lease ends in"):
            store.join("a", ttl_s=1)
        started = time.monotonic()
        store.wait_for(lambda s: "a" not in s.members, timeout_s=5)
        assert time.monotonic() - started < 1 + 2  # etcd raises TTLs to its minimum
        store.join("a", ttl_s=1).close()


def test_bad_options_are_refused(store_url: str) -> None:
    with ringkit.live.connect(store_url) as store:
        with pytest.raises(ConfigError, match="ttl_s must be a number >= 1, got 0"):
            store.join("a", ttl_s=0)
        with pytest.raises(ConfigError, match="weight"):
            store.join("a", weight=0)
        with pytest.raises(ConfigError, match="vnodes must be >= 1"):
            store.join("a", vnodes=0)


def test_states_joining_active_leaving(store_url: str) -> None:
    with ringkit.live.connect(store_url) as store:
        seen: list[tuple[str, ...]] = []
        store.subscribe(lambda change: seen.append(change.new.active))
        member = store.join("a", ready=False, ttl_s=2)
        snap = store.wait_for(lambda s: "a" in s.members)
        assert snap.members["a"].state == "joining" and "a" not in snap.ring
        assert not member.owns("k")
        member.ready()
        assert store.snapshot().members["a"].state == "active" and member.owns("k")
        handed: list[MemberChange] = []
        member.on_change(handed.append)
        member.leave()
        # The leaving epoch was delivered (its arcs handed over) before the lease was dropped.
        assert handed and handed[-1].lost and not handed[-1].gained
        store.wait_for(lambda s: "a" not in s.members)
        assert not member.owns("k")


def test_movement_and_member_arcs_equal_diff_exactly(store_url: str) -> None:
    with ringkit.live.connect(store_url) as store:
        changes: list[Change] = []
        handoffs: dict[str, list[MemberChange]] = {"a": [], "b": [], "c": []}
        store.subscribe(changes.append)
        members = {}
        for name in ("a", "b", "c"):
            members[name] = store.join(name, ttl_s=2)
            members[name].on_change(handoffs[name].append, replicas=2)
        store.wait_for(lambda s: len(s.ring) == 3)
        members["b"].leave()
        store.wait_for(lambda s: len(s.ring) == 2)
        store.wait_delivered(store.snapshot().epoch)
        epochs = [c.new.epoch for c in changes]
        assert epochs == sorted(set(epochs))
        for change in changes:
            old, new = change.old.ring, change.new.ring
            if len(old) and len(new):
                assert change.movement.arcs == diff(old, new).arcs
            for name, seen in handoffs.items():
                for hand in (h for h in seen if h.new_epoch == change.new.epoch):
                    if len(old) and len(new):
                        full = diff(old, new, replicas=2)
                        assert list(hand.gained) == full.gained(name)
                        assert list(hand.lost) == full.lost(name)
        first = changes[0]  # the first join onto an empty ring: everything arrives
        assert first.movement.moved_fraction == 1.0
        assert sum(arc.length for arc in first.movement.gained("a")) == 2**64
        assert {(arc.source, arc.destination) for arc in first.movement.arcs} == {("", "a")}
        for member in members.values():
            member.close()


def test_the_last_leave_is_a_change_too(store_url: str) -> None:
    with ringkit.live.connect(store_url) as store:
        changes: list[Change] = []
        store.subscribe(changes.append)
        member = store.join("a", ttl_s=2)
        ring = store.wait_for(lambda s: "a" in s.ring).ring
        member.leave()
        store.wait_for(lambda s: not s.members)
        store.wait_delivered(store.snapshot().epoch)
        last = next(c for c in changes if len(c.old.ring) and not len(c.new.ring))
        assert [(a.source, a.destination) for a in last.movement.arcs] == [("a", "")]
        assert last.movement.lost("a")[0].length == 2**64 and len(ring) == 1


def test_a_crashed_member_disappears_by_itself(store_url: str) -> None:
    with ringkit.live.connect(store_url) as store:
        a, b = store.join("a", ttl_s=3), store.join("b", ttl_s=1)  # a outlives a stall
        store.wait_for(lambda s: len(s.ring) == 2)
        crash(b)
        started = time.monotonic()
        store.wait_for(lambda s: list(s.ring) == ["a"], timeout_s=5)
        assert time.monotonic() - started < 2 + 1 and a.owns("k") and not b.owns("k")
        a.close()


def test_allocated_tokens_minimise_the_largest_share(store_url: str) -> None:
    with ringkit.live.connect(store_url) as store:
        members = [store.join(n, vnodes=8, allocate=True, ttl_s=2) for n in "abcd"]
        hashed = HashRing(list("abcd"), vnodes=8)
        snap = store.wait_for(lambda s: len(s.ring) == 4)
        assert max(snap.ring.shares().values()) < max(hashed.shares().values())
        for member in members:
            member.close()


def test_two_controllers_racing_to_publish_exactly_one_wins(store_url: str) -> None:
    with ringkit.live.connect(store_url) as one, ringkit.live.connect(store_url) as two:
        epoch = one.snapshot().epoch
        tables = [FixedPartitions(["a", "b"], partitions=16), FixedPartitions(["a", "c"])]
        outcomes: list[object] = []
        gate = threading.Barrier(2)

        def race(store: ringkit.live.Store, table: FixedPartitions) -> None:
            gate.wait()
            try:
                outcomes.append(store.publish(table, expect_epoch=epoch))
            except ViewConflictError as error:
                outcomes.append(error)

        threads = [
            threading.Thread(target=race, args=pair)
            for pair in zip((one, two), tables, strict=True)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        errors = [o for o in outcomes if isinstance(o, ViewConflictError)]
        assert len(errors) == 1 and len(outcomes) == 2
        assert "published at epoch" in str(errors[0])
        snap = two.wait_for(lambda s: s.table)
        assert snap.ring in tables and isinstance(snap.ring, FixedPartitions)


def test_lease_remaining_and_async_changes(store_url: str) -> None:
    import asyncio

    with ringkit.live.connect(store_url) as store:
        member = store.join("a", ttl_s=2)
        assert 0 < store.lease_remaining_s("a") <= 2
        with pytest.raises(ringkit.errors.UnknownNodeError, match="member 'zz' is not in"):
            store.lease_remaining_s("zz")

        async def follow() -> Change:
            async for change in store.changes():
                return change
            raise AssertionError("no change")

        async def main() -> Change:
            task = asyncio.ensure_future(follow())
            await asyncio.sleep(0.05)
            await asyncio.to_thread(store.join, "b", ttl_s=2)
            return await asyncio.wait_for(task, 5)

        change = asyncio.run(main())
        assert "b" in change.new.members
        member.close()


def test_an_allocated_ring_is_published_as_its_tokens(store_url: str) -> None:
    from ringkit.strategies.allocation import AllocatedRing

    with ringkit.live.connect(store_url) as store:
        allocated = AllocatedRing(["a", "b", "c"], tokens=8)
        snap = store.publish(allocated, expect_epoch=store.snapshot().epoch)
        assert snap.table and snap.ring == allocated.ring
        with pytest.raises(ViewConflictError, match=f"published at epoch {snap.epoch}"):
            store.publish(allocated, expect_epoch=snap.epoch - 1)
        with pytest.raises(ConfigError, match="published placement must be"):
            store.publish(ringkit.Modulo(["a"]), expect_epoch=snap.epoch)


def test_async_iteration_ends_when_the_store_closes(store_url: str) -> None:
    import asyncio

    store = ringkit.live.connect(store_url)

    async def main() -> list[Change]:
        seen: list[Change] = []

        async def follow() -> None:
            async for change in store.changes():
                seen.append(change)

        task = asyncio.ensure_future(follow())
        await asyncio.sleep(0.05)
        await asyncio.to_thread(store.join, "a", ttl_s=2)
        await asyncio.to_thread(store.close)
        await asyncio.wait_for(task, 5)
        return seen

    assert [("a" in c.new.members) for c in asyncio.run(main())][:1] == [True]


def test_a_watch_from_now_hands_over_only_the_changes_made_after_it(store_url: str) -> None:
    """``watch(prefix, 0, ...)`` starts at the service's current revision (what a follower of
    release marks opens before its read: etcd syncs such a watch at once)."""
    with ringkit.live.connect(store_url) as store:
        backend, folder = store.backend, store.mark_key("") + "watch-from-now/"
        lease, _ = backend.grant(30)
        assert backend.create(folder + "before", b"1", lease)[0]
        seen: list[str] = []
        arrived = threading.Event()

        def on_events(events: Sequence[Event]) -> None:
            seen.extend(event.key for event in events)
            arrived.set()

        handle = backend.watch(folder, 0, on_events, lambda error: None)
        assert backend.create(folder + "after", b"2", lease)[0]
        assert arrived.wait(10)
        time.sleep(0.2)  # anything else it would hand over has come by now
        assert seen == [folder + "after"]
        handle.cancel()
        backend.revoke(lease)
