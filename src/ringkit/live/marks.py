"""Release marks as records: where they live, how one is written and read, what a store holds.

Every exclusive member keeps a *release mark* (:mod:`ringkit.live.handoff`): one record
``PREFIX/_released/NAME`` under its own lease, holding the highest epoch it has let go of. A
mark is input like any record: one that is not valid is skipped, logged once and counted, and
never stops the handoff. :class:`ReleaseMarks` is the table of valid marks a store follows
(:mod:`ringkit.live.ledger` keeps it; :mod:`ringkit.live.markwatch` feeds it).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from ringkit.errors import ConfigError
from ringkit.live.backend import Event, Record
from ringkit.live.snapshot import SkippedRecord

if TYPE_CHECKING:
    from ringkit.live.snapshot import MemberInfo

__all__ = ["MARKS_FOLDER", "ReleaseMarks", "decode_mark", "encode_mark"]

_log = logging.getLogger("ringkit.live")

#: Where release marks live under a store's prefix: first in key order, so the ring's watch
#: (a key range) leaves them out (see :mod:`ringkit.live.markwatch`).
MARKS_FOLDER = "_released/"


def encode_mark(name: str, epoch: int) -> bytes:
    """Return the stored release mark of member `name` at `epoch`."""
    return json.dumps({"epoch": epoch, "name": name}, sort_keys=True).encode()


def decode_mark(value: bytes, name: str) -> int:
    """Return the epoch of a release mark stored under member `name`'s key.

    >>> decode_mark(encode_mark("w1", 7), "w1")
    7

    :raises ConfigError: when it is not a mark, names another member, or its epoch is not an
        int >= 0
    """
    try:
        raw = json.loads(value)
    except ValueError as error:
        raise ConfigError(f"release mark must be JSON, got {value[:80]!r}") from error
    if not isinstance(raw, dict) or raw.get("name") != name:
        raise ConfigError(f"release mark of {name!r} must name it, got {value[:80]!r}")
    epoch = raw.get("epoch")
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise ConfigError(f"release mark epoch must be an int >= 0, got {epoch!r}")
    return epoch


class ReleaseMarks:
    """The release marks a store follows: member name → (epoch, lease), validated.

    Feeding: ``load`` (a read), ``apply`` (watch events). Asking: ``settled``, ``skipped``
    (the invalid ones, as ``ringkit ring status`` counts them beside member records).
    Each key's last revision is kept: marks come from a read and up to two watches (a
    member's own mark, and the folder while a member waits), so a write one of them delivers
    late never replaces a newer one.
    """

    def __init__(self) -> None:
        self._marks: dict[str, tuple[int, int]] = {}
        self._invalid: dict[str, SkippedRecord] = {}
        self._warned: set[tuple[str, bytes]] = set()
        self._revisions: dict[str, int] = {}  # key -> revision of its last write or deletion

    def _name(self, key: str) -> str:
        return key.rpartition(MARKS_FOLDER)[2]

    def _put(self, key: str, value: bytes, lease: int, revision: int) -> bool:
        name = self._name(key)
        try:
            epoch = decode_mark(value, name)
        except ConfigError as error:
            if (key, value) not in self._warned:  # once per bad value, not per event
                self._warned.add((key, value))
                _log.warning("ignoring release mark %s: %s", key, error)
            self._invalid[key] = SkippedRecord(key, revision, str(error))
            return self._marks.pop(name, None) is not None
        self._invalid.pop(key, None)
        if self._marks.get(name) == (epoch, lease):
            return False
        self._marks[name] = (epoch, lease)
        return True

    def _delete(self, key: str) -> bool:
        self._invalid.pop(key, None)
        return self._marks.pop(self._name(key), None) is not None

    def load(self, records: Iterable[Record], revision: int) -> bool:
        """Take the marks a read at `revision` returned; return whether any mark changed.

        A key written or deleted after `revision` (a watch delivered it first) keeps what
        the watch said.
        """
        before = dict(self._marks)
        found = {record.key: record for record in records}
        for key in [key for key, seen in self._revisions.items() if seen <= revision]:
            if key not in found:  # deleted by the time of the read
                del self._revisions[key]
                self._delete(key)
        for key, record in found.items():
            if self._revisions.get(key, 0) <= revision:
                self._revisions[key] = record.mod_revision
                self._put(key, record.value, record.lease, record.mod_revision)
        return self._marks != before

    def apply(self, events: Sequence[Event]) -> bool:
        """Apply watch events on mark keys; return whether any mark changed."""
        changed = False
        for event in events:
            if event.revision <= self._revisions.get(event.key, 0):
                continue  # delivered late by the other watch: a newer write is held
            self._revisions[event.key] = event.revision
            if event.kind == "delete":
                changed |= self._delete(event.key)
            else:
                changed |= self._put(event.key, event.value, event.lease, event.revision)
        return changed

    def skipped(self) -> tuple[SkippedRecord, ...]:
        """The release records that are not valid marks (ignored), by key."""
        return tuple(self._invalid[key] for key in sorted(self._invalid))

    def get(self, name: str) -> tuple[int, int] | None:
        """Member `name`'s (mark epoch, lease), or None when it keeps no valid mark."""
        return self._marks.get(name)

    def released(self, members: Mapping[str, MemberInfo], *, excluding: str) -> dict[str, int]:
        """The epoch each exclusive member of `members` but `excluding` has released, by name.

        A member keeps a mark iff it is exclusive; one held under another lease than its
        record's (it rejoined and has not marked yet) counts as 0.
        """
        found = {}
        for name, info in members.items():
            mark = self._marks.get(name)
            if name != excluding and mark is not None:
                found[name] = mark[0] if mark[1] == info.lease else 0
        return found

    def settled(self, epoch: int, members: Mapping[str, MemberInfo], *, excluding: str) -> int:
        """The lowest mark among the exclusive members other than `excluding` (cap: `epoch`)."""
        return min([epoch, *self.released(members, excluding=excluding).values()])
