"""Recovering a store whose etcd was restored, replaced, or compacted past its revision.

The evidence and the epoch base are :mod:`ringkit.live.restore`'s; this module is what a store
does with them. :class:`Recovery` notes the cluster each read came from, checks (whenever the
watch is opened again) that etcd still holds the history up to the store's revision, and
recovers: raise the base above every epoch the store has held, read the current records, and
move to them as one change; then open the watch again. Recoveries run one at a time, and a
restore detected twice (by the confirmer and by the watch, say) is recovered from once: each
detection carries the count of recoveries at the time its evidence was gathered.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping

from ringkit.live.backend import Backend, Record
from ringkit.live.restore import raise_base, restore_reason
from ringkit.live.watching import RESUME_DELAY_S

__all__ = ["Recovery"]

_log = logging.getLogger("ringkit.live")


class Recovery:
    """Restore detection and recovery for one store.

    The store gives: `closed()`; `held()`, its (epoch, revision, records) under its lock;
    `read()`, a fresh read returning its revision and records; `adopt(revision, records,
    restored=, adopted=)`, which moves the store to them as one change, calling `adopted()`
    under its lock, and returns whether it did (False when that would not move its epoch
    forward); `rewatch()`, which opens the watch
    from the store's new revision. `relevant` filters the keys the store follows.
    """

    def __init__(
        self,
        backend: Backend,
        prefix: str,
        base_key: str,
        *,
        relevant: Callable[[str], bool],
        closed: Callable[[], bool],
        held: Callable[[], tuple[int, int, Mapping[str, Record]]],
        read: Callable[[], tuple[int, list[Record]]],
        adopt: Callable[..., bool],
        rewatch: Callable[[], None],
    ) -> None:
        self._backend, self._prefix, self._base_key = backend, prefix, base_key
        self._relevant, self._closed, self._held = relevant, closed, held
        self._read, self._adopt, self._rewatch = read, adopt, rewatch
        self._lock = threading.Lock()
        self._count = 0
        self._cluster_id = 0

    @property
    def count(self) -> int:
        """How many recoveries have completed (a detection's evidence is dated by it)."""
        return self._count

    def note_cluster(self, cluster_id: int) -> None:
        """Note the cluster id of the read the store's records came from."""
        self._cluster_id = cluster_id

    def cluster_changed(self, cluster_id: int) -> bool:
        """Whether `cluster_id` differs from the one the store's records came from."""
        return bool(self._cluster_id) and cluster_id != self._cluster_id

    def check(self) -> bool:
        """Recover when etcd no longer holds the history up to the store's revision.

        Return whether it did (the recovery opens the watch again itself).
        """
        seen = self._count
        _, revision, records = self._held()
        reason = restore_reason(self._backend, self._prefix, revision, records, self._relevant)
        if reason is None and self.cluster_changed(self._backend.cluster_id()):
            reason = f"the cluster id changed from {self._cluster_id:x}"
        if reason is None:
            return False
        self.recover(reason, seen=seen)
        return True

    def soon(self, reason: str, *, seen: int | None = None) -> None:
        """Recover on another thread (the caller holds the store's lock or is the client's).

        `seen` is the count of recoveries when the evidence was gathered (default: now): a
        restore that another thread recovered from meanwhile is not recovered from twice.
        """
        seen = self._count if seen is None else seen

        def run() -> None:
            while not self._closed():
                try:
                    self.recover(reason, seen=seen)
                    return
                except Exception as error:  # etcd away: try again until closed
                    _log.info("recovering from the restore failed: %r", error)
                    time.sleep(RESUME_DELAY_S)

        threading.Thread(target=run, name="ringkit-live-recover", daemon=True).start()

    def recover(self, reason: str, *, seen: int | None = None) -> None:
        """Raise the epoch base above every epoch held, then move to the current records.

        Subscribers are told of one change, from the last epoch before the restore to the
        first after it; the watch is opened again from the new revision. Exclusive members
        wait out the longest lease before owning anew (departures in the lost history were
        not seen).
        """
        with self._lock:
            if self._closed() or (seen is not None and seen != self._count):
                return
            epoch = self._held()[0]
            _log.warning(
                "%s was restored or replaced (%s); raising the epoch base above %d",
                self._backend.describe(),
                reason,
                epoch,
            )
            while True:
                raise_base(self._backend, self._base_key, above_epoch=self._held()[0])
                revision, records = self._read()
                if self._adopt(revision, records, restored=True, adopted=self._counted):
                    break  # else someone lowered the base between our write and read
            if not self._closed():
                self._rewatch()

    def _counted(self) -> None:
        # Called under the store's lock as it moves: evidence gathered from then on is new.
        self._count += 1

    def reload(self) -> None:
        """Move to the current records when etcd compacted the history the watch needed.

        The records are labelled with the current revision: a new epoch, later than every one
        the store has seen, holding the true state at that revision.
        """
        seen, floor = self._count, self._held()[1]  # what was held before the read
        revision, records = self._read()
        if revision < floor:
            self.recover(f"etcd is at revision {revision}, below the store's", seen=seen)
            return
        self._adopt(revision, records, restored=False)
