"""Build time, add/remove time and memory per vnode for a large cluster (10,000 × 256 vnodes).

    python benchmarks/bench_build.py

Timed without a memory tracer (tracing slows allocation); memory is counted from the arrays:
tokens (uint64) + owners (uint16) + the prefix table.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from ringkit import HashRing


def timed(function, repeats: int = 5) -> list[float]:  # type: ignore[no-untyped-def]
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        samples.append(time.perf_counter() - start)
    return samples


def main() -> None:
    names = [f"node-{i}" for i in range(10_000)]
    build = timed(lambda: HashRing(names, vnodes=256))
    ring = HashRing(names, vnodes=256)
    add = timed(lambda: ring.add("node-new"), repeats=9)
    remove = timed(lambda: ring.remove("node-5000"), repeats=9)
    table = ring._table  # the private arrays are what is measured
    total = table.tokens.nbytes + table.owners.nbytes + table.prefix.nbytes
    print("| nodes=10000/vnodes=256 (2.56M tokens) | min (s) | median (s) | max (s) |")
    print("|---|---:|---:|---:|")
    for label, samples in (("build", build), ("add one node", add), ("remove one node", remove)):
        print(f"| {label} | {min(samples):.3f} | {statistics.median(samples):.3f} | "
              f"{max(samples):.3f} |")  # fmt: skip
    per_vnode = table.prefix.nbytes / len(table.tokens)
    print(f"\nmemory: {total / len(table.tokens):.2f} bytes per vnode "
          f"(tokens {table.tokens.itemsize} + owners {table.owners.itemsize} + prefix "
          f"{per_vnode:.2f}); {total / 2**20:.1f} MiB in all")  # fmt: skip


if __name__ == "__main__":
    main()
