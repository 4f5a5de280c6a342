"""Exclusive handoff: at most R members answer ``owns(key)`` True at any instant.

In the default mode a gaining member owns an arc as soon as its own watch delivers the epoch,
while the losing member may not have applied it yet. ``store.join(..., handoff="exclusive")``
closes that gap the way Kafka's cooperative rebalancing and Apache Helix's state transitions
do (a partition is assigned only once its previous owner has revoked it), with etcd records:

- every exclusive member keeps a *release mark*, ``PREFIX/_released/NAME`` under its own lease:
  the highest epoch E for which it has applied every change up to E and every ``on_change``
  call for the arcs it lost up to E has returned. The mark only grows, and never changes the
  epoch or the ring;
- a member owns an arc it gained at epoch E only once every *other* exclusive member with a
  live record has a mark ≥ E, or its record has gone at a revision this store applied (its
  lease ended, or it left after raising its mark), or it held none of what this member holds
  at E in any ring since its own mark (a member with mark M answers ``owns`` from a ring no
  older than the one in effect at M). Waiting only for the member that lost the arc is not
  enough: after A → B at E1 and B → C at E2, C must not own while a slow A still answers from
  before E1, and A held the arc then;
- a member whose release stays pending for ``release_timeout_s`` (its callbacks hang, or its
  store is not current) revokes its own lease, so a gainer waits at most that plus a TTL.

A member without ``on_change`` callbacks sends its mark from the thread that applied the change,
as soon as it is applied, without waiting for etcd's answer there: handing the write to the
member's release thread cost a wake-up behind the dispatcher's own work on every change (with
10 processes on two cores, 4-9 ms of the gainer's wait at the median). That write is one
attempt without failover, so the thread that applies changes never waits out an election; a
failure, a mark overwritten by someone else, or a write already under way leaves the mark to the
release thread, which retries until it is written.

``owns`` checks a key against every ring from the *settled* epoch (the lowest mark among the
others) to the latest: the member must hold the key in all of them. ``on_change`` reports lost
arcs when the epoch is applied and gained arcs once owned, computed on key-space regions. The
settled epoch ``owns`` answers from moves on the dispatcher thread, in the call that reports the
arcs it makes owned: a callback is told of every arc before ``owns`` answers True for it, so a
worker driven by its callbacks never misses an interval of ownership.

Only a member that gained arcs needs the others' marks: one whose arcs did not grow at an
epoch owns, at that epoch, exactly what it held in the ring (everything it holds it held at
an epoch that was settled). So each member keeps a *floor*, the highest epoch at which it
owned every arc it held: it moves with each change that gives the member nothing, and
otherwise once the marks show that no other member may still own any of it. The store
follows the other members' marks only while one of its members is above its floor
(:mod:`ringkit.live.markwatch`), from a read made after that member applied the change, so a
mark is never missed for being older than the wait. When no member still in the ring held
the arcs gained just before (they came from a member that left the ring), a read of the
marks alone usually settles the wait, and the folder is followed only if it does not: when
one member leaves a pool of N, its N - 1 gainers each read N marks once instead of each
being delivered every member's mark (N × N watch events).
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from ringkit.errors import BackendError, ConfigError
from ringkit.live.backend import Record, SwapAnswer
from ringkit.live.change import Change, MemberChange, movement_between
from ringkit.live.marks import encode_mark
from ringkit.live.regions import SPACE, Region
from ringkit.ring import Arc, HashRing

if TYPE_CHECKING:
    from ringkit.hashing import Key
    from ringkit.live.backend import Backend
    from ringkit.live.dispatch import Dispatcher
    from ringkit.live.markwatch import MarksWatch
    from ringkit.live.snapshot import Snapshot

__all__ = ["HANDOFFS", "Handoff", "HandoffStore"]

_log = logging.getLogger("ringkit.live")

#: The handoff modes of ``store.join``.
HANDOFFS = ("default", "exclusive")
#: How often a member looks at its pending release (and writes its mark if it lags).
_RELEASE_POLL_S = 0.05


class HandoffStore(Protocol):
    """What a handoff asks of its store (:class:`~ringkit.live.store.Store` is one): the
    service, the dispatcher, the marks it follows and the history it keeps."""

    @property
    def backend(self) -> Backend: ...

    @property
    def dispatcher(self) -> Dispatcher: ...

    @property
    def marks(self) -> MarksWatch: ...

    def snapshot(self) -> Snapshot: ...

    def is_current(self) -> bool: ...

    def blind_s(self) -> float: ...

    def history_since(self, epoch: int, *, unbroken: bool = False) -> list[Snapshot] | None: ...

    def mark_key(self, name: str) -> str: ...

    def mark_of(self, name: str) -> tuple[int, int] | None: ...

    def settled_epoch(self, name: str) -> int: ...

    def released(self, name: str) -> dict[str, int]: ...


class Handoff:
    """One exclusive member's side of the handoff: ownership, its mark, its callbacks.

    Asking: ``owns``, ``owns_many``, ``settled_rings``. Following: ``relay`` (an
    ``on_change`` callback).
    Releasing: ``first_mark``, ``start``, ``write_mark``, ``leave_mark``, ``stop``.
    Waiting: ``settled_epoch`` (its floor, or the others' marks while its store follows them).
    """

    def __init__(
        self,
        store: HandoffStore,
        name: str,
        *,
        replicas: int,
        release_timeout_s: float,
        give_up: Callable[[str], None],
    ) -> None:
        self._store, self.name, self.replicas = store, name, replicas
        self._release_timeout_s, self._give_up = release_timeout_s, give_up
        self._lease = 0
        self._mark = -1  # the highest epoch written (it only grows, across leases too)
        self._rewrite = False  # the stored mark was overwritten or deleted: write it again
        self._first = -1  # the epoch of the mark written with the member's record
        self._applied_lock = threading.Lock()
        self._applied_at: dict[int, float] = {}  # epoch above the mark -> when it was applied
        self._mark_revision = 0
        # One mark write at a time: the release thread's, or one sent where a change was
        # applied (held until its answer arrives, on whichever thread that is).
        self._writing = threading.Lock()
        # A mark sent without waiting failed: the release thread writes the marks until one of
        # its writes gets through.
        self._sent_failed = False
        self._cache: tuple[object, ...] = ()
        self._rings: list[Snapshot] | None = None
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._callbacks: list[Callable[[MemberChange], None]] = []
        self._regions: dict[int, Region] = {}
        self._reported = Region.empty()
        self._latest: Change | None = None
        self._settle_queued = False
        self._settled_at: tuple[int, int] = (-1, -1)  # (settled epoch, latest epoch) last done
        # The highest epoch at which this member owned every arc it held (see the module
        # docstring): it owns from its rings since then without the others' marks. It moves
        # only on the dispatcher thread, in the call that reports the arcs it makes owned, so
        # every arc ``owns`` answers True for is reported to ``on_change`` first.
        self._floor = -1
        self._following = False  # whether it asked its store to follow every mark
        # Whether the wait at the latest epoch needs the marks followed (a watch), or a read
        # of them may do (see ``_lagging_may_hold``); and the epoch a read was asked for.
        self._watch_needed = True
        self._read_for = -1
        # Who held this member's arcs at an epoch, ring by ring: (epoch, {ring epoch: names}),
        # kept while the wait at that epoch lasts (each mark that comes in asks again).
        self._holders: tuple[int, dict[int, set[str]]] = (-1, {})
        self._follow_lock = threading.Lock()
        self._remove_hook = store.dispatcher.after_delivery(lambda _epoch: self._wake.set())
        self._thread = threading.Thread(target=self._run, name=f"ringkit-live-release-{name}")
        self._thread.daemon = True

    # -- owning ----------------------------------------------------------------------------------

    def settled_epoch(self, epoch: int) -> int:
        """The epoch ``settle`` moves this member's floor to (``owns`` answers from the floor).

        Its floor, or the lowest other member's mark if higher while its store follows every
        mark (the marks it holds otherwise may lack a member that joined since: not enough to
        own by). At most `epoch`.
        """
        settled = self._floor
        marks = self._store.marks
        if marks.fresh():
            settled = max(settled, self._store.settled_epoch(self.name))
        latest = self._latest
        if (
            settled < epoch
            and latest is not None
            and latest.new.epoch == epoch
            and marks.complete_at() >= latest.new.revision
            and not self._lagging_may_hold(epoch)
        ):
            settled = epoch
        return min(settled, epoch)

    def _lagging_may_hold(self, epoch: int) -> bool:
        """Whether a member that has not released `epoch` may still own arcs held here then.

        A member whose mark is M < `epoch` has applied every change up to M, so it answers
        ``owns`` from a ring no older than the one in effect at M: if none of the rings since
        then gave it a point of what this member holds at `epoch`, it cannot own any of it,
        whatever it has applied since. When no such member can, this member owns all it holds
        at `epoch` without waiting for their marks (after a member leaves, its gainers wait
        for nobody). True whenever that cannot be shown: several replicas, a table, a ring too
        old for the history kept, or a history broken in between (changes went unseen).
        Read with marks complete as of `epoch` (a member that joined later held nothing then).
        """
        region = self._regions.get(epoch)
        if region is None or self.replicas != 1:
            return True
        # A member in the default mode keeps no mark and is not waited for.
        lagging = {
            name: released
            for name, released in self._store.released(self.name).items()
            if released < epoch
        }
        if not lagging:
            return False
        since = self._store.history_since(min(lagging.values()), unbroken=True)
        if since is None:
            return True
        window = [snapshot for snapshot in since if snapshot.epoch <= epoch]
        if self._holders[0] != epoch:
            self._holders = (epoch, {})
        holders = self._holders[1]
        for index, snapshot in enumerate(window):
            if not isinstance(snapshot.ring, HashRing):
                return True
            if snapshot.epoch not in holders:
                holders[snapshot.epoch] = region.holders(snapshot.ring)
            # The members that may answer from this ring: their mark is below the next one.
            until = window[index + 1].epoch if index + 1 < len(window) else math.inf
            if any(
                released < until
                for name, released in lagging.items()
                if name in holders[snapshot.epoch]
            ):
                return True
        return False

    def settled_rings(self, snapshot: Snapshot) -> list[Snapshot] | None:
        """The snapshots from the settled epoch to `snapshot`, or None when nothing is owned."""
        key = (snapshot.epoch, self._floor, self._store.blind_s() > 0)
        if key != self._cache:
            rings = None
            if not key[2]:
                settled = min(self._floor, snapshot.epoch)
                rings = self._store.history_since(settled)
                if rings is not None:
                    rings = [ring for ring in rings if ring.epoch <= snapshot.epoch]
            self._cache, self._rings = key, rings
        return self._rings

    def owns(self, key: Key, snapshot: Snapshot) -> bool:
        """Whether this member held `key` in every ring from the last reported settled epoch on."""
        rings = self.settled_rings(snapshot)
        if not rings:
            return False
        return all(
            len(s.ring) > 0 and self.name in s.ring.nodes_for(key, self.replicas) for s in rings
        )

    def owns_many(self, keys: list[Key], snapshot: Snapshot) -> list[bool]:
        """``owns`` for each key, the rings looked up once each (vectorised for one replica)."""
        rings = self.settled_rings(snapshot)
        if not rings or any(len(s.ring) == 0 for s in rings):
            return [False] * len(keys)
        owned = [True] * len(keys)
        for s in rings:
            if self.replicas == 1:
                owners = s.ring.node_for_many(keys) if keys else []
                owned = [
                    was and owner == self.name for was, owner in zip(owned, owners, strict=True)
                ]
            else:
                owned = [
                    was and self.name in s.ring.nodes_for(key, self.replicas)
                    for was, key in zip(owned, keys, strict=True)
                ]
        return owned

    # -- reporting -------------------------------------------------------------------------------

    def subscribe(self, callback: Callable[[MemberChange], None]) -> None:
        """Call `callback` with lost arcs when applied and gained arcs once owned."""
        self._callbacks.append(callback)

    def relay(self, change: Change) -> None:
        """On the dispatcher thread: report what `change` took away, then what is now owned."""
        self._latest = change
        with self._applied_lock:
            applied = self._applied_at.get(change.new.epoch, change.applied_s)
            self._applied_at[change.new.epoch] = min(applied, change.applied_s)
        previous = self._regions.get(change.old.epoch)
        if isinstance(change.new.ring, HashRing) and self.replicas == 1:
            # The member's own arcs: O(T) once, where a diff of the rings costs 9 ms at N = 50
            # in every member process at every change.
            region = self._region_of(change.new)
        else:
            before = previous if previous is not None else self._region_of(change.old)
            region = self._region_after(before, change)
        self._regions[change.new.epoch] = region
        # Only a hash ring's regions are exact: a table's may come out empty (its diff cannot
        # segment), so a change of or to a table counts as a gain, and the marks decide.
        exact = isinstance(change.old.ring, HashRing) and isinstance(change.new.ring, HashRing)
        grew = not exact or previous is None or bool(region.subtract(previous))
        if not grew and self._floor >= change.old.epoch:
            self._floor = max(self._floor, change.new.epoch)  # nothing gained: nothing to wait
        elif self._floor < change.new.epoch:
            # It waits for the marks: its release thread reads or follows them. A read does
            # unless a member still live held some of its arcs just before (it must release).
            self._watch_needed = not exact or self._held_by_others(change, region)
            self._wake.set()
        lost = self._reported.subtract(region)
        if lost:
            self._reported = self._reported.intersect(region)
            self._report(change, (), lost.arcs(self.name))
        self.settle()

    def settle(self) -> None:
        """On the dispatcher thread: report the arcs that became owned since the last report."""
        self._settle_queued = False
        change = self._latest
        if change is None or self._store.blind_s() > 0 or not self._regions:
            return
        settled = self.settled_epoch(change.new.epoch)
        marks = self._store.marks
        if (
            settled < change.new.epoch
            and not marks.fresh()
            and marks.complete_at() >= change.new.revision
        ):
            # The marks read since the change are not enough: follow them from now on.
            self._watch_needed = True
            self._wake.set()
        # Owned from here on, and reported below before any later change is relayed: the
        # dispatcher thread runs both, so a gain is never taken away unreported.
        self._floor = max(self._floor, settled)
        if (settled, change.new.epoch) == self._settled_at:
            return  # nothing new: N members' marks each wake every member once per change
        self._settled_at = (settled, change.new.epoch)
        held = [epoch for epoch in self._regions if epoch <= settled]
        if not held:
            return
        start = max(held)
        for epoch in [e for e in self._regions if e < start]:
            del self._regions[epoch]
        owned = self._regions[start]
        for epoch, region in self._regions.items():
            if epoch > start:
                owned = owned.intersect(region)
        gained = owned.subtract(self._reported)
        if gained:
            self._reported = self._reported.union(gained)
            self._report(change, gained.arcs(self.name), ())

    def _held_by_others(self, change: Change, region: Region) -> bool:
        """Whether a member still in the ring at `change` held some of `region` in the one before.

        Such a member must release first, and its mark comes after this member's read: the
        marks are followed. A member that left the ring (it leaves, or its lease ended) has
        released by the time the read comes, or soon after (it leaves because it is done).
        """
        ring = change.old.ring
        if self.replicas != 1 or not isinstance(ring, HashRing):
            return True
        still = {node.name for node in change.new.ring.nodes}
        return bool((region.holders(ring) - {self.name}) & still)

    def _region_of(self, snapshot: Snapshot) -> Region:
        ring = snapshot.ring
        if self.name not in {node.name for node in ring.nodes}:
            return Region.empty()
        if isinstance(ring, HashRing) and self.replicas == 1:
            return Region.of_member(ring, self.name)
        empty = HashRing.from_tokens({}, space=ring.space if isinstance(ring, HashRing) else SPACE)
        try:
            gained = movement_between(empty, ring, replicas=self.replicas).gained(self.name)
        except ConfigError:  # a table diff cannot segment: its arcs come with each change
            return Region.empty()
        return Region.of_arcs(gained)

    def _region_after(self, previous: Region, change: Change) -> Region:
        if self.name not in {node.name for node in change.new.ring.nodes}:
            return Region.empty()
        movement = change.movement_for(self.replicas)
        names = set(movement.nodes_before) | set(movement.nodes_after)
        if self.name not in names:
            return previous
        gained, lost = (
            Region.of_arcs(movement.gained(self.name)),
            Region.of_arcs(movement.lost(self.name)),
        )
        return previous.subtract(lost).union(gained)

    def _report(self, change: Change, gained: tuple[Arc, ...], lost: tuple[Arc, ...]) -> None:
        report = MemberChange(
            self.name, change.old.epoch, change.new.epoch, self.replicas, gained, lost, change
        )
        for callback in list(self._callbacks):
            try:
                callback(report)
            except Exception:  # one callback's bug must not stop the handoff
                _log.exception("on_change callback %r of %s failed", callback, self.name)

    def marks_changed(self) -> None:
        """Marks changed: look again at what this member owns (soon), and at its own mark.

        A mark of this member that someone else overwrote (under another lease, or none) or
        deleted is written again at once: without it the others would stop waiting for this
        member. It is written again at the epoch the member holds: the rewrite neither lowers
        the mark nor makes released epochs pending again (a member once gave up its lease with
        its mark reset to -1 by a rewrite). A lower epoch under this member's own lease is an
        earlier write of its own delivered late: no reason to write again.
        """
        found = self._store.mark_of(self.name)
        if self._mark >= 0 and (found is None or found[1] != self._lease):
            # Written again at the epoch it holds: the mark itself is never lowered, and the
            # release is not pending again (its epochs stay released).
            self._rewrite = True
            self._wake.set()
        if self._waits():
            # Only a member holding arcs it does not own yet needs a look: the echo of each
            # member's own mark write would otherwise wake its dispatcher once per change
            # (a change relayed later ends with a look of its own).
            self._queue_settle()

    def _queue_settle(self) -> None:
        if not self._settle_queued:  # one look per burst of marks is enough
            self._settle_queued = True
            self._store.dispatcher.call_soon(self.settle)

    # -- releasing -------------------------------------------------------------------------------

    def first_mark(self) -> tuple[str, bytes]:
        """The (key, value) of the mark to write with the member's record: the delivered epoch.

        :raises BackendError: when the member has stopped (it gave up or closed meanwhile: a
            heartbeat that found its lease gone must not register it again)
        """
        if self._stopped.is_set():
            raise BackendError(f"member {self.name!r} has stopped; join again")
        # A registration after a lost lease keeps what it released under the old one: the
        # dispatcher may trail the mark (a member without callbacks marks the applied epoch).
        self._first = max(self._store.dispatcher.delivered, self._mark)
        return self._store.mark_key(self.name), encode_mark(self.name, self._first)

    def start(self, lease: int, revision: int) -> None:
        """Follow from the first mark, written under `lease` at `revision` with the record.

        The member has gained its arcs: its store follows every mark from a read made now
        (a member alone owns at once). A read or watch that fails is tried again on the
        store's marks thread.
        """
        with self._writing:
            self._lease, self._mark, self._mark_revision = lease, self._first, revision
            self._rewrite = False
        marks = self._store.marks
        marks.wrote(self.name, encode_mark(self.name, self._first), lease, revision)
        with contextlib.suppress(BackendError):
            marks.watch_own(self.name, revision + 1)
        with contextlib.suppress(BackendError):  # tried again on the store's marks thread
            self._follow(wanted=True)
        if self._thread.ident is None:  # a rejoin after a lost lease keeps the one thread
            self._thread.start()

    def _waits(self) -> bool:
        """Whether this member holds arcs it does not own yet (it needs the others' marks)."""
        latest = self._latest
        return latest is None or self._floor < latest.new.epoch

    def _follow(self, *, wanted: bool, wait: bool = True) -> None:
        """Have the store follow every mark while this member waits, and not once it does not.

        With `wait`, returns once the marks are read (else they are read on the store's marks
        thread).

        :raises BackendError: with `wait`, when the marks cannot be read yet
        """
        with self._follow_lock:
            if wanted == self._following:
                return
            self._following = wanted
            if wanted:
                self._store.marks.follow(wait=wait)
            else:
                self._store.marks.unfollow()

    def _read_marks(self, epoch: int) -> None:
        """Have the store read every mark once for the wait at `epoch` (on its marks thread)."""
        if self._read_for < epoch:
            self._read_for = epoch
            self._store.marks.read()

    def write_mark(self, epoch: int) -> None:
        """Raise the release mark to `epoch` (never lowers it).

        :raises BackendError: when the service cannot be reached
        """
        with self._writing:
            self._write_mark(epoch)

    def _write_mark(self, epoch: int) -> None:
        rewrite, self._rewrite = self._rewrite, False
        if epoch <= self._mark and not rewrite:
            return
        epoch = max(epoch, self._mark)
        backend, key = self._store.backend, self._store.mark_key(self.name)
        value = encode_mark(self.name, epoch)
        try:
            ok, record = backend.swap(key, value, self._lease, self._mark_revision)
            if not ok:  # written by an earlier lease of ours, or by hand: take it over
                ok, record = backend.swap(key, value, self._lease, record.mod_revision)
        except BackendError:
            self._rewrite |= rewrite
            raise
        if not ok:
            self._rewrite |= rewrite
            raise BackendError(f"release mark {key!r} changed while it was written; retrying")
        self._wrote(epoch, value, self._lease, record)

    def _wrote(self, epoch: int, value: bytes, lease: int, record: Record) -> None:
        """Note the mark written at `epoch` (`value`, under `lease`): `record` is its write."""
        self._mark, self._mark_revision = epoch, record.mod_revision
        self._sent_failed = False
        self._store.marks.wrote(self.name, value, lease, record.mod_revision)

    def leave_mark(self, epoch: int) -> None:
        """Raise the mark to the leaving epoch (its callbacks have returned)."""
        with contextlib.suppress(BackendError):  # the lease then ends by itself
            self.write_mark(epoch)

    def applied(self) -> None:
        """On the thread that applied a change: with no callback to wait for, mark it now.

        The mark waits for this member's ``on_change`` calls for lost arcs; a member that has
        none (it acts on ``owns`` alone, which answers from the applied epoch) need not wait
        for the dispatcher to reach the change behind other subscribers.
        """
        if not self._callbacks:
            self._send_mark()

    def _send_mark(self) -> None:
        """Send the mark from this thread without waiting; else wake the release thread."""
        if (
            not self._lease
            or self._sent_failed
            or self._rewrite
            or self._stopped.is_set()
            or not self._writing.acquire(blocking=False)
        ):
            self._wake.set()
            return
        epoch, lease = self._target(), self._lease
        if epoch <= self._mark:
            self._writing.release()
            return
        value = encode_mark(self.name, epoch)

        def answered(result: SwapAnswer) -> None:
            written = False
            try:
                if not isinstance(result, BackendError) and result[0]:
                    self._wrote(epoch, value, lease, result[1])
                    written = True
            finally:
                if not written:  # unanswered, or overwritten: the release thread takes over
                    self._sent_failed = True
                self._writing.release()
                if not written:
                    self._wake.set()

        key = self._store.mark_key(self.name)
        try:
            self._store.backend.start_swap(key, value, lease, self._mark_revision, answered)
        except BaseException:  # never sent: nothing will answer, so nothing else releases
            self._sent_failed = True
            self._writing.release()
            self._wake.set()
            raise

    def _target(self) -> int:
        """The epoch the mark may be raised to now."""
        if not self._callbacks:
            # NOTE: a callback subscribed later may still be told of arcs lost at an epoch
            # marked here: it came after the release, when owns() had already stopped.
            return max(self._store.dispatcher.delivered, self._store.snapshot().epoch)
        return self._store.dispatcher.delivered

    def _pending_since(self, now: float) -> float | None:
        """When the oldest epoch above the mark was applied (None: the mark is up to date).

        Each epoch's release is timed from when it was applied, not from when the mark last
        matched the latest epoch: under a steady stream of changes (fifty processes starting,
        each join an epoch) the mark trails the latest epoch for good while every release
        completes in one mark write, and such a member is not stuck.
        """
        latest = self._store.snapshot().epoch
        with self._applied_lock:
            for epoch in [epoch for epoch in self._applied_at if epoch <= self._mark]:
                del self._applied_at[epoch]
            if latest > self._mark and latest not in self._applied_at:
                # Not relayed yet (queued behind a callback): pending from now at the latest.
                self._applied_at[latest] = now
            return min(self._applied_at.values(), default=None)

    def _run(self) -> None:
        """Write the mark as deliveries advance; give up when a release hangs too long."""
        not_current_since: float | None = None
        while not self._stopped.is_set():
            self._wake.wait(_RELEASE_POLL_S)
            self._wake.clear()
            if self._stopped.is_set():
                return
            with contextlib.suppress(BackendError):
                self.write_mark(self._target())
            waits, latest = self._waits(), self._latest
            if waits and latest is not None and not self._watch_needed:
                self._read_marks(latest.new.epoch)
            self._follow(wanted=waits and self._watch_needed, wait=False)  # on the marks thread
            if waits:
                # Not owned yet: look again on the dispatcher (a wait for departures this store
                # did not see ends with time, not with a mark or a change that would wake it).
                self._queue_settle()
            now = time.monotonic()
            current = self._store.is_current()
            if current:
                not_current_since = None
            elif not_current_since is None:
                not_current_since = now
            since = min(
                (t for t in (self._pending_since(now), not_current_since) if t is not None),
                default=None,
            )
            if since is not None and now - since > self._release_timeout_s:
                reason = (
                    f"release pending past release_timeout_s {self._release_timeout_s:g} s "
                    f"(mark {self._mark}, epoch {self._store.snapshot().epoch}, store current: "
                    f"{current})"
                )
                not_current_since = None
                with self._applied_lock:
                    self._applied_at.clear()
                self._give_up(reason)

    def stop(self) -> None:
        """Stop writing marks (the member closed)."""
        self._stopped.set()
        self._wake.set()
        self._remove_hook()
        with contextlib.suppress(BackendError):
            self._follow(wanted=False)
        self._store.marks.unwatch_own(self.name)
