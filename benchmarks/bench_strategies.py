"""Every placement side by side: lookup throughput, build time and memory, against peers.

Run by hand (never collected by pytest)::

    PYTHONPATH=src python3 benchmarks/bench_strategies.py            # nodes 8, 32, 128
    PYTHONPATH=src python3 benchmarks/bench_strategies.py --nodes 32 --repeats 9
    PYTHONPATH=src python3 benchmarks/bench_strategies.py --lookups-only --repeats 15
    PYTHONPATH=src python3 benchmarks/bench_strategies.py --lookups-only --repeats 41 \
        --only "JumpHash,MultiProbe k=21,BoundedLoad c=1.25,Rendezvous,peer jump.hash (C)"

Each measurement: one warm-up, then ``--repeats`` timed runs interleaved across contenders
(``_harness.time_interleaved``); the tables show min / median / max per operation and the
median's ratio to ringkit's ``HashRing`` in the same run. Peers
run on the same keys: ``jump-consistent-hash`` (``jump.hash``, a C extension, fed the same
xxh3_64 key hashes as ringkit's JumpHash) and pymemcache's ``RendezvousHash``. Memory is the
bytes a built placement still holds (tracemalloc, numpy arrays included). ``--lookups-only``
times the scalar and batch lookups alone (no builds, no memory), the figures with targets:
JumpHash / MultiProbe / BoundedLoad ``node_for`` at most 2x / 3x / 2x ``HashRing.node_for``.
``--only`` keeps the contenders with the given labels (the ring always stays), so that a slow
peer does not run between two of them and leave the next one cold caches.
"""

from __future__ import annotations

import argparse
import gc
import sys
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from _harness import Timing, print_paired_ratios, print_table, time_interleaved
from ringkit import BoundedLoad, HashRing, JumpHash, Maglev, Modulo, MultiProbe, Rendezvous
from ringkit.hashing import xxh3_64

BASELINE = "HashRing v=160"
PEERS = (
    ("JumpHash", "peer jump.hash (C)"),
    ("Rendezvous pymemcache", "peer pymemcache RendezvousHash"),
    ("Rendezvous", "peer pymemcache RendezvousHash"),
)

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
            _many,
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


def _scalar(contender: Contender, placement: Any, keys: list[str]) -> None:
    for key in keys:
        contender.lookup(placement, key)


def _memory_bytes(build: Builder, names: list[str]) -> int:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    placement = build(names)
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del placement
    return after - before


def _peer_ratios(timings: list[Timing]) -> None:
    medians = {t.label: t.median for t in timings}
    for ours, peer in PEERS:
        if ours in medians and peer in medians:
            print(f"  {ours} / {peer}: {medians[ours] / medians[peer]:.2f}x time")


def run(
    node_counts: list[int],
    keys: int,
    batch: int,
    repeats: int,
    *,
    lookups_only: bool = False,
    only: list[str] | None = None,
) -> None:
    """Print scalar lookup, batch lookup, build time and memory, per node count."""
    contenders = [
        c for c in _contenders() if only is None or c.label == BASELINE or c.label in only
    ]
    scalar_keys = [f"key:{i}" for i in range(keys)]
    batch_keys = [f"key:{i}" for i in range(batch)]
    for count in node_counts:
        names = [f"cache-{i:04d}" for i in range(count)]
        built = {c.label: c.build(names) for c in contenders}
        lookups = {c.label: partial(_scalar, c, built[c.label], scalar_keys) for c in contenders}
        timings = time_interleaved(lookups, keys, repeats=repeats)
        print_table(f"node_for, nodes={count}, {keys} keys", timings, BASELINE, "ns")
        print_paired_ratios(timings, BASELINE)
        _peer_ratios(timings)
        batches = {
            c.label: partial(c.batch, built[c.label], batch_keys) for c in contenders if c.batch
        }
        timings = time_interleaved(batches, batch, repeats=repeats)
        print_table(f"node_for_many, nodes={count}, {batch} keys", timings, BASELINE, "ns")
        if lookups_only:
            continue
        builds = {c.label: partial(c.build, names) for c in contenders}
        timings = time_interleaved(builds, 1, repeats=repeats)
        print_table(f"build, nodes={count}", timings, BASELINE, "ms")
        print(f"\nmemory held after build, nodes={count} (tracemalloc, KiB)")
        for c in contenders:
            print(f"| {c.label} | {_memory_bytes(c.build, names) / 1024:,.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="8,32,128", help="comma-separated node counts")
    parser.add_argument("--keys", type=int, default=2000, help="keys for scalar lookups")
    parser.add_argument("--batch", type=int, default=100_000, help="keys for batch lookups")
    parser.add_argument("--repeats", type=int, default=7, help="timed runs after a warm-up")
    parser.add_argument(
        "--lookups-only", action="store_true", help="time lookups only (no builds, no memory)"
    )
    parser.add_argument("--only", help="comma-separated contender labels to time beside the ring")
    args = parser.parse_args()
    if args.repeats < 5:
        parser.error(f"--repeats must be >= 5, got {args.repeats}")
    run(
        [int(n) for n in args.nodes.split(",")],
        args.keys,
        args.batch,
        args.repeats,
        lookups_only=args.lookups_only,
        only=args.only.split(",") if args.only else None,
    )


if __name__ == "__main__":
    main()
