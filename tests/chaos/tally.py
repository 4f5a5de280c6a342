"""The tally of a set of chaos runs: per fault kind, runs, operations, violations, stale reads.

Built from the runs of this process, or read back from the lines that earlier runs printed
(``python -m tests.chaos --tally LOG [LOG ...]``), so that a run set split over several
processes or machines by seed range (``--seed``, ``--runs``) adds up to one table.

>>> line = ("seed=1 fault=restart/memcached/split ops=5856 reads=3043 faults=8 violations=1 "
...         "(lost 1) stale=14 (lost 1; up to 1004.4 ms after the ack) counter_low=14 errors=24")
>>> run = RunTally.parse(line)
>>> run.fault, run.operations, run.violations, run.stale
('restart', 5856, 1, 14)
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tests.chaos.nemesis import FAULTS

__all__ = ["RunTally", "read_tallies", "table"]

# The head of RunResult.line: what the table adds up (the rest of the line explains it).
_LINE = re.compile(
    r"^seed=(?P<seed>\d+) fault=(?P<label>\S+) ops=(?P<operations>\d+) reads=(?P<reads>\d+) "
    r"faults=(?P<faults>\d+) violations=(?P<violations>\d+)(?: \([^)]*\))? stale=(?P<stale>\d+)"
)


@dataclass(frozen=True, slots=True)
class RunTally:
    """The counts of one run, as its line states them; `label` is fault/backend/config."""

    seed: int
    label: str
    operations: int
    reads: int
    faults: int
    violations: int
    stale: int

    @property
    def fault(self) -> str:
        """The fault kind of the run."""
        return self.label.split("/", 1)[0]

    @classmethod
    def parse(cls, line: str) -> RunTally | None:
        """Return the counts of a run line of ``make chaos``, None for any other line."""
        found = _LINE.match(line)
        if found is None:
            return None
        fields = found.groupdict()
        label = fields.pop("label")
        return cls(label=label, **{name: int(value) for name, value in fields.items()})


def read_tallies(paths: Iterable[Path]) -> list[RunTally]:
    """Return the runs that the logs `paths` list, in order (a rerun seed counts again)."""
    runs = []
    for path in paths:
        for line in path.read_text().splitlines():
            if (run := RunTally.parse(line)) is not None:
                runs.append(run)
    return runs


def table(runs: Iterable[RunTally]) -> str:
    """Return a Markdown table: one row per fault kind (in `FAULTS` order), then the total."""
    by_fault: dict[str, list[RunTally]] = {}
    for run in runs:
        by_fault.setdefault(run.fault, []).append(run)
    order = [fault for fault in FAULTS if fault in by_fault]
    order += sorted(set(by_fault) - set(order))
    rows = [_row(fault, by_fault[fault]) for fault in order]
    rows.append(_row("total", [run for fault in order for run in by_fault[fault]]))
    head = (
        "| fault kind | runs | operations | reads | faults | violations | runs with violations "
        "| stale reads |"
    )
    return "\n".join([head, "|---|---:|---:|---:|---:|---:|---:|---:|", *rows])


def _row(name: str, runs: list[RunTally]) -> str:
    cells = [
        len(runs),
        sum(run.operations for run in runs),
        sum(run.reads for run in runs),
        sum(run.faults for run in runs),
        sum(run.violations for run in runs),
        sum(bool(run.violations) for run in runs),
        sum(run.stale for run in runs),
    ]
    return f"| {name} | " + " | ".join(f"{cell:,}" for cell in cells) + " |"
