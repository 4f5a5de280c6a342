"""Member: a process taking part in a live ring, alive for as long as its lease is renewed.

A member's record (state, weight, zone, data and the tokens chosen once at join) lives under an
etcd lease; a heartbeat thread renews the lease every third of its TTL and writes nothing else,
so a heartbeat never changes the epoch. A member that stops renewing (crashed, partitioned,
paused) loses the lease, etcd deletes the record, and every store drops it from the ring at one
epoch; this is the liveness rule of etcd's election recipe and of tooz's etcd3 driver.

States: ``joining`` (registered, not in the ring) → ``active`` (in the ring) → ``leaving`` (out
of the ring, still registered while it hands its arcs over). A member that finds its lease gone
(after a pause) counts as ``dropped`` and rejoins with a new lease and its old tokens; until the
ring shows it active again, ``owns`` answers False: it never acts on ownership it may have lost.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from ringkit.errors import BackendError, ConfigError, DuplicateNodeError, RingkitError
from ringkit.hashing import Key
from ringkit.live.change import Change, MemberChange
from ringkit.live.handoff import HANDOFFS, Handoff, HandoffStore
from ringkit.live.snapshot import MemberInfo, Snapshot, decode_member
from ringkit.live.transitions import TransitionLog
from ringkit.nodes import Node
from ringkit.ring import HashRing, check_vnodes
from ringkit.strategies.allocation import allocate_tokens

if TYPE_CHECKING:
    from ringkit.live.dispatch import Subscription

__all__ = ["Member", "choose_tokens"]

_log = logging.getLogger("ringkit.live")
#: Allocated joins planned again when other joins keep winning the race to write first.
_ALLOCATION_ATTEMPTS = 20
#: How soon a renewal that failed is tried again (not a third of the TTL later: meanwhile
#: the lease's deadline passes and ``owns`` is False, a gap the load did not make).
RENEW_RETRY_S = 0.25


def choose_tokens(node: Node, *, vnodes: int, ring: object = None) -> tuple[int, ...]:
    """Return `node`'s tokens: hashed as ``HashRing`` hashes them, or allocated against `ring`.

    >>> choose_tokens(Node("a"), vnodes=3) == tuple(HashRing(["a"], vnodes=3).tokens.tolist())
    True
    """
    check_vnodes(vnodes)
    if isinstance(ring, HashRing):
        return allocate_tokens(ring, node, tokens=vnodes)
    return tuple(sorted(int(t) for t in HashRing([node], vnodes=vnodes).tokens.tolist()))


def _newer_than(revision: int, snapshot: Snapshot) -> bool:
    return snapshot.revision > revision


def _check_wait(wait_s: object) -> float:
    if (
        isinstance(wait_s, bool)
        or not isinstance(wait_s, (int, float))
        or not 0 <= wait_s < math.inf
    ):
        raise ConfigError(f"wait_s must be a finite number >= 0, got {wait_s!r}")
    return float(wait_s)


def _check_ttl(ttl_s: object) -> float:
    if isinstance(ttl_s, bool) or not isinstance(ttl_s, (int, float)) or not ttl_s >= 1:
        raise ConfigError(f"ttl_s must be a number >= 1, got {ttl_s!r}")
    return float(ttl_s)


def _check_handoff(handoff: object, replicas: object, release_timeout_s: object) -> None:
    if handoff not in HANDOFFS:
        raise ConfigError(f"handoff must be one of {', '.join(HANDOFFS)}, got {handoff!r}")
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
        raise ConfigError(f"replicas must be an int >= 1, got {replicas!r}")
    timeout = release_timeout_s
    if timeout is not None and (
        isinstance(timeout, bool)
        or not isinstance(timeout, (int, float))
        or not 0 < timeout < math.inf
    ):
        raise ConfigError(f"release_timeout_s must be a number > 0 or None, got {timeout!r}")


class MemberStore(HandoffStore, Protocol):
    """What a member asks of its store (:class:`~ringkit.live.store.Store` is one), beyond
    what its handoff asks: its record's key, the snapshots and their history, the changes."""

    def member_key(self, name: str) -> str: ...

    def history(self) -> tuple[list[Snapshot], set[int]]: ...

    def resumed_epoch(self) -> int: ...

    def current_within_s(self) -> float: ...

    def wait_current(self, *, timeout_s: float = 10.0) -> bool: ...

    def wait_for(
        self, predicate: Callable[[Snapshot], bool], *, timeout_s: float = 10.0
    ) -> Snapshot: ...

    def subscribe(self, callback: Callable[[Change], None]) -> Subscription: ...

    def wait_delivered(self, epoch: int, *, timeout_s: float = 10.0) -> bool: ...


class Member:
    """This process's membership of a live ring, made by ``store.join``.

    Looking up: ``owns``, ``fencing_token``, ``state``, ``info``, ``handoff``, ``replicas``.
    Following: ``on_change``, ``log_transitions``. Changing state:
    ``ready``, ``leave``, ``close`` (also a context manager: leaving gracefully on exit);
    ``abandon`` stops renewing without a word, as a crash does.
    """

    def __init__(
        self,
        store: MemberStore,
        info: MemberInfo,
        *,
        replicas: int = 1,
        handoff: Handoff | None = None,
    ) -> None:
        self._store, self._info = store, info
        self._replicas, self._handoff = replicas, handoff
        self._lock = threading.RLock()
        self._deadline = 0.0  # monotonic time by which the lease surely still holds
        self._mod_revision = 0
        self._closed = False
        self._dropped_count = 0
        self._resumed_epoch = 0  # the epoch at which the lease was last confirmed after a lapse
        self._wake = threading.Event()
        self._subscriptions: list[Subscription] = []
        self._heartbeat: threading.Thread | None = None
        self._transitions: TransitionLog | None = None  # see log_transitions
        self.error: RingkitError | None = None

    @classmethod
    def join(
        cls,
        store: MemberStore,
        members: list[Member],
        name: str,
        *,
        weight: float,
        zone: str | None,
        data: Any,
        ttl_s: float,
        ready: bool,
        vnodes: int,
        allocate: bool,
        handoff: str = "default",
        replicas: int = 1,
        release_timeout_s: float | None = None,
        wait_s: float = 0.0,
    ) -> Member:
        """Register a member (see ``Store.join``), in `members` (the store's) from then on."""
        node = Node(name, weight=weight, zone=zone)
        ttl = _check_ttl(ttl_s)
        _check_handoff(handoff, replicas, release_timeout_s)
        wait = _check_wait(wait_s)
        planned = store.snapshot()
        tokens = choose_tokens(node, vnodes=vnodes, ring=planned.ring if allocate else None)
        holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        state = "active" if ready else "joining"
        info = MemberInfo(name, state, zone, float(weight), data, tokens, ttl, 0, holder)
        member = cls(store, info, replicas=replicas)
        if handoff == "exclusive":
            member._handoff = Handoff(
                store,
                name,
                replicas=replicas,
                release_timeout_s=ttl if release_timeout_s is None else float(release_timeout_s),
                give_up=member._give_up,
            )
            # Subscribed before the record exists: the change that adds it is reported too.
            member._subscriptions.append(store.subscribe(member._handoff.relay))
        members.append(member)
        try:
            member._register_waiting(wait, node, vnodes, planned if allocate else None)
        except BaseException:
            members.remove(member)
            member.close()
            raise
        member._heartbeat = threading.Thread(target=member._beat, name=f"ringkit-live-{name}")
        member._heartbeat.daemon = True
        member._heartbeat.start()
        # Return once this process's snapshot shows the member (owns() is then meaningful).
        try:
            joined = store.wait_for(lambda s: s.revision >= member._mod_revision)
            store.wait_current(timeout_s=member._info.ttl_s)
            # An exclusive member owns from its dispatcher (in the call that reports its gains),
            # after the join's change and the marks read on joining: so a member nobody must
            # release to owns when join returns. A store subscriber that holds the dispatcher
            # up delays that, not the join, beyond the TTL.
            if member._handoff is not None and store.wait_delivered(
                joined.epoch, timeout_s=member._info.ttl_s
            ):
                store.dispatcher.flush(timeout_s=member._info.ttl_s)
        except BaseException:
            member.close()  # a join that fails leaves no record behind it under a live lease
            raise
        return member

    # -- the lease -------------------------------------------------------------------------------

    def _register_waiting(
        self, wait_s: float, node: Node, vnodes: int, planned: Snapshot | None
    ) -> None:
        """Register; while another lease holds the name, wait up to `wait_s` for it to end.

        A supervisor that restarts a crashed worker under the same name within the old
        lease's TTL would otherwise be refused until the lease runs out; the wait follows the
        store's watch (the old record's deletion), not a timer.
        """
        deadline = time.monotonic() + wait_s
        name = self.name
        while True:
            try:
                if planned is not None:
                    self._register_allocated(node, vnodes, planned)
                else:
                    self._register()
                return
            except DuplicateNodeError:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise
                # After the wait, one more try: then the error names the holder and its lease.
                with contextlib.suppress(TimeoutError):
                    self._store.wait_for(lambda s: name not in s.members, timeout_s=remaining)
                time.sleep(0.01)  # a record skipped as invalid is not in members: do not spin

    def _register_allocated(self, node: Node, vnodes: int, planned: Snapshot) -> None:
        """Register with tokens allocated against `planned`, again until no join raced ours.

        The record is created only if no member record was written since the ring it was
        planned on (compare-and-swap on the members' revisions); two joins planned on one
        ring would otherwise take the same tokens, and one would own nothing for good.
        """
        for _ in range(_ALLOCATION_ATTEMPTS):
            if self._register(planned_revision=planned.revision):
                return
            planned = self._store.wait_for(partial(_newer_than, planned.revision))
            tokens = choose_tokens(node, vnodes=vnodes, ring=planned.ring)
            self._info = replace(self._info, tokens=tokens)
        raise BackendError(
            f"member {self.name!r} must find the ring unchanged between planning its tokens and "
            f"writing them, got {_ALLOCATION_ATTEMPTS} concurrent changes; join again"
        )

    def _register(self, *, planned_revision: int | None = None) -> bool:
        """Take a lease and create the record; refuse a name a live member holds.

        With `planned_revision`, only if no member record was written after it: return False
        (nothing left behind) when one was.
        """
        backend = self._store.backend
        started = time.monotonic()
        lease, ttl = backend.grant(self._info.ttl_s)
        info = replace(self._info, lease=lease)
        try:
            # An exclusive member's first mark goes in the record's own transaction: a store
            # that sees the record has the mark, and the join costs one write, not two.
            mark = self._handoff.first_mark() if self._handoff is not None else None
            key = self._store.member_key(info.name)
            if planned_revision is None:
                ok, record = backend.create(key, info.encode(), lease, also=mark)
            else:
                ok, record = backend.create_unless_changed(
                    key,
                    info.encode(),
                    lease,
                    prefix=self._store.member_key(""),
                    revision=planned_revision,
                    also=mark,
                )
            if ok and self._handoff is not None:
                self._handoff.start(lease, record.mod_revision)
        except BaseException:
            with contextlib.suppress(BackendError):  # else it ends by itself after its TTL
                backend.revoke(lease)
            raise
        if not ok and record.mod_revision == 0:
            backend.revoke(lease)  # another member's record was written: plan again
            return False
        if not ok and record.lease != lease:
            backend.revoke(lease)
            left = backend.time_to_live(record.lease) if record.lease else math.inf
            try:
                holder = f"holder {decode_member(record.value, record.lease).holder!r}"
            except ConfigError:
                holder = "holder unknown"
            raise DuplicateNodeError(
                f"member name {info.name!r} must be free, got one held by a live member "
                f"({holder}, lease ends in {left:.1f} s); choose another name or "
                "wait for its lease to end"
            )
        with self._lock:
            if self._info.lease:
                # A registration after a lost lease: whatever the store's history shows
                # (an etcd watch that was not read while this process was paused may skip
                # the epoch without the record), no interval of owning runs across the loss.
                snapshot = self._store.snapshot()
                self._resumed_epoch = max(
                    self._resumed_epoch, snapshot.epoch - snapshot.revision + record.mod_revision
                )
            self._info, self._mod_revision = info, record.mod_revision
            self._deadline = started + ttl
        return True

    def _beat(self) -> None:
        """Renew the lease every third of its TTL; rejoin when it turns out to be gone."""
        pause = self._info.ttl_s / 3
        while not self._closed:
            self._wake.wait(pause)
            pause = self._info.ttl_s / 3
            self._wake.clear()
            if self._closed:
                return
            try:
                started = time.monotonic()
                ttl = self._store.backend.keepalive(self._info.lease)
                if ttl > 0:
                    with self._lock:
                        if self._deadline <= time.monotonic():  # in doubt until now
                            self._resumed_epoch = self._store.snapshot().epoch
                        self._deadline = started + ttl
                    continue
                with self._lock:
                    self._deadline, self._dropped_count = 0.0, self._dropped_count + 1
                if not self._closed:
                    self._register()
            except DuplicateNodeError as error:
                self.error, self._closed = error, True
            except BackendError:
                # The service is away or slow: owns() turns False at the deadline, so ask
                # again soon rather than a third of the TTL later.
                pause = min(pause, RENEW_RETRY_S)

    # -- looking up ------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """The member's name: its node name in the ring."""
        return self._info.name

    @property
    def info(self) -> MemberInfo:
        """The member's record as this process last wrote it."""
        return self._info

    @property
    def dropped_count(self) -> int:
        """How many times the member found its lease gone and rejoined."""
        return self._dropped_count

    def _current(self) -> bool:
        """Whether the latest snapshot shows this member, under its live lease, as active."""
        seen = self._store.snapshot().members.get(self.name)
        return (
            seen is not None
            and seen.lease == self._info.lease
            and seen.state == "active"
            and time.monotonic() < self._deadline
            and not self._closed
            and self._store.is_current()
        )

    @property
    def state(self) -> str:
        """``joining``, ``active`` or ``leaving`` as the latest snapshot shows this lease, or
        ``dropped`` when the ring does not show it (lease lost, or not seen yet)."""
        seen = self._store.snapshot().members.get(self.name)
        if seen is None or seen.lease != self._info.lease or time.monotonic() >= self._deadline:
            return "dropped"
        return seen.state

    @property
    def handoff(self) -> str:
        """``default`` or ``exclusive`` (see ``Store.join``)."""
        return "default" if self._handoff is None else "exclusive"

    @property
    def replicas(self) -> int:
        """The copies per key this member was joined with (``owns``' default)."""
        return self._replicas

    def _check_replicas(self, replicas: int | None) -> int:
        if replicas is None:
            return self._replicas
        if self._handoff is not None and replicas != self._replicas:
            raise ConfigError(
                f"replicas of an exclusive member must be the {self._replicas} it joined with, "
                f"got {replicas!r}; join another member for another count"
            )
        return replicas

    def owns(self, key: Key, *, replicas: int | None = None) -> bool:
        """Return whether this member is among `key`'s first `replicas` distinct nodes.

        False whenever the member cannot be sure: not active in the latest snapshot, its
        lease may have run out (no renewal confirmed within its TTL), or its store has not been
        confirmed current within ``store.current_within_s()``. An exclusive member also needs
        every other exclusive member to have released the epoch it gained `key` at.
        `replicas` defaults to the count the member joined with. Runtime: O(log T), times the
        epochs not yet released for an exclusive member.

        :raises ConfigError: for an exclusive member asked with another `replicas`
        """
        count = self._check_replicas(replicas)
        return self._logged([key], count, lambda: self._decide(key, count))[0]

    def _logged(
        self, keys: list[Key], count: int, decide: Callable[[], tuple[list[bool], int]]
    ) -> list[bool]:
        """Return `decide`'s answers for `keys`, logging them when transitions are logged.

        The times are read under the log's lock around the decision itself, so an answer's
        logged instant lies within the call that gave it (the ownership checker relies on it).
        """
        log = self._transitions
        if log is None or count != self._replicas:
            return decide()[0]
        with log.lock:
            before = time.monotonic_ns()
            answers, epoch = decide()
            after = time.monotonic_ns()
            # What a fencing token depends on besides the key (see ``_interval_start``).
            generation = (epoch, self._info.lease, self._resumed_epoch, self._store.resumed_epoch())
            for key, owned in zip(keys, answers, strict=True):
                log.observe(
                    key,
                    owned,
                    before_ns=before,
                    after_ns=after,
                    epoch=epoch,
                    token=self._interval_start,
                    generation=generation,
                )
        return answers

    def _decide(self, key: Key, count: int) -> tuple[list[bool], int]:
        """``[owns(key)]`` for `count` replicas, and the epoch of the snapshot decided on."""
        if not self._current():
            return [False], self._store.snapshot().epoch
        snapshot = self._store.snapshot()
        if self._handoff is not None:
            return [self._handoff.owns(key, snapshot)], snapshot.epoch
        return [self.name in snapshot.ring.nodes_for(key, count)], snapshot.epoch

    def log_transitions(self, *, capacity: int = 100_000) -> TransitionLog:
        """Log every change of ``owns``' answer per key from now on; return the log.

        Opt-in and bounded (:mod:`ringkit.live.transitions`): each transition carries the
        key, the new answer, the CLOCK_MONOTONIC time read under the lock ``owns`` decides
        under, the epoch and the fencing token. Calls with another `replicas` than the
        member's are not logged. Calling it again returns the same log.

        :raises ConfigError: for a `capacity` that is not an int >= 1
        """
        with self._lock:
            if self._transitions is None:
                self._transitions = TransitionLog(capacity=capacity)
            return self._transitions

    def owns_many(self, keys: Iterable[Key], *, replicas: int | None = None) -> list[bool]:
        """Return ``owns(key, replicas=replicas)`` for each key, in order, at one instant.

        Every answer comes from one check of the member's lease and store and one snapshot,
        so a change that lands during the call cannot split the keys between two rings; each
        answer is the one ``owns`` gives for that snapshot. Runtime: O(K log T), vectorised
        for one replica (per unreleased epoch for an exclusive member).

        :raises ConfigError: for an exclusive member asked with another `replicas`
        """
        count = self._check_replicas(replicas)
        keys = list(keys)
        return self._logged(keys, count, lambda: self._decide_many(keys, count))

    def _decide_many(self, keys: list[Key], count: int) -> tuple[list[bool], int]:
        """``owns_many(keys)`` for `count` replicas, and the epoch of the snapshot decided on."""
        if not self._current():
            return [False] * len(keys), self._store.snapshot().epoch
        snapshot = self._store.snapshot()
        if self._handoff is not None:
            return self._handoff.owns_many(keys, snapshot), snapshot.epoch
        ring = snapshot.ring
        if count == 1:
            owners = ring.node_for_many(keys) if keys else []
            return [owner == self.name for owner in owners], snapshot.epoch
        return [self.name in ring.nodes_for(key, count) for key in keys], snapshot.epoch

    def fencing_token(self, key: Key) -> int | None:
        """Return the epoch at which this member's current interval of owning `key` began.

        None when ``owns(key)`` is False. The interval starts at the first epoch of the latest
        unbroken run of snapshots in which the member holds `key`, or later when its store or
        lease was in doubt since; so successive owners of a key get strictly increasing
        tokens (the next owner gains it at a later epoch), in both handoff modes. (In the
        default mode's overlap a member whose store lags may begin an interval from the older
        epoch, with a lower token than the new owner's: storage refuses it by that.) Storage
        that refuses a write whose token is below the highest it has seen for the key stops a
        paused former owner (Kleppmann 2016, "How to do distributed locking"; Chubby's
        sequencers). Runtime: O(H log T) for H snapshots in the run.
        """
        if not self.owns(key):
            return None
        return self._interval_start(key)

    def _interval_start(self, key: Key) -> int | None:
        """The fencing token of `key` for a member that owns it (see ``fencing_token``)."""
        history, breaks = self._store.history()
        start = None
        for snapshot in reversed(history):
            ring = snapshot.ring
            if not len(ring) or self.name not in ring.nodes_for(key, self._replicas):
                break
            start = snapshot.epoch
            if snapshot.epoch in breaks:
                break
        if start is None:
            return None
        # NOTE: capped at the history read: a resume the store noted after that read (at a
        # later epoch, one where another member may already have gained the key) is not ours.
        resumed = min(max(self._store.resumed_epoch(), self._resumed_epoch), history[-1].epoch)
        return max(start, resumed)

    # -- following -------------------------------------------------------------------------------

    def on_change(
        self, callback: Callable[[MemberChange], None], *, replicas: int | None = None
    ) -> Subscription | None:
        """Call `callback` with the arcs this member gained and lost, at every epoch that moves any.

        The arcs are ``diff(old.ring, new.ring, replicas=replicas).gained(name)`` / ``.lost``,
        as owner or replica; called on the store's dispatcher thread, in epoch order. For an
        exclusive member, lost arcs come when the epoch is applied and gained arcs once they
        are owned (never wait in the callback for ownership: the release waits for it);
        returns None then, the member's closing ends the calls.

        :raises ConfigError: for an exclusive member asked with another `replicas`
        """
        replicas = self._check_replicas(replicas)
        if self._handoff is not None:
            self._handoff.subscribe(callback)
            return None

        def relay(change: Change) -> None:
            names = {node.name for node in change.old.ring.nodes}
            names |= {node.name for node in change.new.ring.nodes}
            if self.name not in names:
                return
            movement = change.movement_for(replicas)
            gained, lost = tuple(movement.gained(self.name)), tuple(movement.lost(self.name))
            if gained or lost:
                callback(
                    MemberChange(
                        self.name,
                        change.old.epoch,
                        change.new.epoch,
                        replicas,
                        gained,
                        lost,
                        change,
                    )
                )

        subscription = self._store.subscribe(relay)
        self._subscriptions.append(subscription)
        return subscription

    # -- changing state --------------------------------------------------------------------------

    def _set_state(self, state: str) -> int:
        """Write this member's record with `state`; return the revision of the write."""
        with self._lock:
            info = replace(self._info, state=state)
            value = info.encode()
            ok, record = self._store.backend.swap(
                self._store.member_key(self.name), value, info.lease, self._mod_revision
            )
            # A write whose answer was lost (the etcd leader died after committing it) is sent
            # again and then fails its compare on its own result: that is a success.
            ok = ok or (record.lease == info.lease and record.value == value)
            if not ok:
                raise BackendError(
                    f"member {self.name!r} must still hold its record to become {state}, got "
                    f"it changed at epoch {record.mod_revision} (lease lost?); join again"
                )
            self._info, self._mod_revision = info, record.mod_revision
            return record.mod_revision

    def ready(self) -> None:
        """Move from ``joining`` to ``active``: the member enters the ring."""
        if self._info.state == "joining":
            revision = self._set_state("active")
            self._store.wait_for(lambda s: s.revision >= revision)

    def leave(self, *, timeout_s: float = 10.0) -> None:
        """Leave gracefully: ``leaving`` (out of the ring), hand over, then drop the lease.

        Returns once every subscriber of this store, this member's ``on_change`` included, has
        been called for the epoch where the member left the ring, and the lease is revoked.
        """
        if self._closed:
            return
        revision = self._set_state("leaving")
        try:
            snap = self._store.wait_for(lambda s: s.revision >= revision, timeout_s=timeout_s)
            delivered = self._store.wait_delivered(snap.epoch, timeout_s=timeout_s)
            if delivered and self._handoff is not None:
                # Its callbacks have returned: gainers need not wait for the revoke.
                self._handoff.leave_mark(snap.epoch)
        except TimeoutError:
            pass  # the handoff could not be confirmed in time: leave anyway
        self.close()

    def close(self) -> None:
        """Stop the heartbeat and revoke the lease: the member leaves the ring at once."""
        if self._closed and self._heartbeat is None:
            return
        self._closed = True
        self._wake.set()
        if self._handoff is not None:
            self._handoff.stop()
        for subscription in self._subscriptions:
            subscription.cancel()
        with contextlib.suppress(BackendError):  # else the lease runs out by itself
            self._store.backend.revoke(self._info.lease)
        self._heartbeat = None

    def abandon(self) -> None:
        """Stop the heartbeat *without* revoking the lease, as a crashed process would.

        The record stays until its lease runs out (its TTL, plus the service's expiry check),
        then the member leaves every ring at one epoch: a crash to rehearse in one process
        (``ringkit demo workers`` with ``memory://``), where SIGKILL would end every member.
        """
        self._closed = True
        self._wake.set()
        if self._handoff is not None:
            self._handoff.stop()
        for subscription in self._subscriptions:
            subscription.cancel()
        self._heartbeat = None

    def _applied(self) -> None:
        if self._handoff is not None and not self._closed:
            self._handoff.applied()

    def _marks_changed(self) -> None:
        if self._handoff is not None and not self._closed:
            self._handoff.marks_changed()

    def _give_up(self, reason: str) -> None:
        """Stop for good: revoke the lease so that gainers need not wait for its TTL."""
        if self._closed:
            return
        _log.warning("member %s gives up its lease: %s; join again", self.name, reason)
        self.error = BackendError(f"member {self.name!r} gave up its lease: {reason}")
        self.close()

    def __enter__(self) -> Member:
        return self

    def __exit__(self, *exc: object) -> None:
        self.leave()

    def __repr__(self) -> str:
        return f"Member({self.name!r}, state={self.state!r}, lease={self._info.lease})"
