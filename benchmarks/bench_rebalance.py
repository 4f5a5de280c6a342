"""Online rebalancing on real redis-server processes: keys moved per second, read latency.

Run by hand from the repository root (needs redis-server and redis-cli):

    PYTHONPATH=src:. python3 benchmarks/bench_rebalance.py [--keys 200000] [--repeats 5]

1. Keys per second moved by ``add_server`` (3 -> 4 servers, values of 100 bytes), with the index
   only and with the SCAN backfill for keys written without ringkit, beside Redis Cluster's own
   ``redis-cli --cluster rebalance --cluster-use-empty-masters`` moving the same keys from 3 to 4
   cluster-mode redis-servers (its default ``--cluster-pipeline`` of 10 keys per MIGRATE, and
   1000), interleaved: min / median / max over the repeats and the ratio of the medians.
2. Read latency (``client.get`` from another thread) before a rebalance and during one
   (throttled to 5,000 keys/s, so that it lasts a few seconds): median and p99, and their ratio.
3. The cost of a fenced read: ``ShardedClient.get`` against the unfenced connection beneath the
   key's server handle (the same transport and pool, a plain ``MGET`` of the stored bytes: no
   epoch check, no routing, no decoding) and against redis-py's plain ``GET``.

4. Server commands per key moved by ``add_server`` (3 -> 4 servers, index only): every server's
   ``CONFIG RESETSTAT`` after loading, the move, then the sum of ``INFO commandstats`` calls
   (which count the commands run inside scripts), by command. Exact, whatever the load.

The latency of reads is measured with the coordinator in the same process (it competes for the
GIL) and in another process (``ringkit rebalance``), as a deployment would run it.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]  # runnable as `python benchmarks/...` too

import redis  # noqa: E402
from redis.cluster import RedisCluster  # noqa: E402
from tests.servers import Server, free_port, redis_server, serve  # noqa: E402

from ringkit import HashRing  # noqa: E402
from ringkit.cluster import ShardedClient  # noqa: E402
from ringkit.cluster.rebalance.coordinator import RebalanceOptions  # noqa: E402
from ringkit.errors import QuorumError  # noqa: E402

NAMES = ("s1", "s2", "s3", "s4")
VALUE = "x" * 100


def _fresh(urls: dict[str, str], keys: list[str]) -> ShardedClient:
    for url in urls.values():
        host, port = url.removeprefix("redis://").removesuffix("/0").split(":")
        redis.Redis(host=host, port=int(port)).flushdb()
    base = {name: urls[name] for name in NAMES[:3]}
    client = ShardedClient(HashRing(list(base)), base, timeout_s=10.0)  # loading on busy cores
    for at in range(0, len(keys), 2000):
        for attempt in range(5):  # the cores are shared: a slow server is retried, not fatal
            try:
                client.set_many({key: VALUE for key in keys[at : at + 2000]})
                break
            except QuorumError:
                if attempt == 4:
                    raise
    return client


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _ringkit_move(urls: dict[str, str], keys: list[str], *, scan: bool) -> tuple[int, float]:
    client = _fresh(urls, keys)
    report = client.add_server("s4", urls["s4"], options=RebalanceOptions(scan=scan))
    client.close()
    return report.keys_streamed, report.keys_per_s


@contextmanager
def _cluster_node(directory: str) -> Iterator[Server]:
    def command(port: int) -> list[str]:
        return [
            "redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--cluster-enabled", "yes", "--dir", directory,
            "--cluster-config-file", f"nodes-{port}.conf",
            # The cluster bus defaults to port + 10000, which may be taken or above 65535.
            "--cluster-port", str(free_port()),
        ]  # fmt: skip

    with serve(command, None) as server:
        yield server


def _redis_cli(*arguments: str) -> None:
    subprocess.run(
        ["redis-cli", "--cluster", *arguments], check=True, timeout=600,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def _wait_for_cluster(nodes: list[Server]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        answers = [
            redis.Redis(host=node.host, port=node.port).execute_command("CLUSTER", "INFO")
            for node in nodes
        ]
        texts = [a.decode() if isinstance(a, bytes) else str(a) for a in answers]
        if all("cluster_state:ok" in text for text in texts):
            return
        time.sleep(0.1)
    raise RuntimeError("the Redis Cluster did not reach cluster_state:ok within 30 s")


def _redis_cluster_move(keys: list[str], pipeline: int) -> tuple[int, float]:
    """Move keys 3 -> 4 cluster-mode servers with ``redis-cli --cluster rebalance``."""
    with tempfile.TemporaryDirectory() as directory, ExitStack() as stack:
        nodes = [stack.enter_context(_cluster_node(directory)) for _ in NAMES]
        _redis_cli("create", *(node.address for node in nodes[:3]), "--cluster-yes")
        _wait_for_cluster(nodes[:3])
        cluster = RedisCluster(host=nodes[0].host, port=nodes[0].port)
        for at in range(0, len(keys), 2000):
            pipe = cluster.pipeline()
            for key in keys[at : at + 2000]:
                pipe.set(key, VALUE)
            pipe.execute()
        cluster.close()
        _redis_cli("add-node", nodes[3].address, nodes[0].address)
        _wait_for_cluster(nodes)
        started = time.perf_counter()
        _redis_cli(
            "rebalance", nodes[0].address, "--cluster-use-empty-masters",
            "--cluster-pipeline", str(pipeline),
        )  # fmt: skip
        elapsed = time.perf_counter() - started
        moved = int(redis.Redis(host=nodes[3].host, port=nodes[3].port).dbsize())
    return moved, moved / elapsed


def bench_moves(urls: dict[str, str], keys: list[str], repeats: int) -> None:
    print(f"\n1. keys moved per second, 3 -> 4 redis servers, {len(keys):,} keys x 100 B")
    contenders: dict[str, Callable[[], tuple[int, float]]] = {
        "ringkit add_server, index only": lambda: _ringkit_move(urls, keys, scan=False),
        "ringkit add_server, index + SCAN backfill": lambda: _ringkit_move(urls, keys, scan=True),
    }
    if shutil.which("redis-cli"):
        for pipeline in (10, 1000):
            label = f"redis-cli --cluster rebalance, --cluster-pipeline {pipeline}"
            contenders[label] = lambda pipeline=pipeline: _redis_cluster_move(keys, pipeline)
    rates: dict[str, list[float]] = {label: [] for label in contenders}
    moved: dict[str, int] = {}
    order = list(contenders)
    for repeat in range(repeats + 1):  # the first round warms up
        for label in order if repeat % 2 else reversed(order):  # interleaved, both orders
            moved[label], rate = contenders[label]()
            if repeat:
                rates[label].append(rate)
    peer = "redis-cli --cluster rebalance, --cluster-pipeline 10"
    base = statistics.median(rates[peer]) if peer in rates else None
    print("| contender | keys moved | min keys/s | median keys/s | max keys/s | vs redis-cli |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, values in rates.items():
        median = statistics.median(values)
        ratio = f"{median / base:.2f}" if base else "-"
        print(
            f"| {label} | {moved[label]:,} | {min(values):,.0f} | {median:,.0f} "
            f"| {max(values):,.0f} | {ratio} |"
        )


def _read_loop(client: ShardedClient, keys: list[str], stop: threading.Event) -> list[float]:
    rng = random.Random(1)
    latencies: list[float] = []
    deadline = time.monotonic() + 60
    while not stop.is_set() and time.monotonic() < deadline and len(latencies) < 200_000:
        key = rng.choice(keys)
        start = time.perf_counter()
        assert client.get(key) is not None
        latencies.append(time.perf_counter() - start)
    return latencies


def _collect(
    client: ShardedClient, keys: list[str], stop: threading.Event, into: list[float]
) -> None:
    into.extend(_read_loop(client, keys, stop))


def _add_in_subprocess(urls: dict[str, str]) -> None:
    listing = ",".join(f"{name}={urls[name]}" for name in NAMES[:3])
    command = [
        sys.executable, "-m", "ringkit", "rebalance", "--servers", listing,
        "--add", f"s4={urls['s4']}", "--keys-per-s", "5000", "--batch", "100", "--no-progress",
    ]  # fmt: skip
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, timeout=120)


def bench_latency(urls: dict[str, str], keys: list[str], repeats: int) -> None:
    print("\n2. read latency before and during a rebalance (us; throttled to 5000 keys/s)")
    print(
        "| coordinator | before median | during median | ratio | before p99 | during p99 | ratio |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    wheres = ("same process", "another process")
    columns: dict[str, list[tuple[float, float, float, float]]] = {where: [] for where in wheres}
    for repeat in range(repeats):
        for where in wheres if repeat % 2 == 0 else reversed(wheres):  # interleaved
            admin = _fresh(urls, keys)
            reader = ShardedClient(admin.view.placement, dict(admin.view.servers))
            stop = threading.Event()
            before = _read_loop(reader, keys, _Timer(3.0))
            during: list[float] = []
            thread = threading.Thread(target=_collect, args=(reader, keys, stop, during))
            thread.start()
            if where == "same process":
                options = RebalanceOptions(keys_per_s=5000, batch=100)  # as the CLI below
                admin.add_server("s4", urls["s4"], options=options)
            else:
                _add_in_subprocess(urls)
            stop.set()
            thread.join()
            columns[where].append(
                (
                    statistics.median(before), statistics.median(during),
                    _percentile(before, 0.99), _percentile(during, 0.99),
                )
            )  # fmt: skip
            reader.close()
            admin.close()
    for where in wheres:
        b50, d50, b99, d99 = (
            statistics.median(column) * 1e6 for column in zip(*columns[where], strict=True)
        )
        print(
            f"| {where} | {b50:.0f} | {d50:.0f} | {d50 / b50:.2f} | {b99:.0f} | {d99:.0f} "
            f"| {d99 / b99:.2f} |"
        )


class _Timer(threading.Event):
    """An event that is set once `seconds` have passed since it was made."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self._until = time.monotonic() + seconds

    def is_set(self) -> bool:
        return time.monotonic() >= self._until


def bench_fenced_read(urls: dict[str, str], keys: list[str], repeats: int) -> None:
    print("\n3. one read: fenced ShardedClient.get against unfenced and redis-py (us/op)")
    client = _fresh(urls, keys)
    owner = client.replicas_for(keys[0])[0]
    plain = _plain(urls[owner])
    ops = 2000
    # The fenced handle wraps the plain connection it sends through (``inner``); calling that
    # connection leaves out the fence, the routing and the codec, and keeps the transport.
    unfenced = client.server(owner).backend.inner
    stored_key = keys[0].encode()
    samples: dict[str, list[float]] = {
        "redis-py GET": [], "transport MGET, unfenced": [], "ShardedClient.get": []
    }  # fmt: skip
    calls = {
        "redis-py GET": lambda: plain.get(keys[0]),
        "transport MGET, unfenced": lambda: unfenced.get_many([stored_key]),
        "ShardedClient.get": lambda: client.get(keys[0]),
    }
    for _ in range(repeats + 1):
        for label, call in calls.items():
            start = time.perf_counter()
            for _ in range(ops):
                call()
            samples[label].append((time.perf_counter() - start) / ops * 1e6)
    base = statistics.median(samples["redis-py GET"][1:])
    print("| contender | min | median | max | vs redis-py |")
    print("|---|---:|---:|---:|---:|")
    for label, values in samples.items():
        values = values[1:]
        median = statistics.median(values)
        print(f"| {label} | {min(values):.0f} | {median:.0f} | {max(values):.0f} "
              f"| {median / base:.2f} |")  # fmt: skip


def _plain(url: str) -> redis.Redis:
    host, port = url.removeprefix("redis://").removesuffix("/0").split(":")
    return redis.Redis(host=host, port=int(port))


def bench_commands(urls: dict[str, str], keys: list[str]) -> None:
    print(f"\n4. server commands per key moved, 3 -> 4 redis servers, {len(keys):,} keys")
    client = _fresh(urls, keys)
    servers = [_plain(url) for url in urls.values()]
    for server in servers:
        server.config_resetstat()
    report = client.add_server("s4", urls["s4"], options=RebalanceOptions(scan=False))
    client.close()
    calls: Counter[str] = Counter()
    for server in servers:
        for name, stats in server.info("commandstats").items():
            command = name.removeprefix("cmdstat_")
            if command not in ("info", "config|resetstat"):  # the measurement's own
                calls[command] += int(stats["calls"])
    moved = report.keys_streamed
    print(f"keys moved: {moved:,}")
    print("| command | calls | per key moved |")
    print("|---|---:|---:|")
    for command, count in calls.most_common():
        print(f"| {command} | {count:,} | {count / moved:.2f} |")
    print(f"| all | {calls.total():,} | {calls.total() / moved:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keys", type=int, default=200_000)
    parser.add_argument("--only", choices=("moves", "latency", "read", "commands"), default=None)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    keys = [f"booking:{i}" for i in range(args.keys)]
    with ExitStack() as stack:
        servers = [stack.enter_context(redis_server()) for _ in NAMES]
        urls = {name: f"redis://{s.address}/0" for name, s in zip(NAMES, servers, strict=True)}
        if args.only in (None, "moves"):
            bench_moves(urls, keys, args.repeats)
        if args.only in (None, "latency"):
            bench_latency(urls, keys, args.repeats)
        if args.only in (None, "read"):
            bench_fenced_read(urls, keys, args.repeats)
        if args.only in (None, "commands"):
            bench_commands(urls, keys)


if __name__ == "__main__":
    main()
