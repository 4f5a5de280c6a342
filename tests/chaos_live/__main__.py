"""``python -m tests.chaos_live``: the long ownership-checker runs (``make chaos-live``), by hand.

For each fault kind and handoff mode, `--runs` seeded runs (seeds from `--seed`, default 0) of
at most `--load-s` seconds of faults; one line per run and a total per kind. Exits 1 when an
exclusive run shows an overlap, a token error (in the samples or the transition logs), or
(graceful changes) a key unowned for longer than ``ttl_s + 1 s``, and when a run breaks (it
is printed and the others go on).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from tests.chaos_live.run import FAULTS, RunResult, Settings, run_once


def failed(result: RunResult, settings: Settings) -> bool:
    """Whether `result` breaks what its mode promises."""
    verdict = result.verdict
    tokens = verdict.token_errors or verdict.transition_token_errors
    if result.handoff != "exclusive":
        return bool(tokens)  # stale tokens inside the documented overlap are no failure
    tokens = tokens or verdict.stale_tokens or verdict.transition_stale_tokens
    too_long = result.fault == "graceful" and verdict.longest_gap_s > settings.ttl_s + 1
    return bool(verdict.overlaps or verdict.transition_overlaps or tokens or too_long)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos_live")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0, help="the first run's seed")
    parser.add_argument("--faults", default=",".join(FAULTS))
    parser.add_argument("--modes", default="exclusive,default")
    parser.add_argument("--load-s", type=float, default=25.0)
    args = parser.parse_args(argv)
    settings = Settings(load_s=args.load_s)
    bad = 0
    for fault in args.faults.split(","):
        for mode in args.modes.split(","):
            results = []
            for seed in range(args.seed, args.seed + args.runs):
                try:
                    with tempfile.TemporaryDirectory(prefix="ringkit-chaos-live-") as folder:
                        result = run_once(mode, fault, seed, settings, Path(folder))
                except Exception as error:  # one broken run must not end the others
                    print(f"{mode:9} {fault:11} seed {seed:3}: the run broke: {error!r}")
                    bad += 1
                    continue
                print(result.line, flush=True)
                results.append(result)
                bad += failed(result, settings)
            overlaps = sum(len(r.verdict.overlaps) for r in results)
            longest = max((r.verdict.longest_overlap_s for r in results), default=0.0)
            logged = [o.seconds for r in results for o in r.verdict.transition_overlaps]
            logged_longest = max(logged, default=0.0)
            print(
                f"== {mode} {fault}: {len(results)} runs, "
                f"{sum(len(r.faults) for r in results)} faults, "
                f"{sum(r.verdict.runs for r in results)} ownership runs, {overlaps} overlaps "
                f"(longest {longest:.3f} s), "
                f"{sum(len(r.verdict.token_errors) for r in results)} token errors, longest gap "
                f"{max((r.verdict.longest_gap_s for r in results), default=0):.2f} s; "
                f"transition logs: {sum(r.verdict.transition_runs for r in results)} intervals, "
                f"{sum(len(r.verdict.transition_overlaps) for r in results)} overlaps (longest "
                f"{logged_longest:.3f} s), "
                f"{sum(len(r.verdict.transition_token_errors) for r in results)} token errors; "
                f"stale tokens in overlaps: {sum(len(r.verdict.stale_tokens) for r in results)} "
                f"(logs {sum(len(r.verdict.transition_stale_tokens) for r in results)})",
                flush=True,
            )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
