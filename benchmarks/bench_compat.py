"""Ketama lookups and builds: ringkit.compat.ketama against uhashring's ketama mode.

    python benchmarks/bench_compat.py            # 8 and 100 servers, 20,000 keys
    python benchmarks/bench_compat.py --quick    # fewer keys and repeats

Both hash keys with MD5 and search a 32-bit continuum of 160 points per server; uhashring's
answers differ on some keys (docs/compatibility.md), which does not change the work done.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import uhashring

from _harness import print_table, time_interleaved
from ringkit.compat import ketama


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer keys and repeats")
    args = parser.parse_args()
    count, repeats = (2_000, 5) if args.quick else (20_000, 7)
    keys = [f"user:{i}:session" for i in range(count)]
    for servers in (8, 100):
        weights = {f"10.0.{i // 250}.{i % 250 + 1}:11211": 100 + 37 * i for i in range(servers)}
        ours = ketama(weights, variant="libketama")
        theirs = uhashring.HashRing(nodes=weights, hash_fn="ketama")
        lookups = {
            "ringkit node_for": lambda o=ours: [o.node_for(k) for k in keys],
            "ringkit node_for_many": lambda o=ours: o.node_for_many(keys),
            "uhashring get_node": lambda t=theirs: [t.get_node(k) for k in keys],
        }
        timings = time_interleaved(lookups, count, repeats=repeats)
        print_table(
            f"ketama lookup, servers={servers}, keys={count}",
            timings,
            "ringkit node_for",
            unit="us",
        )
        builds = {
            "ringkit ketama()": lambda w=weights: ketama(w, variant="libketama"),
            "uhashring HashRing": lambda w=weights: uhashring.HashRing(nodes=w, hash_fn="ketama"),
        }
        timings = time_interleaved(builds, 1, repeats=repeats)
        print_table(f"ketama build, servers={servers}", timings, "ringkit ketama()", unit="ms")


if __name__ == "__main__":
    main()
