"""Benchmark ringkit.diff and Movement.moved_keys on large rings (run by hand, not by pytest).

Targets: diff of two rings of 10,000 nodes x 256 vnodes (2.56M tokens each) in under
1 s; moved_keys over 10M keys in under 5 s. The peer for moved_keys is the direct way: hash every
key, look up its owner on both rings (two vectorised searches over 2.56M tokens) and compare.

    python3 benchmarks/bench_movement.py [--nodes 10000] [--vnodes 256] [--keys 10000000]
        [--repeats 5]

Contenders are timed interleaved after a warm-up (benchmarks/_harness.py); min / median / max
in seconds, and each median as a ratio to the first contender's.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from _harness import print_table, time_interleaved
from ringkit import HashRing, diff
from ringkit.hashing import points_many
from ringkit.movement.units import native_hashes


def _bench_diff(names: list[str], vnodes: int, repeats: int) -> HashRing:
    start = time.perf_counter()
    ring = HashRing(names, vnodes=vnodes)
    print(f"built a ring of {len(ring.tokens):,} tokens in {time.perf_counter() - start:.1f} s")
    joined, left = ring.add("joiner"), ring.remove(names[len(names) // 2])
    other = HashRing([f"other-{i}" for i in range(len(names))], vnodes=vnodes)
    grid = f"nodes={len(names)}/vnodes={vnodes}"
    timings = time_interleaved(
        {
            f"diff add 1 node {grid}/R=1": lambda: diff(ring, joined),
            f"diff remove 1 node {grid}/R=1": lambda: diff(ring, left),
            f"diff unrelated rings {grid}/R=1": lambda: diff(ring, other),
            f"diff add 1 node {grid}/R=3": lambda: diff(ring, joined, replicas=3),
            f"diff add 1 node + materialise arcs {grid}/R=1": lambda: diff(ring, joined).arcs,
        },
        ops=1,
        repeats=repeats,
    )
    print_table("diff (milliseconds)", timings, baseline=timings[0].label, unit="ms")
    return ring


def _bench_keys(ring: HashRing, count: int, repeats: int) -> None:
    joined = ring.add("joiner")
    movement = diff(ring, joined)
    keys = [f"key-{i}" for i in range(count)]
    position = {node.name: index for index, node in enumerate(joined.nodes)}
    to_new = np.array([position[node.name] for node in ring.nodes])

    def direct() -> int:
        points = native_hashes(keys, ring.hasher)
        before = to_new[ring.owner_indices(points)]
        return int(np.count_nonzero(before != joined.owner_indices(points)))

    keyed = f"keys={count:,}"
    timings = time_interleaved(
        {
            f"moved_keys {keyed}": lambda: movement.moved_keys(keys),
            f"peer: hash + two lookups + compare {keyed}": direct,
            f"hashing alone (native_hashes) {keyed}": lambda: native_hashes(keys, ring.hasher),
            f"hashing alone (points_many) {keyed}": lambda: points_many(keys),
        },
        ops=1,
        repeats=repeats,
    )
    print_table("moved_keys (milliseconds)", timings, baseline=timings[0].label, unit="ms")


def main() -> None:
    """Build the rings, then time each group of contenders."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--vnodes", type=int, default=256)
    parser.add_argument("--keys", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    ring = _bench_diff([f"node-{i}" for i in range(args.nodes)], args.vnodes, args.repeats)
    _bench_keys(ring, args.keys, args.repeats)


if __name__ == "__main__":
    main()
