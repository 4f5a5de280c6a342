"""One operation of a chaos run, the clock it is timed by, and history files (JSON lines).

Every process stamps its operations with ``CLOCK_MONOTONIC`` read through
``time.clock_gettime_ns``. ``time.monotonic`` promises nothing across processes (Python documents
its reference point as undefined, so only differences within one process mean anything), and
``time.time_ns`` is the wall clock, which an NTP step can move backwards in the middle of a run.
POSIX's ``CLOCK_MONOTONIC`` counts from one point fixed at boot for the whole machine and never
steps, so stamps taken in different processes on one host can be compared: that is what lets the
checker say "this write was acknowledged before that read began".
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ["OUTCOMES", "Op", "Window", "now_ns", "read_history", "write_history"]

#: ok: acknowledged. fail: certainly had no effect (reads that raised). unknown: a write that
#: raised (timeout, quorum missed, stale view): it may have reached some replicas, now or later.
OUTCOMES = ("ok", "fail", "unknown")


def now_ns() -> int:
    """Return the machine-wide monotonic clock in nanoseconds (comparable across processes)."""
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


@dataclass(frozen=True, slots=True)
class Op:
    """One operation: who ran it, what, on which key, when, and how it ended.

    `value` is what a ``set`` wrote (unique per run), what a ``get`` or ``incr`` returned (None:
    missing), or None for a ``delete``. `final` marks the reads made after every fault healed.
    For a read that found a value, `server` is the server that answered and `marked_down_ns`
    the last time this process saw that server fail (and so marked it down), if it ever did.
    """

    process: int
    kind: str  # "set" | "delete" | "get" | "incr"
    key: str
    value: str | int | None
    invoke_ns: int
    complete_ns: int
    outcome: str
    final: bool = False
    server: str | None = None
    marked_down_ns: int | None = None

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {', '.join(OUTCOMES)}, got {self.outcome!r}")
        if self.complete_ns < self.invoke_ns:
            raise ValueError(f"op completes before it is invoked: {self}")


@dataclass(frozen=True, slots=True)
class Window:
    """A server failed (killed, hung) from `start_ns` until `end_ns` (back, listening)."""

    server: str
    start_ns: int
    end_ns: int

    def missed(self, op: Op) -> bool:
        """Whether the server may have missed `op` because it was failed while `op` ran."""
        return self.start_ns <= op.complete_ns and op.invoke_ns <= self.end_ns


def write_history(path: Path, ops: Iterable[Op]) -> None:
    """Write `ops` to `path`, one JSON object a line."""
    with path.open("w") as out:
        for op in ops:
            out.write(json.dumps(asdict(op)) + "\n")


def read_history(path: Path) -> Iterator[Op]:
    """Read the operations `write_history` wrote."""
    with path.open() as lines:
        for line in lines:
            yield Op(**json.loads(line))
