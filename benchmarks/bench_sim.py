"""Simulator at scale: one membership step of 10M keys over 1,000 nodes, and 100M keys streamed.

Each measured run is a fresh child process (so its peak RSS is its own): a scenario of `--keys`
keys on `--nodes` nodes (ring, `--vnodes` vnodes, xxh3_64), one event (add a node), measured
against ``hash % N`` as the simulator always does. The child reports the start pass (generating
and hashing every key, owners, loads), the step pass (owners under the old and new ring and the old
and new ``hash % N``, loads by keys/bytes/requests, moved keys) and its peak RSS. One warm-up
run is discarded, then `--repeats` runs: min / median / max.

Peers in the same run, on a sample of keys and extrapolated to `--keys`: the same step done one
key at a time with ``HashRing.node_for`` (old and new ring), and with uhashring (the main Python
peer) when it is installed. Ratios are peer time / simulator step time.

    PYTHONPATH=src python3 benchmarks/bench_sim.py                      # 10M keys, 5 repeats
    PYTHONPATH=src python3 benchmarks/bench_sim.py --keys 100000000 --repeats 1 --no-warmup
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from typing import Any

from ringkit import HashRing
from ringkit.nodes import Node
from ringkit.sim import Event, Population, Scenario, Sizes, run_scenario
from ringkit.strategies.registry import StrategyOptions

_SAMPLE_KEYS = 200_000


def _child(keys: int, nodes: int, vnodes: int) -> dict[str, Any]:
    marks: list[float] = []

    def progress(done: int, total: int) -> None:
        if done == total:
            marks.append(time.perf_counter())

    names = tuple(Node(f"node-{i:04d}") for i in range(1, nodes + 1))
    scenario = Scenario(
        population=Population(
            count=keys, prefix="key-", width=0, zipf=1.0, sizes=Sizes("lognormal")
        ),
        nodes=names,
        options=StrategyOptions(vnodes=vnodes),
        events=(Event("add", f"node-{nodes + 1:04d}"),),
        hot_keys=5,
    )
    start = time.perf_counter()
    run = run_scenario(scenario, progress=progress)
    end = time.perf_counter()
    step = run.steps[1]
    return {
        "start_s": marks[0] - start,
        "step_s": marks[1] - marks[0],
        "total_s": end - start,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "moved": step.moved["keys"],
        "moved_modulo": step.baseline_moved,
        "busiest_keys": step.balance["keys"].busiest_ratio,
        "busiest_requests": step.balance["requests"].busiest_ratio,
    }


def _spawn(args: argparse.Namespace) -> dict[str, Any]:
    command = [
        sys.executable,
        __file__,
        "--child",
        "--keys",
        str(args.keys),
        "--nodes",
        str(args.nodes),
        "--vnodes",
        str(args.vnodes),
    ]
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    result: dict[str, Any] = json.loads(output)
    return result


def _peers(args: argparse.Namespace) -> dict[str, float]:
    """Seconds one step would take one key at a time, extrapolated from a sample."""
    names = [f"node-{i:04d}" for i in range(1, args.nodes + 1)]
    sample = [f"key-{i}" for i in range(1, _SAMPLE_KEYS + 1)]
    old = HashRing(names, vnodes=args.vnodes)
    new = old.add(f"node-{args.nodes + 1:04d}")
    scale = args.keys / _SAMPLE_KEYS
    began = time.perf_counter()
    sum(old.node_for(k) != new.node_for(k) for k in sample)
    peers = {"HashRing.node_for loop": (time.perf_counter() - began) * scale}
    try:
        from uhashring import HashRing as UHashRing
    except ImportError:
        return peers
    u_old = UHashRing(nodes=names, vnodes=args.vnodes)
    u_new = UHashRing(nodes=[*names, f"node-{args.nodes + 1:04d}"], vnodes=args.vnodes)
    sub = sample[: _SAMPLE_KEYS // 4]  # uhashring is slow; a quarter of the sample is plenty
    began = time.perf_counter()
    sum(u_old.get_node(k) != u_new.get_node(k) for k in sub)
    peers["uhashring get_node loop"] = (time.perf_counter() - began) * args.keys / len(sub)
    return peers


def _line(label: str, values: list[float], unit: str) -> str:
    return (
        f"{label:<24} min {min(values):8.2f} {unit}  median {statistics.median(values):8.2f} "
        f"{unit}  max {max(values):8.2f} {unit}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=10_000_000)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--vnodes", type=int, default=160)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-warmup", action="store_true")
    parser.add_argument("--no-peers", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(args.keys, args.nodes, args.vnodes)))
        return
    label = f"keys={args.keys:,}/nodes={args.nodes}/vnodes={args.vnodes}/hash=xxh3_64"
    print(label)
    if not args.no_warmup:
        _spawn(args)
    runs = [_spawn(args) for _ in range(args.repeats)]
    for key, unit in (("start_s", "s"), ("step_s", "s"), ("total_s", "s"), ("peak_rss_mb", "MB")):
        print(_line(key, [r[key] for r in runs], unit))
    first = runs[0]
    print(
        f"moved on the ring {first['moved']:.4f} (1/(N+1) = {1 / (args.nodes + 1):.4f}), "
        f"with hash % N {first['moved_modulo']:.4f}; busiest × fair: keys "
        f"{first['busiest_keys']:.3f}, requests {first['busiest_requests']:.3f}"
    )
    if args.no_peers:
        return
    step = statistics.median(r["step_s"] for r in runs)
    total = statistics.median(r["total_s"] for r in runs)
    for name, seconds in _peers(args).items():
        print(
            f"peer {name:<26} {seconds:8.1f} s for the step (extrapolated): "
            f"{seconds / step:6.1f}x the step pass, {seconds / total:5.1f}x start + step"
        )


if __name__ == "__main__":
    main()
