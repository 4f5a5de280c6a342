"""Snapshots: what a live ring is at one epoch, rebuilt identically by every process.

A member's record holds everything its part of the ring needs: weight, zone and the tokens it
chose once at join. So the ring of a snapshot is a pure function of the records, built with
``HashRing.from_tokens`` from the *active* members only; two processes that have applied the
same changes (the same epoch) build equal rings, whatever their order of arrival. A table a
controller published (``FixedPartitions``, an ``AllocatedRing``'s tokens) replaces the ring.

>>> info = MemberInfo("a", "active", None, 1.0, None, (1, 2), 2.0, 7)
>>> snap = Snapshot.build(3, {"a": info}, None)
>>> snap.epoch, list(snap.ring), snap.active
(3, ['a'], ('a',))
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ringkit.errors import ConfigError
from ringkit.nodes import Node
from ringkit.placement import Placement
from ringkit.ring import HashRing
from ringkit.strategies.allocation import AllocatedRing
from ringkit.strategies.fixed import FixedPartitions

__all__ = [
    "STATES",
    "MemberInfo",
    "SkippedRecord",
    "Snapshot",
    "decode_member",
    "decode_table",
    "encode_table",
    "snapshot_dict",
]

#: A member's states, in the order it passes through them.
STATES = ("joining", "active", "leaving")


@dataclass(frozen=True, slots=True)
class MemberInfo:
    """One member at one epoch: its state, zone, weight, free-form data and tokens.

    ``ttl_s`` is its lease's TTL (liveness is the lease: a member whose lease runs out is
    removed by the store). ``lease`` is the lease id, which changes when a member rejoins.
    """

    name: str
    state: str
    zone: str | None
    weight: float
    data: Any
    tokens: tuple[int, ...]
    ttl_s: float
    lease: int
    holder: str = ""

    @property
    def node(self) -> Node:
        """The node this member is in the ring."""
        return Node(self.name, weight=self.weight, zone=self.zone)

    def encode(self) -> bytes:
        """Return the JSON record stored under the member's key."""
        fields = {
            "name": self.name,
            "state": self.state,
            "zone": self.zone,
            "weight": self.weight,
            "data": self.data,
            "tokens": list(self.tokens),
            "ttl_s": self.ttl_s,
            "holder": self.holder,
        }
        return json.dumps(fields, sort_keys=True).encode()


@dataclass(frozen=True, slots=True)
class SkippedRecord:
    """A record a store ignored (see :mod:`ringkit.live.records`): its key, the revision of its
    last write, and why."""

    key: str
    mod_revision: int
    reason: str

    def as_dict(self) -> dict[str, Any]:
        """The record as JSON-ready data (``ringkit ring status --json``, ``snapshot_dict``)."""
        return {"key": self.key, "mod_revision": self.mod_revision, "reason": self.reason}


def decode_member(value: bytes, lease: int) -> MemberInfo:
    """Return the member a stored record describes.

    :raises ConfigError: when the record is not a member record
    """
    try:
        raw = json.loads(value)
        return MemberInfo(
            str(raw["name"]),
            str(raw["state"]),
            raw["zone"],
            float(raw["weight"]),
            raw["data"],
            tuple(int(t) for t in raw["tokens"]),
            float(raw["ttl_s"]),
            lease,
            str(raw.get("holder", "")),
        )
    except (ValueError, KeyError, TypeError) as error:
        raise ConfigError(f"member record must be ringkit's JSON, got {value[:80]!r}") from error


def encode_table(placement: Placement) -> bytes:
    """Return the stored form of a controller's table (its ``to_dict``).

    An :class:`AllocatedRing` is stored as its ring's explicit tokens and read back as that
    :class:`HashRing`, which places every key the same way.

    :raises ConfigError: for a placement without a table form
    """
    if isinstance(placement, AllocatedRing):
        placement = placement.ring
    if not isinstance(placement, (FixedPartitions, HashRing)):
        raise ConfigError(
            "published placement must be FixedPartitions, AllocatedRing or HashRing, "
            f"got {type(placement).__name__}"
        )
    return json.dumps(placement.to_dict(), sort_keys=True).encode()


def decode_table(value: bytes) -> Placement:
    """Return the placement a stored table describes.

    :raises ConfigError: when it is not a table ringkit wrote
    """
    data = json.loads(value)
    if data.get("kind") == "FixedPartitions":
        return FixedPartitions.from_dict(data)
    return HashRing.from_dict(data)


def _empty_ring() -> HashRing:
    return HashRing.from_tokens({})


_MAX_DERIVED_CHANGES = 4


def _derive(previous: Snapshot, active: Mapping[str, MemberInfo]) -> HashRing | None:
    """Return `previous`'s ring changed into the ring of `active`, or None to build afresh."""
    ring = previous.ring
    if previous.table or not isinstance(ring, HashRing) or not len(ring) or not active:
        return None
    before = {n: m for n, m in previous.members.items() if m.state == "active"}
    same = {n for n in before.keys() & active.keys() if _placed_alike(before[n], active[n])}
    gone, new = before.keys() - same, active.keys() - same
    if len(gone) + len(new) > _MAX_DERIVED_CHANGES or len(same) == 0:
        return None
    for name in sorted(gone):
        ring = ring.remove(name)
    for name in sorted(new):
        ring = ring.add(active[name].node, tokens=active[name].tokens)
    return ring


def _placed_alike(one: MemberInfo, other: MemberInfo) -> bool:
    return (one.tokens, one.weight, one.zone) == (other.tokens, other.weight, other.zone)


@dataclass(frozen=True, slots=True, eq=False)
class Snapshot:
    """The live ring at one epoch; immutable.

    ``epoch``: the etcd revision of the last change under the store's prefix (a counter of
    the same kind for ``memory://``). ``members``: name → :class:`MemberInfo`, every state.
    ``ring``: the :class:`HashRing` of the active members, or the published table.
    ``revision``: the etcd revision the snapshot was read at; the epoch is the ring's *epoch
    base* plus it (:mod:`ringkit.live.restore`; the base is 0 until etcd is restored).
    ``skipped``: the records under the prefix that were not valid, and why.
    """

    epoch: int
    members: Mapping[str, MemberInfo]
    ring: Placement
    table: bool = False
    revision: int = 0
    skipped: tuple[SkippedRecord, ...] = ()
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def build(
        cls,
        epoch: int,
        members: Mapping[str, MemberInfo],
        table: Placement | None,
        previous: Snapshot | None = None,
        *,
        revision: int | None = None,
        skipped: tuple[SkippedRecord, ...] = (),
    ) -> Snapshot:
        """Return the snapshot of these members (and table) at `epoch`.

        With `previous`, a ring that differs from its ring by a few members is derived from it
        by ``remove`` / ``add`` with the members' tokens (an equal ring, built in O(T) instead
        of O(T log T) and without re-checking every token: the cost of a change in each of N
        watching processes). `revision` defaults to `epoch`. Runtime: O(T log T), or
        O(T + c·V log V) for c changed members.
        """
        frozen = MappingProxyType(dict(sorted(members.items())))
        revision = epoch if revision is None else revision
        if table is not None:
            return cls(epoch, frozen, table, True, revision, skipped)
        active = {name: m for name, m in frozen.items() if m.state == "active"}
        ring = _derive(previous, active) if previous is not None else None
        if ring is None:
            tokens: dict[str | Node, Iterable[int]] = {m.node: m.tokens for m in active.values()}
            ring = HashRing.from_tokens(tokens) if tokens else _empty_ring()
        return cls(epoch, frozen, ring, False, revision, skipped)

    @property
    def active(self) -> tuple[str, ...]:
        """The names of the members in the ring, sorted."""
        return tuple(name for name, m in self.members.items() if m.state == "active")

    def __repr__(self) -> str:
        states = ", ".join(f"{n}={m.state}" for n, m in list(self.members.items())[:5])
        more = f", … and {len(self.members) - 5} more" if len(self.members) > 5 else ""
        return f"Snapshot(epoch={self.epoch}, members=[{states}{more}])"


def snapshot_dict(snapshot: Snapshot) -> dict[str, Any]:
    """Return `snapshot` as JSON-ready data: epoch, members with their shares, the ring's tokens.

    What ``ringkit ring status --json`` prints and the page's ``/api/live`` answers (dskit's
    ``/ring`` page and Cassandra's ``nodetool ring`` show the same facts). ``share`` is the
    member's exact fraction of the keyspace in ``snapshot.ring.shares()`` (0.0 for a member
    not in the ring); ``tokens`` is its token count and ``ring.tokens`` / ``ring.owners`` the
    ring's sorted tokens and owner indices into ``ring.nodes`` (``null`` for a table).

    >>> info = MemberInfo("a", "active", "z1", 1.0, None, (10, 2**63), 5.0, 7)
    >>> report = snapshot_dict(Snapshot.build(3, {"a": info}, None))
    >>> report["epoch"], report["members"][0]["share"], report["ring"]["owners"]
    (3, 1.0, [0, 0])
    """
    ring = snapshot.ring
    shares = ring.shares() if len(ring) else {}
    members = [
        {
            "name": m.name,
            "state": m.state,
            "zone": m.zone,
            "weight": m.weight,
            "data": m.data,
            "tokens": len(m.tokens),
            "share": shares.get(m.name, 0.0),
            "ttl_s": m.ttl_s,
            "lease": m.lease,
            "holder": m.holder,
        }
        for m in snapshot.members.values()
    ]
    tokens: list[int] | None = None
    owners: list[int] | None = None
    if isinstance(ring, HashRing):
        tokens, owners = ring.tokens.tolist(), ring.token_owners.tolist()
    return {
        "epoch": snapshot.epoch,
        "table": snapshot.table,
        "members": members,
        "skipped": [s.as_dict() for s in snapshot.skipped],
        "ring": {
            "nodes": [node.name for node in ring.nodes],
            "space": ring.space if isinstance(ring, HashRing) else None,
            "tokens": tokens,
            "owners": owners,
        },
    }
