"""Benchmark ringkit.diff and Movement.moved_keys on large rings (run by hand, not by pytest).

Targets (issue 5): diff of two rings of 10,000 nodes x 256 vnodes (2.56M tokens each) in under
1 s; moved_keys over 10M keys in under 5 s. The peer for moved_keys is the direct way: look up
every key's owner on both rings (two vectorised searches over 2.56M tokens) and compare.

    PYTHONPATH=src python3 benchmarks/bench_movement.py [--nodes 10000] [--vnodes 256]
        [--keys 10000000] [--repeats 5]

Warm-up, then --repeats timed runs with time.perf_counter; min / median / max in seconds.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ringkit import HashRing, diff
from ringkit.hashing import points_many
from ringkit.movement_rows import native_hashes


def timed(label: str, function: Callable[[], Any], repeats: int) -> float:
    """Run `function` once to warm up, then `repeats` times; print and return the median."""
    function()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    median = statistics.median(times)
    print(f"{label:<58} {min(times):8.3f} {median:8.3f} {max(times):8.3f}")
    return median


def main() -> None:
    """Build the rings, then time each scenario."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--vnodes", type=int, default=256)
    parser.add_argument("--keys", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    n, v, repeats = args.nodes, args.vnodes, args.repeats
    names = [f"node-{i}" for i in range(n)]
    start = time.perf_counter()
    ring = HashRing(names, vnodes=v)
    print(f"built ring of {len(ring.tokens):,} tokens in {time.perf_counter() - start:.1f} s")
    joined, left = ring.add("joiner"), ring.remove(names[n // 2])
    other = HashRing([f"other-{i}" for i in range(n)], vnodes=v)
    grid = f"nodes={n}/vnodes={v}"
    print(f"{'scenario (seconds)':<58} {'min':>8} {'median':>8} {'max':>8}")
    timed(f"diff add 1 node       {grid}/R=1", lambda: diff(ring, joined), repeats)
    timed(f"diff remove 1 node    {grid}/R=1", lambda: diff(ring, left), repeats)
    timed(f"diff unrelated rings  {grid}/R=1", lambda: diff(ring, other), repeats)
    timed(f"diff add 1 node       {grid}/R=3", lambda: diff(ring, joined, replicas=3), repeats)
    movement = diff(ring, joined)
    timed(f"arcs (materialise)    {grid}/R=1", lambda: diff(ring, joined).arcs, repeats)
    keys = [f"key-{i}" for i in range(args.keys)]
    keyed = f"keys={args.keys:,}"
    ours = timed(
        f"moved_keys            {grid}/{keyed}", lambda: movement.moved_keys(keys), repeats
    )
    hasher = ring.hasher
    timed(f"  hashing alone (native_hashes)  {keyed}", lambda: native_hashes(keys, hasher), repeats)
    timed(f"  hashing alone (points_many)    {keyed}", lambda: points_many(keys), repeats)
    position = {node.name: index for index, node in enumerate(joined.nodes)}
    to_new = np.array([position[node.name] for node in ring.nodes])

    def direct() -> int:
        points = native_hashes(keys, hasher)
        before = to_new[ring.owner_indices(points)]
        return int(np.count_nonzero(before != joined.owner_indices(points)))

    peer = timed(f"peer: two lookups + compare  {keyed}", direct, repeats)
    print(f"moved_keys / peer = {ours / peer:.2f}")


if __name__ == "__main__":
    main()
