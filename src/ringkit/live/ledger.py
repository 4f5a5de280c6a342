"""What a store keeps for its exclusive members: release marks, recent rings, blind time.

Exclusive handoff (:mod:`ringkit.live.handoff`) decides ownership from more than the latest
snapshot: the other members' release marks (which epoch each has let go of), the rings since
the settled epoch (a member must hold a key in every one of them), the epochs where this
store's history is broken (it read the state afresh instead of following each change; fencing
tokens start again there), and a *blind* time during which departures it could not see may
still be under way. :class:`HandoffLedger` holds these for one store; the store feeds it from
its reads and its watch.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Iterable, Mapping, Sequence

from ringkit.live.backend import Event, Record
from ringkit.live.marks import ReleaseMarks
from ringkit.live.snapshot import MemberInfo, SkippedRecord, Snapshot

__all__ = ["HISTORY", "HandoffLedger"]

#: Snapshots kept for exclusive members: the rings since the last epoch every member released.
HISTORY = 256


class HandoffLedger:
    """Release marks, the recent snapshots and where their history breaks, and blind time.

    Marks: ``load_marks``, ``apply_marks``, ``mark_of``, ``marks_version``, ``settled``,
    ``skipped_marks``.
    Rings: ``followed``, ``jumped``, ``history``, ``history_since``, ``resumed``,
    ``resumed_epoch``. Blindness: ``blind_for``, ``blind_s``. Thread-safe.
    """

    def __init__(self) -> None:
        self._marks = ReleaseMarks()
        self._marks_version = 0
        self._lock = threading.Lock()
        self._history: collections.deque[Snapshot] = collections.deque(maxlen=HISTORY)
        self._breaks: set[int] = set()  # epochs whose snapshot does not follow the one before
        self._blind_until = 0.0  # monotonic: departures this store did not see end here
        self._resumed_epoch = 0  # the epoch at which the store last became current again

    # -- release marks ---------------------------------------------------------------------------

    def load_marks(
        self, records: Iterable[Record], revision: int, *, restored: bool = False
    ) -> bool:
        """Take the marks a read at `revision` returned; return whether any mark changed.

        A mark the watches delivered after `revision` is kept; after a restore (`restored`:
        etcd counts its revisions again) the read replaces everything.
        """
        with self._lock:
            if restored:
                self._marks = ReleaseMarks()
            changed = self._marks.load(records, revision)
            self._marks_version += 1
            return changed

    def apply_marks(self, events: Sequence[Event]) -> bool:
        """Apply watch events on mark keys; return whether any mark changed."""
        with self._lock:
            changed = self._marks.apply(events)
            if changed:
                self._marks_version += 1
            return changed

    def mark_of(self, name: str) -> tuple[int, int] | None:
        """Member `name`'s release mark: (epoch, lease), or None."""
        with self._lock:
            return self._marks.get(name)

    def marks_version(self) -> int:
        """A counter that moves whenever a release mark changes."""
        return self._marks_version

    def skipped_marks(self) -> tuple[SkippedRecord, ...]:
        """The release records that are not valid marks, by key."""
        with self._lock:
            return self._marks.skipped()

    def released(self, members: Mapping[str, MemberInfo], *, excluding: str) -> dict[str, int]:
        """The epoch each exclusive member but `excluding` has released (``ReleaseMarks``)."""
        with self._lock:
            return self._marks.released(members, excluding=excluding)

    def settled(self, epoch: int, members: Mapping[str, MemberInfo], *, excluding: str) -> int:
        """The highest epoch (≤ `epoch`) every exclusive member but `excluding` released."""
        with self._lock:
            return self._marks.settled(epoch, members, excluding=excluding)

    # -- rings -----------------------------------------------------------------------------------

    def followed(self, snapshot: Snapshot) -> None:
        """Note a snapshot reached by applying the next change."""
        with self._lock:
            self._history.append(snapshot)

    def jumped(self, snapshot: Snapshot, *, blind_s: float) -> None:
        """Note a snapshot read afresh, not followed: changes in between went unseen.

        Members may have left in that history: an exclusive gainer cannot know that their
        owners stopped, so it waits `blind_s` (the longest lease); and fencing tokens start
        again.
        """
        with self._lock:
            self._history.append(snapshot)
            self._breaks.add(snapshot.epoch)
        self.blind_for(blind_s)

    def history(self) -> tuple[list[Snapshot], set[int]]:
        """The snapshots kept (oldest first) and the epochs where the history is broken."""
        with self._lock:
            return list(self._history), set(self._breaks)

    def history_since(self, epoch: int, *, unbroken: bool = False) -> list[Snapshot] | None:
        """The snapshots from the one holding `epoch` on; None when it is older than kept.

        With `unbroken`, None too when the history breaks after that one (changes went unseen
        in between: the one holding `epoch` may not be the ring that was in effect then).
        """
        with self._lock:
            history, breaks = list(self._history), set(self._breaks)
        for index in range(len(history) - 1, -1, -1):
            if history[index].epoch <= epoch:
                since = history[index:]
                if unbroken and any(snapshot.epoch in breaks for snapshot in since[1:]):
                    return None
                return since
        return None

    def resumed(self, epoch: int) -> None:
        """Note that the store became current again (after a lapse) at `epoch`."""
        self._resumed_epoch = epoch

    def resumed_epoch(self) -> int:
        """The epoch the store held when it last became current after a lapse."""
        return self._resumed_epoch

    # -- blindness -------------------------------------------------------------------------------

    def blind_for(self, seconds: float) -> None:
        """Make exclusive members own nothing newly for `seconds` (unseen departures)."""
        with self._lock:
            self._blind_until = max(self._blind_until, time.monotonic() + seconds)

    def blind_s(self) -> float:
        """Seconds left of a wait for departures the store did not see (0: none)."""
        return max(0.0, self._blind_until - time.monotonic())
