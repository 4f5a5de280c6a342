"""Every placement side by side: lookup throughput, build time and memory, against peers.

Run by hand (never collected by pytest)::

    PYTHONPATH=src python3 benchmarks/bench_strategies.py            # nodes 8, 32, 128
    PYTHONPATH=src python3 benchmarks/bench_strategies.py --nodes 32 --repeats 7

Each measurement: one warm-up, then ``--repeats`` timed runs (``time.perf_counter``); the table
shows min / median / max and the median's ratio to ringkit's ``HashRing`` in the same run. Peers
run on the same keys: ``jump-consistent-hash`` (``jump.hash``, a C extension, fed the same
xxh3_64 key hashes as ringkit's JumpHash) and pymemcache's ``RendezvousHash``. Memory is the
bytes a built placement still holds (tracemalloc, numpy arrays included).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from ringkit import BoundedLoad, HashRing, JumpHash, Maglev, Modulo, MultiProbe, Rendezvous
from ringkit.hashing import xxh3_64

Builder = Callable[[list[str]], Any]


@dataclass(frozen=True, slots=True)
class Contender:
    """A placement to measure: how to build it, look one key up, and look many up."""

    label: str
    build: Builder
    lookup: Callable[[Any, str], object]
    batch: Callable[[Any, list[str]], object] | None


def _contenders() -> list[Contender]:
    contenders = [
        Contender("HashRing v=160", HashRing, lambda p, k: p.node_for(k), _many),
        Contender("Modulo", Modulo, lambda p, k: p.node_for(k), _many),
        Contender("JumpHash", JumpHash, lambda p, k: p.node_for(k), _many),
        Contender("Rendezvous", Rendezvous, lambda p, k: p.node_for(k), _many),
        Contender(
            "Rendezvous pymemcache",
            lambda names: Rendezvous(names, variant="pymemcache"),
            lambda p, k: p.node_for(k),
            None,
        ),
        Contender("Maglev M=65537", Maglev, lambda p, k: p.node_for(k), _many),
        Contender("MultiProbe k=21", MultiProbe, lambda p, k: p.node_for(k), _many),
        Contender(
            "BoundedLoad c=1.25",
            lambda n: BoundedLoad(HashRing(n)),
            lambda p, k: p.node_for(k),
            None,
        ),
    ]
    try:
        import jump

        contenders.append(
            Contender(
                "peer jump.hash (C)",
                lambda names: (jump.hash, list(names)),
                lambda p, k: p[1][p[0](xxh3_64(k.encode()), len(p[1]))],
                None,
            )
        )
    except ImportError:
        print("(jump-consistent-hash not installed: pip install jump-consistent-hash)")
    try:
        from pymemcache.client.rendezvous import RendezvousHash

        contenders.append(
            Contender(
                "peer pymemcache RendezvousHash",
                lambda names: RendezvousHash(list(names)),
                lambda p, k: p.get_node(k),
                None,
            )
        )
    except ImportError:
        print("(pymemcache not installed: pip install pymemcache)")
    return contenders


def _many(placement: Any, keys: list[str]) -> object:
    return placement.node_for_many(keys)


def _time(action: Callable[[], object], repeats: int) -> list[float]:
    action()  # warm-up
    timings = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        action()
        timings.append(time.perf_counter() - start)
    return timings


def _memory_bytes(build: Builder, names: list[str]) -> int:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    placement = build(names)
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del placement
    return after - before


def _row(label: str, timings: list[float], per: int, reference: float | None) -> str:
    median = statistics.median(timings)
    ratio = f"{median / reference:8.2f}x" if reference else "        -"
    return (
        f"  {label:<32} {min(timings) / per * 1e6:10.2f} {median / per * 1e6:10.2f} "
        f"{max(timings) / per * 1e6:10.2f} {ratio}"
    )


def _scalar(contender: Contender, placement: Any, keys: list[str]) -> None:
    for key in keys:
        contender.lookup(placement, key)


def _lookup_rows(
    contenders: list[Contender], built: dict[str, Any], keys: list[str], repeats: int
) -> None:
    print(
        f"  {'lookup: node_for, per key':<32} {'min us':>10} {'median us':>10} "
        f"{'max us':>10} {'vs ring':>9}"
    )
    reference = None
    for c in contenders:
        timings = _time(partial(_scalar, c, built[c.label], keys), repeats)
        reference = reference or statistics.median(timings)
        print(_row(c.label, timings, len(keys), reference))


def _batch_rows(
    contenders: list[Contender], built: dict[str, Any], keys: list[str], repeats: int
) -> None:
    print(f"  {'batch: node_for_many, per key':<32}")
    reference = None
    for c in contenders:
        if c.batch is not None:
            timings = _time(partial(c.batch, built[c.label], keys), repeats)
            reference = reference or statistics.median(timings)
            print(_row(c.label, timings, len(keys), reference))


def _build_rows(contenders: list[Contender], names: list[str], repeats: int) -> None:
    print(
        f"  {'build':<32} {'min ms':>10} {'median ms':>10} {'max ms':>10} {'vs ring':>9} "
        f"{'KiB held':>9}"
    )
    reference = None
    for c in contenders:
        timings = [t * 1e-3 for t in _time(partial(c.build, names), repeats)]
        reference = reference or statistics.median(timings)
        memory = _memory_bytes(c.build, names) / 1024
        print(f"{_row(c.label, timings, 1, reference)} {memory:9.1f}")


def run(node_counts: list[int], keys: int, batch: int, repeats: int) -> None:
    """Print scalar lookup, batch lookup, build time and memory, per node count."""
    contenders = _contenders()
    scalar_keys = [f"key:{i}" for i in range(keys)]
    batch_keys = [f"key:{i}" for i in range(batch)]
    for count in node_counts:
        names = [f"cache-{i:04d}" for i in range(count)]
        built = {c.label: c.build(names) for c in contenders}
        print(f"\nnodes={count} keys={keys} batch={batch} repeats={repeats}")
        _lookup_rows(contenders, built, scalar_keys, repeats)
        _batch_rows(contenders, built, batch_keys, repeats)
        _build_rows(contenders, names, repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="8,32,128", help="comma-separated node counts")
    parser.add_argument("--keys", type=int, default=2000, help="keys for scalar lookups")
    parser.add_argument("--batch", type=int, default=100_000, help="keys for batch lookups")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs after a warm-up")
    args = parser.parse_args()
    if args.repeats < 5:
        parser.error(f"--repeats must be >= 5, got {args.repeats}")
    run([int(n) for n in args.nodes.split(",")], args.keys, args.batch, args.repeats)


if __name__ == "__main__":
    main()
