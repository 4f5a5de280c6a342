"""The client's own path, no I/O: µs per ``get`` / ``set`` on ``memory://``, and where they go.

    python benchmarks/bench_client_path.py                  # µs per call, sync and async
    python benchmarks/bench_client_path.py --profile        # cProfile of 20,000 gets and sets
    python benchmarks/bench_client_path.py --src /tmp/old/src  # the same figures for another tree
    python benchmarks/bench_client_path.py --sleep-us 30   # each store call sleeps first

``ShardedClient`` (and ``AsyncShardedClient``) defaults over three in-process stores: JSON, one
replica, a settled stable view, 16-byte keys and 100-byte str values. The store alone
(``MemoryBackend.get_many`` / ``set_many`` of one key) is timed beside them, so that the
difference is what the client adds to every call, whatever its server: key checks, routing,
encoding and decoding, the epoch fence's check on the store, counters and the steps' driver.
The pieces of a lone get and set are timed apart too (``--pieces``, this tree only), each a loop
over the same keys.

Contenders are timed interleaved (A B C, A B C, …) by ``time.process_time``, the CPU this
process spent: with no I/O on the path that is its whole cost, and a loaded machine (other
processes on the same cores) disturbs it far less than the wall clock. The figures are medians
of the repeats (``--wall`` times by ``perf_counter`` instead). ``--src`` runs against another
copy of ``src/`` (``git archive`` of an earlier commit), so a before and an after can be taken
in one window, one process after the other.

``--sleep-us N`` makes every call of the store (the client's and the store's alone) sleep N µs
first (``select`` with a timeout), as a thread waiting for a server's reply sleeps: a thread
that slept finds the code and objects of its path cold, and the client's path reads more of
them than a plain client's one function does. Compare the difference between the client and
the store alone with and without it.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import select
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

NAMES = ["cache-a", "cache-b", "cache-c"]
VALUE = "v" * 100


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per repeat")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--src", default=str(Path(__file__).resolve().parents[1] / "src"))
    parser.add_argument("--profile", action="store_true", help="cProfile instead of timing")
    parser.add_argument("--pieces", action="store_true", help="also time the path's pieces")
    parser.add_argument("--wall", action="store_true", help="wall clock, not process CPU time")
    parser.add_argument(
        "--sleep-us", type=float, default=0.0, help="sleep this long in each store call first"
    )
    return parser.parse_args()


ARGS = _parse()
sys.path.insert(0, ARGS.src)

from _harness import Timing, print_table  # noqa: E402
from ringkit import HashRing  # noqa: E402
from ringkit.cluster import AsyncShardedClient, ShardedClient  # noqa: E402
from ringkit.cluster.wire.memory import MemoryBackend  # noqa: E402


def _sleeping_first(call: Callable[..., Any]) -> Callable[..., Any]:
    """`call`, after a sleep of ``--sleep-us`` (a reply awaited from a server, in effect)."""
    pause = ARGS.sleep_us / 1e6

    def slept(*args: Any, **options: Any) -> Any:
        select.select([], [], [], pause)
        return call(*args, **options)

    return slept


def time_interleaved(
    contenders: dict[str, Callable[[], object]], ops: int, *, repeats: int
) -> list[Timing]:
    """Time each contender `repeats` times, interleaved, after one warm-up call each."""
    clock = time.perf_counter if ARGS.wall else time.process_time
    for function in contenders.values():
        function()
    samples: dict[str, list[float]] = {label: [] for label in contenders}
    for _ in range(repeats):
        for label, function in contenders.items():
            start = clock()
            function()
            samples[label].append((clock() - start) / ops)
    return [Timing(label, tuple(values)) for label, values in samples.items()]


def _keys(count: int) -> list[str]:
    return [f"seat:{i:011d}" for i in range(count)]  # 16 bytes


def _profile(client: ShardedClient, keys: list[str]) -> None:
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(10):
        for key in keys:
            client.set(key, VALUE)
        for key in keys:
            client.get(key)
    profiler.disable()
    stats = pstats.Stats(profiler)
    stats.sort_stats("tottime").print_stats(25)


def main() -> None:
    if ARGS.sleep_us:
        for name in ("get_many", "set_many"):
            setattr(MemoryBackend, name, _sleeping_first(getattr(MemoryBackend, name)))
    keys = _keys(ARGS.calls)
    urls = {name: f"memory://bench-path-{name}" for name in NAMES}
    client = ShardedClient(HashRing(NAMES), urls)
    client.set_many(dict.fromkeys(keys, VALUE))
    if ARGS.profile:
        _profile(client, keys)
        return
    aclient = AsyncShardedClient(HashRing(NAMES), urls)
    loop = asyncio.new_event_loop()
    loop.run_until_complete(aclient.get(keys[0]))  # settles it
    store = client.server(NAMES[0]).backend.inner.kind.backend  # the MemoryBackend itself
    encoded = [key.encode() for key in keys]
    stored = store.get_many([encoded[0]])[encoded[0]] if encoded[0] in store.store.data else b""

    async def aget() -> None:
        for key in keys:
            await aclient.get(key)

    async def aset() -> None:
        for key in keys:
            await aclient.set(key, VALUE)

    contenders = {
        "store alone: MemoryBackend.get_many": lambda: [store.get_many([k]) for k in encoded],
        "store alone: MemoryBackend.set_many": lambda: [
            store.set_many({k: stored}, None) for k in encoded
        ],
        "ShardedClient.get": lambda: [client.get(k) for k in keys],
        "ShardedClient.set": lambda: [client.set(k, VALUE) for k in keys],
        "AsyncShardedClient.get": lambda: loop.run_until_complete(aget()),
        "AsyncShardedClient.set": lambda: loop.run_until_complete(aset()),
    }
    if ARGS.pieces:  # this tree's pieces of a lone get and set (not in an older --src)
        from ringkit.cluster.drivers.steps import call_sync
        from ringkit.cluster.values.keys import user_key

        lone = client._lone_get(encoded[0])
        assert lone is not None, "the client takes the whole steps: no lone call to time"
        call, server = lone
        found = call_sync(call, server)
        one = client.writer.encode_one(keys[0], VALUE, None)
        contenders["piece: user_key (key check)"] = lambda: [user_key(k) for k in keys]
        contenders["piece: _lone_get (routes, node_for, Call)"] = lambda: [
            client._lone_get(k) for k in encoded
        ]
        contenders["piece: call_sync (driver, fence, store, counters)"] = lambda: [
            call_sync(call, server) for _ in keys
        ]
        contenders["piece: _lone_got (decode)"] = lambda: [
            client._lone_got(lone, encoded[0], found) for _ in keys
        ]
        contenders["piece: writer.encode_one (checks, version, envelope)"] = lambda: [
            client.writer.encode_one(k, VALUE, None) for k in keys
        ]
        contenders["piece: _lone_set (routes, node_for, Call)"] = lambda: [
            client._lone_set(one, None) for _ in keys
        ]
    timings = time_interleaved(contenders, ARGS.calls, repeats=ARGS.repeats)
    print_table(
        f"memory://, one key per call, {ARGS.calls} calls x {ARGS.repeats} repeats, "
        f"{'wall' if ARGS.wall else 'process CPU'} time ({ARGS.src})"
        + (f", each store call after a {ARGS.sleep_us:g} µs sleep" if ARGS.sleep_us else ""),
        timings,
        "store alone: MemoryBackend.get_many",
        unit="us",
    )
    loop.close()
    client.close()


if __name__ == "__main__":
    main()
