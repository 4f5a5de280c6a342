"""Store: one process's view of a live ring, kept current by a watch, and its changes dispatched.

A store holds the records under its prefix (``members/NAME``, one per member, under that
member's lease; ``table``, a controller's table) exactly as they were at its current *epoch*:
the revision of the last change under the prefix. It starts from the records at the revision of
the newest one (a past revision, read as it was) and replays every later change from the
service's history through a watch, so every process passes through the same epochs and builds
the same ring at each: the property dskit's ring gets from one CAS-updated descriptor, here
from etcd's revisions (Cassandra gossips instead and converges eventually).

Each new epoch becomes a :class:`Change`; one *dispatcher thread* per store calls the
subscribers, in epoch order, one at a time, so a slow subscriber delays the others but never
reorders them. asyncio users iterate ``store.changes()``.

The parts are modules of their own: the records and the snapshot they make
(:mod:`ringkit.live.followed`), the watch and its re-creation (:mod:`ringkit.live.watching`),
restores (:mod:`ringkit.live.restore`), currency (:mod:`ringkit.live.currency`), what exclusive
members need (:mod:`ringkit.live.ledger`) and the subscribers' thread
(:mod:`ringkit.live.dispatch`). This module applies changes, moves the epoch and answers users.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from ringkit.errors import (
    BackendError,
    ConfigError,
    UnknownNodeError,
    ViewConflictError,
    format_names,
)
from ringkit.live.backend import Backend, Event, Record
from ringkit.live.change import Change
from ringkit.live.currency import Confirmer
from ringkit.live.dispatch import Dispatcher, Subscription
from ringkit.live.followed import FollowedRecords
from ringkit.live.ledger import HandoffLedger
from ringkit.live.marks import MARKS_FOLDER
from ringkit.live.markwatch import MarksWatch, range_end
from ringkit.live.member import Member
from ringkit.live.metrics import StoreMetrics, track_store
from ringkit.live.opening import check_current_within, open_store_backend
from ringkit.live.recovery import Recovery
from ringkit.live.snapshot import SkippedRecord, Snapshot, encode_table
from ringkit.live.urls import redacted
from ringkit.live.watching import PrefixWatch
from ringkit.placement import Placement

__all__ = ["Store", "connect", "open_store_backend"]

_log = logging.getLogger("ringkit.live")
#: How long a store with no members counts as current after a confirmation.
_DEFAULT_WITHIN_S = 5.0


def connect(
    url: str, *, current_within_s: float | None = None, metrics_registry: object | None = None
) -> Store:
    """Connect to the live ring at `url` and return its :class:`Store`.

    ``etcd://h1:2379,h2:2379/PREFIX`` (``etcds://`` for TLS, ``user:password@`` for auth) or
    ``memory://NAME`` (shared by the threads of this process). The store confirms that it is
    current at least every `current_within_s` / 2 (:mod:`ringkit.live.currency`); members'
    ``owns`` is False once it has not been confirmed for `current_within_s`. By default that
    is half the smallest ``ttl_s`` among the ring's members, or 5 s when it has none.
    `metrics_registry`: a ``prometheus_client`` registry to report the store's metrics in
    (:mod:`ringkit.live.metrics`), or None (default).

    >>> store = connect("memory://connect-doctest")
    >>> store.snapshot().epoch, len(store.snapshot().ring)
    (0, 0)
    >>> store.close()

    :raises ConfigError: for a malformed URL or a `current_within_s` that is not > 0
    :raises BackendError: when etcd cannot be reached within a few seconds (the message names
        the hosts and the cause)
    """
    within = check_current_within(current_within_s)
    backend, prefix = open_store_backend(url)
    store = Store(backend, prefix, url, current_within_s=within)
    if metrics_registry is not None:
        try:
            store.metrics = track_store(store, metrics_registry)
        except ConfigError:
            store.close()
            raise
    return store


class Store:
    """A live ring as this process sees it: snapshots, changes, members, published tables.

    Reading: ``snapshot``, ``wait_for``. Following: ``subscribe``, ``changes`` (async).
    Currency: ``is_current``, ``confirmed_age_s``, ``current_within_s``.
    Taking part: ``join``. Controllers: ``publish``. ``close`` (also a context manager).
    """

    def __init__(
        self,
        backend: Backend,
        prefix: str,
        url: str = "",
        *,
        current_within_s: float | None = None,
    ) -> None:
        self._backend, self._prefix, self._url = backend, prefix, url
        self._followed = FollowedRecords(prefix)
        self._marks_prefix = prefix + MARKS_FOLDER
        self._ledger = HandoffLedger()
        self._marks = MarksWatch(
            backend, self._marks_prefix, ledger=self._ledger, changed=self._marks_changed
        )
        self._lock = threading.Condition()
        self._closed = False
        self.metrics: StoreMetrics | None = None  # set by connect(metrics_registry=)
        self._members: list[Member] = []
        self._recovery = Recovery(
            backend,
            prefix,
            self._followed.base_key,
            relevant=self._followed.relevant,
            closed=lambda: self._closed,
            held=self._held,
            read=self._read,
            adopt=self._adopt,
            rewatch=lambda: self._watch.start(replace=True),
        )
        self._applied = 0  # the highest revision applied (the watch delivers in order)
        self._within_s = check_current_within(current_within_s)
        self._default_within_s = _DEFAULT_WITHIN_S
        self._confirmer = Confirmer(
            self, self.current_within_s, name=prefix, on_resume=self._resumed
        )
        sent = time.monotonic()
        self._snapshot = self._load()
        self._ledger.followed(self._snapshot)
        self._dispatcher = Dispatcher(prefix, delivered=self._snapshot.epoch)
        # The ring's watch leaves out the release marks, which sort first under the prefix:
        # only a member that waits to own needs them (see ringkit.live.markwatch).
        self._watch = PrefixWatch(
            backend,
            range_end(self._marks_prefix),
            range_end=range_end(prefix),
            from_revision=lambda: self._snapshot.revision + 1,
            on_events=self._on_events,
            before_resume=self._before_resume,
        )
        self._watch.start()
        self._confirmer.confirmed(sent)  # the read at connect is current as of its sending
        self._confirmer.start()

    @property
    def backend(self) -> Backend:
        """The coordination service (memory or etcd) this store reads and writes."""
        return self._backend

    @property
    def prefix(self) -> str:
        """The key prefix of this ring in the service."""
        return self._prefix

    @property
    def url(self) -> str:
        """The store's URL without credentials (as logs and metrics show it)."""
        return redacted(self._url) if self._url else self._backend.describe()

    def member_key(self, name: str) -> str:
        """Return the key of member `name`'s record."""
        return self._followed.members_prefix + name

    # -- following the service -------------------------------------------------------------------

    def _read(self) -> tuple[int, list[Record]]:
        """Read the records under the prefix now; note the cluster that answered.

        The release marks read with them are taken as they are (they only grow).
        """
        revision, records = self._backend.get_prefix(self._prefix)
        self._recovery.note_cluster(self._backend.cluster_id())
        marks = [r for r in records if r.key.startswith(self._marks_prefix)]
        self._ledger.load_marks(marks, revision)
        self._applied = revision
        return revision, records

    def _load(self) -> Snapshot:
        """Start from the current records, labelled with the revision of the read.

        Never from replayed history: a process that connects after members left is not told
        of their old changes, and ``wait_for`` sees only the members there now (the same
        ring every process that applied the changes up to that revision holds).
        """
        revision, records = self._read()
        self._followed.replace(records)
        return self._build(revision)

    def _build(self, revision: int, previous: Snapshot | None = None) -> Snapshot:
        snapshot = self._followed.build(revision, previous)
        ttls = [m.ttl_s for m in snapshot.members.values()]
        within = min(ttls) / 2 if ttls else _DEFAULT_WITHIN_S
        if within < self._default_within_s:
            self._confirmer.reschedule()
        self._default_within_s = within
        return snapshot

    def _on_events(self, events: Sequence[Event]) -> None:
        # Called by the etcd client, which swallows exceptions: one here must not end the
        # store's following, so it is logged and the next change rebuilds from the records.
        try:
            self._apply(events)
        except Exception:
            _log.exception("applying the changes at revision %d failed", events[0].revision)

    def _apply(self, events: Sequence[Event]) -> None:
        with self._lock:
            revision = events[0].revision
            if revision > self._applied:
                self._applied = revision
                self._lock.notify_all()
            if self._closed or revision <= self._snapshot.revision:
                return
            if not self._followed.apply(events):
                return
            old = self._snapshot
            new = self._build(revision, old)
            if new.epoch <= old.epoch:
                # The base went down (deleted or lowered by hand): raise it again, as after a
                # restore, rather than move this store backwards.
                self._recovery.soon(f"the epoch base fell at revision {revision}")
                return
            self._snapshot = new
            self._ledger.followed(new)
            self._lock.notify_all()
        self._publish(Change(old, new))

    def _before_resume(self, compacted: bool) -> bool:
        """Before a broken watch is opened again: check what etcd still holds.

        A compacted history needs a fresh read; a restored etcd would accept a watch from a
        revision it has not reached and stay silent (see :mod:`ringkit.live.restore`). Return
        whether the watch should be opened again (a recovery opens it itself).
        """
        if compacted:
            self._recovery.reload()
        return not self._recovery.check()

    def _held(self) -> tuple[int, int, dict[str, Record]]:
        with self._lock:
            return self._snapshot.epoch, self._snapshot.revision, self._followed.as_dict()

    def _adopt(
        self,
        revision: int,
        records: list[Record],
        *,
        restored: bool,
        adopted: Callable[[], None] | None = None,
    ) -> bool:
        """Move to the records of a fresh read as one change; return whether the epoch rose.

        After a restore (`restored`) the read's revision may be below the store's (the base
        was raised first); otherwise a read no newer than what the watch applied is dropped.
        The records were read, not followed: changes in between went unseen, so exclusive
        members wait out the longest lease and fencing tokens start again (the ledger's jump).
        """
        with self._lock:
            old = self._snapshot
            if not restored and revision <= old.revision:
                return False
            self._followed.replace(records)
            self._applied = revision
            new = self._build(revision, old)
            if new.epoch <= old.epoch:
                return False
            self._snapshot = new
            # The owners to wait out are the members of the ring left behind as much as of the
            # new one: after a restore to an empty etcd the new ring has none, while the old
            # one's members may still act on the lost history until their stores notice.
            members = (*old.members.values(), *new.members.values())
            self._ledger.jumped(new, blind_s=max((m.ttl_s for m in members), default=0.0))
            if restored:  # etcd counts its revisions again: marks and their watches restart
                marks = [r for r in records if r.key.startswith(self._marks_prefix)]
                self._ledger.load_marks(marks, revision, restored=True)
                self._marks.restart()
            if adopted is not None:
                adopted()
            self._lock.notify_all()
        self._publish(Change(old, new))
        return True

    def _publish(self, change: Change) -> None:
        """Log who joined and left at the change's epoch, then hand it to the subscribers."""
        old, new = change.old.members, change.new.members
        joined, left = sorted(new.keys() - old.keys()), sorted(old.keys() - new.keys())
        if joined or left:
            _log.info(
                "ring %s at epoch %d: %s",
                self.url,
                change.new.epoch,
                ", ".join(
                    [*(f"{name} joined" for name in joined), *(f"{name} left" for name in left)]
                ),
            )
        # A member with no callback sends its release mark first: the gainers wait for it,
        # while this store's subscribers wait only for the dispatcher.
        for member in list(self._members):
            member._applied()
        self._dispatcher.put(change)

    # -- currency --------------------------------------------------------------------------------

    def current_within_s(self) -> float:
        """The seconds after its last confirmation that this store still counts as current.

        The `current_within_s` given to :func:`connect`, else half the smallest ``ttl_s`` among
        the latest snapshot's members, or 5 s when it has none.
        """
        return self._within_s if self._within_s is not None else self._default_within_s

    def is_current(self) -> bool:
        """Whether this store's last confirmation was sent within ``current_within_s()``."""
        return not self._closed and self._confirmer.current()

    def wait_current(self, *, timeout_s: float = 10.0) -> bool:
        """Block until this store is confirmed current; return whether it was in time."""
        return self._confirmer.wait_current(timeout_s)

    def confirmed_age_s(self) -> float:
        """Seconds since the read that last confirmed this store current was sent."""
        return self._confirmer.age_s()

    def read_revisions(self, timeout_s: float) -> tuple[int, dict[str, int]]:
        """Read the followed keys' mod revisions from the service (for the confirmer)."""
        # NOTE: the floor is what was applied *before* the read was sent: the watch may apply
        # a later revision while the read is under way, and that is no restore.
        floor, seen = self._applied, self._recovery.count
        revision, found = self._backend.read_revisions(self._prefix, timeout_s=timeout_s)
        cluster = self._backend.cluster_id()
        if revision < floor or self._recovery.cluster_changed(cluster):
            # etcd was restored or replaced under this store (see live.restore).
            self._recovery.soon(
                f"etcd answered at revision {revision} (cluster {cluster:x})", seen=seen
            )
            raise BackendError(
                f"{self._backend.describe()} must be the cluster this store followed, at "
                f"revision {floor} or later, to confirm the ring; got revision "
                f"{revision} (restored?)"
            )
        return revision, {key: rev for key, rev in found.items() if self._followed.relevant(key)}

    def holds(self, revision: int, found: dict[str, int], timeout_s: float) -> bool:
        """Wait up to `timeout_s` until this store holds what the service held at `revision`.

        It does once it holds the same records, or has applied `revision` with records that
        agree with `found` (a change under the prefix that the ring does not follow moves
        the service's revision alone). Having applied `revision` is not enough by itself: an
        etcd restored under the store counts its revisions again from 1 and, once it reaches
        the store's, answers at that revision with other records; a store that took that for
        a confirmation would answer from the lost history while the stores that noticed the
        restore move on (a key's fencing token would fall when ownership moved back to it).
        """
        with self._lock:
            return self._lock.wait_for(
                lambda: (
                    self._closed
                    or self._followed.mod_revisions() == found
                    or self._followed.agrees(found, revision, applied=self._applied)
                ),
                timeout=timeout_s,
            )

    def rewatch(self) -> None:
        """Open the watch again from the next revision, on another endpoint (it went silent)."""
        if not self._closed and not self._recovery.check():
            self._watch.start(replace=True)

    # -- exclusive handoff -----------------------------------------------------------------------

    def mark_key(self, name: str) -> str:
        """Return the key of member `name`'s release mark."""
        return self._marks_prefix + name

    @property
    def marks(self) -> MarksWatch:
        """The release marks this store follows (its members' own; all, while one waits)."""
        return self._marks

    def _marks_changed(self) -> None:
        for member in list(self._members):
            member._marks_changed()

    def mark_of(self, name: str) -> tuple[int, int] | None:
        """Member `name`'s release mark as this store follows it: (epoch, lease), or None."""
        return self._ledger.mark_of(name)

    def marks_version(self) -> int:
        """A counter that moves whenever a release mark this store follows changes."""
        return self._ledger.marks_version()

    def settled_epoch(self, name: str) -> int:
        """The highest epoch every other exclusive member has released (see ``handoff``).

        The latest epoch when no other member keeps a release mark. Members in the default
        mode keep none and are not waited for.
        """
        with self._lock:
            snapshot = self._snapshot
        return self._ledger.settled(snapshot.epoch, snapshot.members, excluding=name)

    def released(self, name: str) -> dict[str, int]:
        """The epoch every other exclusive member has released, by name (latest snapshot's)."""
        with self._lock:
            snapshot = self._snapshot
        return self._ledger.released(snapshot.members, excluding=name)

    def history_since(self, epoch: int, *, unbroken: bool = False) -> list[Snapshot] | None:
        """The snapshots this store held from `epoch` on: the one holding `epoch`, and later.

        None when that one is older than the history kept; with `unbroken`, also when the
        history breaks after it (the store read the state afresh since).
        """
        return self._ledger.history_since(epoch, unbroken=unbroken)

    def history(self) -> tuple[list[Snapshot], set[int]]:
        """The snapshots kept (oldest first) and the epochs where the history is broken."""
        return self._ledger.history()

    def _resumed(self) -> None:
        self._ledger.resumed(self._snapshot.epoch)

    def resumed_epoch(self) -> int:
        """The epoch this store held when it last became current after a lapse."""
        return self._ledger.resumed_epoch()

    def longest_ttl_s(self) -> float:
        """The longest ``ttl_s`` among the latest snapshot's members (0 when none)."""
        return max((m.ttl_s for m in self._snapshot.members.values()), default=0.0)

    def blind_for(self, seconds: float) -> None:
        """Make exclusive members own nothing newly for `seconds` (unseen departures)."""
        self._ledger.blind_for(seconds)

    def blind_s(self) -> float:
        """Seconds left of a wait for departures this store did not see (0: none)."""
        return self._ledger.blind_s()

    @property
    def dispatcher(self) -> Dispatcher:
        """The thread that calls subscribers (members hook their release marks on it)."""
        return self._dispatcher

    # -- reading ---------------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """Return the latest snapshot this process has seen (never blocks). Runtime: O(1)."""
        return self._snapshot

    def skipped_records(self) -> tuple[SkippedRecord, ...]:
        """Every record under the prefix that this store skips as invalid, by key.

        The latest snapshot's member and table records, and the release records
        (``_released/NAME``) that are not valid marks: those change no epoch, so no snapshot
        lists them, and they are as of the store's last read of the marks (at connect, and
        while a member waits; its own members' marks always). ``ringkit ring status`` and the
        ``ringkit_live_records_skipped`` metric count these.
        """
        both = (*self._snapshot.skipped, *self._ledger.skipped_marks())
        return tuple(sorted(both, key=lambda record: record.key))

    def wait_for(
        self, predicate: Callable[[Snapshot], bool], *, timeout_s: float = 10.0
    ) -> Snapshot:
        """Block until a snapshot satisfies `predicate`; return it.

        :raises TimeoutError: when none does within `timeout_s`
        """
        with self._lock:
            if not self._lock.wait_for(lambda: predicate(self._snapshot), timeout=timeout_s):
                raise TimeoutError(
                    f"no snapshot satisfied the condition within {timeout_s} s; "
                    f"latest {self._snapshot!r}"
                )
            return self._snapshot

    def lease_remaining_s(self, name: str) -> float:
        """Return the seconds member `name`'s lease has left now (0 when it is gone).

        Asked of the service: a snapshot holds each member's TTL, not a countdown, since a
        countdown in an immutable value is stale the moment it is read.

        :raises UnknownNodeError: when the latest snapshot has no member `name`
        """
        info = self._snapshot.members.get(name)
        if info is None:
            raise UnknownNodeError(
                f"member {name!r} is not in the live ring "
                f"({len(self._snapshot.members)} members: {format_names(self._snapshot.members)})"
            )
        return self._backend.time_to_live(info.lease)

    # -- dispatching -----------------------------------------------------------------------------

    def subscribe(self, callback: Callable[[Change], None]) -> Subscription:
        """Call `callback(change)` on every new epoch from now on, in order.

        "From now on" means every epoch after the one ``snapshot()`` returns at the time of the
        call, even if an earlier change is still queued for delivery. Calls come from this
        store's one dispatcher thread (:mod:`ringkit.live.dispatch`); an exception in a
        callback is logged and does not stop the others.
        """
        return self._dispatcher.subscribe(callback, after_epoch=self.snapshot().epoch)

    def wait_delivered(self, epoch: int, *, timeout_s: float = 10.0) -> bool:
        """Block until every subscriber has been called for `epoch`; return whether it was."""
        return self._dispatcher.wait_delivered(epoch, timeout_s=timeout_s)

    async def changes(self) -> AsyncIterator[Change]:
        """Yield every new epoch's :class:`Change`, in order, to an asyncio task.

        The dispatcher thread hands each change to the running loop; iteration ends when the
        store closes.
        """
        async for change in self._dispatcher.changes(after_epoch=self.snapshot().epoch):
            yield change

    # -- taking part -----------------------------------------------------------------------------

    def join(
        self,
        name: str,
        *,
        weight: float = 1.0,
        zone: str | None = None,
        data: Any = None,
        ttl_s: float = 10.0,
        ready: bool = True,
        vnodes: int = 160,
        allocate: bool = False,
        handoff: str = "default",
        replicas: int = 1,
        release_timeout_s: float | None = None,
        wait_s: float = 0.0,
    ) -> Member:
        """Register member `name` under a lease kept alive in the background; return it.

        Its tokens are chosen once, now: `vnodes` hashed exactly as ``HashRing`` hashes them, or
        with `allocate` as ``allocate_tokens`` places them against the current ring. It is
        ``active`` at once, or ``joining`` until ``member.ready()`` when `ready` is False.

        `handoff` ``"exclusive"`` (:mod:`ringkit.live.handoff`) makes the member own an arc it
        gained only once every other exclusive member has released the epoch, so at most
        `replicas` members answer ``owns(key)`` True at any instant; `replicas` is then fixed
        for ``owns`` and ``on_change``. A member whose release stays pending (or whose store is
        not current) for `release_timeout_s` (default `ttl_s`) revokes its lease and stops.
        Such a join returns once the store's dispatcher has taken the join's epoch (at most
        `ttl_s` later), so a member nobody must release owns at once.

        With `wait_s`, a name still held by another lease (a crashed process restarted by its
        supervisor within the TTL) is waited for, up to `wait_s` seconds, until that lease
        ends; by default the join is refused at once.

        :raises DuplicateNodeError: when a live member holds the name (until its lease ends)
            beyond `wait_s`
        :raises ConfigError: for a bad name, weight, zone, `ttl_s`, `vnodes`, `handoff`,
            `replicas`, `release_timeout_s` or `wait_s`
        :raises BackendError: when the service cannot be reached
        """
        member = Member.join(
            self,
            self._members,
            name,
            weight=weight,
            zone=zone,
            data=data,
            ttl_s=ttl_s,
            ready=ready,
            vnodes=vnodes,
            allocate=allocate,
            handoff=handoff,
            replicas=replicas,
            release_timeout_s=release_timeout_s,
            wait_s=wait_s,
        )
        return member

    # -- controllers -----------------------------------------------------------------------------

    def publish(self, placement: Placement, *, expect_epoch: int) -> Snapshot:
        """Store `placement` as the ring's table if nothing changed since `expect_epoch`.

        Compare-and-swap on the epoch (the table key's revision, 0 for none yet), so of two
        controllers that read the same epoch exactly one wins. Returns the snapshot that holds
        the table.

        :raises ViewConflictError: when another table won; the message names its epoch
        :raises ConfigError: for a placement without a table form
        """
        value = encode_table(placement)
        base = self._snapshot.epoch - self._snapshot.revision
        ok, record = self._backend.put_unless_newer(
            self._followed.table_key, value, expect_epoch - base
        )
        if not ok:
            raise ViewConflictError(
                f"table must be unchanged since epoch {expect_epoch} to publish, got a table "
                f"published at epoch {base + record.mod_revision} by another controller; read "
                "that snapshot and plan again",
                epoch=base + record.mod_revision,
            )
        return self.wait_for(lambda s: s.revision >= record.mod_revision)

    # -- closing ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Close this store's members (their leases end), then the watch, dispatcher, client."""
        if self._closed:
            return
        for member in self._members:
            member.close()
        self._closed = True
        if self.metrics is not None:
            self.metrics.untrack(self)
        self._confirmer.close()
        self._watch.close()
        self._marks.close()
        self._backend.close()
        self._dispatcher.close()
        with self._lock:
            self._lock.notify_all()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({self.url!r}, epoch={self._snapshot.epoch})"
