"""The cache client's two fan-out figures, each beside its peer in the same run.

    python benchmarks/bench_fanout.py            # 4 redis-server + 1 memcached on loopback
    python benchmarks/bench_fanout.py --quick    # fewer operations and repeats

1. ``get_many`` of 100 keys spread over 4 redis-servers ÷ one ``get`` (target <= 1.5): the
   sync client sends a round's per-server batches at once (``ShardedClient.fan_out``); the
   same client with its fan-out closed sends them one server after another. ``set_many`` and
   ``delete_many`` are timed both ways too, and redis-py's own MGET per server (in turn, and
   from 4 threads) shows the floor this machine gives any Python client.
2. memcached ``ShardedClient.get`` ÷ a bare pymemcache ``Client.get`` round trip on the same
   server (target <= 1.25): the client's direct single-key read, the same client made to take
   the steps (``_alone`` off: a read then goes through the sans-I/O core's generators),
   and pymemcache's ``PooledClient``, which the backend used before.

Contenders run interleaved (A B C, A B C, …); medians and ratios of medians are the figures.
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import redis
from pymemcache.client.base import Client, PooledClient

from _harness import Timing, print_table, time_interleaved
from ringkit import HashRing
from ringkit.cluster import ShardedClient
from ringkit.demos.gatepass import local_servers

REDIS_NAMES = ["cache-a", "cache-b", "cache-c", "cache-d"]
TIMEOUT_S = 10.0


def _host_port(url: str) -> tuple[str, int]:
    host, port = url.split("://", 1)[1].split("/")[0].rsplit(":", 1)
    return host, int(port)


def _median(timings: list[Timing], label: str) -> float:
    return next(t for t in timings if t.label == label).median


def fan_out(urls: list[str], batches: int, repeats: int) -> None:
    """get_many / set_many / delete_many of 100 keys over 4 servers, against one get."""
    servers = dict(zip(REDIS_NAMES, urls, strict=True))
    ring = HashRing(REDIS_NAMES)
    # A generous timeout: on a loaded machine a 1 s default can expire mid-benchmark.
    client = ShardedClient(ring, servers, timeout_s=TIMEOUT_S)
    sequential = ShardedClient(ring, servers, timeout_s=TIMEOUT_S)
    sequential.fan_out.close()  # the same client, one server after another
    keys = [f"seat:{i}" for i in range(100)]
    values = dict.fromkeys(keys, "z" * 64)
    client.set_many(values)
    owners: dict[str, list[str]] = {}
    for key in keys:
        owners.setdefault(client.replicas_for(key)[0], []).append(key)
    raws = {name: redis.Redis(*_host_port(url)) for name, url in servers.items()}
    threads = ThreadPoolExecutor(max_workers=len(raws))

    def mget_in_turn() -> None:
        for name, group in owners.items():
            raws[name].mget(group)

    def mget_threads() -> None:
        list(threads.map(lambda item: raws[item[0]].mget(item[1]), owners.items()))

    def rewrite_then(delete: ShardedClient) -> None:
        for _ in range(batches):
            delete.set_many(values)
            delete.delete_many(keys)

    one = "ShardedClient.get (one key)"
    contenders = {
        one: lambda: [client.get(keys[i % 100]) for i in range(batches)],
        "ShardedClient.get_many, fan-out": lambda: [client.get_many(keys) for _ in range(batches)],
        "ShardedClient.get_many, in turn": lambda: [
            sequential.get_many(keys) for _ in range(batches)
        ],
        "ShardedClient.set_many, fan-out": lambda: [
            client.set_many(values) for _ in range(batches)
        ],
        "ShardedClient.set_many, in turn": lambda: [
            sequential.set_many(values) for _ in range(batches)
        ],
        "ShardedClient.set_many + delete_many, fan-out": lambda: rewrite_then(client),
        "ShardedClient.set_many + delete_many, in turn": lambda: rewrite_then(sequential),
        "redis-py Redis.get (one key, no routing)": lambda: [
            raws[REDIS_NAMES[0]].get(owners[REDIS_NAMES[0]][0]) for _ in range(batches)
        ],
        "redis-py MGET per server, in turn": lambda: [mget_in_turn() for _ in range(batches)],
        "redis-py MGET per server, 4 threads": lambda: [mget_threads() for _ in range(batches)],
    }
    timings = time_interleaved(contenders, batches, repeats=repeats)
    print_table("redis, 4 servers: 100 keys per call against one get", timings, one, unit="us")
    get = _median(timings, one)
    for label in ("ShardedClient.get_many, fan-out", "ShardedClient.get_many, in turn"):
        print(f"{label} / ShardedClient.get: {_median(timings, label) / get:.2f} (target <= 1.5)")
    floor = _median(timings, "redis-py MGET per server, 4 threads")
    raw_get = _median(timings, "redis-py Redis.get (one key, no routing)")
    print(f"floor, redis-py 4-thread MGET / redis-py get: {floor / raw_get:.2f}")
    threads.shutdown()
    client.close()
    sequential.close()


def single_get(url: str, ops: int, repeats: int) -> None:
    """memcached: one key per call, the client against a bare pymemcache round trip."""
    host, port = _host_port(url)
    client = ShardedClient(HashRing(["only"]), {"only": url}, timeout_s=TIMEOUT_S)
    steps = ShardedClient(HashRing(["only"]), {"only": url}, timeout_s=TIMEOUT_S)
    # Made to take the whole steps for every read (a view check no longer does: between two
    # checks a read goes alone).
    steps._alone = False
    keys = [f"booking:{i}" for i in range(ops)]
    client.set_many(dict.fromkeys(keys, "x" * 64))
    bare = Client((host, port), default_noreply=False, no_delay=True)
    pooled = PooledClient((host, port), default_noreply=False, no_delay=True)
    peer = "pymemcache Client.get (bare)"
    contenders = {
        peer: lambda: [bare.get(key) for key in keys],
        "ringkit ShardedClient.get": lambda: [client.get(key) for key in keys],
        "ringkit ShardedClient.get, through the steps": lambda: [steps.get(key) for key in keys],
        "pymemcache PooledClient.get": lambda: [pooled.get(key) for key in keys],
    }
    timings = time_interleaved(contenders, ops, repeats=repeats)
    print_table(f"memcached: one key per call, {ops} calls", timings, peer, unit="us")
    ratio = _median(timings, "ringkit ShardedClient.get") / _median(timings, peer)
    print(f"ShardedClient.get / pymemcache Client.get: {ratio:.2f} (target <= 1.25)")
    client.close()
    steps.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    ops, batches, repeats = (500, 50, 5) if args.quick else (2000, 200, 9)
    with local_servers("redis", len(REDIS_NAMES)) as urls:
        fan_out(urls, batches, repeats)
    with local_servers("memcached", 1) as urls:
        single_get(urls[0], ops, repeats)


if __name__ == "__main__":
    main()
