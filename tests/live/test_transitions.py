"""A member's transition log agrees with what ``owns`` answers, across changes of the ring.

Run on memory:// and a real etcd (``store_url``), in both handoff modes.
"""

from __future__ import annotations

import pytest

import ringkit.live
from ringkit.errors import ConfigError
from ringkit.live import Member, Transition, TransitionLog
from tests.live.test_handoff import wait_until

pytestmark = pytest.mark.timeout(60)

KEYS = [f"tenant-{i}" for i in range(120)]


def owned_by_the_log(log: TransitionLog) -> set[str]:
    return {str(interval.key) for interval in log.open_intervals()}


def check_agrees(member: Member, log: TransitionLog, answers: dict[str, bool]) -> None:
    """The open intervals are the keys owns() last said True for; each gain has its token."""
    assert owned_by_the_log(log) == {key for key, owned in answers.items() if owned}
    for interval in log.open_intervals():
        assert interval.token == member.fencing_token(interval.key)


@pytest.mark.parametrize("handoff", ["default", "exclusive"])
def test_the_log_agrees_with_owns_across_a_change(store_url: str, handoff: str) -> None:
    with ringkit.live.connect(store_url) as store_a, ringkit.live.connect(store_url) as store_b:
        a = store_a.join("a", ttl_s=5, handoff=handoff)
        log = a.log_transitions()
        assert a.log_transitions() is log
        before = {key: a.owns(key) for key in KEYS}
        assert all(before.values())
        gains = log.drain()
        assert [t.key for t in gains] == KEYS and all(t.owned for t in gains)
        first_epoch = store_a.snapshot().epoch
        assert {(t.epoch, t.token) for t in gains} == {(first_epoch, a.fencing_token(KEYS[0]))}
        check_agrees(a, log, before)

        b = store_b.join("b", ttl_s=5, handoff=handoff)
        moved = {key for key in KEYS if store_b.snapshot().ring.node_for(key) == "b"}
        assert moved
        wait_until(lambda: store_a.snapshot().epoch >= store_b.snapshot().epoch)
        after = dict(zip(KEYS, a.owns_many(KEYS), strict=True))
        assert {key for key, owned in after.items() if not owned} == moved
        losses = log.drain()
        assert {t.key for t in losses} == moved and not any(t.owned for t in losses)
        for loss in losses:
            assert isinstance(loss, Transition)
            assert loss.epoch == store_a.snapshot().epoch > first_epoch
            assert loss.token == gains[0].token  # the interval that ended
            assert gains[0].at_ns <= loss.last_owned_ns < loss.at_ns
        check_agrees(a, log, after)

        # b's log sees the keys it gained once owns() answers True for them.
        log_b = b.log_transitions()
        wait_until(lambda: all(b.owns(key) for key in moved))
        gained = log_b.drain()
        assert {t.key for t in gained} == moved and all(t.owned for t in gained)
        assert all(t.token is not None and t.token > gains[0].token for t in gained)
        # Unchanged answers log nothing; another replicas count is not logged at all.
        assert [a.owns(key) for key in KEYS] == list(after.values()) and log.drain() == []
        if handoff == "default":
            a.owns(KEYS[0], replicas=2)
            assert log.drain() == []
        b.leave()
        a.leave()
        # Leaving turns every answer False: the log records the end of each interval.
        a.owns_many(KEYS)
        assert owned_by_the_log(log) == set()
        assert {t.key for t in log.drain()} == set(KEYS) - moved


def test_a_full_log_keeps_the_latest_and_counts_the_rest() -> None:
    with ringkit.live.connect("memory://transitions-capacity") as store:
        member = store.join("a", ttl_s=5)
        log = member.log_transitions(capacity=10)
        member.owns_many(KEYS)
        assert [t.key for t in log.entries()] == KEYS[-10:] and log.dropped == len(KEYS) - 10
        member.leave()


@pytest.mark.parametrize("capacity", [0, -1, 1.5, True])
def test_a_capacity_that_is_not_a_positive_int_is_refused(capacity: object) -> None:
    with pytest.raises(ConfigError, match="capacity must be an int >= 1"):
        TransitionLog(capacity=capacity)  # type: ignore[arg-type]


def test_an_interval_that_ended_between_two_true_answers_is_logged() -> None:
    """A process paused past its lease takes a new one and answers True again at once: the
    token changed between two True answers, so the old interval ended unseen in between."""
    log = TransitionLog()
    tokens = {"k": 3}
    with log.lock:
        log.observe("k", True, before_ns=9, after_ns=10, epoch=3, token=tokens.get, generation=3)
        tokens["k"] = 8  # not looked at again while the generation stays
        log.observe("k", True, before_ns=19, after_ns=20, epoch=3, token=tokens.get, generation=3)
        log.observe("k", True, before_ns=29, after_ns=30, epoch=8, token=tokens.get, generation=8)
        log.observe("k", True, before_ns=39, after_ns=40, epoch=9, token=tokens.get, generation=9)
    assert [(t.owned, t.at_ns, t.last_owned_ns, t.token) for t in log.drain()] == [
        (True, 10, 9, 3),
        (False, 29, 19, 3),  # last surely owned at the second call; over by the third
        (True, 30, 29, 8),
    ]


def test_a_member_that_lost_its_lease_starts_a_new_interval(store_url: str) -> None:
    """Its token after the registration that follows a lost lease is at least that epoch,
    even where the store's history shows no epoch without the member (a paused process's
    watch may deliver the loss and the new record with nothing in between to answer from)."""
    with ringkit.live.connect(store_url) as store:
        member = store.join("a", ttl_s=1)
        first = member.fencing_token(KEYS[0])
        lease = member.info.lease
        store.backend.revoke(lease)  # as if etcd had let the lease of a paused process end
        wait_until(lambda: member.info.lease != lease and member.owns(KEYS[0]))
        snapshot = store.snapshot()
        rejoined = snapshot.epoch - snapshot.revision + member._mod_revision
        history, breaks = store.history()
        # The store as a paused process may see it: no snapshot without the member.
        gapless = [s for s in history if "a" in s.members]
        store.history = lambda: (gapless, breaks)  # type: ignore[method-assign]
        token = member.fencing_token(KEYS[0])
        assert first is not None and token is not None
        assert token >= rejoined > first
        member.close()
