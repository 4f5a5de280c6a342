"""The price of each guarantee on the wire: ShardedClient beside the plain clients, per operation.

    python benchmarks/bench_wire_cost.py                       # redis and memcached, R = 1 and 2
    python benchmarks/bench_wire_cost.py --kind redis --replicas 1
    python benchmarks/bench_wire_cost.py --no-index            # one guarantee switched off
    python benchmarks/bench_wire_cost.py --hot-copies          # writes read spread markers
    python benchmarks/bench_wire_cost.py --quick               # 200 keys, 4 repeats (a smoke run)
    python benchmarks/bench_wire_cost.py --retried             # only: a set_many refused once

Three local redis-servers and three memcached (loopback, free ports, stopped at the end). For
``set``, ``get``, ``delete`` (one key per call), ``get_many`` and ``set_many`` (100 keys per
call), and ``set after delete`` (a ``set`` of each key the ``delete`` pass has just deleted, which
on ringkit lifts the delete's tombstone: one more round trip on memcached), with ``ShardedClient``
defaults and 100-byte values, it prints:

- **round trips per call**, counted on the client's sockets: a send that follows a receive (or
  is a socket's first) opens a round trip, so a pipeline of several commands is one, and a
  request written in several pieces is still one;
- **server commands per call**: Redis ``INFO commandstats`` (which counts the commands a Lua
  script runs, ``EVALSHA`` itself included), memcached ``stats`` (keys asked by ``get`` /
  ``gets``, stores of any kind, deletes, touches, incr / decr); for the batches, per key too.
  ``set_many`` is counted on fresh keys (each adds an index entry on Redis, as a first write
  does), the others on the keys the ``set`` pass wrote;
- **server bytes per key** (``set`` rows): Redis ``used_memory``, memcached ``bytes``, the
  difference over writing 20,000 fresh keys (``--memory-keys``), divided by the keys, every
  replica included;
- **latency** as the median over the repeats of (ringkit's time / the plain client's time in the
  same repeat), each repeat a pass over the keys, all contenders interleaved, and each going
  first in every other repeat: which one runs first changed the ``set`` row by up to 0.7x
  (plain client first: 1.09-1.63x, ringkit first: 1.79-1.94x, four runs each on memcached),
  so a fixed order would tilt every ratio one way;
- **client CPU per call** (``time.process_time``, every thread of the process): what each client
  spends in Python and C on this side of the socket, which a loaded machine disturbs less than
  the wall clock.

The plain clients are redis-py ``Redis(host, port)`` (with the hiredis parser when it is
installed) and ``pymemcache.client.base.Client(addr, no_delay=True, default_noreply=False)``,
one per server, the keys routed to them by hand before timing; at R = 2 a plain write is one call
on each of the two servers, one after the other, and a plain read one call on the first. A plain
``set_many`` is one ``MSET`` (pymemcache ``set_many``) per server that holds keys of the batch.

``--by-command`` prints ringkit's server commands of each counted pass by name, per key.
``--retried`` counts, instead, ``set_many`` calls of 100 fresh keys whose first attempt one
server refuses (a newer view was published on it alone, as a coordinator moving the servers on
does): round trips and server commands of the whole call, the first attempt, the view read again
and the retry, which is a conditional write of each key (``repair_many``: it lands only where no
newer version is held).

``--hot-copies`` measures under a view that allows hot-key copies (``HotKeys`` spreading, which
a spreading client publishes): every write then also reads its keys' spread markers. Guarantees
can be switched off to price them: ``--no-index`` is the client's own option
(``index_keys=False``); the others patch the installed client in this process only, which a user
cannot do: ``--no-tombstones`` (a delete is a plain fenced delete), ``--no-markers`` (writes read
no hot-copy spread marker), ``--no-lift`` (a write leaves an older delete's tombstone beside it:
memcached reads no tombstone, Redis's write script looks at none) and ``--no-fence`` (calls skip
the epoch check where the server kind has a plain form of the call).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import os
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import redis
import redis.utils
from pymemcache.client.base import Client

from ringkit import HashRing
from ringkit.cluster import ShardedClient
from ringkit.cluster.wire.fence import MEMCACHED_FENCE_CHECK_S

NAMES = ["cache-a", "cache-b", "cache-c"]
VALUE = "v" * 100  # what ringkit stores (JSON adds its quotes and the envelope its header)
RAW_VALUE = b"v" * 100  # what the plain clients store
BATCH = 100  # keys per get_many call
_PlainSocket = socket.socket


# -- servers -------------------------------------------------------------------------------------


def _free_port() -> int:
    with contextlib.closing(socket.socket()) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextlib.contextmanager
def local_servers(kind: str, count: int) -> Iterator[list[tuple[str, int]]]:
    """Start `count` redis-server or memcached processes on free loopback ports; stop them."""
    binary = shutil.which("redis-server" if kind == "redis" else "memcached")
    if binary is None:
        sys.exit(f"{kind} is not installed (apt-get install -y redis-server memcached)")
    processes: list[subprocess.Popen[bytes]] = []
    try:
        addresses = []
        for _ in range(count):
            port = _free_port()
            if kind == "redis":
                command = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
                command += ["--appendonly", "no"]
            else:
                command = [binary, "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-m", "256"]
                command += ["-u", "root"] if os.geteuid() == 0 else []
            processes.append(
                subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            )
            deadline = time.monotonic() + 10
            while True:
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port)):
                    break
                if time.monotonic() > deadline:
                    sys.exit(f"{kind} on port {port} did not start")
                time.sleep(0.02)
            addresses.append(("127.0.0.1", port))
        yield addresses
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


# -- counting round trips ------------------------------------------------------------------------


class _Trips:
    """Round trips counted over every socket opened while counting is on."""

    def __init__(self) -> None:
        self.count = 0
        self.lock = threading.Lock()


TRIPS = _Trips()


class CountingSocket(_PlainSocket):
    """A socket that counts a round trip at each send following a receive (or its first send)."""

    _sending = False

    def _sent(self) -> None:
        if not self._sending:
            self._sending = True
            with TRIPS.lock:
                TRIPS.count += 1

    def send(self, data: Any, *args: Any) -> int:
        self._sent()
        return super().send(data, *args)

    def sendall(self, data: Any, *args: Any) -> None:
        self._sent()
        super().sendall(data, *args)

    def recv(self, *args: Any) -> bytes:
        self._sending = False
        return super().recv(*args)

    def recv_into(self, *args: Any) -> int:
        self._sending = False
        return super().recv_into(*args)


@contextlib.contextmanager
def counting_sockets() -> Iterator[None]:
    """Make the sockets opened inside the block count their round trips."""
    socket.socket = CountingSocket  # type: ignore[misc]
    try:
        yield
    finally:
        socket.socket = _PlainSocket  # type: ignore[misc]


# -- server counters -----------------------------------------------------------------------------


def server_commands_by_name(kind: str, addresses: Sequence[tuple[str, int]]) -> Counter[str]:
    """Return the commands the servers have run so far, by name (this probe's own left out)."""
    counts: Counter[str] = Counter()
    for host, port in addresses:
        if kind == "redis":
            stats = redis.Redis(host=host, port=port).info("commandstats")
            for name, entry in stats.items():
                if name not in ("cmdstat_info", "cmdstat_hello", "cmdstat_client|setinfo"):
                    counts[name.removeprefix("cmdstat_")] += int(entry["calls"])
        else:
            found = _memcached_stats(host, port)
            counted = ("cmd_get", "cmd_set", "cmd_touch", "delete_hits", "delete_misses")
            counted += ("incr_hits", "incr_misses", "decr_hits", "decr_misses")
            for name in counted:
                counts[name] += int(found[name])
    return counts


def server_commands(kind: str, addresses: Sequence[tuple[str, int]]) -> int:
    """Return the commands the servers have run so far (this probe's own left out)."""
    return sum(server_commands_by_name(kind, addresses).values())


def server_bytes(kind: str, addresses: Sequence[tuple[str, int]]) -> int:
    """Return the bytes the servers hold (Redis ``used_memory``, memcached ``bytes``)."""
    if kind == "redis":
        return sum(
            int(redis.Redis(host=host, port=port).info("memory")["used_memory"])
            for host, port in addresses
        )
    return sum(int(_memcached_stats(host, port)["bytes"]) for host, port in addresses)


def _memcached_stats(host: str, port: int) -> dict[str, str]:
    client = Client((host, port), default_noreply=False)
    try:
        return {key.decode(): str(value) for key, value in client.stats().items()}
    finally:
        client.close()


# -- contenders ----------------------------------------------------------------------------------


@dataclass
class Contender:
    """One client's operations over a list of keys (each a pass over the keys)."""

    set: Callable[[list[str]], object]
    get: Callable[[list[str]], object]
    get_many: Callable[[list[str]], object]
    set_many: Callable[[list[str]], object]
    delete: Callable[[list[str]], object]
    # A set of the keys the delete pass has just deleted: on ringkit it lifts their tombstones.
    set_after_delete: Callable[[list[str]], object]


def ringkit_contender(client: ShardedClient) -> Contender:
    def set_all(keys: list[str]) -> None:
        for key in keys:
            client.set(key, VALUE)

    def get_all(keys: list[str]) -> None:
        for key in keys:
            client.get(key)

    def get_many_all(keys: list[str]) -> None:
        for at in range(0, len(keys), BATCH):
            client.get_many(keys[at : at + BATCH])

    def set_many_all(keys: list[str]) -> None:
        for at in range(0, len(keys), BATCH):
            client.set_many(dict.fromkeys(keys[at : at + BATCH], VALUE))

    def delete_all(keys: list[str]) -> None:
        for key in keys:
            client.delete(key)

    return Contender(set_all, get_all, get_many_all, set_many_all, delete_all, set_all)


def plain_contender(
    kind: str, addresses: Sequence[tuple[str, int]], route: ShardedClient, replicas: int
) -> tuple[Contender, Callable[[], None]]:
    """The plain clients, one per server, with every key routed by hand beforehand."""
    if kind == "redis":
        clients = {
            name: redis.Redis(host=h, port=p) for name, (h, p) in zip(NAMES, addresses, strict=True)
        }
    else:
        clients = {
            name: Client((h, p), no_delay=True, default_noreply=False)
            for name, (h, p) in zip(NAMES, addresses, strict=True)
        }
    owners: dict[str, list[Any]] = {}

    def targets(key: str) -> list[Any]:
        found = owners.get(key)
        if found is None:
            found = owners[key] = [clients[name] for name in route.replicas_for(key)[:replicas]]
        return found

    def set_all(keys: list[str]) -> None:
        for key in keys:
            for client in targets(key):
                client.set(key, RAW_VALUE)

    def get_all(keys: list[str]) -> None:
        for key in keys:
            targets(key)[0].get(key)

    def get_many_all(keys: list[str]) -> None:
        for at in range(0, len(keys), BATCH):
            groups: dict[int, tuple[Any, list[str]]] = {}
            for key in keys[at : at + BATCH]:
                client = targets(key)[0]
                groups.setdefault(id(client), (client, []))[1].append(key)
            for client, group in groups.values():
                if kind == "redis":
                    client.mget(group)
                else:
                    client.get_many(group)

    def set_many_all(keys: list[str]) -> None:
        for at in range(0, len(keys), BATCH):
            groups: dict[int, tuple[Any, dict[str, bytes]]] = {}
            for key in keys[at : at + BATCH]:
                for client in targets(key):
                    groups.setdefault(id(client), (client, {}))[1][key] = RAW_VALUE
            for client, group in groups.values():
                if kind == "redis":
                    client.mset(group)
                else:
                    client.set_many(group)

    def delete_all(keys: list[str]) -> None:
        for key in keys:
            for client in targets(key):
                client.delete(key)

    def close() -> None:
        for client in clients.values():
            client.close()

    return Contender(set_all, get_all, get_many_all, set_many_all, delete_all, set_all), close


# In this order in every pass: `set` writes keys that hold a value (written by the pass before),
# `set_after_delete` the keys `delete` has just deleted.
OPS = ("set", "get", "get_many", "set_many", "delete", "set_after_delete")
BATCHES = ("get_many", "set_many")  # BATCH keys per call


def calls_of(op: str, keys: list[str]) -> int:
    """Return how many calls a pass of `op` over `keys` makes."""
    return len(keys) // BATCH if op in BATCHES else len(keys)


def open_ringkit(kind: str, addresses: Sequence[tuple[str, int]], replicas: int) -> ShardedClient:
    scheme = "redis" if kind == "redis" else "memcached"
    suffix = "/0" if kind == "redis" else ""
    urls = {
        name: f"{scheme}://{h}:{p}{suffix}" for name, (h, p) in zip(NAMES, addresses, strict=True)
    }
    # A long timeout: on a loaded machine a call can wait past the default second, and a
    # failover would measure something else (the plain clients have no timeout at all).
    client = ShardedClient(HashRing(NAMES), urls, replicas=replicas, timeout_s=30.0)
    client.index_keys = not ARGS.no_index
    if ARGS.hot_copies:  # the view allows hot-key copies: every write reads its keys' markers
        client.set("bench:settle", 1)
        client._run(client._tracker.spread_hot_keys())
        assert client.view.hot_copies
    return client


# -- guarantees switched off (this process only) -------------------------------------------------


def switch_off_guarantees() -> list[str]:
    """Patch the client as the flags ask; return what was switched off."""
    off = []
    if ARGS.no_tombstones or ARGS.no_markers or ARGS.no_fence:
        from ringkit.cluster.core import writer
        from ringkit.cluster.wire import handles

    if ARGS.hot_copies:
        off.append("(on) a view that allows hot-key copies")
    if ARGS.no_index:
        off.append("index (index_keys=False)")
    if ARGS.no_tombstones:

        def delete(self: Any, router: Any, data: bytes, done: Any = None) -> Any:
            return (yield from self.each(router, data, "delete", (data,), done))

        writer.Writer.delete = delete  # type: ignore[method-assign]
        off.append("tombstones (a delete is a fenced plain delete)")
    if ARGS.no_markers:

        def markerless(original: Callable[..., Any]) -> Callable[..., Any]:
            def serve_at(self: Any, epoch: int, op: str, args: Any) -> Any:
                if op == "write_marked":  # (write, its args, the keys whose markers to read)
                    write, write_args, _ = args
                    return original(self, epoch, write, write_args), {}
                return original(self, epoch, op, args)

            return serve_at

        handles.FencedBackend.serve_at = markerless(handles.FencedBackend.serve_at)  # type: ignore[method-assign]
        off.append("hot-copy markers (writes read none)")
    if ARGS.no_lift:
        from ringkit.cluster.wire.memcached import ops as memcached_ops
        from ringkit.cluster.wire.redis import ops as redis_ops

        memcached_ops._tombs_of = lambda items: {}  # type: ignore[attr-defined]
        call = "  lift(KEYS[i + n], value)\n"
        for name in ("set", "set+markers"):
            source = redis_ops._SOURCES[name]
            assert call in source, "the Redis write script's lift moved: update --no-lift"
            redis_ops._SOURCES[name] = source.replace(call, "")
            redis_ops._SHAS[name] = hashlib.sha1(redis_ops._SOURCES[name].encode()).hexdigest()
        off.append("the lift of an older delete (writes leave its tombstone)")
    if ARGS.no_fence:
        plain_serve = handles.FencedBackend.serve_at

        def unfenced(original: Callable[..., Any]) -> Callable[..., Any]:
            def serve_at(self: Any, epoch: int, op: str, args: Any) -> Any:
                if hasattr(self.inner, op):
                    return getattr(self.inner, op)(*args)
                return original(self, epoch, op, args)

            return serve_at

        handles.FencedBackend.serve_at = unfenced(plain_serve)  # type: ignore[method-assign]
        off.append("fence (no epoch check where a plain call exists)")
    return off


# -- measuring -----------------------------------------------------------------------------------


@dataclass
class Row:
    op: str
    replicas: int
    trips: tuple[float, float]
    commands: tuple[float, float]
    bytes_per_key: tuple[float, float] | None
    plain_us: float
    ours_us: float
    ratio: float
    plain_cpu_us: float
    ours_cpu_us: float


def count_pass(
    kind: str,
    addresses: Sequence[tuple[str, int]],
    contender: Contender,
    op: str,
    keys: list[str],
    label: str = "",
) -> tuple[float, float]:
    """Run one pass of `op`; return its round trips and server commands per call.

    With ``--by-command``, also print the commands per key (per call for one-key operations)
    by name.
    """
    calls = calls_of(op, keys)
    commands_before = server_commands_by_name(kind, addresses)
    trips_before = TRIPS.count
    getattr(contender, op)(keys)
    trips = (TRIPS.count - trips_before) / calls
    ran = server_commands_by_name(kind, addresses) - commands_before
    if ARGS.by_command and label:
        per = len(keys)
        named = ", ".join(f"{name} {count / per:.3f}" for name, count in ran.most_common())
        print(f"{kind} {label} {op}, commands per key by name: {named}")
    return trips, sum(ran.values()) / calls


def _fresh(keys: list[str], fresh: bool) -> list[str]:
    """Return `keys`, or as many keys none of the passes writes otherwise (same length)."""
    return [key.replace(":", "+", 1) for key in keys] if fresh else keys


def bytes_per_key(
    kind: str, addresses: Sequence[tuple[str, int]], contender: Contender, prefix: str
) -> float:
    """Return the server bytes one more key costs, over ``--memory-keys`` fresh keys."""
    keys = [f"{prefix}{i:0{ARGS.key_bytes - len(prefix)}d}" for i in range(ARGS.memory_keys)]
    before = server_bytes(kind, addresses)
    contender.set(keys)
    return (server_bytes(kind, addresses) - before) / len(keys)


def measure(kind: str, addresses: Sequence[tuple[str, int]], replicas: int) -> list[Row]:
    keys_ours = [f"ring:{i:0{ARGS.key_bytes - 5}d}" for i in range(ARGS.keys)]
    keys_plain = [f"pln:{i:0{ARGS.key_bytes - 4}d}" for i in range(ARGS.keys)]
    # Counting: clients opened with counting sockets, used for one pass of each operation.
    with counting_sockets():
        counted_ours = open_ringkit(kind, addresses, replicas)
        counted_plain, close_counted = plain_contender(kind, addresses, counted_ours, replicas)
        ours_c = ringkit_contender(counted_ours)
        # Warm-up: connections, scripts loaded, the view published and read.
        warm = [f"warm:{i}" for i in range(2 * BATCH)]
        for contender in (counted_plain, ours_c):
            for op in OPS:
                getattr(contender, op)(warm)
        counts: dict[str, tuple[tuple[float, float], tuple[float, float]]] = {}
        for op in OPS:
            # A batch write on fresh keys: each adds its index entry, as a first write does.
            fresh = op == "set_many"
            counts[op] = (
                count_pass(kind, addresses, counted_plain, op, _fresh(keys_plain, fresh)),
                count_pass(
                    kind, addresses, ours_c, op, _fresh(keys_ours, fresh), f"R={replicas} ringkit"
                ),
            )
        # Memory: fresh keys, more of them than the timed passes (used_memory moves by tens of
        # kB on its own), written one by one; every replica's bytes count.
        stored = (
            bytes_per_key(kind, addresses, counted_plain, "pmem:"),
            bytes_per_key(kind, addresses, ours_c, "rmem:"),
        )
        close_counted()
        counted_ours.close()
    # Timing: fresh clients on plain sockets, every operation interleaved, repeats interleaved.
    ours_client = open_ringkit(kind, addresses, replicas)
    plain, close_plain = plain_contender(kind, addresses, ours_client, replicas)
    ours = ringkit_contender(ours_client)
    for contender in (plain, ours):
        for op in OPS:
            getattr(contender, op)(keys_plain if contender is plain else keys_ours)
    samples: dict[tuple[str, str], list[float]] = {}
    cpu: dict[tuple[str, str], list[float]] = {}
    contenders = (("plain", plain, keys_plain), ("ours", ours, keys_ours))
    for repeat in range(ARGS.repeats):
        for op in OPS:
            for label, contender, keys in contenders[:: -1 if repeat % 2 else 1]:
                start, start_cpu = time.perf_counter(), time.process_time()
                getattr(contender, op)(keys)
                calls = calls_of(op, keys)
                samples.setdefault((label, op), []).append((time.perf_counter() - start) / calls)
                cpu.setdefault((label, op), []).append((time.process_time() - start_cpu) / calls)
    close_plain()
    ours_client.close()
    rows = []
    for op in OPS:
        (p_trips, p_cmds), (o_trips, o_cmds) = counts[op]
        theirs, mine = samples[("plain", op)], samples[("ours", op)]
        ratio = statistics.median(m / t for m, t in zip(mine, theirs, strict=True))
        rows.append(
            Row(
                op,
                replicas,
                (p_trips, o_trips),
                (p_cmds, o_cmds),
                stored if op == "set" else None,
                statistics.median(theirs) * 1e6,
                statistics.median(mine) * 1e6,
                ratio,
                statistics.median(cpu[("plain", op)]) * 1e6,
                statistics.median(cpu[("ours", op)]) * 1e6,
            )
        )
    return rows


def count_retried(kind: str, addresses: Sequence[tuple[str, int]], replicas: int) -> str:
    """Return a table row: round trips and commands per set_many refused once by one server."""
    calls = 5 if kind == "memcached" else max(1, ARGS.keys // BATCH)
    trips = commands = 0
    with counting_sockets():
        client = open_ringkit(kind, addresses, replicas)
        client.refresh_view()  # published on every server: the epoch the first attempt carries
        for call in range(calls):
            newer = dataclasses.replace(client.view, epoch=client.view.epoch + 1)
            client.server(NAMES[-1]).backend.publish(newer.epoch, newer.to_json())
            if kind == "memcached":  # its fence reads the epoch at most this often
                time.sleep(MEMCACHED_FENCE_CHECK_S + 0.1)
            keys = [f"retried:{call:04d}:{i:0{ARGS.key_bytes - 13}d}" for i in range(BATCH)]
            commands_before, trips_before = server_commands(kind, addresses), TRIPS.count
            client.set_many(dict.fromkeys(keys, VALUE))
            trips += TRIPS.count - trips_before
            commands += server_commands(kind, addresses) - commands_before
            assert client.view.epoch == newer.epoch  # refused once, read again, retried
        client.close()
    return (
        f"| set_many refused once | {replicas} | {trips / calls:.2f} | {commands / calls:.2f} "
        f"({commands / calls / BATCH:.2f} / key) | {calls} |"
    )


def print_rows(kind: str, rows: list[Row]) -> None:
    plain = "redis-py" if kind == "redis" else "pymemcache"
    print(
        f"\n{kind}: {ARGS.keys} keys of {ARGS.key_bytes} bytes, 100-byte values, "
        f"{ARGS.repeats} interleaved repeats (each contender first in half of them); "
        f"get_many, set_many: {BATCH} keys per call"
    )
    print(
        f"| operation | R | round trips / call ({plain} · ringkit) | server commands / call "
        f"| server bytes / key | {plain} µs / call | ringkit µs / call | ringkit ÷ {plain} "
        f"| client CPU µs / call ({plain} · ringkit) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        stored = "–"
        if row.bytes_per_key is not None:
            theirs, mine = row.bytes_per_key
            stored = f"{theirs:.0f} · {mine:.0f} ({mine / theirs:.2f}×)"
        commands = f"{row.commands[0]:.2f} · {row.commands[1]:.2f}"
        if row.op in BATCHES:
            commands += f" ({row.commands[0] / BATCH:.2f} · {row.commands[1] / BATCH:.2f} / key)"
        operation = row.op.replace("_", " ")
        print(
            f"| {operation} | {row.replicas} | {row.trips[0]:.2f} · {row.trips[1]:.2f} | "
            f"{commands} | {stored} | {row.plain_us:.1f} | "
            f"{row.ours_us:.1f} | **{row.ratio:.2f}×** | {row.plain_cpu_us:.1f} · "
            f"{row.ours_cpu_us:.1f} |"
        )


def main() -> None:
    global ARGS
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kind", choices=("redis", "memcached", "both"), default="both")
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--keys", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=8, help="an even number: half each order")
    parser.add_argument("--key-bytes", type=int, default=16, help="key length (at least 10)")
    parser.add_argument("--memory-keys", type=int, default=20_000, help="keys of the memory pass")
    parser.add_argument("--quick", action="store_true", help="200 keys, 4 repeats")
    parser.add_argument(
        "--hot-copies",
        action="store_true",
        help="publish a view that allows hot-key copies (writes read their spread markers)",
    )
    parser.add_argument(
        "--retried", action="store_true", help="only count set_many calls one server refuses once"
    )
    parser.add_argument(
        "--by-command", action="store_true", help="print ringkit's server commands by name"
    )
    parser.add_argument("--no-index", action="store_true")
    parser.add_argument("--no-tombstones", action="store_true")
    parser.add_argument("--no-markers", action="store_true")
    parser.add_argument("--no-lift", action="store_true")
    parser.add_argument("--no-fence", action="store_true")
    ARGS = parser.parse_args()
    if ARGS.quick:
        ARGS.keys, ARGS.repeats, ARGS.memory_keys = 200, 4, 2000
    off = switch_off_guarantees()
    off_text = ", ".join(off) or "none"
    print(f"hiredis parser: {redis.utils.HIREDIS_AVAILABLE}; switched off: {off_text}")
    kinds = ("redis", "memcached") if ARGS.kind == "both" else (ARGS.kind,)
    if ARGS.retried:
        for kind in kinds:
            print(f"\n{kind}: {BATCH} fresh keys per call, 100-byte values")
            print("| call | R | round trips / call | server commands / call | calls |")
            print("|---|---:|---:|---:|---:|")
            for replicas in ARGS.replicas:
                with local_servers(kind, len(NAMES)) as addresses:
                    print(count_retried(kind, addresses, replicas))
        return
    for kind in kinds:
        rows = []
        for replicas in ARGS.replicas:  # fresh servers: a view of another R is refused
            with local_servers(kind, len(NAMES)) as addresses:
                rows += measure(kind, addresses, replicas)
        print_rows(kind, rows)


ARGS: argparse.Namespace
if __name__ == "__main__":
    main()
