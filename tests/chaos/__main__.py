"""``python -m tests.chaos``: the long chaos run (``make chaos``), by hand, never in pytest.

For each fault kind, `--runs` seeded runs, cycling through the backends and client
configurations the kind applies to; one line per run (seed, case, operations, faults,
violations, stale reads) and the history around each violation. Exits 1 if any run found a
violation.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
from pathlib import Path

from tests.chaos.cases import long_cases
from tests.chaos.nemesis import FAULTS
from tests.chaos.run import CONFIGS, RunResult, Settings, run_once


def _summary(fault: str, results: list[RunResult]) -> str:
    """One line per fault kind: runs, runs with a violation, and the violations by category."""
    verdicts = [result.verdict for result in results]
    failed = sum(bool(v.violations) for v in verdicts)
    hidden = sum(len(v.near_hidden) for v in verdicts)
    return (
        f"== {fault}: {len(results)} runs, {sum(v.operations for v in verdicts)} operations, "
        f"{sum(len(r.faults) for r in results)} faults, "
        f"{sum(len(v.violations) for v in verdicts)} violations in {failed} runs, "
        f"{sum(len(v.stale) for v in verdicts)} stale reads of {sum(v.reads for v in verdicts)}"
    ) + (f", {hidden} hidden within the near-cache bound" if hidden else "")


def _run_kind(fault: str, args: argparse.Namespace, settings: Settings) -> list[RunResult]:
    cases = [
        case
        for case in long_cases(fault)
        if args.backend in (None, case.backend) and args.config in (None, case.config)
    ]
    results = []
    for n in range(args.runs):
        seed, case = args.seed + n, cases[n % len(cases)]
        with tempfile.TemporaryDirectory(prefix="ringkit-chaos-") as workdir:
            result = run_once(case, seed, settings, Path(workdir))
        print(result.line, flush=True)
        for text in result.excerpts():
            print("  " + text.replace("\n", "\n  "), flush=True)
        results.append(result)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos", description=__doc__)
    parser.add_argument("--runs", type=int, default=20, help="seeded runs per fault kind")
    parser.add_argument("--faults", default=",".join(FAULTS), help="fault kinds, comma-separated")
    parser.add_argument("--backend", choices=("redis", "memcached"), help="only this backend")
    parser.add_argument("--config", choices=sorted(CONFIGS), help="only this configuration")
    parser.add_argument("--seed", type=int, default=0, help="the first seed")
    parser.add_argument("--load-s", type=float, default=6.0, help="seconds of load per run")
    parser.add_argument("--processes", type=int, default=3, help="client processes per run")
    args = parser.parse_args(argv)
    # SIGTERM unwinds like Ctrl-C, so that the servers a run started are stopped, not orphaned.
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(128 + number))
    settings = Settings(processes=args.processes, load_s=args.load_s)
    summaries, failed = [], 0
    for fault in args.faults.split(","):
        results = _run_kind(fault, args, settings)
        summaries.append(_summary(fault, results))
        failed += sum(bool(result.verdict.violations) for result in results)
    print("\n".join(summaries), flush=True)
    print(f"{failed} run(s) with violations", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
