"""Which release marks a store follows: its members' own always, the others' while one waits.

Every exclusive member writes its release mark at every change (:mod:`ringkit.live.handoff`).
Were every mark delivered to every process, as a watch of the whole prefix does, one change
would cost N mark writes times N + 1 deliveries: 2,550 watch events at N = 50, each some
200 µs of Python in every process, to tell most of them something they do not need. Only a
member waiting to own an arc it gained needs the others' marks, so the marks live under a
folder of their own (``PREFIX/_released/``) that the ring's watch leaves out, and a store
follows that folder only while one of its members waits: one linearizable read of the folder
when the wait begins (so a mark written before it is seen), a watch from the read's revision
while it lasts, cancelled when no member of the store waits (as Kafka's cooperative
rebalancing tells a partition's revocation only to the consumer that is assigned it next).

A member that needs the marks only as they stand after a change (no member still in the ring
held what it gained: see :mod:`ringkit.live.handoff`) asks for one read of the folder instead
(``read``); ``complete_at`` tells up to which revision the marks held are complete.

Each member's own mark is watched on its own key (one event a change, in one process), so a
mark overwritten or deleted by hand is written again at once. :class:`MarksWatch` holds these
watches for one store and feeds what they deliver to the store's ledger.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
from collections.abc import Callable, Sequence

from ringkit.errors import BackendError
from ringkit.live.backend import Backend, Event, WatchHandle
from ringkit.live.ledger import HandoffLedger

__all__ = ["MarksWatch", "range_end"]

_log = logging.getLogger("ringkit.live")
#: How often the marks thread looks for a watch to open again, when nothing wakes it.
_REPAIR_S = 0.5


def range_end(prefix: str) -> str:
    """The first key after every key that starts with `prefix` (etcd's prefix range end).

    >>> range_end("/workers/_released/")
    '/workers/_released0'
    """
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


class MarksWatch:
    """The release marks one store follows: ``follow``/``unfollow`` (the folder, counted),
    ``fresh``; ``read``, ``complete_at`` (the folder once); ``watch_own``/``unwatch_own`` (a
    member's own key), ``wrote``; ``restart``, ``close``. Thread-safe; what breaks is opened
    again on a thread of its own.

    `changed()` is called after marks changed, and after the folder was read.
    """

    def __init__(
        self,
        backend: Backend,
        folder: str,
        *,
        ledger: HandoffLedger,
        changed: Callable[[], None],
    ) -> None:
        self._backend, self._folder = backend, folder
        self._ledger, self._changed = ledger, changed
        self._lock = threading.Lock()
        self._opening = threading.Lock()  # one read-and-watch at a time
        self._waiters = 0
        self._folder_watch: WatchHandle | None = None
        self._read_wanted = False  # a read of the folder alone was asked for (see `read`)
        self._complete_at = 0  # the revision of the last read of the folder: complete then
        self._own: dict[str, WatchHandle | None] = {}  # member name -> its key's watch
        self._generation = 0  # moves at restart: calls from older watches are dropped
        self._closed = False
        # Reads and watches are opened again on a thread of this store's own: a read can take
        # seconds on a starved etcd, and a member's release thread must keep writing its mark.
        self._wake = threading.Event()
        self._opener: threading.Thread | None = None

    # -- the folder, while a member waits --------------------------------------------------------

    def follow(self, *, wait: bool = True) -> None:
        """A member waits: follow every mark from now on (a read, then a watch) until unfollowed.

        With `wait`, returns once the folder has been read, so the marks held are at least as
        new as the call; else the read is made on this store's marks thread (``fresh`` tells
        when it is done). Counted: the watch ends at the last ``unfollow``.

        :raises BackendError: with `wait`, when the folder cannot be read or watched (it is
            tried again on the marks thread)
        """
        with self._lock:
            self._waiters += 1
        if wait:
            try:
                self._open_folder()
            except BackendError:
                self._reopen()
                raise
        else:
            self._reopen()

    def unfollow(self) -> None:
        """A member no longer waits; the last one out cancels the folder's watch."""
        with self._lock:
            self._waiters -= 1
            handle = self._folder_watch if self._waiters == 0 else None
            if handle is not None:
                self._folder_watch = None
        if handle is not None:
            handle.cancel()

    def fresh(self) -> bool:
        """Whether every mark is followed now (read, and watched since the read)."""
        return self._folder_watch is not None

    def read(self) -> None:
        """Read the folder once on the marks thread, without following it; `changed()` after.

        For a member that needs the marks as they were after a change, not as they will be:
        one whose gained arcs no member that may lag held (see :mod:`ringkit.live.handoff`).
        At N members that gain at once, as when one leaves, a read each is N reads where a
        watch each would also be N × N events (every member's mark delivered to every gainer).
        """
        with self._lock:
            self._read_wanted = True
        self._reopen()

    def complete_at(self) -> float:
        """The revision as of which every mark is held: a read's, or infinite while followed.

        Marks only grow, so marks complete at revision R are each at least what it was at R;
        a member that joined after R has no mark here.
        """
        return math.inf if self._folder_watch is not None else self._complete_at

    def _open_folder(self) -> None:
        with self._opening:
            with self._lock:
                if self._folder_watch is not None or self._waiters == 0 or self._closed:
                    return
                generation = self._generation
            # The watch first, from now, then the read: a watch from the read's revision would
            # start in the past whenever a mark came in between, and etcd catches such a watch
            # up only every 100 ms (the exclusive join's last mark came 60-95 ms late in a
            # quarter of the joins). The read's marks and the watch's overlap; each key keeps
            # its newest revision.
            handle = self._watch(self._folder, range_end(self._folder), 0, generation)
            try:
                loaded = self._load_folder(generation)
            except BackendError:
                handle.cancel()
                raise
            with self._lock:
                stale = generation != self._generation  # a restore since the read
                if not loaded or stale or self._waiters == 0 or self._closed:
                    keep = False
                else:
                    self._folder_watch, keep = handle, True
            if not keep:
                handle.cancel()
                return
        self._changed()  # the marks are fresh: waiting members look again

    # -- a member's own mark ---------------------------------------------------------------------

    def watch_own(self, name: str, from_revision: int) -> None:
        """Follow member `name`'s own mark from `from_revision` on (it wrote it there).

        :raises BackendError: when the watch cannot be opened (the marks thread tries again)
        """
        with self._lock:
            if self._own.get(name) is not None or self._closed:
                return
            self._own[name] = None
            generation = self._generation
        try:
            self._open_own(name, from_revision, generation)
        except BackendError:
            self._reopen()
            raise

    def _open_own(self, name: str, from_revision: int, generation: int) -> None:
        key = self._folder + name
        handle = self._watch(key, key + "\0", from_revision, generation, own=name)
        with self._lock:
            if name in self._own and self._own[name] is None and generation == self._generation:
                self._own[name] = handle
                return
        handle.cancel()

    def unwatch_own(self, name: str) -> None:
        """Stop following member `name`'s own mark (it closed)."""
        with self._lock:
            handle = self._own.pop(name, None)
        if handle is not None:
            handle.cancel()

    def wrote(self, name: str, value: bytes, lease: int, revision: int) -> None:
        """Note a mark this process wrote (acknowledged at `revision`) before its watch tells."""
        event = Event("put", self._folder + name, value, revision, lease)
        if self._ledger.apply_marks([event]):
            self._changed()

    # -- breaks and restores ---------------------------------------------------------------------

    def _watch(
        self, key: str, end: str, from_revision: int, generation: int, *, own: str | None = None
    ) -> WatchHandle:
        opened: list[WatchHandle] = []  # this watch, once opened

        def on_events(events: Sequence[Event]) -> None:
            if generation == self._generation and self._ledger.apply_marks(events):
                self._changed()

        def on_error(error: Exception) -> None:
            _log.info("watch of release marks %s broke (%s); opening it again", key, error)
            with self._lock:
                if generation != self._generation or not opened:
                    return
                # Only this watch is forgotten, not one opened since in its place.
                if own is not None and self._own.get(own) is opened[0]:
                    self._own[own] = None
                elif own is None and self._folder_watch is opened[0]:
                    self._folder_watch = None
            self._reopen()

        handle = self._backend.watch(key, from_revision, on_events, on_error, range_end=end)
        opened.append(handle)
        return handle

    def _reopen(self) -> None:
        """Have the marks thread open what is wanted and not open (started on first need)."""
        with self._lock:
            if self._closed:
                return
            if self._opener is None:
                self._opener = threading.Thread(
                    target=self._open_loop, name="ringkit-live-marks", daemon=True
                )
                self._opener.start()
        self._wake.set()

    def _open_loop(self) -> None:
        while not self._closed:
            self._wake.wait(_REPAIR_S)
            self._wake.clear()
            if not self._closed:
                self._repair()

    def _repair(self) -> None:
        """Open again what broke: the folder (while followed) and each own mark's watch.

        On the marks thread, woken when a watch breaks or a member begins to wait, and
        looking every few tenths of a second. A watch opened again starts from a read, so
        nothing written meanwhile is missed.
        """
        with self._lock:
            broken = [name for name, handle in self._own.items() if handle is None]
            generation = self._generation
        for name in broken:
            with contextlib.suppress(BackendError):
                revision, records = self._backend.get_prefix(self._folder + name)
                found = [r for r in records if r.key == self._folder + name]
                events = [Event("put", r.key, r.value, r.mod_revision, r.lease) for r in found]
                if not found:
                    events = [Event("delete", self._folder + name, b"", revision)]
                if self._ledger.apply_marks(events):
                    self._changed()
                self._open_own(name, revision + 1, generation)
        if self._waiters and self._folder_watch is None:
            with contextlib.suppress(BackendError):
                self._open_folder()
        if self._read_wanted:
            self._read_folder(generation)

    def _read_folder(self, generation: int) -> None:
        """The read `read` asked for (asked again at the next look if it fails)."""
        self._read_wanted = False
        try:
            loaded = self._load_folder(generation)
        except BackendError:
            self._read_wanted = True
            return
        if loaded:
            self._changed()

    def _load_folder(self, generation: int) -> bool:
        """Read every mark into the ledger; return whether it was taken (same `generation`).

        :raises BackendError: when the folder cannot be read
        """
        revision, records = self._backend.get_prefix(self._folder)
        with self._lock:
            if generation != self._generation:
                return False  # etcd was restored meanwhile: the read may count revisions of before
        self._ledger.load_marks(records, revision)
        with self._lock:
            if generation != self._generation:
                return False
            self._complete_at = max(self._complete_at, revision)
        return True

    def restart(self) -> None:
        """etcd was restored (its revisions start again): drop every watch, opened again anew.

        Called after the store loaded the marks of its read of the restored etcd.
        """
        with self._lock:
            self._generation += 1
            self._complete_at = 0
            handles = [self._folder_watch, *self._own.values()]
            self._folder_watch = None
            self._own = dict.fromkeys(self._own)
        for handle in handles:
            if handle is not None:
                handle.cancel()
        self._reopen()

    def close(self) -> None:
        """Cancel every watch (the store is closing)."""
        with self._lock:
            self._closed = True
        self.restart()
        self._wake.set()
