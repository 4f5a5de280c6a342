"""Hot-key remedies on real servers: busiest server's requests x fair, before and after each.

    python benchmarks/bench_hotkeys.py                        # 200,000 requests per run
    python benchmarks/bench_hotkeys.py --requests 1000000     # the documented run (minutes)
    python benchmarks/bench_hotkeys.py --only redis --load counters --requests 20000

8 servers (redis-server, then memcached, started on loopback), ``HashRing`` of 160 vnodes,
100,000 keys, requests drawn with Zipf s = 1.1 (seeded). Two loads, each run with no remedy and
with each remedy on fresh, flushed servers:

- *reads*: every request a ``get`` of a value ``"v:<version>"``; another client (no near-cache)
  overwrites one of the 50 hottest keys with a higher version every `--write-every` requests.
  Remedies: a near-cache of 1,000 items (``NearCache(max_items=1000, ttl_s=1.0)``) and read
  spreading as today (``HotKeys(top=10, spread=8, capacity=1000)``). Every read is checked against
  the other client's acknowledged writes: it must return at least the newest version acknowledged
  more than ``ttl_s`` before the read began (0 stale reads beyond the bound); reads older than a
  write acknowledged before they began, but within the bound, are counted too (the staleness the
  near-cache allows).
- *counters*: 90 % ``incr``, 10 % ``get`` of the same keys. Remedy: split counters,
  ``HotKeys(remedy="split", parts=8, top=16, capacity=1000)``. At the end every counter of the
  100 hottest keys must equal the number of increments sent to it.

Requests per server are the servers' own counts (Redis ``INFO stats`` total_commands_processed;
memcached ``stats``: cmd_get + cmd_set + cmd_touch + incr/decr/delete hits and misses), taken
before and after the measured requests (setup writes excluded); the client's own per-server
call counts are printed beside them. *Fair* is the run's total / 8, so a remedy that adds
requests (a split ``get`` reads every part) is judged against its own total, printed as x none.
"""

from __future__ import annotations

import argparse
import bisect
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import redis

from ringkit import HashRing
from ringkit.cluster import HotKeys, NearCache, ShardedClient
from ringkit.demos.gatepass import local_servers

KEYS, SERVERS, S = 100_000, 8, 1.1
TTL_S = 1.0
_MEMCACHED_COUNTS = (
    "cmd_get",
    "cmd_set",
    "cmd_touch",
    "incr_hits",
    "incr_misses",
    "decr_hits",
    "decr_misses",
    "delete_hits",
    "delete_misses",
)


def zipf_requests(seed: int, keys: int, requests: int) -> np.ndarray:
    """Return `requests` key indices drawn with Zipf s = 1.1 over `keys` keys."""
    rng = np.random.default_rng(seed)
    weights = np.arange(1, keys + 1, dtype=np.float64) ** -S
    return rng.choice(keys, size=requests, p=weights / weights.sum())


def _memcached_stats(url: str) -> int:
    host, port = url.removeprefix("memcached://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(b"stats\r\n")
        data = b""
        while not data.endswith(b"END\r\n"):
            data += sock.recv(65536)
    stats = dict(
        line.split()[1:3] for line in data.decode().splitlines() if line.startswith("STAT")
    )
    return sum(int(stats[name]) for name in _MEMCACHED_COUNTS)


def server_counts(kind: str, urls: list[str]) -> list[int]:
    """Return each server's own count of the requests it processed so far."""
    if kind == "memcached":
        return [_memcached_stats(url) for url in urls]
    counts = []
    for url in urls:
        with redis.Redis.from_url(url) as connection:
            counts.append(int(connection.info("stats")["total_commands_processed"]))
    return counts


class Staleness:
    """The other client's acknowledged writes, and reads judged against them."""

    def __init__(self, ttl_s: float) -> None:
        self.ttl_s = ttl_s
        self.acked: dict[int, tuple[list[float], list[int]]] = {}
        self.beyond = 0
        self.within = 0

    def write(self, writer: ShardedClient, key: int, name: str) -> None:
        times, versions = self.acked.setdefault(key, ([], []))
        version = (versions[-1] if versions else 0) + 1
        writer.set(name, f"v:{version}")
        times.append(time.monotonic())  # acknowledged: set returned
        versions.append(version)

    def check(self, key: int, began: float, value: Any) -> None:
        if key not in self.acked:
            return
        times, versions = self.acked[key]
        newest = bisect.bisect_right(times, began) - 1
        value = int(value.removeprefix("v:"))
        if newest < 0 or value >= versions[newest]:
            return
        bound = bisect.bisect_right(times, began - self.ttl_s) - 1
        if bound >= 0 and value < versions[bound]:
            self.beyond += 1
        else:
            self.within += 1


def run(
    kind: str,
    urls: list[str],
    load: str,
    label: str,
    options: dict[str, Any],
    requests: np.ndarray,
    write_every: int,
) -> dict[str, Any]:
    """Run one load with one remedy on flushed servers; return its per-server counts."""
    names = [f"cache-{i}" for i in range(SERVERS)]
    servers = dict(zip(names, urls, strict=True))
    ring = HashRing(names)
    client = ShardedClient(ring, servers, **options)
    writer = ShardedClient(ring, servers)
    client.flush()
    keys = [f"key:{i}" for i in range(KEYS)]
    initial = 0 if load == "counters" else "v:0"  # counters are ints; other values versioned
    for start in range(0, KEYS, 1000):
        writer.set_many({keys[i]: initial for i in range(start, min(start + 1000, KEYS))})
    hottest = [int(k) for k in np.argsort(-np.bincount(requests, minlength=KEYS))[:100]]
    staleness = Staleness(TTL_S)
    incrs = np.zeros(KEYS, dtype=np.int64)
    rng = np.random.default_rng(7)
    is_incr = rng.random(len(requests)) < 0.9 if load == "counters" else None
    before_servers = server_counts(kind, urls)
    before_client = {name: snap.calls for name, snap in client.stats().items()}
    started = time.perf_counter()
    get: Callable[[str], Any] = client.get
    for i, key in enumerate(requests.tolist()):
        if is_incr is not None and is_incr[i]:
            client.incr(keys[key])
            incrs[key] += 1
            continue
        if load == "reads" and i % write_every == 0:
            hot = hottest[(i // write_every) % 50]
            staleness.write(writer, hot, keys[hot])
        began = time.monotonic()
        value = get(keys[key])
        staleness.check(key, began, value)
    elapsed = time.perf_counter() - started
    after_servers = server_counts(kind, urls)
    counted = [a - b - 1 for a, b in zip(after_servers, before_servers, strict=True)]
    calls = [client.stats()[name].calls - before_client[name] for name in names]
    wrong = 0
    if load == "counters":
        wrong = sum(client.get(keys[key]) != int(incrs[key]) for key in hottest)
    result = {
        "load": load,
        "label": label,
        "servers": counted,
        "calls": calls,
        "elapsed_s": elapsed,
        "stale_beyond": staleness.beyond,
        "stale_within": staleness.within,
        "wrong_counts": wrong,
        "near": options["near_cache"].stats() if "near_cache" in options else None,
        "split": options["hot_keys"].split_stats() if "hot_keys" in options else None,
    }
    client.close()
    writer.close()
    return result


def report(kind: str, results: list[dict[str, Any]], requests: int) -> None:
    print(f"\n{kind}: {SERVERS} servers, {KEYS:,} keys, {requests:,} requests, Zipf s = {S}")
    print(
        "| load | remedy | busiest x fair (server counts) | busiest x fair (client calls) "
        "| requests x none | stale beyond ttl_s | stale within ttl_s | wrong counts | time (s) |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    totals: dict[str, int] = {}
    for result in results:
        counted, calls = result["servers"], result["calls"]
        total = sum(counted)
        totals.setdefault(result["load"], total)
        print(
            f"| {result['load']} | {result['label']} "
            f"| {max(counted) / (total / SERVERS):.2f} "
            f"| {max(calls) / (sum(calls) / SERVERS):.2f} "
            f"| {total / totals[result['load']]:.2f} "
            f"| {result['stale_beyond']} | {result['stale_within']} | {result['wrong_counts']} "
            f"| {result['elapsed_s']:.0f} |"
        )
    for result in results:
        shares = " ".join(f"{100 * n / sum(result['servers']):.1f}" for n in result["servers"])
        print(f"  {result['load']}/{result['label']}: % per server {shares}")
        for extra in ("near", "split"):
            if result[extra] is not None:
                print(f"    {result[extra]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=200_000)
    parser.add_argument("--write-every", type=int, default=500)
    parser.add_argument("--only", choices=("redis", "memcached"), help="one backend only")
    parser.add_argument("--load", choices=("reads", "counters"), help="one load only")
    args = parser.parse_args()
    requests = zipf_requests(11, KEYS, args.requests)
    runs: list[tuple[str, str, Callable[[], dict[str, Any]]]] = [
        ("reads", "none", dict),
        (
            "reads",
            "near-cache 1,000",
            lambda: {"near_cache": NearCache(max_items=1000, ttl_s=TTL_S)},
        ),
        (
            "reads",
            "spread reads (top 10 on 8)",
            lambda: {"hot_keys": HotKeys(top=10, spread=SERVERS, capacity=1000)},
        ),
        ("counters", "none", dict),
        (
            "counters",
            "split counters (8 parts)",
            lambda: {"hot_keys": HotKeys(remedy="split", parts=8, top=16, capacity=1000)},
        ),
    ]
    for kind in (args.only,) if args.only else ("redis", "memcached"):
        with local_servers(kind, SERVERS) as urls:
            results = [
                run(kind, urls, load, label, options(), requests, args.write_every)
                for load, label, options in runs
                if args.load in (None, load)
            ]
        report(kind, results, args.requests)


if __name__ == "__main__":
    main()
