"""Balance and movement of every placement on the same keys (no timing; deterministic).

    PYTHONPATH=src python3 benchmarks/bench_strategy_balance.py

Prints, for 10 nodes and 200,000 keys: peak-to-mean keys per node, the fraction of keys that
move when an 11th node joins (and how many of them go anywhere but the new node), and the
fraction that moves when one node leaves (and how many of them did not live on it). Then
Maglev's slot disruption at its default table size, and MultiProbe's exact-model
peak-to-mean over 300 seeded sets of 100 nodes.
"""

from __future__ import annotations

import random
import statistics
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from ringkit import HashRing, JumpHash, Maglev, Modulo, MultiProbe, Rendezvous


def movement_table(keys: list[str]) -> None:
    """Print balance and movement on add and remove, one row per placement."""
    names = [f"cache-{i:02d}" for i in range(10)]
    print("| placement | peak-to-mean | moved on add | moved elsewhere | moved on remove | extra |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, placement in [
        ("HashRing v=160", HashRing(names)),
        ("Modulo", Modulo(names)),
        ("JumpHash", JumpHash(names)),
        ("Rendezvous", Rendezvous(names)),
        ("Maglev M=65537", Maglev(names)),
        ("MultiProbe k=21", MultiProbe(names)),
    ]:
        before = placement.node_for_many(keys)
        peak = max(Counter(before).values()) / (len(keys) / len(names))
        added = placement.add("cache-10").node_for_many(keys)
        moved = [(a, b) for a, b in zip(before, added, strict=True) if a != b]
        elsewhere = sum(b != "cache-10" for _, b in moved)
        victim = names[-1] if label == "JumpHash" else names[3]  # jump removes the last only
        removed = placement.remove(victim).node_for_many(keys)
        gone = [(a, b) for a, b in zip(before, removed, strict=True) if a != b]
        extra = sum(a != victim for a, _ in gone)
        print(
            f"| {label} | {peak:.3f} | {len(moved) / len(keys):.2%} | {elsewhere} | "
            f"{len(gone) / len(keys):.2%} | {extra / len(keys):.2%} |"
        )


def maglev_disruption() -> None:
    """Print how many slots change owner between nodes that stay, on removing one node."""
    print("\n| nodes | slots of the removed node | other slots changing owner | of the table |")
    print("|---:|---:|---:|---:|")
    for count in (10, 100, 1000):
        names = [f"node-{i:04d}" for i in range(count)]
        before = Maglev(names).table
        victim = names[count // 2]
        after = Maglev(names).remove(victim).table
        own = sum(owner == victim for owner in before)
        extra = sum(a != b and a != victim for a, b in zip(before, after, strict=True))
        print(f"| {count} | {own} | {extra} | {extra / len(before):.2%} |")


def multiprobe_peak_to_mean(sets: int = 300) -> None:
    """Print the distribution of exact-model peak-to-mean at k = 21, N = 100."""
    ratios = []
    for seed in range(sets):
        rng = random.Random(seed)
        names = [f"cache-{rng.getrandbits(48):012x}" for _ in range(100)]
        ratios.append(max(MultiProbe(names, probes=21).shares().values()) * 100)
    ratios.sort()
    print(
        f"\nMultiProbe k=21, N=100, {sets} node sets: median {statistics.median(ratios):.4f}, "
        f"mean {statistics.fmean(ratios):.4f}, 90th percentile {ratios[int(0.9 * sets)]:.4f}, "
        f"max {ratios[-1]:.4f}, share of sets <= 1.05: {sum(r <= 1.05 for r in ratios) / sets:.0%}"
    )


if __name__ == "__main__":
    movement_table([f"key:{i}" for i in range(200_000)])
    maglev_disruption()
    multiprobe_peak_to_mean()
