"""Moving large values under one hash tag: pages by bytes, and the reads of other keys meanwhile.

    PYTHONPATH=src:. python3 benchmarks/bench_large_values.py [--values 520] [--value-kb 1000]
        [--page-bytes 1048576]

Three local redis-servers; `--values` values of `--value-kb` kB under one hash tag (so on one
server), plus 2,000 small keys. The tag's server is removed with ``Rebalancer`` while a thread
reads small keys on every server. Prints the move's outcome and time, the pages copied (keys and
bytes of the largest), and the reads: how many failed, their median, p99 and slowest latency.
``--page-bytes 0`` pages by keys alone, as moves did before (``--batch`` keys a page).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]  # runnable as `python benchmarks/...` too

from tests.servers import redis_server  # noqa: E402

from ringkit import HashRing  # noqa: E402
from ringkit.cluster import ShardedClient  # noqa: E402
from ringkit.cluster.rebalance.coordinator import RebalanceOptions, Rebalancer  # noqa: E402
from ringkit.errors import RingkitError  # noqa: E402

NAMES = ("s1", "s2", "s3")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--values", type=int, default=520)
    parser.add_argument("--value-kb", type=int, default=990)
    parser.add_argument("--page-bytes", type=int, default=1 << 20)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--timeout-s", type=float, default=2.0)
    args = parser.parse_args()
    with ExitStack() as stack:
        servers = [stack.enter_context(redis_server()) for _ in NAMES]
        urls = {name: f"redis://{s.address}/0" for name, s in zip(NAMES, servers, strict=True)}
        client = ShardedClient(HashRing(list(urls)), urls, timeout_s=5.0)
        value = b"v" * (args.value_kb * 1000)
        for i in range(args.values):
            client.set(f"{{bulk}}:{i}", value)
        small = [f"small:{i}" for i in range(2_000)]
        client.set_many({key: i for i, key in enumerate(small)})
        owner = client.replicas_for("{bulk}:0")[0]
        pages: list[tuple[int, int]] = []
        totals: dict[str, tuple[int, int]] = {}

        def seen(title: str, keys: int, planned: int, size: int) -> None:
            before = totals.get(title, (0, 0))
            if (keys, size) != before:
                pages.append((keys - before[0], size - before[1]))
            totals[title] = (keys, size)

        reader = ShardedClient(HashRing(list(urls)), urls, timeout_s=5.0)
        latencies: list[float] = []
        failures: list[str] = []
        stop = threading.Event()

        def read() -> None:
            i = 0
            while not stop.is_set():
                key = small[i % len(small)]
                i += 1
                began = time.perf_counter()
                try:
                    reader.get(key)
                except RingkitError as error:
                    failures.append(str(error)[:120])
                latencies.append(time.perf_counter() - began)

        options = RebalanceOptions(
            batch=args.batch,
            page_bytes=args.page_bytes or None,
            progress=seen,
            timeout_s=args.timeout_s,
        )
        thread = threading.Thread(target=read, daemon=True)
        thread.start()
        began = time.perf_counter()
        try:
            report = Rebalancer(client.refresh_view(), options=options).remove(owner)
            outcome = f"{report.outcome}, {report.keys_copied} keys copied"
        except RingkitError as error:
            outcome = f"failed: {str(error)[:200]}"
        elapsed = time.perf_counter() - began
        stop.set()
        thread.join()
        ordered = sorted(latencies)
        largest = max(pages, key=lambda page: page[1], default=(0, 0))
        print(
            f"{args.values} values of {args.value_kb} kB, page_bytes={args.page_bytes or None}, "
            f"batch={args.batch}: {outcome} in {elapsed:.1f} s; {len(pages)} pages, the largest "
            f"{largest[0]} keys / {largest[1]:,} bytes"
        )
        if ordered:
            p99 = ordered[int(len(ordered) * 0.99)]
            print(
                f"reads of other keys during the move: {len(ordered)}, failed {len(failures)}, "
                f"median {statistics.median(ordered) * 1e3:.2f} ms, p99 {p99 * 1e3:.2f} ms, "
                f"slowest {ordered[-1] * 1e3:.1f} ms"
            )
        if failures:
            print(f"first failure: {failures[0]}")


if __name__ == "__main__":
    main()
