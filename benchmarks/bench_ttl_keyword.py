"""What the check that names ``ttl_s=`` costs a correct ``set``: the wrapped verb next to the bare.

``ShardedClient.set`` is wrapped so that a TTL given the pymemcache or redis-py way fails with a
``TypeError`` naming ``ttl_s=``; a call that binds only passes through one more Python frame.
Both contenders write one key with a TTL to three ``memory://`` servers (two replicas), timed
interleaved. Run by hand: ``python benchmarks/bench_ttl_keyword.py [repeats]``.
"""

from __future__ import annotations

import sys

from _harness import print_paired_ratios, print_table, time_interleaved
from ringkit import HashRing
from ringkit.cluster import ShardedClient

OPS = 3_000


def main(repeats: int = 9) -> None:
    urls = {name: f"memory://bench-ttl-keyword-{name}" for name in "abc"}
    client = ShardedClient(HashRing(list(urls)), urls, replicas=2)
    bare = ShardedClient.set.__wrapped__  # type: ignore[attr-defined]

    def wrapped_set() -> None:
        for _ in range(OPS):
            client.set("booking:42", "12A", ttl_s=60)

    def bare_set() -> None:
        for _ in range(OPS):
            bare(client, "booking:42", "12A", ttl_s=60)

    contenders = {"bare set": bare_set, "set (wrapped)": wrapped_set}
    timings = time_interleaved(contenders, OPS, repeats=repeats)
    print_table("ShardedClient.set on memory:// (2 replicas of 3)", timings, "bare set", "us")
    print_paired_ratios(timings, "bare set")
    client.close()


if __name__ == "__main__":
    main(*(int(arg) for arg in sys.argv[1:2]))
