"""The benchmarks that need no server still run, each once and as small as its options allow.

Benchmarks are run by hand (docs/performance.md), so a change to the library that breaks one
would otherwise go unnoticed until someone needs its figures: `bench_client_path.py` reached
into a handle that cluster/'s layers had replaced. Each is run as its docstring says, from
another directory, and must finish and print its figures; the figures themselves are not
judged here (performance is measured by hand, never asserted in a test).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"

# (script, arguments that make it small, a text its output must hold)
RUNS = [
    ("bench_client_path.py", ["--calls", "20", "--repeats", "1"], "ShardedClient.set"),
    (
        "bench_client_path.py",
        ["--calls", "20", "--repeats", "1", "--pieces", "--sleep-us", "1"],
        "after a 1 µs sleep",
    ),
    ("bench_movement.py", ["--keys", "2000", "--repeats", "1", "--nodes", "10"], "moved_keys"),
    (
        "bench_sim.py",
        ["--keys", "2000", "--repeats", "1", "--nodes", "10", "--no-peers", "--no-warmup"],
        "total_s",
    ),
    ("bench_transitions.py", ["--quick"], "owns, log off"),
    ("bench_live_records.py", [], "decode_member_record"),
    ("bench_compat.py", ["--quick"], "ketama lookup"),
    ("bench_proxies.py", ["--quick"], "proxy layouts"),
]


@pytest.mark.parametrize(
    ("script", "arguments", "expected"),
    RUNS,
    ids=[" ".join([script, *arguments]) for script, arguments, _ in RUNS],
)
def test_a_benchmark_without_servers_runs_to_its_figures(
    script: str, arguments: list[str], expected: str, tmp_path: Path
) -> None:
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    finished = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *arguments],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr[-2000:]
    assert expected in finished.stdout, finished.stdout[-2000:]
