"""The Gatepass scenario on real cache servers: add a server, count the misses.

Three cache servers hold the booking keys; a fourth is added the night before a sale. With
``hash % N`` most keys change server, every read of a moved key misses, and the misses fall
through to the database at once (the stampede). With a ring only the keys the new server takes
over move: about ``added / (servers + added)`` of them. :func:`run_gatepass` fills the servers
through a :class:`~ringkit.cluster.client.ShardedClient`, warms them (every key read once),
publishes the bigger placement and replays the reads, for a ring and for modulo in turn.
:func:`local_servers` starts memcached or redis-server processes on free loopback ports for it.

>>> report = run_gatepass(memory_urls(4, "doctest"), servers=3, added=1, keys=2_000)
>>> [round(result.hit_rate, 2) for result in report.results]
[0.75, 0.24]
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from ringkit.cluster.client import ShardedClient
from ringkit.cluster.views.view import ClusterView
from ringkit.cluster.wire.memory import memory_store
from ringkit.errors import ConfigError
from ringkit.placement import Placement
from ringkit.ring import DEFAULT_VNODES, HashRing
from ringkit.strategies.modulo import Modulo

__all__ = ["GatepassReport", "StrategyResult", "local_servers", "memory_urls", "run_gatepass"]

_BATCH = 500
_INSTALL = {
    "memcached": ("memcached", "apt-get install -y memcached  (macOS: brew install memcached)"),
    "redis": ("redis-server", "apt-get install -y redis-server  (macOS: brew install redis)"),
}


@dataclass(frozen=True, slots=True)
class StrategyResult:
    """What one placement did when the servers were added."""

    strategy: str
    keys: int
    moved: int
    hits: int
    database_reads: int
    fill_s: float
    warm_s: float
    replay_s: float

    @property
    def hit_rate(self) -> float:
        """Fraction of the replayed reads that still hit the cache."""
        return self.hits / self.keys if self.keys else 0.0

    @property
    def moved_fraction(self) -> float:
        """Fraction of the keys whose server changed."""
        return self.moved / self.keys if self.keys else 0.0


@dataclass(frozen=True, slots=True)
class GatepassReport:
    """The scenario's settings and one result per strategy (ring first, then modulo)."""

    backend: str
    servers: int
    added: int
    keys: int
    results: tuple[StrategyResult, ...]


def memory_urls(count: int, prefix: str) -> list[str]:
    """Return `count` URLs of empty memory stores named ``gatepass-<prefix>-<i>``."""
    urls = [f"memory://gatepass-{prefix}-{i}" for i in range(count)]
    for url in urls:
        memory_store(url.removeprefix("memory://")).data.clear()
    return urls


def _timed_batches(client: ShardedClient, keys: list[str], write: bool) -> tuple[int, float]:
    start, hits = time.perf_counter(), 0
    for offset in range(0, len(keys), _BATCH):
        batch = keys[offset : offset + _BATCH]
        if write:
            client.set_many({key: f"booking {key}: seat, payment, holds" for key in batch})
        else:
            hits += len(client.get_many(batch))
    return hits, time.perf_counter() - start


def _run_one(
    name: str, before: Placement, after: Placement, urls: Sequence[str], keys: list[str]
) -> StrategyResult:
    names = [node.name for node in after.nodes]
    servers = dict(zip(names, urls, strict=True))
    old = ShardedClient(before, {node.name: servers[node.name] for node in before.nodes})
    new = ShardedClient(after, servers)
    try:
        new.flush()
        _, fill_s = _timed_batches(old, keys, write=True)
        _, warm_s = _timed_batches(old, keys, write=False)
        # The bigger placement, published without moving a key: the naive change measured here
        # (a view at a later epoch, so the new client is not refused for its membership).
        new.adopt_view(ClusterView(old.epoch + 1, after, servers))
        hits, replay_s = _timed_batches(new, keys, write=False)
    finally:
        old.close()
        new.close()
    owners_before, owners_after = before.node_for_many(keys), after.node_for_many(keys)
    moved = sum(a != b for a, b in zip(owners_before, owners_after, strict=True))
    return StrategyResult(name, len(keys), moved, hits, len(keys) - hits, fill_s, warm_s, replay_s)


def run_gatepass(
    urls: Sequence[str],
    *,
    servers: int = 3,
    added: int = 1,
    keys: int = 10_000,
    vnodes: int = DEFAULT_VNODES,
    backend: str = "memory",
) -> GatepassReport:
    """Run the scenario on ``servers + added`` servers at `urls`; return what it measured.

    Runtime: about 3 * keys / 500 round trips per server and per strategy.

    :raises ConfigError: when there are not ``servers + added`` URLs, or a count is < 1
    :raises BackendError: when a server fails during the run
    """
    for label, value in (("servers", servers), ("added", added), ("keys", keys)):
        if value < 1:
            raise ConfigError(f"{label} must be >= 1, got {value}")
    if len(urls) != servers + added:
        raise ConfigError(f"need servers + added = {servers + added} URLs, got {len(urls)}")
    names = [
        f"cache-{chr(ord('a') + i)}" if i < 26 else f"cache-{i}" for i in range(servers + added)
    ]
    booking = [f"booking:{i}" for i in range(keys)]
    ring = HashRing(names[:servers], vnodes=vnodes)
    modulo = Modulo(names[:servers])
    for name in names[servers:]:
        ring, modulo = ring.add(name), modulo.add(name)
    results = (
        _run_one(
            f"ring ({vnodes} vnodes)", HashRing(names[:servers], vnodes=vnodes), ring, urls, booking
        ),
        _run_one("modulo (hash % N)", Modulo(names[:servers]), modulo, urls, booking),
    )
    return GatepassReport(backend, servers, added, keys, results)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _command(kind: str, binary: str, port: int) -> list[str]:
    if kind == "memcached":
        command = [binary, "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-m", "64"]
        # memcached refuses to run as root unless told which user to stay.
        return [*command, "-u", "root"] if os.geteuid() == 0 else command
    return [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]


def _wait_listening(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ConfigError(f"server on port {port} exited with status {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise ConfigError(f"server did not listen on 127.0.0.1:{port} within 10 s")


@contextmanager
def local_servers(kind: str, count: int) -> Iterator[list[str]]:
    """Start `count` memcached or redis-server processes on free loopback ports; stop them after.

    :raises ConfigError: when the binary is not installed (the message says how to install it)
    """
    binary_name, install = _INSTALL[kind]
    binary = shutil.which(binary_name)
    if binary is None:
        raise ConfigError(f"{binary_name} is not installed; install it with: {install}")
    processes: list[subprocess.Popen[bytes]] = []
    try:
        urls = []
        for _ in range(count):
            port = _free_port()
            process = subprocess.Popen(
                _command(kind, binary, port), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            processes.append(process)
            _wait_listening(port, process)
            urls.append(
                f"redis://127.0.0.1:{port}/0"
                if kind == "redis"
                else f"memcached://127.0.0.1:{port}"
            )
        yield urls
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
