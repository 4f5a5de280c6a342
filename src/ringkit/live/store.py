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
"""

from __future__ import annotations

import asyncio
import collections
import logging
import math
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
from ringkit.live.backend import Backend, Event, Record, WatchHandle
from ringkit.live.change import Change
from ringkit.live.currency import Confirmer
from ringkit.live.dispatch import Dispatcher, Subscription
from ringkit.live.handoff import MARKS_FOLDER, ReleaseMarks
from ringkit.live.member import Member
from ringkit.live.records import decode_member_record, decode_table_record
from ringkit.live.restore import BASE_KEY, decode_base, raise_base, restore_reason
from ringkit.live.snapshot import MemberInfo, SkippedRecord, Snapshot, encode_table
from ringkit.live.urls import parse_store_url, redacted
from ringkit.placement import Placement

__all__ = ["Store", "connect", "open_store_backend"]

_log = logging.getLogger("ringkit.live")
_RESUME_DELAY_S = 0.1
#: How long a store with no members counts as current after a confirmation.
_DEFAULT_WITHIN_S = 5.0
#: Snapshots kept for exclusive members: the rings since the last epoch every member released.
_HISTORY = 256


def _compacted(error: BaseException | None) -> bool:
    """Whether `error` (or its cause) says the revision asked for was compacted away."""
    while error is not None:
        if "compact" in (type(error).__name__ + str(error)).lower():
            return True
        error = error.__cause__
    return False


def open_store_backend(url: str) -> tuple[Backend, str]:
    """Open the coordination service `url` names; return it and the URL's key prefix.

    What :func:`connect` opens, for other users of the same service (the cache client keeps
    its cluster view in etcd through it, :mod:`ringkit.cluster.etcdviews`).

    >>> backend, prefix = open_store_backend("memory://open-doctest")
    >>> backend.describe(), prefix
    ('memory://open-doctest', '/')

    :raises ConfigError: for a malformed URL
    :raises BackendError: when etcd cannot be reached within a few seconds
    """
    parsed = parse_store_url(url)
    if parsed.scheme == "memory":
        from ringkit.live.memory import MemoryBackend

        return MemoryBackend.named(parsed.name), parsed.prefix
    from ringkit.live.etcd import EtcdBackend

    return EtcdBackend(parsed), parsed.prefix


def connect(url: str, *, current_within_s: float | None = None) -> Store:
    """Connect to the live ring at `url` and return its :class:`Store`.

    ``etcd://h1:2379,h2:2379/PREFIX`` (``etcds://`` for TLS, ``user:password@`` for auth) or
    ``memory://NAME`` (shared by the threads of this process). The store confirms that it is
    current at least every `current_within_s` / 2 (:mod:`ringkit.live.currency`); members'
    ``owns`` is False once it has not been confirmed for `current_within_s`. By default that
    is half the smallest ``ttl_s`` among the ring's members, or 5 s when it has none.

    >>> store = connect("memory://connect-doctest")
    >>> store.snapshot().epoch, len(store.snapshot().ring)
    (0, 0)
    >>> store.close()

    :raises ConfigError: for a malformed URL or a `current_within_s` that is not > 0
    :raises BackendError: when etcd cannot be reached within a few seconds (the message names
        the hosts and the cause)
    """
    within = _check_within(current_within_s)
    backend, prefix = open_store_backend(url)
    return Store(backend, prefix, url, current_within_s=within)


def _check_within(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ConfigError(f"current_within_s must be a number > 0 or None, got {value!r}")
    if not math.isfinite(value):
        raise ConfigError(f"current_within_s must be finite, got {value!r}")
    return float(value)


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
        self._members_prefix = prefix + "members/"
        self._table_key = prefix + "table"
        self._base_key = prefix + BASE_KEY
        self._marks_prefix = prefix + MARKS_FOLDER
        self._marks = ReleaseMarks()
        self._marks_version = 0
        self._history: collections.deque[Snapshot] = collections.deque(maxlen=_HISTORY)
        self._blind_until = 0.0  # monotonic: departures this store did not see end here
        self._breaks: set[int] = set()  # epochs whose snapshot does not follow the one before
        self._resumed_epoch = 0  # the epoch at which the store last became current again
        self._lock = threading.Condition()
        self._records: dict[str, Record] = {}
        self._closed = False
        self._watch: WatchHandle | None = None
        self._members: list[Member] = []
        self._decoded: dict[str, tuple[int, MemberInfo | Placement | ConfigError]] = {}
        self._logged: set[tuple[str, int]] = set()
        self._watch_error: BaseException | None = None
        self._cluster_id = 0
        self._recovering = threading.Lock()
        self._recoveries = 0
        self._watch_lock = threading.Lock()
        self._generation = 0
        self._applied = 0  # the highest revision applied (the watch delivers in order)
        self._within_s = _check_within(current_within_s)
        self._default_within_s = _DEFAULT_WITHIN_S
        self._confirmer = Confirmer(
            self, self.current_within_s, name=prefix, on_resume=self._resumed
        )
        sent = time.monotonic()
        self._snapshot = self._load()
        self._history.append(self._snapshot)
        self._dispatcher = Dispatcher(prefix, delivered=self._snapshot.epoch)
        self._start_watch()
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

    def member_key(self, name: str) -> str:
        """Return the key of member `name`'s record."""
        return self._members_prefix + name

    # -- following the service -------------------------------------------------------------------

    def _relevant(self, key: str) -> bool:
        return key.startswith(self._members_prefix) or key in (self._table_key, self._base_key)

    def _read(self) -> tuple[int, list[Record]]:
        """Read the records under the prefix now; note the cluster that answered.

        The release marks read with them are taken as they are (they only grow).
        """
        revision, records = self._backend.get_prefix(self._prefix)
        self._cluster_id = self._backend.cluster_id()
        self._marks.load(r for r in records if r.key.startswith(self._marks_prefix))
        self._applied = revision
        return revision, [r for r in records if self._relevant(r.key)]

    def _load(self) -> Snapshot:
        """Start from the current records, labelled with the revision of the read.

        Never from replayed history: a process that connects after members left is not told
        of their old changes, and ``wait_for`` sees only the members there now (the same
        ring every process that applied the changes up to that revision holds).
        """
        revision, records = self._read()
        self._records = {r.key: r for r in records}
        self._applied = revision
        return self._build(revision)

    def _base(self) -> int:
        record = self._records.get(self._base_key)
        try:
            return decode_base(record)
        except ConfigError as error:
            self._skip(record, str(error))  # type: ignore[arg-type]
            return 0

    def _skip(self, record: Record, reason: str) -> None:
        """Log a skipped record once per write of it (every store skips the same ones)."""
        if (record.key, record.mod_revision) not in self._logged:
            self._logged.add((record.key, record.mod_revision))
            _log.warning(
                "skipping record %s (revision %d): %s", record.key, record.mod_revision, reason
            )

    def _build(self, revision: int, previous: Snapshot | None = None) -> Snapshot:
        snapshot = self._build_snapshot(revision, previous)
        ttls = [m.ttl_s for m in snapshot.members.values()]
        within = min(ttls) / 2 if ttls else _DEFAULT_WITHIN_S
        if within < self._default_within_s:
            self._confirmer.reschedule()
        self._default_within_s = within
        return snapshot

    def _build_snapshot(self, revision: int, previous: Snapshot | None) -> Snapshot:
        members: dict[str, MemberInfo] = {}
        table: Placement | None = None
        skipped: list[SkippedRecord] = []
        for key, record in sorted(self._records.items()):
            if key == self._base_key:
                continue
            found = self._decode(record)
            if isinstance(found, ConfigError):
                self._skip(record, str(found))
                skipped.append(SkippedRecord(key, record.mod_revision, str(found)))
            elif isinstance(found, MemberInfo):
                members[found.name] = found
            else:
                table = found
        epoch = self._base() + revision
        try:
            return Snapshot.build(
                epoch, members, table, previous, revision=revision, skipped=tuple(skipped)
            )
        except Exception:
            # Valid records always build; should one not, rebuild from scratch (a pure
            # function of the records) rather than from `previous`, which is this store's own.
            _log.exception("deriving the ring at epoch %d failed; building it afresh", epoch)
            return Snapshot.build(epoch, members, table, revision=revision, skipped=tuple(skipped))

    def _decode(self, record: Record) -> MemberInfo | Placement | ConfigError:
        """Decode a record once per write (N watchers each decode every change)."""
        cached = self._decoded.get(record.key)
        if cached is None or cached[0] != record.mod_revision:
            found: MemberInfo | Placement | ConfigError
            try:
                if record.key == self._table_key:
                    found = decode_table_record(record.key, record.value)
                else:
                    found = decode_member_record(
                        record.key, record.value, record.lease, self._members_prefix
                    )
            except ConfigError as error:
                found = error
            cached = (record.mod_revision, found)
            self._decoded[record.key] = cached
        return cached[1]

    def _start_watch(self, *, replacing: WatchHandle | None = None) -> None:
        """Watch from the next revision; calls from any earlier watch are dropped from now on."""
        with self._watch_lock:
            if self._closed:
                return  # closing: the client is going away (see close)
            self._generation += 1
            generation = self._generation

            def on_events(events: Sequence[Event]) -> None:
                if generation == self._generation:
                    self._on_events(events)

            def on_error(error: Exception) -> None:
                if generation == self._generation:
                    self._on_watch_error(error)

            self._watch = self._backend.watch(
                self._prefix,
                self._snapshot.revision + 1,
                on_events,
                on_error,
                replacing=replacing,
            )

    def _on_events(self, events: Sequence[Event]) -> None:
        # Called by the etcd client, which swallows exceptions: one here must not end the
        # store's following, so it is logged and the next change rebuilds from the records.
        try:
            self._apply(events)
        except Exception:
            _log.exception("applying the changes at revision %d failed", events[0].revision)

    def _apply(self, events: Sequence[Event]) -> None:
        with self._lock:
            relevant = [e for e in events if self._relevant(e.key)]
            revision = events[0].revision
            if revision > self._applied:
                self._applied = revision
                marks = [e for e in events if e.key.startswith(self._marks_prefix)]
                if marks and self._marks.apply(marks):
                    self._marks_changed()
                self._lock.notify_all()
            if self._closed or revision <= self._snapshot.revision or not relevant:
                return
            for event in relevant:
                if event.kind == "delete":
                    self._records.pop(event.key, None)
                    self._decoded.pop(event.key, None)
                else:
                    self._records[event.key] = Record(
                        event.key, event.value, event.revision, 0, event.lease
                    )
            old = self._snapshot
            new = self._build(revision, old)
            if new.epoch <= old.epoch:
                # The base went down (deleted or lowered by hand): raise it again, as after a
                # restore, rather than move this store backwards.
                self._recover_soon(f"the epoch base fell at revision {revision}")
                return
            self._snapshot = new
            self._history.append(new)
            self._lock.notify_all()
        self._dispatcher.put(Change(old, new))

    def _on_watch_error(self, error: Exception) -> None:
        if self._closed:
            return
        self._watch_error = error
        _log.info("watch of %s broke (%s); resuming", self._backend.describe(), error)
        threading.Thread(target=self._resume, name="ringkit-live-resume", daemon=True).start()

    def _resume(self) -> None:
        """Watch again from the next revision, on whichever endpoint answers, until closed.

        Before the watch is created again the store checks that etcd still has the history it
        followed: a restored etcd would accept a watch from a revision it has not reached and
        stay silent (see :mod:`ringkit.live.restore`).
        """
        while not self._closed:
            time.sleep(_RESUME_DELAY_S)
            try:
                if _compacted(self._watch_error):
                    self._reload()
                if not self._check_restored():
                    self._start_watch(replacing=self._watch)
                self._watch_error = None
                return
            except Exception as error:  # any failure: try again; a store never stops following
                self._watch_error = error
                _log.info("resuming the watch failed: %r", error)

    def _check_restored(self) -> bool:
        """Recover when etcd no longer holds the history up to this store's revision.

        Return whether it did (the recovery opens the watch again itself).
        """
        with self._lock:
            revision, records = self._snapshot.revision, dict(self._records)
            seen = self._recoveries
        reason = restore_reason(self._backend, self._prefix, revision, records, self._relevant)
        if reason is None and self._cluster_id and self._backend.cluster_id() != self._cluster_id:
            reason = f"the cluster id changed from {self._cluster_id:x}"
        if reason is None:
            return False
        self._recover(reason, seen=seen)
        return True

    def _recover_soon(self, reason: str, *, seen: int | None = None) -> None:
        """Recover on another thread (the caller holds the lock or is the etcd client's).

        `seen` is the count of recoveries when the evidence was gathered (default: now): a
        restore that another thread recovered from meanwhile is not recovered from twice.
        """
        seen = self._recoveries if seen is None else seen

        def run() -> None:
            while not self._closed:
                try:
                    self._recover(reason, seen=seen)
                    return
                except Exception as error:  # etcd away: try again until closed
                    _log.info("recovering from the restore failed: %r", error)
                    time.sleep(_RESUME_DELAY_S)

        threading.Thread(target=run, name="ringkit-live-recover", daemon=True).start()

    def _recover(self, reason: str, *, seen: int | None = None) -> None:
        """Raise the epoch base above every epoch held, then start from the current records.

        Subscribers are told of one change, from the last epoch before the restore to the
        first after it; the watch is opened again from the new revision. Exclusive members
        wait out the longest lease before owning anew (departures in the lost history were
        not seen). Runs on one thread at a time; `seen`, the count of recoveries when the
        restore was detected, makes a second detection of the same restore a no-op.
        """
        with self._recovering:
            if self._closed or (seen is not None and seen != self._recoveries):
                return
            _log.warning(
                "%s was restored or replaced (%s); raising the epoch base above %d",
                self._backend.describe(),
                reason,
                self._snapshot.epoch,
            )
            while True:
                raise_base(self._backend, self._base_key, above_epoch=self._snapshot.epoch)
                revision, records = self._read()
                with self._lock:
                    self._records = {r.key: r for r in records}
                    self._decoded.clear()
                    self._applied = revision
                    old = self._snapshot
                    new = self._build(revision, old)
                    if new.epoch <= old.epoch:
                        continue  # someone lowered the base between our write and read
                    self._snapshot = new
                    self._jumped(new)
                    self._recoveries += 1
                    self._lock.notify_all()
                break
            self._dispatcher.put(Change(old, new))
            if not self._closed:
                self._start_watch(replacing=self._watch)

    def _reload(self) -> None:
        """Start again from the current records when etcd compacted the history we needed.

        The records are labelled with the current revision: a new epoch, later than every one
        this process has seen, holding the true state at that revision.
        """
        seen, floor = self._recoveries, self._snapshot.revision  # what was held before the read
        revision, records = self._read()
        if revision < floor:
            self._recover(f"etcd is at revision {revision}, below the store's", seen=seen)
            return
        with self._lock:
            if revision <= self._snapshot.revision:
                return
            self._records = {r.key: r for r in records}
            old = self._snapshot
            self._snapshot = self._build(revision, old)
            self._jumped(self._snapshot)
            self._lock.notify_all()
        self._dispatcher.put(Change(old, self._snapshot))

    def _jumped(self, snapshot: Snapshot) -> None:
        """Note a snapshot read afresh, not followed: changes in between went unseen.

        Members may have left in that history: an exclusive gainer cannot know that their
        owners stopped, so it waits out the longest lease; and fencing tokens start again.
        """
        self._history.append(snapshot)
        self._breaks.add(snapshot.epoch)
        self.blind_for(self.longest_ttl_s())

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

    def _tracked_revisions(self) -> dict[str, int]:
        return {key: record.mod_revision for key, record in self._records.items()}

    def read_revisions(self, timeout_s: float) -> tuple[int, dict[str, int]]:
        """Read the followed keys' mod revisions from the service (for the confirmer)."""
        # NOTE: the floor is what was applied *before* the read was sent: the watch may apply
        # a later revision while the read is under way, and that is no restore.
        floor, seen = self._applied, self._recoveries
        revision, found = self._backend.read_revisions(self._prefix, timeout_s=timeout_s)
        cluster = self._backend.cluster_id()
        if revision < floor or (self._cluster_id and cluster != self._cluster_id):
            # etcd was restored or replaced under this store (see live.restore).
            self._recover_soon(
                f"etcd answered at revision {revision} (cluster {cluster:x})", seen=seen
            )
            raise BackendError(
                f"{self._backend.describe()} must be the cluster this store followed, at "
                f"revision {floor} or later, to confirm the ring; got revision "
                f"{revision} (restored?)"
            )
        return revision, {key: rev for key, rev in found.items() if self._relevant(key)}

    def holds(self, revision: int, found: dict[str, int], timeout_s: float) -> bool:
        """Wait up to `timeout_s` until this store holds what the service held at `revision`.

        It does once it has applied `revision` or the same records (a change under the
        prefix that the ring does not follow moves the service's revision alone).
        """
        with self._lock:
            return self._lock.wait_for(
                lambda: (
                    self._closed or self._applied >= revision or self._tracked_revisions() == found
                ),
                timeout=timeout_s,
            )

    def rewatch(self) -> None:
        """Open the watch again from the next revision, on another endpoint (it went silent)."""
        if not self._closed and not self._check_restored():
            self._start_watch(replacing=self._watch)

    # -- exclusive handoff -----------------------------------------------------------------------

    def mark_key(self, name: str) -> str:
        """Return the key of member `name`'s release mark."""
        return self._marks_prefix + name

    def _marks_changed(self) -> None:
        self._marks_version += 1
        for member in list(self._members):
            member._marks_changed()

    def mark_of(self, name: str) -> tuple[int, int] | None:
        """Member `name`'s release mark as this store follows it: (epoch, lease), or None."""
        return self._marks.get(name)

    def marks_version(self) -> int:
        """A counter that moves whenever a release mark this store follows changes."""
        return self._marks_version

    def settled_epoch(self, name: str) -> int:
        """The highest epoch every other exclusive member has released (see ``handoff``).

        The latest epoch when no other member keeps a release mark. Members in the default
        mode keep none and are not waited for.
        """
        with self._lock:
            snapshot = self._snapshot
            return self._marks.settled(snapshot.epoch, snapshot.members, excluding=name)

    def history_since(self, epoch: int) -> list[Snapshot] | None:
        """The snapshots this store held from `epoch` on: the one holding `epoch`, and later.

        None when that one is older than the history kept.
        """
        with self._lock:
            history = list(self._history)
        for index in range(len(history) - 1, -1, -1):
            if history[index].epoch <= epoch:
                return history[index:]
        return None

    def history(self) -> tuple[list[Snapshot], set[int]]:
        """The snapshots kept (oldest first) and the epochs where the history is broken."""
        with self._lock:
            return list(self._history), set(self._breaks)

    def _resumed(self) -> None:
        self._resumed_epoch = self._snapshot.epoch

    def resumed_epoch(self) -> int:
        """The epoch this store held when it last became current after a lapse."""
        return self._resumed_epoch

    def longest_ttl_s(self) -> float:
        """The longest ``ttl_s`` among the latest snapshot's members (0 when none)."""
        return max((m.ttl_s for m in self._snapshot.members.values()), default=0.0)

    def blind_for(self, seconds: float) -> None:
        """Make exclusive members own nothing newly for `seconds` (unseen departures)."""
        self._blind_until = max(self._blind_until, time.monotonic() + seconds)

    def blind_s(self) -> float:
        """Seconds left of a wait for departures this store did not see (0: none)."""
        return max(0.0, self._blind_until - time.monotonic())

    @property
    def dispatcher(self) -> Dispatcher:
        """The thread that calls subscribers (members hook their release marks on it)."""
        return self._dispatcher

    # -- reading ---------------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """Return the latest snapshot this process has seen (never blocks). Runtime: O(1)."""
        return self._snapshot

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
        loop = asyncio.get_running_loop()
        inbox: asyncio.Queue[Change | None] = asyncio.Queue()

        def hand_over(change: Change) -> None:
            loop.call_soon_threadsafe(inbox.put_nowait, change)

        def end() -> None:
            loop.call_soon_threadsafe(inbox.put_nowait, None)

        subscription = self._dispatcher.subscribe(hand_over, end, after_epoch=self.snapshot().epoch)
        try:
            while not self._closed:
                change = await inbox.get()
                if change is None:
                    return
                yield change
        finally:
            subscription.cancel()

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
        ok, record = self._backend.put_unless_newer(self._table_key, value, expect_epoch - base)
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
        self._confirmer.close()
        with self._watch_lock:  # no watch is being opened while it is cancelled
            if self._watch is not None:
                self._watch.cancel()
        self._backend.close()
        self._dispatcher.close()
        with self._lock:
            self._lock.notify_all()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        shown = redacted(self._url) if self._url else self._backend.describe()
        return f"Store({shown!r}, epoch={self._snapshot.epoch})"
