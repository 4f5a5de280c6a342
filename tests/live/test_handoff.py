"""Exclusive handoff: a gainer owns only once every other member has released the epoch.

Run on memory:// and a real etcd (``store_url``). Each test holds a loser's ``on_change`` (its
release) and checks that the gainer does not own the moved keys meanwhile, the property that
the default mode does not have (there the gainer owns as soon as its own watch delivers).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

import pytest

import ringkit.live
from ringkit.errors import BackendError, ConfigError
from ringkit.live import MemberChange, Store
from ringkit.live.backend import Event, Record, SwapAnswer
from ringkit.live.marks import decode_mark, encode_mark
from ringkit.live.memory import MemoryBackend

pytestmark = pytest.mark.timeout(60)

KEYS = [f"tenant-{i}" for i in range(200)]


def wait_until(
    condition: Callable[[], bool], timeout_s: float = 10.0, what: Callable[[], object] = str
) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"condition not reached in time: {what()}"
        time.sleep(0.01)


def stored_marks(store: ringkit.live.Store) -> dict[str, int]:
    """The release marks in the service now: member name -> epoch."""
    folder = store.mark_key("")
    _, records = store.backend.get_prefix(folder)
    return {r.key[len(folder) :]: decode_mark(r.value, r.key[len(folder) :]) for r in records}


def reported_up_to(member: ringkit.live.Member, epoch: int) -> bool:
    """Whether an exclusive member's ``on_change`` has been told what it owns at `epoch`.

    Its floor reaches `epoch` on its dispatcher thread in the call that reports the arcs, so
    any later change is relayed after that report.
    """
    handoff = member._handoff
    assert handoff is not None
    return handoff._floor >= epoch


@contextlib.contextmanager
def three_stores(url: str) -> Iterator[tuple[ringkit.live.Store, ...]]:
    """Three stores on `url`, as three processes would hold them."""
    with (
        ringkit.live.connect(url) as first,
        ringkit.live.connect(url) as second,
        ringkit.live.connect(url) as third,
    ):
        yield first, second, third


def hold(gate: threading.Event, change: MemberChange) -> None:
    """A release that takes until `gate` is set (at most 10 s): work on lost arcs finishing."""
    if change.lost:
        gate.wait(10)


def test_a_gainer_owns_only_after_the_loser_released(store_url: str) -> None:
    with ringkit.live.connect(store_url) as store_a, ringkit.live.connect(store_url) as store_b:
        a = store_a.join("a", ttl_s=5, handoff="exclusive")
        assert all(a.owns(key) for key in KEYS)  # alone: nobody to wait for
        release = threading.Event()
        lost_by_a: list[MemberChange] = []

        def hand_over(change: MemberChange) -> None:
            if change.lost:
                lost_by_a.append(change)
                release.wait(10)  # a's work on the lost tenants is still finishing

        a.on_change(hand_over)
        gained_at: list[float] = []
        b = store_b.join("b", ttl_s=5, handoff="exclusive")
        b.on_change(lambda change: gained_at.append(time.monotonic()) if change.gained else None)
        moved = [key for key in KEYS if store_b.snapshot().ring.node_for(key) == "b"]
        assert moved
        wait_until(lambda: bool(lost_by_a))
        time.sleep(0.3)  # b's store has long applied the epoch; a has not released it
        assert not any(b.owns(key) for key in moved) and not gained_at
        assert not any(a.owns(key) for key in moved)  # the loser stopped at once
        released = time.monotonic()
        release.set()
        wait_until(lambda: all(b.owns(key) for key in moved))
        wait_until(lambda: bool(gained_at))
        assert gained_at[0] >= released  # gained arcs are reported only once owned
        assert not any(a.owns(key) for key in moved)
        b.leave()
        wait_until(lambda: all(a.owns(key) for key in KEYS))


def test_an_arc_is_owned_only_once_on_change_has_been_told(store_url: str) -> None:
    """``owns`` turns True for a gained arc in the dispatcher call that reports it.

    Before, it turned True as soon as the store read the others' marks, while the report
    waited behind the store's other subscribers: an arc taken away again meanwhile was owned
    without its member's callback ever hearing of it.
    """
    with three_stores(store_url) as (store_a, store_b, store_c):
        a = store_a.join("a", ttl_s=5, handoff="exclusive")
        release = threading.Event()
        a.on_change(lambda change: hold(release, change))
        b = store_b.join("b", ttl_s=5, handoff="exclusive")
        gained: list[MemberChange] = []
        b.on_change(lambda change: gained.append(change) if change.gained else None)
        joined = store_b.snapshot().epoch
        moved = [key for key in KEYS if store_b.snapshot().ring.node_for(key) == "b"]
        assert moved
        busy = threading.Event()
        store_b.subscribe(lambda change: busy.wait(10))  # b's dispatcher is held up from here
        c = store_c.join("c", ttl_s=5, ready=False)  # a new epoch for b's store to deliver
        store_b.wait_for(lambda s: "c" in s.members)
        release.set()  # a releases: its mark passes b's join
        wait_until(lambda: stored_marks(store_b).get("a", -1) >= joined)
        time.sleep(0.3)  # b's store has read a's mark by now
        assert not any(b.owns(key) for key in moved) and not gained
        busy.set()
        wait_until(lambda: all(b.owns(key) for key in moved))
        wait_until(lambda: bool(gained))  # told in the call that made them owned
        assert gained[0].new_epoch >= joined
        for member in (a, b, c):
            member.close()


def test_every_other_member_must_release_not_only_the_loser(store_url: str) -> None:
    """A → B at E1, B → C at E2: C must not own while a slow A has not released E1 or E2."""
    with three_stores(store_url) as (store_a, store_b, store_c):
        a = store_a.join("a", ttl_s=5, handoff="exclusive")
        release = threading.Event()
        a.on_change(lambda change: hold(release, change))
        b = store_b.join("b", ttl_s=5, handoff="exclusive")
        c = store_c.join("c", ttl_s=5, handoff="exclusive")
        ring = store_c.snapshot().ring
        of_c = [key for key in KEYS if ring.node_for(key) == "c"]
        time.sleep(0.3)
        assert not any(c.owns(key) for key in of_c)
        release.set()
        wait_until(lambda: all(c.owns(key) for key in of_c))
        for key in KEYS:  # at most one owner once settled
            assert sum(m.owns(key) for m in (a, b, c)) <= 1
        for member in (a, b, c):
            member.close()


def test_a_release_that_hangs_revokes_the_losers_lease(store_url: str) -> None:
    with ringkit.live.connect(store_url) as store_a, ringkit.live.connect(store_url) as store_b:
        a = store_a.join("a", ttl_s=2, handoff="exclusive", release_timeout_s=1)
        never = threading.Event()
        a.on_change(lambda change: hold(never, change))
        # a's callback must have been told of its arcs before b joins. owns() turns True as
        # soon as the marks are read; the report follows on a's dispatcher thread, and on a
        # loaded machine it came after b's join: it then covered only the arcs a keeps, so
        # a had nothing to release and rightly never gave up.
        wait_until(lambda: reported_up_to(a, store_a.snapshot().epoch), timeout_s=30)
        assert all(a.owns(key) for key in KEYS)
        b = store_b.join("b", ttl_s=2, handoff="exclusive")
        # a gives up after 1 s: its lease is revoked, its record goes, b owns everything.
        wait_until(
            lambda: all(b.owns(key) for key in KEYS),
            timeout_s=30,
            what=lambda: (
                a.error,
                store_b.snapshot(),
                store_b.settled_epoch("b"),
                store_b.is_current(),
                b.state,
            ),
        )
        assert a.error is not None and "release_timeout_s" in str(a.error)
        assert not any(a.owns(key) for key in KEYS)
        never.set()
        again = store_a.join("a", ttl_s=2, handoff="exclusive")  # it may join again
        wait_until(lambda: any(again.owns(key) for key in KEYS), timeout_s=30)
        again.close()
        b.close()


def test_replicas_are_fixed_at_join(store_url: str) -> None:
    with ringkit.live.connect(store_url) as store:
        member = store.join("a", ttl_s=5, handoff="exclusive", replicas=2)
        assert member.owns("k") and member.owns("k", replicas=2) and member.replicas == 2
        with pytest.raises(ConfigError, match="replicas of an exclusive member must be the 2"):
            member.owns("k", replicas=1)
        with pytest.raises(ConfigError, match="replicas of an exclusive member must be the 2"):
            member.on_change(lambda change: None, replicas=3)
        member.close()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"handoff": "strict"}, "handoff must be one of default, exclusive, got 'strict'"),
        ({"replicas": 0}, "replicas must be an int >= 1, got 0"),
        ({"release_timeout_s": 0}, "release_timeout_s must be a number > 0 or None, got 0"),
    ],
)
def test_bad_handoff_options_are_refused(options: dict[str, object], message: str) -> None:
    store = ringkit.live.connect("memory://handoff-bad")
    with pytest.raises(ConfigError, match=message):
        store.join("a", ttl_s=5, **options)  # type: ignore[arg-type]
    store.close()


@pytest.mark.parametrize("handoff", ["default", "exclusive"])
def test_fencing_tokens_grow_from_one_owner_to_the_next(store_url: str, handoff: str) -> None:
    # A store not confirmed current for a moment rightly ends every interval: one confirming
    # round whose watch lagged by a quarter of current_within_s (half the TTL) did, at load 45
    # on 2 cores. A long TTL gives that round seconds; a lapse all the same is told apart below.
    with ringkit.live.connect(store_url) as store_a, ringkit.live.connect(store_url) as store_b:
        a = store_a.join("a", ttl_s=30, handoff=handoff)
        first = {key: a.fencing_token(key) for key in KEYS}
        join_epoch = store_a.snapshot().epoch
        assert set(first.values()) == {join_epoch}
        b = store_b.join("b", ttl_s=30, handoff=handoff)
        moved = [key for key in KEYS if store_b.snapshot().ring.node_for(key) == "b"]
        wait_until(lambda: all(b.owns(key) for key in moved), timeout_s=30)
        wait_until(lambda: not any(a.owns(key) for key in moved), timeout_s=30)
        second = {key: b.fencing_token(key) for key in moved}
        assert all(a.fencing_token(key) is None for key in moved)
        assert all(token is not None and token > join_epoch for token in second.values())
        kept = [key for key in KEYS if key not in moved]
        kept_tokens = {a.fencing_token(key) for key in kept}
        # Uninterrupted: the join's epoch, or the epoch a's store became current again at.
        assert kept_tokens == {max(join_epoch, store_a.resumed_epoch())}
        b.leave()
        wait_until(lambda: all(a.owns(key) for key in moved), timeout_s=30)
        for key in moved:
            token = a.fencing_token(key)
            assert token is not None and token > second[key]
        assert all(b.fencing_token(key) is None for key in KEYS)
        a.close()


def test_a_mark_overwritten_by_hand_is_written_again(store_url: str) -> None:
    """Without its mark the others would stop waiting for the member: it writes it again."""
    with ringkit.live.connect(store_url) as store:
        a = store.join("a", ttl_s=5, handoff="exclusive")
        wait_until(lambda: store.mark_of("a") is not None)
        store.backend.put_unless_newer(store.mark_key("a"), b'{"name": "a", "epoch": -1}', 2**62)
        wait_until(lambda: store.mark_of("a") == (store.snapshot().epoch, a.info.lease))
        store.backend.delete(store.mark_key("a"))
        wait_until(lambda: store.mark_of("a") == (store.snapshot().epoch, a.info.lease))
        a.close()


def test_the_first_mark_is_written_with_the_member_record(store_url: str) -> None:
    """One transaction: no store sees the record without the mark, and a join costs one write."""
    with ringkit.live.connect(store_url) as store:
        a = store.join("a", ttl_s=5, handoff="exclusive")
        _, records = store.backend.get_prefix(store.prefix)
        created = {record.key: (record.create_revision, record.lease) for record in records}
        assert created[store.mark_key("a")] == created[store.member_key("a")]
        assert created[store.member_key("a")][1] == a.info.lease
        a.close()


def test_a_member_that_keeps_releasing_under_steady_changes_keeps_its_lease(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its mark trails the latest epoch for 4 s, but no epoch waits 1.5 s: it does not give up.

    Each mark write takes 0.3 s (a slow etcd) while the ring changes every tenth of a second,
    as when many processes start together: every release completes, the mark never catches up.
    """
    with ringkit.live.connect(store_url) as store_a, ringkit.live.connect(store_url) as store_b:
        a = store_a.join("a", ttl_s=5, handoff="exclusive", release_timeout_s=1.5)
        swap, start_swap = store_a.backend.swap, store_a.backend.start_swap

        def slow_swap(key: str, value: bytes, lease: int, mod_revision: int) -> object:
            if key == store_a.mark_key("a"):
                time.sleep(0.3)
            return swap(key, value, lease, mod_revision)

        def slow_start_swap(key: str, *args: object) -> None:
            # A mark sent where the change was applied: its answer comes 0.3 s later.
            threading.Timer(0.3, start_swap, (key, *args)).start()

        monkeypatch.setattr(store_a.backend, "swap", slow_swap)
        monkeypatch.setattr(store_a.backend, "start_swap", slow_start_swap)
        trailed = 0
        ends = time.monotonic() + 4
        while time.monotonic() < ends:
            store_b.join(f"c{trailed}", ttl_s=5).leave()
            mark = store_a.mark_of("a")
            trailed += mark is not None and mark[0] < store_a.snapshot().epoch
            time.sleep(0.02)
        assert trailed >= 5  # the mark did trail the ring (else the test proves nothing)
        assert a.error is None, a.error
        wait_until(lambda: store_a.mark_of("a") == (store_a.snapshot().epoch, a.info.lease))
        assert a.state == "active"
        a.close()


@pytest.mark.parametrize("replicas", [1, 2])
def test_owns_many_answers_as_owns_while_a_release_is_pending(
    store_url: str, replicas: int
) -> None:
    keys = [*KEYS, b"bytes", 7]
    with ringkit.live.connect(store_url) as store_a, ringkit.live.connect(store_url) as store_b:
        a = store_a.join("a", ttl_s=5, handoff="exclusive", replicas=replicas)
        release = threading.Event()
        a.on_change(lambda change: hold(release, change))
        b = store_b.join("b", ttl_s=5, handoff="exclusive", replicas=replicas)
        c = store_b.join("c", ttl_s=5, handoff="exclusive", replicas=replicas)

        def marked(store: ringkit.live.Store, names: str) -> bool:
            # Read from etcd: a store follows the others' marks only while a member waits.
            epoch, marks = store.snapshot().epoch, stored_marks(store)
            return all(marks.get(name, -1) == epoch for name in names)

        # Still until a releases: b and c own only what no unreleased ring moved.
        def agree(member: ringkit.live.Member) -> bool:
            # Asked again if a store's confirmation lapsed between the two (a loaded machine).
            return member.owns_many(keys) == [member.owns(key) for key in keys]

        wait_until(lambda: marked(store_a, "bc") and marked(store_b, "bc"))
        for member in (a, b, c):
            wait_until(lambda member=member: agree(member), timeout_s=5)
        release.set()
        wait_until(lambda: marked(store_a, "abc") and marked(store_b, "abc"))
        for member in (a, b, c):
            wait_until(lambda member=member: agree(member), timeout_s=5)
        assert a.owns_many([]) == []
        for member in (a, b, c):
            member.close()


def test_a_member_without_callbacks_releases_without_waiting_for_other_subscribers(
    store_url: str,
) -> None:
    """Its mark waits for its own on_change calls only: it has none, a slow logger is no reason."""
    with ringkit.live.connect(store_url) as store_a, ringkit.live.connect(store_url) as store_b:
        a = store_a.join("a", ttl_s=5, handoff="exclusive")
        logged = threading.Event()
        store_a.subscribe(lambda change: logged.wait(10))  # e.g. a slow log shipper
        b = store_b.join("b", ttl_s=5, handoff="exclusive")
        moved = [key for key in KEYS if store_b.snapshot().ring.node_for(key) == "b"]
        wait_until(lambda: all(b.owns_many(moved)))
        assert not logged.is_set() and not any(a.owns_many(moved))
        logged.set()
        a.close()
        b.close()


def test_an_earlier_mark_of_its_own_delivered_late_is_not_written_again(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The watch may deliver a member's earlier mark after its later write was acknowledged."""
    with ringkit.live.connect(store_url) as store:
        a = store.join("a", ttl_s=5, handoff="exclusive")
        wait_until(lambda: store.mark_of("a") == (store.snapshot().epoch, a.info.lease))
        writes: list[str] = []
        swap = store.backend.swap

        def counted(key: str, value: bytes, lease: int, mod_revision: int) -> object:
            writes.append(key)
            return swap(key, value, lease, mod_revision)

        monkeypatch.setattr(store.backend, "swap", counted)
        revision = store.backend.get_prefix("/none/")[0] + 1  # the next one
        late = Event("put", store.mark_key("a"), encode_mark("a", 0), revision, a.info.lease)
        # As its mark's watch hands it over: the mark a wrote at epoch 0.
        if store._ledger.apply_marks([late]):
            store._marks_changed()
        time.sleep(0.3)  # the release thread looks every 50 ms
        assert writes == []
        a.close()


# -- marks reach only the members that wait for them ---------------------------------------------


def mark_events(store: ringkit.live.Store) -> list[str]:
    """Record the keys of every release mark event the store's watches hand over from now on."""
    keys: list[str] = []
    apply = store._ledger.apply_marks

    def counted(events: list[Event]) -> bool:
        keys.extend(event.key for event in events)
        return apply(events)

    store._ledger.apply_marks = counted  # type: ignore[method-assign]
    return keys


def test_a_gainer_follows_the_marks_while_it_waits_and_no_longer(store_url: str) -> None:
    with ringkit.live.connect(store_url) as store_a, ringkit.live.connect(store_url) as store_b:
        a = store_a.join("a", ttl_s=5, handoff="exclusive")
        release = threading.Event()
        a.on_change(lambda change: hold(release, change))
        b = store_b.join("b", ttl_s=5, handoff="exclusive")
        moved = [key for key in KEYS if store_b.snapshot().ring.node_for(key) == "b"]
        seen = mark_events(store_b)
        time.sleep(0.3)
        assert store_b.marks.fresh()  # b waits for a: its store follows every mark
        assert not any(b.owns_many(moved))
        release.set()
        wait_until(lambda: all(b.owns_many(moved)))
        assert store_a.mark_key("a") in seen  # a's release reached b through the watch
        wait_until(lambda: not store_b.marks.fresh())  # nothing left to wait for: cancelled
        a.close()
        b.close()


def test_a_member_that_does_not_wait_receives_no_mark_events(store_url: str) -> None:
    """A loser gains nothing: it hears of no member's mark but its own."""
    with ringkit.live.connect(store_url) as store_a, ringkit.live.connect(store_url) as store_b:
        a = store_a.join("a", ttl_s=5, handoff="exclusive")
        wait_until(lambda: all(a.owns_many(KEYS)) and not store_a.marks.fresh())
        seen = mark_events(store_a)
        others = [store_b.join(f"b{i}", ttl_s=5, handoff="exclusive") for i in range(3)]
        moved = [key for key in KEYS if store_b.snapshot().ring.node_for(key) != "a"]
        for member in others:
            wait_until(lambda member=member: any(member.owns_many(moved)))
        epoch = store_b.snapshot().epoch
        wait_until(lambda: all(stored_marks(store_b).get(m.name) == epoch for m in others))
        assert not store_a.marks.fresh()
        assert set(seen) <= {store_a.mark_key("a")}, seen
        assert all(a.owns_many([k for k in KEYS if k not in moved]))
        for member in (*others, a):
            member.close()


def test_the_gainers_of_a_member_that_left_own_after_one_read_of_the_marks(
    store_url: str,
) -> None:
    """No member still live held what a leaving member gives away: nobody to wait for.

    Its gainers read the marks once and follow none, where a watch each would deliver every
    member's mark to every gainer (N x N events at N members that gain at once). The gainers'
    stores are held (a slow subscriber ahead of their handoff) until c has left, so their read
    comes after c's release: a read before it would not settle the wait, and the gainer would
    follow the marks after all (as it must).
    """
    with three_stores(store_url) as (store_a, store_b, store_c):
        gate = threading.Event()
        gate.set()
        for store in (store_a, store_b):
            store.subscribe(lambda change: gate.wait(10))  # called before the member's handoff
        a = store_a.join("a", ttl_s=5, handoff="exclusive")
        b = store_b.join("b", ttl_s=5, handoff="exclusive")
        c = store_c.join("c", ttl_s=5, handoff="exclusive")
        of_c = [key for key in KEYS if store_c.snapshot().ring.node_for(key) == "c"]
        wait_until(lambda: all(c.owns_many(of_c)))
        wait_until(lambda: not any(store.marks.fresh() for store in (store_a, store_b, store_c)))
        seen_a, seen_b = mark_events(store_a), mark_events(store_b)
        gate.clear()
        c.leave()  # its mark raised to the leaving epoch, then its lease revoked
        gate.set()
        wait_until(lambda: all(a.owns(key) or b.owns(key) for key in of_c))
        for key in KEYS:
            assert a.owns(key) + b.owns(key) == 1
        assert set(seen_a) <= {store_a.mark_key("a")}, seen_a  # its own mark's echo only
        assert set(seen_b) <= {store_b.mark_key("b")}, seen_b
        a.close()
        b.close()


def test_a_gainer_that_a_read_cannot_settle_follows_the_marks_again(store_url: str) -> None:
    """g joined while l was slow to release; then a leaves: what g gains was l's before.

    a's departure alone would need no mark (a read), but l, which has not released g's join,
    held some of g's arcs in the ring before it: g owns nothing, and follows the marks again
    until l releases.
    """
    with three_stores(store_url) as (store_a, store_l, store_g):
        a = store_a.join("a", ttl_s=5, handoff="exclusive")
        slow = store_l.join("l", ttl_s=5, handoff="exclusive")
        release = threading.Event()
        wait_until(lambda: not store_l.marks.fresh() and not store_a.marks.fresh())
        slow.on_change(lambda change: hold(release, change))
        g = store_g.join("g", ttl_s=5, handoff="exclusive")
        a.leave()
        ring = store_g.wait_for(lambda s: "a" not in s.members).ring
        of_g = [key for key in KEYS if ring.node_for(key) == "g"]
        wait_until(store_g.marks.fresh)  # it read the marks, saw l behind, follows them again
        time.sleep(0.3)
        assert not any(g.owns_many(of_g))
        release.set()
        wait_until(lambda: all(g.owns_many(of_g)))
        for key in KEYS:
            assert g.owns(key) + slow.owns(key) <= 1
        g.close()
        slow.close()


def test_a_mark_written_before_the_wait_began_is_seen_by_the_read(store_url: str) -> None:
    """c gains when b leaves; a released that epoch before c's store got to it: c owns anyway.

    c's store is held (a slow subscriber ahead of c's handoff) until a's mark for the leave is
    in etcd, so only the read that begins c's wait can show it: a watch from then on never
    would, and c would wait for the next change.
    """
    with three_stores(store_url) as (store_a, store_b, store_c):
        gate = threading.Event()
        gate.set()
        store_c.subscribe(lambda change: gate.wait(10))  # called before c's handoff
        a = store_a.join("a", ttl_s=5, handoff="exclusive")
        b = store_b.join("b", ttl_s=5)  # the default mode: keeps no mark, is not waited for
        c = store_c.join("c", ttl_s=5, handoff="exclusive")
        wait_until(lambda: not store_c.marks.fresh() and not store_a.marks.fresh())
        gate.clear()
        before = set(KEYS) - {k for k in KEYS if store_c.snapshot().ring.node_for(k) == "c"}
        b.leave()
        left = store_a.wait_for(lambda s: "b" not in s.members).epoch
        wait_until(lambda: stored_marks(store_a).get("a", -1) >= left)
        seen = mark_events(store_c)
        gate.set()
        ring = store_c.wait_for(lambda s: "b" not in s.members).ring
        gained = [k for k in before if ring.node_for(k) == "c"]
        assert gained
        wait_until(lambda: all(c.owns_many(gained)))
        assert store_a.mark_key("a") not in seen  # read, not delivered by a watch
        a.close()
        c.close()


def test_the_stored_mark_never_decreases(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not when it is rewritten after a hand's delete, nor when a lost lease is taken again.

    a has no callback, so it marks each epoch its store applies while a slow subscriber holds
    the store's dispatcher behind: a registration that took the delivered epoch as its first
    mark would write one lower than the mark of the lease before.
    """
    with ringkit.live.connect(store_url) as store, ringkit.live.connect(store_url) as other:
        a = store.join("a", ttl_s=2, handoff="exclusive")
        written: list[int] = []
        create, swap = store.backend.create, store.backend.swap

        def noted(value: bytes) -> None:
            written.append(decode_mark(value, "a"))

        def creating(key: str, value: bytes, lease: int, **options: object) -> tuple[bool, Record]:
            ok, record = create(key, value, lease, **options)  # type: ignore[arg-type]
            also = options.get("also")
            if ok and isinstance(also, tuple) and also[0] == store.mark_key("a"):
                noted(also[1])
            return ok, record

        def swapping(key: str, value: bytes, lease: int, mod_revision: int) -> tuple[bool, Record]:
            ok, record = swap(key, value, lease, mod_revision)
            if ok and key == store.mark_key("a"):
                noted(value)
            return ok, record

        monkeypatch.setattr(store.backend, "create", creating)
        monkeypatch.setattr(store.backend, "swap", swapping)
        gate = threading.Event()
        store.subscribe(lambda change: gate.wait(10))  # a slow log shipper
        other.join("b", ttl_s=5)
        applied = store.wait_for(lambda s: "b" in s.members).epoch
        wait_until(lambda: stored_marks(store).get("a", -1) >= applied)
        store.backend.delete(store.mark_key("a"))  # by hand: written again, not lower
        wait_until(lambda: stored_marks(store).get("a", -1) >= applied)
        store.backend.revoke(a.info.lease)  # the lease ends: a's heartbeat registers again
        wait_until(lambda: a.dropped_count >= 1 and "a" in stored_marks(store))
        gate.set()
        assert written == sorted(written), repr(written)
        assert written and written[-1] >= applied, repr(written)
        a.close()


class HeldAnswers(MemoryBackend):
    """memory:// whose release marks sent without waiting are answered only once `answer` is
    set (a slow etcd), or refused (`refuse`) as by an endpoint that stopped answering."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.answer = threading.Event()
        self.refuse = False
        self.sent: list[int] = []  # the epochs of the marks sent without waiting

    def start_swap(
        self,
        key: str,
        value: bytes,
        lease: int,
        mod_revision: int,
        done: Callable[[SwapAnswer], None],
    ) -> None:
        self.sent.append(decode_mark(value, key.rsplit("/", 1)[-1]))
        if self.refuse:
            raise BackendError("etcd at 127.0.0.1:1 did not take the write")

        def later() -> None:
            self.answer.wait(10)
            super(HeldAnswers, self).start_swap(key, value, lease, mod_revision, done)

        threading.Thread(target=later, daemon=True).start()


def test_the_store_applies_changes_while_a_marks_answer_is_on_its_way() -> None:
    """A member without callbacks sends its mark where the change is applied, and the store
    goes on applying later changes before etcd answers; once it does, the mark is the latest."""
    backend = HeldAnswers("held-answers")
    with Store(backend, "/held/") as store:
        a = store.join("a", ttl_s=5, handoff="exclusive")
        wait_until(lambda: bool(backend.sent))  # the mark of a's own join: its answer is held
        b, c = store.join("b", ttl_s=5), store.join("c", ttl_s=5)
        latest = store.wait_for(lambda s: "c" in s.members).epoch  # applied meanwhile
        assert stored_marks(store)["a"] < latest
        backend.answer.set()
        wait_until(lambda: stored_marks(store).get("a", -1) == latest, what=stored_marks)
        assert sorted(backend.sent) == backend.sent, backend.sent  # the mark only grew
        for member in (c, b, a):
            member.close()


def test_a_mark_that_could_not_be_sent_is_written_by_the_release_thread() -> None:
    """The one attempt made where the change was applied fails: the release thread writes it."""
    backend = HeldAnswers("refused-sends")
    backend.refuse = True
    with Store(backend, "/refused/") as store:
        a = store.join("a", ttl_s=5, handoff="exclusive")
        b = store.join("b", ttl_s=5)
        epoch = store.wait_for(lambda s: "b" in s.members).epoch
        wait_until(lambda: stored_marks(store).get("a", -1) == epoch, what=stored_marks)
        assert backend.sent, "no mark was sent where the change was applied"
        backend.refuse, sent = False, len(backend.sent)
        backend.answer.set()
        c = store.join("c", ttl_s=5)
        latest = store.wait_for(lambda s: "c" in s.members).epoch
        wait_until(lambda: stored_marks(store).get("a", -1) == latest, what=stored_marks)
        # A successful write by the release thread lets the next mark be sent at once again.
        assert latest in backend.sent[sent:], backend.sent
        for member in (c, b, a):
            member.close()


def test_a_swap_sent_without_waiting_answers_as_a_swap_does(store_url: str) -> None:
    """``start_swap``: (True, the write) when the revision holds, else (False, what is there)."""
    with ringkit.live.connect(store_url) as store:
        backend = store.backend
        answers: list[SwapAnswer] = []
        done = threading.Event()

        def answered(result: SwapAnswer) -> None:
            answers.append(result)
            done.set()

        key = store.mark_key("probe")
        for mod_revision in (0, 0):  # absent: written; then absent no more: refused
            done.clear()
            backend.start_swap(key, b"v", 0, mod_revision, answered)
            assert done.wait(5)
        wrote, refused = answers
        assert not isinstance(wrote, BackendError) and wrote[0], wrote
        assert not isinstance(refused, BackendError) and not refused[0], refused
        assert refused[1].value == b"v" and refused[1].mod_revision == wrote[1].mod_revision
        assert len(answers) == 2  # each answered once
    if store_url.startswith("etcd"):  # memory:// lives as long as the process
        with pytest.raises(BackendError, match="closed"):
            backend.start_swap(key, b"w", 0, wrote[1].mod_revision, answered)


def test_a_published_table_is_handed_over_exclusively_too(store_url: str) -> None:
    """A table moves every partition from a to b: b owns none until a has released it."""
    from ringkit.strategies.fixed import FixedPartitions

    with ringkit.live.connect(store_url) as store_a, ringkit.live.connect(store_url) as store_b:
        a = store_a.join("a", ttl_s=5, handoff="exclusive")
        b = store_b.join("b", ttl_s=5, handoff="exclusive")
        store_b.publish(FixedPartitions(["a"], partitions=16), expect_epoch=0)
        wait_until(lambda: all(a.owns_many(KEYS)))
        gate = threading.Event()
        gate.set()
        a.on_change(lambda change: None)  # a's mark waits for its store's deliveries
        store_a.subscribe(lambda change: gate.wait(10))  # ... which this one holds up
        gate.clear()
        published = store_b.publish(
            FixedPartitions(["b"], partitions=16), expect_epoch=store_b.snapshot().epoch
        )
        store_a.wait_for(lambda s: s.epoch >= published.epoch)
        time.sleep(0.3)  # b's store has long applied the table; a has not released it
        assert not any(b.owns_many(KEYS)) and not any(a.owns_many(KEYS))
        gate.set()
        wait_until(lambda: all(b.owns_many(KEYS)))
        assert not any(a.owns_many(KEYS))
        a.close()
        b.close()


def test_a_slow_read_of_the_marks_does_not_hold_up_the_members_own_mark(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """b's wait begins with a read that takes 3 s (a starved etcd); b still releases at once."""
    with ringkit.live.connect(store_url) as store_b, ringkit.live.connect(store_url) as other:
        b = store_b.join("b", ttl_s=5, handoff="exclusive")
        c = other.join("c", ttl_s=5, handoff="exclusive")
        wait_until(lambda: not store_b.marks.fresh())
        backend = store_b.backend

        class Starved:  # b's store's reads of the marks take 3 s (memory:// shares a backend)
            def __getattr__(self, name: str) -> object:
                return getattr(backend, name)

            def get_prefix(self, prefix: str, revision: int = 0) -> tuple[int, list[Record]]:
                if prefix == store_b.mark_key(""):
                    time.sleep(3)
                return backend.get_prefix(prefix, revision)

        monkeypatch.setattr(store_b.marks, "_backend", Starved())
        c.leave()  # b gains: its store reads the marks (slowly)
        other.join("d", ttl_s=5, handoff="exclusive")  # b loses to d: releases at once
        joined = store_b.wait_for(lambda s: "d" in s.members).epoch
        started = time.monotonic()
        wait_until(lambda: stored_marks(other).get("b", -1) >= joined, timeout_s=10)
        assert time.monotonic() - started < 2.5
        b.close()
