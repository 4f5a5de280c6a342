"""``python -m tests.chaos``: the long chaos run (``make chaos``), by hand, never in pytest.

For each fault kind, `--runs` seeded runs, cycling through the backends and client
configurations the kind applies to; one line per run (seed, case, operations, faults,
violations, stale reads) and the history around each violation. Exits 1 if any run found a
violation.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from tests.chaos.cases import long_cases
from tests.chaos.nemesis import FAULTS
from tests.chaos.run import CONFIGS, Settings, run_once


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
    settings = Settings(processes=args.processes, load_s=args.load_s)
    failed = 0
    for fault in args.faults.split(","):
        cases = [
            case
            for case in long_cases(fault)
            if args.backend in (None, case.backend) and args.config in (None, case.config)
        ]
        for n in range(args.runs):
            seed, case = args.seed + n, cases[n % len(cases)]
            with tempfile.TemporaryDirectory(prefix="ringkit-chaos-") as workdir:
                result = run_once(case, seed, settings, Path(workdir))
            print(result.line, flush=True)
            for text in result.excerpts():
                print("  " + text.replace("\n", "\n  "), flush=True)
            failed += bool(result.verdict.violations)
    print(f"{failed} run(s) with violations", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
