"""What checking a live ring's records costs: one member record decoded, checked and not.

    python benchmarks/bench_live_records.py

Every watching process decodes each member record once per write of it, so this is the cost a
change adds per process, beside the ring's derivation (bench_live.py). A record of 160 tokens,
as ``join`` writes it; median over 7 runs of 2,000 decodes each.
"""

from __future__ import annotations

import statistics
import timeit
from collections.abc import Callable

from ringkit.live.member import choose_tokens
from ringkit.live.records import decode_member_record
from ringkit.live.snapshot import MemberInfo, decode_member
from ringkit.nodes import Node


def median_us(function: Callable[[], object], *, number: int = 2000, runs: int = 7) -> float:
    """Median over `runs` of the mean time of one call, in microseconds."""
    return statistics.median(
        timeit.timeit(function, number=number) / number * 1e6 for _ in range(runs)
    )


def main() -> None:
    tokens = choose_tokens(Node("w1"), vnodes=160)
    value = MemberInfo("w1", "active", None, 1.0, None, tokens, 10.0, 1, "host:1:ab").encode()
    unchecked = median_us(lambda: decode_member(value, 1))
    checked = median_us(lambda: decode_member_record("/r/members/w1", value, 1, "/r/members/"))
    print(f"decode_member (no checks)      {unchecked:7.1f} µs")
    print(f"decode_member_record (checked) {checked:7.1f} µs  ({checked / unchecked:.2f}×)")


if __name__ == "__main__":
    main()
