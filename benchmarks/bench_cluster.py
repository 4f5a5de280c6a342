"""The sharded client against raw redis-py and pymemcache on the same local servers.

    python benchmarks/bench_cluster.py            # 3 redis-server + 3 memcached on loopback
    python benchmarks/bench_cluster.py --quick    # fewer operations and repeats

Single-key ``get`` and ``set`` through ``ShardedClient`` (HashRing, 3 nodes, replicas=1) are
compared with redis-py's ``Redis`` and pymemcache's ``Client`` talking to one server directly
(no routing at all: the round-trip floor) and with pymemcache's ``HashClient`` (its default
rendezvous hashing, then with ringkit's ``PlacementHasher``). The routing alone (placement
lookup of a key, ``Router.replica_names``) is timed on its own and shown as a share of a raw
round trip. Multi-key: ``get_many`` / ``set_many`` of 100 keys (one round trip per server)
against 100 single calls, and against redis-py's own MGET / pipeline per server.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import redis
from pymemcache.client.base import Client, PooledClient
from pymemcache.client.hash import HashClient

from _harness import print_table, time_interleaved
from ringkit import HashRing
from ringkit.cluster import ShardedClient
from ringkit.cluster.adapters import PlacementHasher, RedisRouter
from ringkit.cluster.values.keys import route_key
from ringkit.cluster.views.view import ClusterView
from ringkit.demos.gatepass import local_servers

NAMES = ["cache-a", "cache-b", "cache-c"]


def _host_port(url: str) -> tuple[str, int]:
    host, port = url.split("://", 1)[1].split("/")[0].rsplit(":", 1)
    return host, int(port)


def single_key(kind: str, urls: list[str], ops: int, repeats: int) -> None:
    """get / set of one key at a time: the client against the round-trip floor."""
    client = ShardedClient(HashRing(NAMES), dict(zip(NAMES, urls, strict=True)))
    keys = [f"booking:{i}" for i in range(ops)]
    client.set_many({key: "x" * 64 for key in keys})
    host, port = _host_port(urls[0])
    if kind == "redis":
        raw = redis.Redis(host=host, port=port)
        contenders = {
            "redis-py Redis.get (one server, no routing)": lambda: [raw.get(k) for k in keys],
            "ringkit ShardedClient.get": lambda: [client.get(k) for k in keys],
            "redis-py via RedisRouter.client_for": lambda: [
                router.client_for(k).get(k) for k in keys
            ],
        }
        router = RedisRouter.from_urls(HashRing(NAMES), dict(zip(NAMES, urls, strict=True)))
        baseline = "redis-py Redis.get (one server, no routing)"
    else:
        raw_mc = Client((host, port), default_noreply=False)
        pooled = PooledClient((host, port), default_noreply=False)
        one = {NAMES[0]: urls[0]}
        single = ShardedClient(HashRing(NAMES[:1]), one)
        # A second configuration on a server of the cluster: it routes by a view of its own, at
        # an epoch above the cluster's, rather than be refused by the view the cluster published.
        single.adopt_view(ClusterView(client.epoch + 1, HashRing(NAMES[:1]), one))
        single.set_many({key: "x" * 64 for key in keys})  # every key on that server: all hits
        servers = [_host_port(url) for url in urls]
        rendezvous = HashClient(servers, default_noreply=False)
        ringed = HashClient(servers, hasher=PlacementHasher, default_noreply=False)
        contenders = {
            "pymemcache Client.get (one server, no routing)": lambda: [raw_mc.get(k) for k in keys],
            "pymemcache PooledClient.get (one server, no routing)": lambda: [
                pooled.get(k) for k in keys
            ],
            "ringkit ShardedClient.get": lambda: [client.get(k) for k in keys],
            "ringkit ShardedClient.get, 1-node ring on that server": lambda: [
                single.get(k) for k in keys
            ],
            "pymemcache HashClient.get (rendezvous)": lambda: [rendezvous.get(k) for k in keys],
            "pymemcache HashClient.get (PlacementHasher)": lambda: [ringed.get(k) for k in keys],
        }
        baseline = "pymemcache Client.get (one server, no routing)"
    router_only = client.router
    encoded = [key.encode() for key in keys]
    contenders["routing only: Router.replica_names"] = lambda: [
        router_only.replica_names(k) for k in encoded
    ]
    # The whole client path without a network: ShardedClient over in-process stores, and the
    # store alone; the difference is what the client adds to every call, I/O excluded.
    memory = ShardedClient(HashRing(NAMES), {n: f"memory://bench-{kind}-{n}" for n in NAMES})
    memory.set_many({key: "x" * 64 for key in keys})
    store = memory.server(NAMES[0]).backend
    contenders["client path, no I/O: ShardedClient.get on memory://"] = lambda: [
        memory.get(k) for k in keys
    ]
    contenders["store alone: MemoryBackend.get_many"] = lambda: [
        store.get_many([k]) for k in encoded
    ]
    contenders["ringkit ShardedClient.set"] = lambda: [client.set(k, "y" * 64) for k in keys]
    timings = time_interleaved(contenders, ops, repeats=repeats)
    print_table(f"{kind}: one key per call, {ops} calls", timings, baseline, unit="us")
    floor = next(t for t in timings if t.label == baseline).median
    route = next(t for t in timings if t.label.startswith("routing only")).median
    path = next(t for t in timings if t.label.startswith("client path")).median
    alone = next(t for t in timings if t.label.startswith("store alone")).median
    print(
        f"\nrouting share of a raw {kind} round trip: {route / floor:.1%}; whole client "
        f"path without I/O: {(path - alone) * 1e6:.1f} us = {(path - alone) / floor:.1%}"
    )
    client.close()


def multi_key(kind: str, urls: list[str], batches: int, repeats: int) -> None:
    """get_many / set_many of 100 keys: pipelined per server against one call per key."""
    client = ShardedClient(HashRing(NAMES), dict(zip(NAMES, urls, strict=True)))
    keys = [f"seat:{i}" for i in range(100)]
    values = {key: "z" * 64 for key in keys}
    client.set_many(values)
    contenders = {
        "ShardedClient.get_many (pipelined)": lambda: [
            client.get_many(keys) for _ in range(batches)
        ],
        "ShardedClient.get x100 (not pipelined)": lambda: [
            [client.get(k) for k in keys] for _ in range(batches)
        ],
        "ShardedClient.set_many (pipelined)": lambda: [
            client.set_many(values) for _ in range(batches)
        ],
    }
    if kind == "redis":
        router = RedisRouter.from_urls(HashRing(NAMES), dict(zip(NAMES, urls, strict=True)))
        contenders["redis-py MGET per server (RedisRouter.mget)"] = lambda: [
            router.mget(keys) for _ in range(batches)
        ]
    else:
        servers = [_host_port(url) for url in urls]
        hashed = HashClient(servers, hasher=PlacementHasher, default_noreply=False)
        contenders["pymemcache HashClient.get_many"] = lambda: [
            hashed.get_many(keys) for _ in range(batches)
        ]
    timings = time_interleaved(contenders, batches, repeats=repeats)
    print_table(
        f"{kind}: 100 keys per batch, {batches} batches",
        timings,
        "ShardedClient.get_many (pipelined)",
        unit="us",
    )
    client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", choices=("redis", "memcached"), help="one backend only")
    args = parser.parse_args()
    ops, batches, repeats = (300, 20, 5) if args.quick else (2000, 100, 7)
    print(f"key routing example: {route_key(b'user:{42}:cart')!r}")
    for kind in (args.only,) if args.only else ("redis", "memcached"):
        with local_servers(kind, len(NAMES)) as urls:
            single_key(kind, urls, ops, repeats)
            multi_key(kind, urls, batches, repeats)


if __name__ == "__main__":
    main()
