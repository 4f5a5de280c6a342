"""``python -m tests.chaos``: the long chaos run (``make chaos``), by hand, never in pytest.

For each fault kind, `--runs` seeded runs from seed `--seed` on, cycling through the backends
and client configurations the kind applies to: seed `s` runs case ``s mod cases``, so seed
ranges split a run set over processes or machines and add up to the same runs
(``--seed 0 --runs 10`` and ``--seed 10 --runs 10`` are ``--runs 20``). One line per run (seed,
case, operations, faults, violations, stale reads) and the history around each violation; at
the end a table per fault kind. `--jobs` runs that many at once (each run starts its own
servers and client processes: only on a machine with cores to spare). `--tally LOG ...` prints
the table of the run lines in earlier logs instead. Exits 1 if any run found a violation.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.chaos.cases import long_cases
from tests.chaos.nemesis import FAULTS
from tests.chaos.run import CONFIGS, Case, RunResult, Settings, run_once
from tests.chaos.tally import RunTally, read_tallies, table


def planned(
    faults: list[str], first_seed: int, runs: int, backend: str | None, config: str | None
) -> list[tuple[int, Case]]:
    """Return the (seed, case) of every run: per fault kind, seed `s` runs case s mod cases.

    >>> [(seed, case.label) for seed, case in planned(["pause"], 5, 2, "memcached", "quorum")]
    [(5, 'pause/memcached/quorum'), (6, 'pause/memcached/quorum')]
    """
    plan = []
    for fault in faults:
        if fault not in FAULTS:
            raise SystemExit(f"unknown fault kind {fault!r}; known: {', '.join(FAULTS)}")
        cases = [
            case
            for case in long_cases(fault)
            if backend in (None, case.backend) and config in (None, case.config)
        ]
        if not cases:
            raise SystemExit(f"fault {fault!r} has no case with backend={backend} config={config}")
        plan += [(seed, cases[seed % len(cases)]) for seed in range(first_seed, first_seed + runs)]
    return plan


def _summary(fault: str, results: list[RunResult]) -> str:
    """One line per fault kind: the totals, with the near-cache's hidden reads."""
    verdicts = [result.verdict for result in results]
    failed = sum(bool(v.violations) for v in verdicts)
    hidden = sum(len(v.near_hidden) for v in verdicts)
    return (
        f"== {fault}: {len(results)} runs, {sum(v.operations for v in verdicts)} operations, "
        f"{sum(len(r.faults) for r in results)} faults, "
        f"{sum(len(v.violations) for v in verdicts)} violations in {failed} runs, "
        f"{sum(len(v.stale) for v in verdicts)} stale reads of {sum(v.reads for v in verdicts)}"
    ) + (f", {hidden} hidden within the near-cache bound" if hidden else "")


def _run(seed: int, case: Case, settings: Settings) -> RunResult:
    with tempfile.TemporaryDirectory(prefix="ringkit-chaos-") as workdir:
        return run_once(case, seed, settings, Path(workdir))


def _results(plan: list[tuple[int, Case]], settings: Settings, jobs: int) -> Iterator[RunResult]:
    """Run the plan, `jobs` runs at a time; yield each result as its run ends."""
    if jobs == 1:
        for seed, case in plan:
            yield _run(seed, case, settings)
        return
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(_run, seed, case, settings) for seed, case in plan]
        for future in futures:
            yield future.result()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos", description=__doc__)
    parser.add_argument("--runs", type=int, default=20, help="seeded runs per fault kind")
    parser.add_argument("--faults", default=",".join(FAULTS), help="fault kinds, comma-separated")
    parser.add_argument("--backend", choices=("redis", "memcached"), help="only this backend")
    parser.add_argument("--config", choices=sorted(CONFIGS), help="only this configuration")
    parser.add_argument("--seed", type=int, default=0, help="the first seed")
    parser.add_argument("--jobs", type=int, default=1, help="runs at once (default 1)")
    parser.add_argument("--load-s", type=float, default=6.0, help="seconds of load per run")
    parser.add_argument("--processes", type=int, default=3, help="client processes per run")
    parser.add_argument(
        "--tally", nargs="+", type=Path, metavar="LOG", help="print the table of earlier logs"
    )
    args = parser.parse_args(argv)
    if args.tally:
        runs = read_tallies(args.tally)
        print(table(runs), flush=True)
        return 1 if any(run.violations for run in runs) else 0
    if args.runs < 1 or args.jobs < 1:
        parser.error(f"--runs and --jobs must be >= 1, got {args.runs} and {args.jobs}")
    # SIGTERM unwinds like Ctrl-C, so that the servers a run started are stopped, not orphaned
    # (with --jobs, once the runs in flight end).
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(128 + number))
    settings = Settings(processes=args.processes, load_s=args.load_s)
    plan = planned(args.faults.split(","), args.seed, args.runs, args.backend, args.config)
    by_fault: dict[str, list[RunResult]] = {}
    printing = threading.Lock()
    for result in _results(plan, settings, args.jobs):
        with printing:
            print(result.line, flush=True)
            for text in result.excerpts():
                print("  " + text.replace("\n", "\n  "), flush=True)
        by_fault.setdefault(result.case.fault, []).append(result)
    print("\n".join(_summary(fault, results) for fault, results in by_fault.items()))
    tallies = [RunTally.parse(result.line) for results in by_fault.values() for result in results]
    print(table(tally for tally in tallies if tally is not None))
    failed = sum(
        bool(result.verdict.violations) for results in by_fault.values() for result in results
    )
    print(f"{failed} run(s) with violations", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
