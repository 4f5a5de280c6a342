"""Real servers for tests: start memcached / redis-server on a free loopback port, then stop it.

A missing binary skips the test locally and fails it under CI (``CI=true``): CI installs the
Debian packages, so a missing one there is a broken setup, never a reason to pass.
"""

from __future__ import annotations

import contextlib
import ctypes.util
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

__all__ = [
    "EtcdCluster",
    "EtcdTLS",
    "Server",
    "etcd_cluster",
    "etcd_server",
    "free_port",
    "free_port_below_ephemeral",
    "memcached_server",
    "redis_server",
    "require_binary",
    "require_library",
    "restart_etcd_member",
    "restart_etcd_members",
    "serve",
    "sigstop",
    "stop",
    "unavailable",
    "wait_for_port",
]


@dataclass(frozen=True)
class Server:
    """A running server process on loopback."""

    host: str
    port: int
    process: subprocess.Popen[bytes]

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def unavailable(message: str) -> NoReturn:
    """Skip the test locally; fail it under ``CI=true``, where every dependency is installed."""
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def require_binary(name: str, package: str) -> str:
    """Return the path of `name`; skip locally, fail under CI, when it is not installed."""
    path = shutil.which(name)
    if path is None:
        unavailable(f"{name} is not installed (apt-get install -y {package})")
    return path


def require_library(name: str, package: str) -> str:
    """Return the path of shared library `name` (``libNAME.so``); skip or fail when missing."""
    path = ctypes.util.find_library(name)
    if path is None:
        unavailable(f"lib{name} is not installed (apt-get install -y {package})")
    return path


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def free_port_below_ephemeral() -> int:
    """Return a free loopback port below the kernel's ephemeral range, for a server to restart on.

    A client that keeps reconnecting to a port in the ephemeral range while its server is down
    can be connected to itself (TCP simultaneous open: the kernel may pick the destination port
    as the source port), and then holds the port the restarted server needs to listen on.
    """
    low = 32768
    with contextlib.suppress(OSError, ValueError):
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(max(1024, low - 12000), low)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port found below {low}")


def wait_for_port(
    port: int, process: subprocess.Popen[bytes], *, timeout_s: float = 10.0, log: Path | None = None
) -> None:
    """Return once `process` accepts connections on `port`; raise if it exits or never does.

    `log` (the process's own log file, if it writes one) is quoted in the error.
    """

    def detail() -> str:
        # Read when failing, not before: the log is written while the server starts.
        return f": {log.read_text()}" if log is not None and log.exists() else ""

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with status {process.returncode} before "
                               f"listening on port {port}{detail()}")  # fmt: skip
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"server did not listen on port {port} within {timeout_s} s{detail()}")


def stop(process: subprocess.Popen[bytes]) -> None:
    """Terminate `process`, killing it if it has not exited within 5 s."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def sigstop(pid: int, timeout_s: float = 10.0) -> None:
    """SIGSTOP `pid` and return once every thread of it is stopped (the signal is asynchronous)."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        states = []
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/stat") as stat:
                states.append(stat.read().rsplit(")", 1)[1].split()[0])
        if all(state == "T" for state in states):
            return
        time.sleep(0.01)
    raise RuntimeError(f"process {pid} did not stop within {timeout_s} s")


#: How many times a server is started on a fresh free port before its failure to listen counts.
STARTS_ON_FREE_PORTS = 3


@contextmanager
def serve(command_for: Callable[[int], list[str]], port: int | None) -> Iterator[Server]:
    """Run `command_for(port)`, a server listening on loopback, for the duration of the block.

    With `port` None a free port is chosen, and chosen again (up to `STARTS_ON_FREE_PORTS`
    times) when the server exits before listening: between our check and its bind, another
    process's outgoing connection may take the port as its source port.
    """
    starts = STARTS_ON_FREE_PORTS if port is None else 1
    for attempt in range(starts):
        chosen = free_port() if port is None else port
        process = subprocess.Popen(
            command_for(chosen), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            try:
                wait_for_port(chosen, process)
            except RuntimeError:
                if attempt + 1 == starts or process.poll() is None:
                    raise  # a server that runs but never listens is not a port race
                continue
            yield Server("127.0.0.1", chosen, process)
            return
        finally:
            stop(process)


@contextmanager
def memcached_server(memory_mb: int = 64, port: int | None = None) -> Iterator[Server]:
    """Run a memcached on `port` (default: a free loopback port) for the duration of the block."""
    binary = require_binary("memcached", "memcached")

    def command(chosen: int) -> list[str]:
        # -u root: memcached refuses to run as root otherwise (tests run as root in CI).
        root = ["-u", "root"] if os.geteuid() == 0 else []
        return [binary, "-l", "127.0.0.1", "-p", str(chosen), "-U", "0", "-m", str(memory_mb),
                *root]  # fmt: skip

    with serve(command, port) as server:
        yield server


@contextmanager
def redis_server(port: int | None = None, *, password: str | None = None) -> Iterator[Server]:
    """Run a redis-server on `port` (default: a free one), without persistence, for the block.

    With `password`, the server requires it (``--requirepass``) from every connection.
    """
    binary = require_binary("redis-server", "redis-server")

    def command(chosen: int) -> list[str]:
        secured = ["--requirepass", password] if password is not None else []
        return [binary, "--port", str(chosen), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--protected-mode", "no", *secured]  # fmt: skip

    with serve(command, port) as server:
        yield server


@dataclass(frozen=True)
class EtcdTLS:
    """Serve etcd's clients over TLS; with `trusted_ca_file`, also demand client certificates."""

    cert_file: str
    key_file: str
    trusted_ca_file: str | None = None

    def flags(self) -> list[str]:
        flags = ["--cert-file", self.cert_file, "--key-file", self.key_file]
        if self.trusted_ca_file:
            flags += ["--client-cert-auth", "--trusted-ca-file", self.trusted_ca_file]
        return flags


@dataclass
class EtcdCluster:
    """Running etcd members on loopback: their names, client ports and processes."""

    names: list[str]
    client_ports: list[int]
    processes: list[subprocess.Popen[bytes]]
    commands: list[list[str]]
    tls: bool = False

    @property
    def endpoints(self) -> str:
        """``h1:p1,h2:p2,…`` for an ``etcd://`` URL."""
        return ",".join(f"127.0.0.1:{port}" for port in self.client_ports)

    def url(self, prefix: str = "ring") -> str:
        """The ``etcd://`` (``etcds://`` over TLS) URL of every member, with `prefix`."""
        return f"etcd{'s' if self.tls else ''}://{self.endpoints}/{prefix}"

    def leader(self) -> int:
        """The index of the current leader (asks each live member's status, v3 JSON gateway)."""
        for index, port in enumerate(self.client_ports):
            if self.processes[index].poll() is not None:
                continue
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}/v3/maintenance/status", data=b"{}", method="POST"
            )
            try:
                with urllib.request.urlopen(request, timeout=1) as reply:
                    status = json.loads(reply.read())
            except OSError:
                continue
            if status.get("leader") == status["header"]["member_id"]:
                return index
        raise RuntimeError("no etcd member is the leader")


def _wait_healthy(port: int, process: subprocess.Popen[bytes], timeout_s: float = 20.0) -> None:
    """Return once etcd on `port` answers /health with health true."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"etcd exited with status {process.returncode} before it was healthy"
            )
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as reply:
                if b'"true"' in reply.read():
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"etcd on port {port} was not healthy within {timeout_s} s")


@contextmanager
def etcd_cluster(
    size: int = 1, extra: tuple[str, ...] = (), tls: EtcdTLS | None = None
) -> Iterator[EtcdCluster]:
    """Run an etcd cluster of `size` members on free loopback ports, data in a tmp dir.

    `extra` flags are given to every member (``--auth-token-ttl 1``). With `tls` clients are
    served over HTTPS and health is read from a plain metrics listener.
    """
    binary = require_binary("etcd", "etcd-server")
    names = [f"m{i}" for i in range(size)]
    scheme = "https" if tls else "http"
    # Fresh ports for every start: a member that exits before it is healthy most likely lost a
    # port to another connection (see `serve`); the whole cluster starts again, up to 3 times.
    for attempt in range(STARTS_ON_FREE_PORTS):
        ports = distinct_free_ports(3 * size if tls else 2 * size)
        clients, peers = ports[:size], ports[size : 2 * size]
        healths = ports[2 * size :] if tls else clients
        initial = ",".join(f"{n}=http://127.0.0.1:{p}" for n, p in zip(names, peers, strict=True))
        with tempfile.TemporaryDirectory(prefix="ringkit-etcd-") as data:
            commands = [
                [binary, "--name", name, "--data-dir", str(Path(data) / name),
                 "--listen-client-urls", f"{scheme}://127.0.0.1:{client}",
                 "--advertise-client-urls", f"{scheme}://127.0.0.1:{client}",
                 "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                 "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                 "--initial-cluster", initial, "--initial-cluster-state", "new",
                 "--heartbeat-interval", "50", "--election-timeout", "500", *extra,
                 *([*tls.flags(), "--listen-metrics-urls", f"http://127.0.0.1:{health}"]
                   if tls else [])]
                for name, client, peer, health in zip(names, clients, peers, healths, strict=True)
            ]  # fmt: skip
            processes = [
                subprocess.Popen(c, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                for c in commands
            ]
            try:
                try:
                    for port, process in zip(healths, processes, strict=True):
                        _wait_healthy(port, process)
                except RuntimeError:
                    exited = any(process.poll() is not None for process in processes)
                    if attempt + 1 == STARTS_ON_FREE_PORTS or not exited:
                        raise
                    continue
                yield EtcdCluster(names, clients, processes, commands, tls=tls is not None)
                return
            finally:
                for process in processes:
                    stop(process)


def distinct_free_ports(count: int, draw: Callable[[], int] = free_port) -> list[int]:
    """`count` different free ports from `draw` (two draws may return the same one)."""
    ports: list[int] = []
    while len(ports) < count:
        port = draw()
        if port not in ports:
            ports.append(port)
    return ports


@contextmanager
def etcd_server(extra: tuple[str, ...] = ()) -> Iterator[EtcdCluster]:
    """Run a one-member etcd on free loopback ports for the duration of the block."""
    with etcd_cluster(1, extra) as cluster:
        yield cluster


def restart_etcd_member(cluster: EtcdCluster, index: int = 0, *, empty: bool = False) -> None:
    """SIGKILL etcd member `index` and start it again with the same flags.

    With `empty`, its data dir is deleted first: the member comes back as an etcd restored
    from nothing (revision 1, same cluster id), as after a restore onto a fresh machine.
    """
    restart_etcd_members(cluster, [index], empty=empty)


def restart_etcd_members(cluster: EtcdCluster, indices: list[int], *, empty: bool = False) -> None:
    """SIGKILL the etcd members `indices` together, start them again, wait until healthy.

    All members of a cluster restarted with `empty` bootstrap it anew with the same flags
    (same cluster id, revisions from 1), as a restore of the whole cluster does.
    """
    for index in indices:
        cluster.processes[index].kill()
        cluster.processes[index].wait()
    for index in indices:
        command = cluster.commands[index]
        if empty:
            shutil.rmtree(command[command.index("--data-dir") + 1], ignore_errors=True)
        cluster.processes[index] = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
    for index in indices:  # a member is healthy only once a quorum runs: start all, then wait
        _wait_healthy(cluster.client_ports[index], cluster.processes[index])
