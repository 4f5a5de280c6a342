"""The records a store follows, and the snapshot they make at a revision.

A store follows ``PREFIX/members/NAME`` (one per member), ``PREFIX/table`` (a controller's
table) and the epoch base (:mod:`ringkit.live.restore`). :class:`FollowedRecords` holds them as
they stand at the store's revision, decodes each write once (N watching processes each decode
every change), skips an invalid one with one log line per write of it, and builds the
:class:`Snapshot`: a pure function of the records and the revision, so every store that holds
the same records builds the same ring at the same epoch.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence

from ringkit.errors import ConfigError
from ringkit.live.backend import Event, Record
from ringkit.live.records import decode_member_record, decode_table_record
from ringkit.live.restore import BASE_KEY, decode_base
from ringkit.live.snapshot import MemberInfo, SkippedRecord, Snapshot
from ringkit.placement import Placement

__all__ = ["FollowedRecords"]

_log = logging.getLogger("ringkit.live")


class FollowedRecords:
    """The member, table and epoch-base records under one prefix, at one revision.

    Feeding: ``replace`` (a read), ``apply`` (watch events). Asking: ``relevant``,
    ``mod_revisions``, ``as_dict``, ``build``. ``skip`` logs a record that is not used.
    Not thread-safe: the store calls it under its lock.
    """

    def __init__(self, prefix: str) -> None:
        self.members_prefix = prefix + "members/"
        self.table_key = prefix + "table"
        self.base_key = prefix + BASE_KEY
        self._records: dict[str, Record] = {}
        self._decoded: dict[str, tuple[int, MemberInfo | Placement | ConfigError]] = {}
        self._logged: set[tuple[str, int]] = set()

    def relevant(self, key: str) -> bool:
        """Whether the ring follows `key` (a change to any other key makes no epoch)."""
        return key.startswith(self.members_prefix) or key in (self.table_key, self.base_key)

    def replace(self, records: Iterable[Record]) -> None:
        """Hold `records` (the relevant ones of a read) instead of what was held."""
        self._records = {r.key: r for r in records if self.relevant(r.key)}
        # A restored etcd reuses revisions: a cached decoding could belong to another value.
        self._decoded.clear()

    def apply(self, events: Sequence[Event]) -> bool:
        """Apply watch events to the records; return whether any was relevant."""
        relevant = False
        for event in events:
            if not self.relevant(event.key):
                continue
            relevant = True
            if event.kind == "delete":
                self._records.pop(event.key, None)
                self._decoded.pop(event.key, None)
            else:
                self._records[event.key] = Record(
                    event.key, event.value, event.revision, 0, event.lease
                )
        return relevant

    def mod_revisions(self) -> dict[str, int]:
        """Each held key's mod revision (compared with the service's to confirm currency)."""
        return {key: record.mod_revision for key, record in self._records.items()}

    def agrees(self, found: Mapping[str, int], revision: int, *, applied: int) -> bool:
        """Whether the service's records at `revision` (key → mod revision) agree with these.

        These are the records as of `applied`, the last revision the store applied (its
        watch delivers in order). Never when `applied` < `revision` (the store may lack a
        change). Else every held record written at or before `revision` must be there with
        the same mod revision; each record there must be held with it or a later one (it was
        rewritten since), or not held (deleted since) unless `applied` is `revision` itself.
        """
        if applied < revision:
            return False
        held = self.mod_revisions()
        if any(mod <= revision and found.get(key) != mod for key, mod in held.items()):
            return False
        # A record held at a later revision was rewritten since; one not held at all was
        # deleted since, which cannot be when the store stands at `revision` itself.
        return applied > revision or all(key in held for key in found)

    def as_dict(self) -> dict[str, Record]:
        """A copy of the held records by key."""
        return dict(self._records)

    def skip(self, record: Record, reason: str) -> None:
        """Log a skipped record once per write of it (every store skips the same ones)."""
        if (record.key, record.mod_revision) not in self._logged:
            self._logged.add((record.key, record.mod_revision))
            _log.warning(
                "skipping record %s (revision %d): %s", record.key, record.mod_revision, reason
            )

    def base(self) -> int:
        """The epoch base the records hold (0 without one, or with an invalid one)."""
        record = self._records.get(self.base_key)
        try:
            return decode_base(record)
        except ConfigError as error:
            self.skip(record, str(error))  # type: ignore[arg-type]
            return 0

    def build(self, revision: int, previous: Snapshot | None = None) -> Snapshot:
        """The snapshot the records make at `revision` (epoch: the base plus `revision`).

        `previous`, this store's snapshot before, only saves work (tokens shared with it).
        """
        members: dict[str, MemberInfo] = {}
        table: Placement | None = None
        skipped: list[SkippedRecord] = []
        for key, record in sorted(self._records.items()):
            if key == self.base_key:
                continue
            found = self._decode(record)
            if isinstance(found, ConfigError):
                self.skip(record, str(found))
                skipped.append(SkippedRecord(key, record.mod_revision, str(found)))
            elif isinstance(found, MemberInfo):
                members[found.name] = found
            else:
                table = found
        epoch = self.base() + revision
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
        """Decode a record once per write."""
        cached = self._decoded.get(record.key)
        if cached is None or cached[0] != record.mod_revision:
            found: MemberInfo | Placement | ConfigError
            try:
                if record.key == self.table_key:
                    found = decode_table_record(record.key, record.value)
                else:
                    found = decode_member_record(
                        record.key, record.value, record.lease, self.members_prefix
                    )
            except ConfigError as error:
                found = error
            cached = (record.mod_revision, found)
            self._decoded[record.key] = cached
        return cached[1]
