"""Where the slow reads of a throttled rebalance fall: each read's latency beside the phases.

The coordinator runs in another process (``ringkit rebalance --keys-per-s 5000 --batch 100``,
as ``bench_rebalance.py --only latency`` runs it) with its phases (the SCAN backfill, the copy,
the cleanup, the publications) timed by wrappers; this process reads random keys all along.
For each repeat it prints the p99 before and during the move, and in which phase the slowest
1 % of the reads during the move fell, beside how many reads each phase saw. The rest of the
time ("other") is the coordinator's start (importing ringkit), views and counting.

    PYTHONPATH=src:. python3 benchmarks/bench_rebalance_phases.py --repeats 3 --keys 50000
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]  # runnable as `python benchmarks/...` too

from benchmarks.bench_rebalance import NAMES, _fresh  # noqa: E402
from tests.servers import redis_server  # noqa: E402

from ringkit.cluster import ShardedClient  # noqa: E402

PHASES = ("_backfill", "_stream", "_cleanup", "_publish")


def coordinator(spans_path: str, argv: list[str]) -> int:
    """Run ``ringkit`` with `argv`, appending each phase's wall-clock span to `spans_path`."""
    from ringkit.cli import main
    from ringkit.cluster.rebalance.coordinator import Rebalancer

    out = open(spans_path, "w")  # noqa: SIM115 - open for the process's whole life

    def timed(name: str) -> None:
        original = getattr(Rebalancer, name)

        def wrapper(self: Rebalancer, *args: Any, **kwargs: Any) -> Any:
            began = time.time()
            try:
                return original(self, *args, **kwargs)
            finally:
                out.write(json.dumps([name, began, time.time()]) + "\n")
                out.flush()

        setattr(Rebalancer, name, wrapper)

    for name in PHASES:
        timed(name)
    return main(argv)


def _p99(values: list[float]) -> float:
    return sorted(values)[int(0.99 * (len(values) - 1))]


def measure(urls: dict[str, str], keys: list[str], spans_path: str) -> None:
    admin = _fresh(urls, keys)
    reader = ShardedClient(admin.view.placement, dict(admin.view.servers))
    rng, reads, stop = random.Random(1), [], threading.Event()

    def loop() -> None:
        while not stop.is_set():
            key = rng.choice(keys)
            began, start = time.time(), time.perf_counter()
            reader.get(key)
            reads.append((began, time.perf_counter() - start))

    thread = threading.Thread(target=loop)
    thread.start()
    time.sleep(3)
    listing = ",".join(f"{name}={urls[name]}" for name in NAMES[:3])
    command = [
        sys.executable, __file__, "--coordinator", spans_path, "rebalance", "--servers", listing,
        "--add", f"s4={urls['s4']}", "--keys-per-s", "5000", "--batch", "100", "--no-progress",
    ]  # fmt: skip
    start = time.time()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, timeout=120)
    end = time.time()
    stop.set()
    thread.join()
    with open(spans_path) as lines:
        spans = [json.loads(line) for line in lines]  # in the order they ended: innermost first

    def phase(at: float) -> str:
        return next((name for name, began, ended in spans if began <= at < ended), "other")

    before = [latency for began, latency in reads if began < start]
    during = [(began, latency) for began, latency in reads if start <= began < end]
    b99, d99 = _p99(before), _p99([latency for _, latency in during])
    slow: dict[str, int] = {}
    seen: dict[str, int] = {}
    for began, latency in during:
        seen[phase(began)] = seen.get(phase(began), 0) + 1
        if latency >= d99:
            slow[phase(began)] = slow.get(phase(began), 0) + 1
    lasted: dict[str, float] = {}
    for name, began, ended in spans:
        lasted[name] = lasted.get(name, 0.0) + ended - began
    print(
        f"p99 before {b99 * 1e6:.0f} us, during {d99 * 1e6:.0f} us, ratio {d99 / b99:.2f}; "
        f"move {end - start:.2f} s; phases (s) { {k: round(v, 2) for k, v in lasted.items()} }"
    )
    print(f"   slowest 1 % by phase: {slow}; all reads by phase: {seen}")
    reader.close()
    admin.close()


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--coordinator":
        sys.exit(coordinator(sys.argv[2], sys.argv[3:]))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keys", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    keys = [f"booking:{i}" for i in range(args.keys)]
    with ExitStack() as stack, tempfile.TemporaryDirectory() as directory:
        servers = [stack.enter_context(redis_server()) for _ in NAMES]
        urls = {name: f"redis://{s.address}/0" for name, s in zip(NAMES, servers, strict=True)}
        for _ in range(args.repeats):
            measure(urls, keys, f"{directory}/spans.jsonl")


if __name__ == "__main__":
    main()
