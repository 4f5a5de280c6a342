"""Lookup throughput: ringkit's HashRing against the Python peers, in one interleaved run.

    python benchmarks/bench_lookup.py            # N = 10, 100, 1000 nodes, 160 vnodes
    python benchmarks/bench_lookup.py --quick    # fewer keys and repeats

Peers: uhashring (default md5 "ketama" mode, and configured with xxh3), hashring (md5), a plain
``bisect`` ring over xxh3 tokens (the textbook sketch, with >=), and jump-consistent-hash (a C
extension; no ring, shown as the floor of "hash then pick"). Also: node_for_many against hashing
the same keys alone, and owner_indices over pre-hashed points.
"""

from __future__ import annotations

import argparse
import bisect
import sys
from pathlib import Path

import numpy as np
import xxhash

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import hashring
import jump
import uhashring

from _harness import print_table, time_interleaved
from ringkit import HashRing

xxh3 = xxhash.xxh3_64_intdigest


class BisectRing:
    """The textbook ring: a sorted Python list of tokens and a parallel list of owners."""

    def __init__(self, nodes: list[str], vnodes: int) -> None:
        pairs = sorted((xxh3(f"{n}#{i}".encode()), n) for n in nodes for i in range(vnodes))
        self.tokens = [t for t, _ in pairs]
        self.owners = [n for _, n in pairs]

    def node_for(self, key: str) -> str:
        i = bisect.bisect_left(self.tokens, xxh3(key.encode()))
        return self.owners[i if i < len(self.tokens) else 0]


def scalar(nodes: int, keys: list[str], repeats: int) -> None:
    names = [f"cache-{i}" for i in range(nodes)]
    ring = HashRing(names)
    uhash_md5 = uhashring.HashRing(nodes=names)
    uhash_xxh3 = uhashring.HashRing(nodes=names, hash_fn=lambda k: xxh3(str(k).encode()))
    peer_hashring = hashring.HashRing(names)
    plain = BisectRing(names, 160)
    contenders = {
        "ringkit node_for": lambda: [ring.node_for(k) for k in keys],
        "uhashring get_node (md5)": lambda: [uhash_md5.get_node(k) for k in keys],
        "uhashring get_node (xxh3)": lambda: [uhash_xxh3.get_node(k) for k in keys],
        "hashring get_node (md5)": lambda: [peer_hashring.get_node(k) for k in keys],
        "bisect ring (xxh3)": lambda: [plain.node_for(k) for k in keys],
        "xxh3 + jump.hash (C)": lambda: [jump.hash(xxh3(k.encode()), nodes) for k in keys],
    }
    timings = time_interleaved(contenders, len(keys), repeats=repeats)
    print_table(f"node_for, str keys, nodes={nodes}/vnodes=160/hash=xxh3_64", timings,
                "ringkit node_for")  # fmt: skip


def batch(keys: list[str], repeats: int) -> None:
    ring = HashRing([f"cache-{i}" for i in range(100)])
    points = np.random.default_rng(0).integers(0, 2**64 - 1, 10_000_000, dtype=np.uint64)
    big = HashRing([f"node-{i}" for i in range(10_000)], vnodes=256)
    timings = time_interleaved(
        {
            "ringkit node_for_many": lambda: ring.node_for_many(keys),
            "xxh3 of the keys alone": lambda: [xxh3(k.encode()) for k in keys],
        },
        len(keys),
        repeats=repeats,
    )
    print_table(f"node_for_many over {len(keys):,} str keys (nodes=100/vnodes=160)", timings,
                "ringkit node_for_many")  # fmt: skip
    timings = time_interleaved(
        {
            "owner_indices, 16k tokens": lambda: ring.owner_indices(points),
            "searchsorted, 16k tokens": lambda: np.searchsorted(ring.tokens, points),
            "owner_indices, 2.56M tokens": lambda: big.owner_indices(points),
            "searchsorted, 2.56M tokens": lambda: np.searchsorted(big.tokens, points),
        },
        len(points),
        repeats=max(3, repeats // 2),
    )
    print_table("owner_indices over 10M pre-hashed uint64 points", timings,
                "owner_indices, 16k tokens")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    count, repeats = (5_000, 5) if args.quick else (20_000, 9)
    keys = [f"booking:{i}" for i in range(count)]
    for nodes in (10, 100, 1000):
        scalar(nodes, keys, repeats)
    batch([f"key-{i}" for i in range(100_000 if args.quick else 1_000_000)], 5)


if __name__ == "__main__":
    main()
