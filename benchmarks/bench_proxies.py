"""HAProxy and nginx layouts: node_for per key and node_for_many, against HashRing.node_for.

    python benchmarks/bench_proxies.py            # 5 and 50 servers, 20,000 keys
    python benchmarks/bench_proxies.py --quick    # fewer keys and repeats

Every table gives each median as a ratio to ``HashRing.node_for`` (160 vnodes, xxh3_64) over
the same server names in the same run. The target: nginx and HAProxy with crc32 within 1.5x
(both hash with zlib's C CRC-32 and bisect a continuum). sdbm, djb2 and wt6 are byte loops in
Python per key; their ``node_for_many`` hashes all keys one byte column at a time with numpy.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from _harness import print_paired_ratios, print_table, time_interleaved
from ringkit import HashRing
from ringkit.compat import HAProxyServer, NginxServer, haproxy, nginx

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
    for servers in (5, 50):
        names = [f"web{i}" for i in range(servers)]
        ring = HashRing(names)
        upstream = nginx(
            [
                NginxServer(f"10.0.{i // 250}.{i % 250 + 1}:80", weight=1 + i % 3)
                for i in range(servers)
            ]
        )
        backends = {
            function: haproxy(
                [HAProxyServer(name, weight=1 + i % 3) for i, name in enumerate(names)],
                hash_function=None if function == "sdbm+avalanche" else function,
            )
            for function in ("crc32", "sdbm+avalanche", "djb2", "wt6")
        }
        lookups = {
            BASELINE: lambda r=ring: [r.node_for(k) for k in keys],
            "nginx node_for": lambda u=upstream: [u.node_for(k) for k in keys],
            **{
                f"haproxy {name} node_for": lambda b=backend: [b.node_for(k) for k in keys]
                for name, backend in backends.items()
            },
            "HashRing node_for_many": lambda r=ring: r.node_for_many(keys),
            "nginx node_for_many": lambda u=upstream: u.node_for_many(keys),
            **{
                f"haproxy {name} node_for_many": lambda b=backend: b.node_for_many(keys)
                for name, backend in backends.items()
            },
        }
        timings = time_interleaved(lookups, count, repeats=repeats)
        print_table(f"proxy layouts, servers={servers}, keys={count}", timings, BASELINE, "ns")
        print_paired_ratios(timings, BASELINE)


if __name__ == "__main__":
    main()
