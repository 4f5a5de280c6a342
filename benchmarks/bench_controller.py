"""Controller-side strategies beside HashRing: lookup, build, memory, allocation quality, plans.

    python benchmarks/bench_controller.py            # everything (allocating 256 tokens at
                                                     # N = 100 alone takes about a minute)
    python benchmarks/bench_controller.py --quick    # skips 256 allocated tokens at N = 100
    python benchmarks/bench_controller.py --sections replicated,plans

Strategies: HashRing (160 random vnodes), FixedPartitions (Q = 4096, R = 1), AllocatedRing
(16 allocated tokens), ScheduledRemap (halfway through a version), RangePartitions (one range
per node). N = 100 nodes, 10,000 keys. Memory is the Python heap retained by a built placement
(tracemalloc, measured apart from the timings).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import print_table, time_interleaved
from ringkit import (
    AllocatedRing,
    FixedPartitions,
    HashRing,
    Node,
    RangePartitions,
    ScheduledRemap,
    replicated_shares,
)

NODES = [f"node-{i:03d}" for i in range(100)]
KEYS = [f"user:{i:06d}" for i in range(10_000)]

BUILDERS: dict[str, Callable[[], object]] = {
    "HashRing vnodes=160": lambda: HashRing(NODES, vnodes=160),
    "FixedPartitions Q=4096 R=1": lambda: FixedPartitions(NODES, partitions=4096),
    "FixedPartitions Q=4096 R=3 zones=5": lambda: FixedPartitions(
        [Node(name, zone=f"z{i % 5}") for i, name in enumerate(NODES)], partitions=4096, replicas=3
    ),
    "AllocatedRing tokens=16": lambda: AllocatedRing(NODES, tokens=16),
    "ScheduledRemap vnodes=160": lambda: ScheduledRemap(NODES).advance(0.5),
    "RangePartitions": lambda: RangePartitions(
        NODES, splits=[f"user:{i:03d}" for i in range(1, 100)]
    ),
}


def retained_bytes(build: Callable[[], object]) -> int:
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept = build()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del kept
    return after - before


def build_and_memory() -> dict[str, object]:
    print("\n## Build time and memory (N = 100)")
    print("| placement | build min (s) | median (s) | max (s) | retained heap (KiB) |")
    print("|---|---:|---:|---:|---:|")
    built = {}
    for label, build in BUILDERS.items():
        samples = []
        for _ in range(5):
            start = time.perf_counter()
            built[label] = build()
            samples.append(time.perf_counter() - start)
        memory = retained_bytes(build)
        print(f"| {label} | {min(samples):.3f} | {statistics.median(samples):.3f} | "
              f"{max(samples):.3f} | {memory / 1024:,.0f} |")  # fmt: skip
    return built


def lookups(built: dict[str, object]) -> None:
    scalar = {
        label: (lambda p=placement: [p.node_for(key) for key in KEYS])  # type: ignore[attr-defined]
        for label, placement in built.items()
    }
    print_table("## node_for, 10,000 keys, one at a time", time_interleaved(scalar, len(KEYS)),
                "HashRing vnodes=160")  # fmt: skip
    batch = {
        label: (lambda p=placement: p.node_for_many(KEYS))  # type: ignore[attr-defined]
        for label, placement in built.items()
    }
    print_table("## node_for_many, 10,000 keys", time_interleaved(batch, len(KEYS)),
                "HashRing vnodes=160")  # fmt: skip


def allocation_quality(quick: bool) -> None:
    print("\n## Largest share / fair share (exact, from arcs)")
    print("| N | tokens | allocated | random (HashRing vnodes=tokens) | allocation time (s) |")
    print("|---:|---:|---:|---:|---:|")
    for n in (10, 100):
        names = [f"node-{i}" for i in range(n)]
        for tokens in (16, 64, 256):
            random = max(HashRing(names, vnodes=tokens).shares().values()) * n
            if quick and n == 100 and tokens == 256:
                print(f"| {n} | {tokens} | (skipped: --quick) | {random:.3f} | |")
                continue
            start = time.perf_counter()
            allocated = max(AllocatedRing(names, tokens=tokens).shares().values()) * n
            elapsed = time.perf_counter() - start
            print(f"| {n} | {tokens} | {allocated:.3f} | {random:.3f} | {elapsed:.1f} |")
        random160 = max(HashRing(names, vnodes=160).shares().values()) * n
        print(f"| {n} | 160 | | {random160:.3f} | |")


def replicated_quality() -> None:
    """Replicated ownership (R = 3): the fraction of keys each node holds a replica of."""
    for n in (30, 100):
        names = [f"node-{i}" for i in range(n)]
        print(f"\n## Replicated ownership, R = 3, N = {n} (exact, from arcs)")
        print("| ring | replicated largest / fair | primary largest / fair | build (s) |")
        print("|---|---:|---:|---:|")
        contenders: list[tuple[str, Callable[[], HashRing]]] = [
            ("allocated 16, replicas=3",
             lambda names=names: AllocatedRing(names, tokens=16, replicas=3).ring),
            ("allocated 16, replicas=1", lambda names=names: AllocatedRing(names, tokens=16).ring),
            ("random 16", lambda names=names: HashRing(names, vnodes=16)),
            ("random 256", lambda names=names: HashRing(names, vnodes=256)),
        ]  # fmt: skip
        for label, build in contenders:
            start = time.perf_counter()
            ring = build()
            elapsed = time.perf_counter() - start
            replicated = max(replicated_shares(ring, 3).values()) * n / 3
            primary = max(ring.shares().values()) * n
            print(f"| {label} | {replicated:.3f} | {primary:.3f} | {elapsed:.1f} |")


def plans() -> None:
    print("\n## FixedPartitions plans: N = 100 in 5 zones, Q = 4096, R = 3")
    print("| change | objective | moved | minimum | sources | transfers | max per source |")
    print("|---|---|---:|---:|---:|---:|---:|")
    nodes = [Node(name, zone=f"z{i % 5}") for i, name in enumerate(NODES)]
    for objective in ("fewest_sources", "spread"):
        table = FixedPartitions(nodes, partitions=4096, replicas=3, objective=objective)
        for label, after in (("join node-new (z0)", table.add(Node("node-new", zone="z0"))),
                             ("remove node-050", table.remove("node-050"))):  # fmt: skip
            plan = after.plan
            assert plan is not None
            print(f"| {label} | {objective} | {plan.moved} | {plan.minimum} | {plan.sources} | "
                  f"{plan.transfers} | {plan.max_per_source} |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip 256 allocated tokens at N=100")
    sections = ("build", "lookup", "allocation", "replicated", "plans")
    parser.add_argument("--sections", default=",".join(sections), help="comma-separated subset")
    options = parser.parse_args()
    chosen = set(options.sections.split(","))
    if chosen & {"build", "lookup"}:
        built = build_and_memory()
        if "lookup" in chosen:
            lookups(built)
    if "allocation" in chosen:
        allocation_quality(options.quick)
    if "replicated" in chosen:
        replicated_quality()
    if "plans" in chosen:
        plans()


if __name__ == "__main__":
    main()
