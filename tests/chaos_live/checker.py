"""Check the ownership history of a live ring: overlaps, fencing tokens, keys left unowned.

Each member process samples ``owns(key)`` and writes its *runs* of True answers (worker.py): a
run's span goes from the end of its first True call to the start of its last, the time in
which the member surely owned the key (a call that answered True began before it returned, so
nothing narrower is certain). Every process of one machine reads the same CLOCK_MONOTONIC, so
spans of different processes compare directly, as Jepsen's histories compare invocation and
completion times.

- An *overlap* is a time in which more than ``replicas`` members surely owned one key: a
  violation for ``handoff="exclusive"``; for the default mode, its longest is reported against
  the documented bound.
- Tokens: sorted by start, a key's runs never get a lower token, and a run by another member
  than the run before it gets a strictly higher one. An inversion between two runs that
  overlap, or that begin within ``lag_s`` (the default mode's ``current_within_s``) of each
  other, is a *stale token*, counted apart: a member whose store lags began an interval from
  the older epoch, and storage refuses its writes by the token, which is what it is for.
- A *gap* is a time in which no member surely owned a key, between two of its runs.

The library's own transition logs (``member.log_transitions()``, timestamps read under the
lock ``owns`` decides under) are checked the same way: each interval, from the time its gain
was decided by to the time just before its last True answer, is a run
(:func:`load_transition_runs`); overlaps and token errors found there are reported apart.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Overlap", "Run", "Verdict", "check", "load_runs", "load_transition_runs"]


@dataclass(frozen=True, slots=True)
class Run:
    """A member surely owned `key` from `start` to `end` (monotonic seconds) with `token`."""

    member: str
    key: str
    start: float
    end: float
    token: int | None


@dataclass(frozen=True, slots=True)
class Overlap:
    """`members` surely owned `key` together for `seconds`, from `start`."""

    key: str
    members: tuple[str, ...]
    start: float
    seconds: float


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the checker found in one run's history."""

    runs: int
    overlaps: list[Overlap] = field(default_factory=list)
    token_errors: list[str] = field(default_factory=list)
    gaps: list[tuple[str, float, float]] = field(default_factory=list)  # key, start, seconds
    transition_runs: int = 0
    transition_overlaps: list[Overlap] = field(default_factory=list)
    transition_token_errors: list[str] = field(default_factory=list)
    stale_tokens: list[str] = field(default_factory=list)  # inversions inside an overlap
    transition_stale_tokens: list[str] = field(default_factory=list)

    @property
    def longest_overlap_s(self) -> float:
        return max((o.seconds for o in self.overlaps), default=0.0)

    @property
    def longest_gap_s(self) -> float:
        return max((seconds for _, _, seconds in self.gaps), default=0.0)


def load_runs(paths: Iterable[Path]) -> list[Run]:
    """Read runs from workers' files; of the lines of one run (checkpoints) keep the longest."""
    longest: dict[tuple[str, str, float], Run] = {}
    for path in paths:
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            try:
                raw = json.loads(line)
            except ValueError:
                continue  # the last line of a killed process may be cut short
            run = Run(raw["member"], raw["key"], raw["start"], raw["end"], raw["token"])
            identity = (run.member, run.key, run.start)
            if identity not in longest or longest[identity].end < run.end:
                longest[identity] = run
    return sorted(longest.values(), key=lambda r: (r.key, r.start))


def load_transition_runs(paths: Iterable[Path]) -> list[Run]:
    """Read workers' transition logs as runs: gain to loss, or to the last checkpoint.

    A gain opens a member's interval for a key, a checkpoint line extends it, a loss closes it
    at the time just before its last True answer. Times are CLOCK_MONOTONIC nanoseconds,
    turned into the seconds the samples use.
    """
    runs: list[Run] = []
    for path in paths:
        if not path.exists():
            continue
        open_runs: dict[tuple[str, str], Run] = {}
        for line in path.read_text().splitlines():
            try:
                raw = json.loads(line)
            except ValueError:
                continue  # the last line of a killed process may be cut short
            identity = (raw["member"], raw["key"])
            last = raw["last_owned_ns"] / 1e9
            if raw.get("open"):
                run = open_runs.get(identity)
                if run is not None and run.start == raw["since_ns"] / 1e9:
                    open_runs[identity] = Run(*identity, run.start, max(run.end, last), run.token)
            elif raw["owned"]:
                open_runs[identity] = Run(*identity, raw["at_ns"] / 1e9, last, raw["token"])
            elif identity in open_runs:
                run = open_runs.pop(identity)
                runs.append(Run(*identity, run.start, max(run.end, last), run.token))
        runs.extend(open_runs.values())
    return sorted(runs, key=lambda r: (r.key, r.start))


def _overlaps(key: str, runs: list[Run], replicas: int) -> list[Overlap]:
    """Times when more than `replicas` members held `key`, by a sweep over span edges."""
    edges = sorted(
        [(r.start, 1, r.member) for r in runs if r.end > r.start]
        + [(r.end, -1, r.member) for r in runs if r.end > r.start]
    )
    found: list[Overlap] = []
    holding: dict[str, int] = defaultdict(int)
    since: float | None = None
    # Sorted, an end comes before a start at one instant: touching spans do not overlap.
    for time, step, member in edges:
        owners = tuple(sorted(m for m, count in holding.items() if count > 0))
        if len(owners) > replicas and since is not None and time > since:
            last = found[-1] if found else None
            if last is not None and last.start + last.seconds == since:  # one stretch
                names = tuple(sorted(set(last.members) | set(owners)))
                found[-1] = Overlap(key, names, last.start, time - last.start)
            else:
                found.append(Overlap(key, owners, since, time - since))
        holding[member] += step
        since = time
    return found


def _token_errors(key: str, runs: list[Run], lag_s: float) -> tuple[list[str], list[str]]:
    """The key's token errors, and its stale tokens: inversions inside an overlap.

    A run that begins while the previous run (by start) still surely owns the key, or at
    most `lag_s` after that run began, may come from a store that has not applied the newer
    epoch yet: the default mode's documented overlap (``current_within_s`` after a change).
    Such a member may begin an interval from the older epoch, with a lower token than the
    newer owner's: a stale owner, whose writes storage refuses by the token. That is counted
    apart; any other inversion is an error.
    """
    errors: list[str] = []
    stale: list[str] = []
    previous: Run | None = None
    for run in runs:
        if run.token is None:
            continue
        if previous is not None and previous.token is not None:
            lagging = run.start < previous.end or run.start - previous.start <= lag_s
            found = stale if lagging else errors
            if run.token < previous.token:
                found.append(f"{key}: token fell from {previous.token} to {run.token}")
            elif run.member != previous.member and run.token <= previous.token:
                found.append(
                    f"{key}: {run.member} took over from {previous.member} with token "
                    f"{run.token}, not above {previous.token}"
                )
        previous = run
    return errors, stale


def _gaps(key: str, runs: list[Run]) -> list[tuple[str, float, float]]:
    gaps: list[tuple[str, float, float]] = []
    covered: float | None = None
    for run in sorted(runs, key=lambda r: r.start):
        if covered is not None and run.start > covered:
            gaps.append((key, covered, run.start - covered))
        covered = run.end if covered is None else max(covered, run.end)
    return gaps


def _by_key(runs: list[Run]) -> list[tuple[str, list[Run]]]:
    by_key: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        by_key[run.key].append(run)
    for mine in by_key.values():
        mine.sort(key=lambda r: r.start)
    return sorted(by_key.items())


def check(
    runs: list[Run],
    *,
    replicas: int = 1,
    transitions: list[Run] | None = None,
    lag_s: float = 0.0,
) -> Verdict:
    """Check every key's runs, and the runs of the transition logs (see the module docstring).

    `lag_s`: how long after a run begins a lagging store may still begin one with an older
    token (a stale token, not an error; the default mode's ``current_within_s``).
    """
    verdict = Verdict(len(runs), transition_runs=len(transitions or []))
    for key, mine in _by_key(runs):
        verdict.overlaps.extend(_overlaps(key, mine, replicas))
        errors, stale = _token_errors(key, mine, lag_s)
        verdict.token_errors.extend(errors)
        verdict.stale_tokens.extend(stale)
        verdict.gaps.extend(_gaps(key, mine))
    for key, logged in _by_key(transitions or []):
        verdict.transition_overlaps.extend(_overlaps(key, logged, replicas))
        errors, stale = _token_errors(key, logged, lag_s)
        verdict.transition_token_errors.extend(errors)
        verdict.transition_stale_tokens.extend(stale)
    return verdict
