"""Check a merged history per key: lost writes, deleted keys coming back, stale and phantom reads.

The model is a register per key with unique values (every ``set`` of a run writes a value no
other ``set`` writes), plus counters. An acknowledged operation took effect at some instant
between its invocation and its completion; a write whose outcome is unknown (it raised: timeout,
quorum missed) took effect at some instant after its invocation, or never. This is the model of
Jepsen's register checks (Knossos: an operation that crashed may be linearized at any later
point), applied read by read rather than as a full linearizability search: a read is *admissible*
when some write (or delete) that produced the value it returned could still be the newest one.

A read returning `x` is admissible iff some producer `p` of `x` (a ``set`` of `x`; for a miss, a
``delete`` or the initial empty state) began by the end of the read, and no acknowledged operation
`o` that replaces `x` (a ``set`` of another value; for a value, also a ``delete``) began after `p`
surely ended and completed before the read began. Writes concurrent with the read, or with `p`,
may or may not be visible, so they never make a read inadmissible.

An inadmissible read is classified by what it missed: ``lost`` (it found nothing although an
acknowledged ``set`` replaced the key's deletion), ``resurrected`` (it found a value that an
acknowledged ``delete`` removed), ``stale`` (an acknowledged ``set`` replaced it) or ``phantom``
(no ``set`` of that value began by the end of the read). Which of these are violations depends on
the guarantee of the configuration (docs/cluster.md, "What is guaranteed, under which faults"):
with ``read="all"`` or ``write_quorum=R`` every one is; with the defaults a process may read stale
values until a repair, so anomalies of the reads made during the run are counted as stale reads,
and only the final reads (after every fault healed and the servers were repaired), phantoms and
reads that missed a write *the reading process itself* had acknowledged are violations: a
process writes to every replica it considers up and reads only from those (it never serves from
a server it marked down before repairing it), so it always reads its own writes or newer. Given
the nemesis's failure windows, a stale read is also a violation when the server that answered
missed the write during a failure that the reading process noticed (it marked that server down
after the failure began): it had to repair the server from the hints before reading from it.

Counters (keys that see ``incr``) are checked against bounds: a counter read or incremented by
`o` holds at least the number of increments acknowledged before `o` began (and set to 0 before),
and at most the number begun before `o` ended. Above the upper bound is a violation (an increment
counted twice); below the lower bound is counted, never a violation, because counters carry no
version and are never repaired (docs/cluster.md, "Replication"). With split counters a read
returns the sum of the parts, held to the same bounds, but an ``incr`` answers the new count of
the one part it counted into: only the upper bound applies to it.

A client with a near-cache may answer a read from its memory with a value up to the cache's
``ttl_s`` older than a write another process acknowledged (docs/cluster.md, "The near-cache"):
for such a client, a write by another process counts as surely before a read only once it was
acknowledged more than ``ttl_s`` before the read began; the reader's own writes keep the rule
above (`_surely_before` states it).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from tests.chaos.history import Op, Window

__all__ = ["INITIAL", "Anomaly", "Verdict", "check"]

#: The empty state every key starts in: a delete acknowledged before anything else.
INITIAL = Op(
    process=-1, kind="delete", key="", value=None, invoke_ns=-1, complete_ns=-1, outcome="ok"
)

_WRITES = ("set", "delete")


@dataclass(frozen=True, slots=True)
class Anomaly:
    """A read that returned what the model does not allow, and the operation it missed.

    `superseded_by` is the first acknowledged operation that made the value returned outdated;
    `stale_for_ns` is how long before the read began it had been acknowledged.
    """

    kind: str  # lost | resurrected | stale | phantom | counter_high | counter_low
    read: Op
    superseded_by: Op | None = None
    stale_for_ns: int = 0
    own_write_missed: bool = False  # the reading process itself had acknowledged what it missed
    unrepaired: bool = False  # served by a server the reader had marked down since it missed it

    @property
    def category(self) -> str:
        """The kind, or ``unrepaired`` for a read from a server its reader had marked down."""
        return "unrepaired" if self.unrepaired else self.kind

    @property
    def breaks_defaults(self) -> bool:
        """Whether even the defaults forbid this read (own write missed, unrepaired server)."""
        return self.own_write_missed or self.unrepaired

    def describe(self) -> str:
        """One line for a report: the read, and what it should have seen."""
        text = f"{self.kind}: {_show(self.read)}"
        if self.superseded_by is not None:
            text += (
                f" missed {_show(self.superseded_by)}"
                f" acknowledged {self.stale_for_ns / 1e6:.1f} ms before the read began"
            )
        if self.own_write_missed:
            text += "; the reader had acknowledged it itself"
        if self.unrepaired:
            text += f"; {self.read.server} answered, which the reader had marked down since"
        return text


@dataclass
class Verdict:
    """The outcome of a check: violations of the guarantee, stale reads it allows, counts."""

    violations: list[Anomaly] = field(default_factory=list)
    stale: list[Anomaly] = field(default_factory=list)
    counter_low: list[Anomaly] = field(default_factory=list)
    # Reads that missed another process's write acknowledged less than the near-cache's
    # ttl_s before they began: allowed, counted to show that the near-cache served old values.
    near_hidden: list[Anomaly] = field(default_factory=list)
    reads: int = 0
    operations: int = 0

    @property
    def stale_max_ms(self) -> float:
        """The longest time a stale read came after the value it missed was acknowledged."""
        return max((a.stale_for_ns for a in self.stale), default=0) / 1e6

    @property
    def near_hidden_max_ms(self) -> float:
        """The longest a write stayed hidden behind a near-cache (at most its ttl_s)."""
        return max((a.stale_for_ns for a in self.near_hidden), default=0) / 1e6

    @property
    def stale_span_ms(self) -> float:
        """From the first stale read to the last one: how long stale values were served."""
        if not self.stale:
            return 0.0
        starts = [a.read.invoke_ns for a in self.stale]
        return (max(starts) - min(starts)) / 1e6


def check(
    ops: Iterable[Op],
    *,
    strict: bool,
    windows: Sequence[Window] = (),
    near_ttl_ns: int = 0,
    split_counters: bool = False,
) -> Verdict:
    """Check every key of `ops`; `strict`: ``read="all"`` or ``write_quorum=R`` was used.

    `windows` are the server failures the nemesis caused: with the defaults, a stale read served
    by a server that missed the write during a failure which the reading process had noticed
    (it marked the server down at or after the failure began) is a violation, since that process
    must repair the server from the hints before it serves from it again. `near_ttl_ns`: the
    clients had a near-cache of this ``ttl_s`` (0: none). `split_counters`: the counters were
    split, so an ``incr`` answers one part's count, not the total.

    Runtime: O(reads x acknowledged writes) per key.
    """
    by_key: dict[str, list[Op]] = defaultdict(list)
    verdict = Verdict()
    for op in ops:
        by_key[op.key].append(op)
        verdict.operations += 1
        verdict.reads += op.kind == "get" and op.outcome == "ok"
    for key_ops in by_key.values():
        if any(op.kind == "incr" for op in key_ops):
            _check_counter(key_ops, verdict, near_ttl_ns=near_ttl_ns, split=split_counters)
        else:
            _check_register(
                key_ops, verdict, strict=strict, windows=windows, near_ttl_ns=near_ttl_ns
            )
    return verdict


def _surely_before(write: Op, read: Op, near_ttl_ns: int) -> bool:
    """Whether `read` must see acknowledged `write` or newer: it was surely in place and visible.

    The near-cache bound, applied here and only here: a client with a near-cache may answer
    from its memory a value read up to `near_ttl_ns` before, so another process's write
    acknowledged less than that before the read began is concurrent with it (may or may not be
    seen). The reader's own writes drop their keys from its cache, acknowledged or not, so they
    keep the strict rule; so do the final reads, made by a fresh client that reads each key
    once (its near-cache is empty and answers none of them).
    """
    hidden_ns = 0 if read.final or write.process == read.process else near_ttl_ns
    return write.complete_ns + hidden_ns < read.invoke_ns


def _end_ns(op: Op) -> float:
    """The latest instant `op` can have taken effect (never, for an unknown outcome)."""
    return op.complete_ns if op.outcome == "ok" else math.inf


def _replaces(op: Op, value: object) -> bool:
    """Whether `op`, once applied, means `value` is no longer the key's newest state."""
    if value is None:
        return op.kind == "set"
    return op.kind == "delete" or op.value != value


def _check_register(
    ops: Sequence[Op],
    verdict: Verdict,
    *,
    strict: bool,
    windows: Sequence[Window],
    near_ttl_ns: int,
) -> None:
    writes = [op for op in ops if op.kind in _WRITES and op.outcome != "fail"]
    acked = [op for op in writes if op.outcome == "ok"]
    producers: dict[object, list[Op]] = defaultdict(list)
    producers[None].append(INITIAL)
    for op in writes:
        producers[op.value if op.kind == "set" else None].append(op)
    for read in ops:
        if read.kind != "get" or read.outcome != "ok":
            continue
        anomaly = _judge(read, producers.get(read.value, []), acked, near_ttl_ns)
        if anomaly is None:
            if near_ttl_ns and (hidden := _judge(read, producers.get(read.value, []), acked, 0)):
                verdict.near_hidden.append(hidden)  # legal, but shows the bound was used
            continue
        if _unrepaired(anomaly, windows):
            anomaly = replace(anomaly, unrepaired=True)
        if strict or read.final or anomaly.kind == "phantom" or anomaly.breaks_defaults:
            verdict.violations.append(anomaly)
        else:
            verdict.stale.append(anomaly)


def _judge(
    read: Op, producers: Sequence[Op], acked: Sequence[Op], near_ttl_ns: int
) -> Anomaly | None:
    """Return why `read` is inadmissible, or None when some producer may still be the newest."""
    began = [p for p in producers if p.invoke_ns <= read.complete_ns]
    if not began:
        return Anomaly("phantom", read)
    # A later end leaves fewer operations surely after it, so the latest-ending producer decides.
    end = max(_end_ns(p) for p in began)
    missed = [
        o
        for o in acked
        if _replaces(o, read.value) and o.invoke_ns > end and _surely_before(o, read, near_ttl_ns)
    ]
    if not missed:
        return None
    first = min(missed, key=lambda o: o.complete_ns)
    if read.value is None:
        kind = "lost"
    elif any(o.kind == "delete" for o in missed):
        kind = "resurrected"
    else:
        kind = "stale"
    own = any(o.process == read.process for o in missed)
    return Anomaly(kind, read, first, read.invoke_ns - first.complete_ns, own)


def _unrepaired(anomaly: Anomaly, windows: Sequence[Window]) -> bool:
    """Whether the read came from a server its process had marked down in the failure it missed."""
    read, missed = anomaly.read, anomaly.superseded_by
    if read.server is None or read.marked_down_ns is None or missed is None:
        return False
    return any(
        window.server == read.server
        and window.missed(missed)
        and window.start_ns <= read.marked_down_ns
        for window in windows
    )


def _check_counter(ops: Sequence[Op], verdict: Verdict, *, near_ttl_ns: int, split: bool) -> None:
    seeded = [op for op in ops if op.kind == "set" and op.outcome == "ok"]
    incrs = [op for op in ops if op.kind == "incr" and op.outcome != "fail"]
    acked = [op for op in incrs if op.outcome == "ok"]
    for op in ops:
        if op.kind not in ("get", "incr") or op.outcome != "ok":
            continue
        if not any(s.complete_ns < op.invoke_ns for s in seeded):
            continue  # read before the counter was set to 0: nothing to compare with
        hidden_ns = near_ttl_ns if op.kind == "get" else 0  # an incr is answered by servers
        low = sum(_surely_before(o, op, hidden_ns) for o in acked) + (op.kind == "incr")
        high = sum(o.invoke_ns < op.complete_ns for o in incrs)
        if isinstance(op.value, int) and op.value > high:
            verdict.violations.append(Anomaly("counter_high", op))
        elif split and op.kind == "incr":
            continue  # one part's new count: the total is a get, and only it has a lower bound
        elif not isinstance(op.value, int) or op.value < low:  # None: a replica lost it
            verdict.counter_low.append(Anomaly("counter_low", op))


def _show(op: Op) -> str:
    if op.kind == "delete":
        value = ""
    else:
        value = f" -> {op.value!r}" if op.kind in ("get", "incr") else f" {op.value!r}"
    final = " (final)" if op.final else ""
    return (
        f"p{op.process} {op.kind} {op.key}{value} [{op.outcome}]{final} "
        f"@{op.invoke_ns / 1e6:.1f}..{op.complete_ns / 1e6:.1f} ms"
    )
