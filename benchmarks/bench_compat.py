"""Ketama and Envoy continuum lookups and builds, against HashRing and uhashring's ketama mode.

    python benchmarks/bench_compat.py            # 8 and 100 servers, 20,000 keys
    python benchmarks/bench_compat.py --quick    # fewer keys and repeats
    python benchmarks/bench_compat.py --keys 2000 --repeats 61   # short repeats, many of them

Every lookup table gives each median as a ratio to ``HashRing.node_for`` (160 vnodes, xxh3_64)
over the same server names, measured in the same run (the target for ketama is <= 1.5x).
Ketama and uhashring both hash keys with MD5 and search a 32-bit continuum of 160 points per
server; uhashring's answers differ on some keys (docs/compatibility.md), which does not change
the work done. Envoy's ring hashes keys with xxHash64 onto a 64-bit ring of 1024+ entries.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import uhashring

from _harness import print_paired_ratios, print_table, time_interleaved
from ringkit import HashRing
from ringkit.compat import envoy_ring, ketama

BASELINE = "HashRing node_for"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer keys and repeats")
    parser.add_argument("--repeats", type=int, default=0, help="timed runs (default 7, quick 5)")
    parser.add_argument("--keys", type=int, default=0, help="keys per run (default 20,000)")
    args = parser.parse_args()
    count, repeats = (2_000, 5) if args.quick else (20_000, 7)
    repeats, count = args.repeats or repeats, args.keys or count
    keys = [f"user:{i}:session" for i in range(count)]
    for servers in (8, 100):
        weights = {f"10.0.{i // 250}.{i % 250 + 1}:11211": 100 + 37 * i for i in range(servers)}
        ring = HashRing(list(weights))
        ours = ketama(weights, variant="libketama")
        envoy = envoy_ring(weights)
        theirs = uhashring.HashRing(nodes=weights, hash_fn="ketama")
        lookups = {
            BASELINE: lambda r=ring: [r.node_for(k) for k in keys],
            "ketama node_for": lambda o=ours: [o.node_for(k) for k in keys],
            "envoy_ring node_for": lambda e=envoy: [e.node_for(k) for k in keys],
            "uhashring get_node": lambda t=theirs: [t.get_node(k) for k in keys],
            "HashRing node_for_many": lambda r=ring: r.node_for_many(keys),
            "ketama node_for_many": lambda o=ours: o.node_for_many(keys),
            "envoy_ring node_for_many": lambda e=envoy: e.node_for_many(keys),
        }
        timings = time_interleaved(lookups, count, repeats=repeats)
        print_table(f"ketama lookup, servers={servers}, keys={count}", timings, BASELINE, "ns")
        print_paired_ratios(timings, BASELINE)
        builds = {
            "ringkit ketama()": lambda w=weights: ketama(w, variant="libketama"),
            "uhashring HashRing": lambda w=weights: uhashring.HashRing(nodes=w, hash_fn="ketama"),
        }
        timings = time_interleaved(builds, 1, repeats=repeats)
        print_table(f"ketama build, servers={servers}", timings, "ringkit ketama()", unit="ms")


if __name__ == "__main__":
    main()
