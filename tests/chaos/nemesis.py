"""The nemesis: faults injected into a running cluster, one at a time, each healed before the next.

The fault model is the one docs/cluster.md promises to survive: never more than R - 1 of a key's
replicas failed at once. Server faults therefore always strike the same *victim* server of a run:
a server restarted empty has lost every key it held, and stays failed for those keys until they
are repaired, so striking another server next could fail two replicas of one key. Coordinator
faults kill the ``ringkit rebalance`` process (SIGKILL) in the middle of a move and finish it with
``--resume`` or ``--rollback`` from a new process, as an operator would.

Each fault kind is a function ``(Cluster, random.Random) -> str`` registered in `FAULTS`; it
injects one fault, heals it and returns a one-line description. `BACKENDS` says which servers a
kind applies to (online rebalancing needs Redis).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import redis

from tests.chaos.history import Window, now_ns
from tests.chaos.worker import child_environment
from tests.servers import (
    Server,
    free_port_below_ephemeral,
    memcached_server,
    redis_server,
    sigstop,
)

__all__ = ["BACKENDS", "FAULTS", "Cluster", "Timing", "cluster"]


@dataclass(frozen=True, slots=True)
class Timing:
    """How long a fault lasts and the quiet gap after it heals (seconds)."""

    down_s: float = 0.6
    gap_s: float = 0.4
    keys_per_s: float = 10.0  # the coordinator's throttle: a move long enough to be killed in
    command_timeout_s: float = 60.0


@dataclass
class Cluster:
    """The servers of a run: their processes (replaced on restart), and who is a member now."""

    kind: str
    stack: ExitStack
    servers: dict[str, Server]
    members: list[str]
    victim: str
    spare: str | None
    replicas: int
    timing: Timing
    log_dir: Path
    paused: set[str] = field(default_factory=set)
    windows: list[Window] = field(default_factory=list)  # server failures, for the checker

    def url(self, name: str) -> str:
        address = self.servers[name].address
        return f"redis://{address}/0" if self.kind == "redis" else f"memcached://{address}"

    def urls(self, names: list[str] | None = None) -> dict[str, str]:
        return {name: self.url(name) for name in (self.members if names is None else names)}

    def start(self, name: str, port: int | None = None) -> None:
        """Start server `name` (empty), on `port` when given (a restart on the same port)."""
        start = redis_server if self.kind == "redis" else memcached_server
        port = free_port_below_ephemeral() if port is None else port
        self.servers[name] = self.stack.enter_context(start(port=port))

    def kill(self, name: str) -> None:
        process = self.servers[name].process
        process.kill()
        process.wait()

    def pause(self, name: str) -> None:
        self.paused.add(name)  # first: a stop that times out half-way is still healed
        sigstop(self.servers[name].process.pid)

    def resume(self, name: str) -> None:
        os.kill(self.servers[name].process.pid, signal.SIGCONT)
        self.paused.discard(name)

    def heal(self) -> None:
        """Resume every paused server (also on the way out of a failed run)."""
        for name in list(self.paused):
            self.resume(name)

    def view(self) -> dict[str, object] | None:
        """The newest view any member holds (Redis), as JSON data."""
        newest: dict[str, object] | None = None
        for name in self.servers:
            server = self.servers[name]
            try:
                with redis.Redis(
                    host=server.host, port=server.port, socket_timeout=1
                ) as raw_client:
                    raw = raw_client.get("ringkit:view")
            except redis.RedisError:
                continue
            if raw is not None:
                data = json.loads(raw)
                if newest is None or data["epoch"] > newest["epoch"]:  # type: ignore[operator]
                    newest = data
        return newest


@contextmanager
def cluster(
    kind: str,
    *,
    servers: int,
    spare: bool,
    replicas: int,
    timing: Timing,
    log_dir: Path,
    rng: random.Random,
) -> Iterator[Cluster]:
    """Start `servers` servers of `kind` (plus a spare one, not a member) for the block."""
    with ExitStack() as stack:
        names = [f"s{n + 1}" for n in range(servers + spare)]
        members = names[:servers]
        result = Cluster(
            kind=kind,
            stack=stack,
            servers={},
            members=members,
            victim=rng.choice(members),
            spare=names[-1] if spare else None,
            replicas=replicas,
            timing=timing,
            log_dir=log_dir,
        )
        for name in names:
            result.start(name)
        try:
            yield result
        finally:
            result.heal()


def calm(cluster: Cluster, rng: random.Random) -> str:
    """No fault at all: the baseline, where every violation is the client's own race."""
    time.sleep(cluster.timing.down_s)
    return "no fault"


def kill(cluster: Cluster, rng: random.Random) -> str:
    """SIGKILL the victim, leave it down, then restart it empty on the same port."""
    port, start_ns = cluster.servers[cluster.victim].port, now_ns()
    cluster.kill(cluster.victim)
    down_s = rng.uniform(0.5, 1.5) * cluster.timing.down_s
    time.sleep(down_s)
    cluster.start(cluster.victim, port)
    cluster.windows.append(Window(cluster.victim, start_ns, now_ns()))
    return f"kill -9 {cluster.victim}, down {down_s:.2f} s, restarted empty"


def restart(cluster: Cluster, rng: random.Random) -> str:
    """SIGKILL the victim and restart it empty at once: clients may never see it down."""
    port, start_ns = cluster.servers[cluster.victim].port, now_ns()
    cluster.kill(cluster.victim)
    cluster.start(cluster.victim, port)
    cluster.windows.append(Window(cluster.victim, start_ns, now_ns()))
    return f"restart {cluster.victim} empty"


def pause(cluster: Cluster, rng: random.Random) -> str:
    """SIGSTOP the victim (a hung server keeps its data), then SIGCONT it."""
    start_ns = now_ns()
    cluster.pause(cluster.victim)
    down_s = rng.uniform(0.5, 1.5) * cluster.timing.down_s
    time.sleep(down_s)
    cluster.resume(cluster.victim)
    cluster.windows.append(Window(cluster.victim, start_ns, now_ns()))
    return f"SIGSTOP {cluster.victim} for {down_s:.2f} s"


def _rebalance(cluster: Cluster, *action: str) -> subprocess.Popen[bytes]:
    servers = ",".join(f"{name}={url}" for name, url in cluster.urls().items())
    command = [
        sys.executable,
        "-m",
        "ringkit",
        "rebalance",
        "--servers",
        servers,
        "--replicas",
        str(cluster.replicas),
        "--keys-per-s",
        str(cluster.timing.keys_per_s),
        "--no-progress",
        *action,
    ]
    log = (cluster.log_dir / "coordinator.log").open("ab")
    log.write(f"$ {' '.join(command)}\n".encode())
    log.flush()
    return subprocess.Popen(command, stdout=log, stderr=log, env=child_environment())


def _finish(cluster: Cluster, process: subprocess.Popen[bytes]) -> None:
    """Wait for the coordinator to succeed, then take the members from the stable view."""
    code = process.wait(timeout=cluster.timing.command_timeout_s)
    if code != 0:
        log = (cluster.log_dir / "coordinator.log").read_text()[-2000:]
        raise RuntimeError(f"ringkit rebalance exited with {code}:\n{log}")
    _adopt(cluster)


def _adopt(cluster: Cluster) -> None:
    view = cluster.view()
    assert view is not None and view["state"] == "stable", view
    cluster.members = sorted(view["servers"])  # type: ignore[arg-type]


def _change(cluster: Cluster) -> tuple[str, ...]:
    spare = cluster.spare
    assert spare is not None, "coordinator faults need a spare server"
    if spare in cluster.members:
        return ("--remove", spare)
    return ("--add", f"{spare}={cluster.url(spare)}")


def membership(cluster: Cluster, rng: random.Random) -> str:
    """Add the spare server, or remove it when it is a member: a whole online rebalance."""
    change = _change(cluster)
    _finish(cluster, _rebalance(cluster, *change))
    return f"rebalance {' '.join(change)}"


def _killed_coordinator(cluster: Cluster, rng: random.Random, finish: str) -> str:
    change = _change(cluster)
    coordinator = _rebalance(cluster, *change)
    deadline = time.monotonic() + cluster.timing.command_timeout_s
    while coordinator.poll() is None and time.monotonic() < deadline:
        view = cluster.view()
        if view is not None and view["state"] == "moving":
            break
        time.sleep(0.02)
    time.sleep(rng.uniform(0.0, 0.3))
    if coordinator.poll() is not None:
        _finish(cluster, coordinator)
        return f"rebalance {' '.join(change)} finished before the kill"
    coordinator.kill()
    coordinator.wait()
    view = cluster.view()
    if view is not None and view["state"] == "stable":  # killed while deleting moved copies
        _adopt(cluster)
        return f"rebalance {' '.join(change)}: coordinator killed after the switch"
    _finish(cluster, _rebalance(cluster, f"--{finish}"))
    return f"rebalance {' '.join(change)}: coordinator killed, --{finish}"


def coordinator_resume(cluster: Cluster, rng: random.Random) -> str:
    """SIGKILL a rebalance mid-move, then ``ringkit rebalance --resume``."""
    return _killed_coordinator(cluster, rng, "resume")


def coordinator_rollback(cluster: Cluster, rng: random.Random) -> str:
    """SIGKILL a rebalance mid-move, then ``ringkit rebalance --rollback``."""
    return _killed_coordinator(cluster, rng, "rollback")


Fault = Callable[[Cluster, random.Random], str]

#: Every fault kind, by name.
FAULTS: dict[str, Fault] = {
    "calm": calm,
    "kill": kill,
    "restart": restart,
    "pause": pause,
    "membership": membership,
    "coordinator_resume": coordinator_resume,
    "coordinator_rollback": coordinator_rollback,
}

#: The backends each fault kind applies to: online rebalancing needs Redis (docs/rebalance.md).
BACKENDS: dict[str, tuple[str, ...]] = {
    "calm": ("redis", "memcached"),
    "kill": ("redis", "memcached"),
    "restart": ("redis", "memcached"),
    "pause": ("redis", "memcached"),
    "membership": ("redis",),
    "coordinator_resume": ("redis",),
    "coordinator_rollback": ("redis",),
}
