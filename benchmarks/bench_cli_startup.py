"""How long ``ringkit --help`` and every subcommand's ``--help`` take over ``python -c pass``.

The target: at most 150 ms over a bare interpreter's start-up, median of 20 runs. Every repeat
starts a fresh interpreter for each contender, interleaved (bare, ``--help``, ``lookup --help``,
…; bare, …) so that a noisy neighbour slows all alike; the figure is each median minus the bare
interpreter's median. ``python -m ringkit`` is timed rather than the ``ringkit`` script so that
the checkout's sources are measured. Run by hand: ``python benchmarks/bench_cli_startup.py
[repeats]``.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

HELPS = (
    (),
    ("lookup",),
    ("demo",),
    ("demo", "cache"),
    ("demo", "workers"),
    ("simulate",),
    ("sweep",),
    ("advise",),
    ("compare",),
    ("plan",),
    ("rebalance",),
    ("ring",),
    ("ring", "status"),
    ("ring", "watch"),
    ("serve",),
)
TARGET_MS = 150.0


def _run_once(argv: list[str], pycache: str) -> float:
    # Bytecode is written once by the warm-up (to a scratch prefix, the checkout stays clean),
    # as an installed package has it: otherwise every run would time the compiler.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env |= {"PYTHONPATH": str(SRC), "PYTHONPYCACHEPREFIX": pycache}
    start = time.perf_counter()
    subprocess.run(argv, check=True, env=env, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main(repeats: int = 20) -> None:
    """Time every ``--help`` `repeats` times against a bare interpreter, interleaved."""
    pycache = tempfile.mkdtemp(prefix="ringkit-bench-cli-")
    contenders = {"python -c pass": [sys.executable, "-c", "pass"]}
    for path in HELPS:
        label = " ".join(("ringkit", *path, "--help"))
        contenders[label] = [sys.executable, "-m", "ringkit", *path, "--help"]
    for argv in contenders.values():
        _run_once(argv, pycache)
    samples: dict[str, list[float]] = {label: [] for label in contenders}
    for _ in range(repeats):
        for label, argv in contenders.items():
            samples[label].append(_run_once(argv, pycache) * 1000)
    bare = statistics.median(samples["python -c pass"])
    print(f"{repeats} fresh interpreters each, interleaved; wall time per process, ms")
    print(f"{'contender':<34}{'min':>8}{'median':>8}{'max':>8}{'over bare':>11}")
    worst = 0.0
    for label, ms in samples.items():
        over = statistics.median(ms) - bare
        worst = max(worst, over)
        print(
            f"{label:<34}{min(ms):>8.1f}{statistics.median(ms):>8.1f}{max(ms):>8.1f}{over:>+11.1f}"
        )
    print(
        f"slowest --help over python -c pass (medians): {worst:+.1f} ms (target <= +{TARGET_MS:g})"
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
