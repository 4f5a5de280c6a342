"""One seeded run of the ownership checker: a real etcd, member processes, a nemesis.

The members are ``python -m tests.chaos_live.worker`` processes sampling their ownership; the
nemesis injects one kind of fault, at seeded times, for the length of the load:

- ``graceful``: a member leaves (SIGTERM: ``leave()``) and a new one joins, in turn;
- ``worker_stop``: SIGSTOP of a member past its TTL, then SIGCONT (its lease ends meanwhile);
- ``etcd_stop``: SIGSTOP of an etcd follower past the TTL, then SIGCONT (needs 3 members);
- ``leader_kill``: SIGKILL of the etcd leader, restarted on its data after a second;
- ``bad_records``: bad and mismatched member records and bad release marks, written and
  deleted through the etcd API;
- ``restore``: every etcd member SIGKILLed and started again on an empty data dir with the same
  flags, as a restore of the cluster (revisions start again from 1, same cluster id).

The checker (checker.py) then reads every member's runs.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import ringkit.live
from ringkit.errors import BackendError, RingkitError
from tests.chaos_live.checker import Verdict, check, load_runs, load_transition_runs
from tests.servers import EtcdCluster, etcd_cluster, restart_etcd_members, sigstop, stop

ROOT = Path(__file__).resolve().parents[2]
FAULTS = ("graceful", "worker_stop", "etcd_stop", "leader_kill", "bad_records", "restore")


@dataclass(frozen=True, slots=True)
class Settings:
    """The size of a run: members, keys, lease TTL and how long the nemesis acts."""

    workers: int = 3
    keys: int = 24
    ttl_s: float = 2.0
    load_s: float = 25.0
    tail_s: float = 5.0
    etcd_members: int = 3


@dataclass
class RunResult:
    """One run: its fault kind and seed, the faults injected, the checker's verdict."""

    handoff: str
    fault: str
    seed: int
    faults: list[tuple[float, str]] = field(default_factory=list)
    verdict: Verdict = field(default_factory=lambda: Verdict(0))

    @property
    def line(self) -> str:
        v = self.verdict
        return (
            f"{self.handoff:9} {self.fault:11} seed {self.seed:3}: {len(self.faults)} faults, "
            f"{v.runs} ownership runs, {len(v.overlaps)} overlaps "
            f"(longest {v.longest_overlap_s * 1000:.0f} ms), {len(v.token_errors)} token errors, "
            f"longest gap {v.longest_gap_s:.2f} s; transition logs: {v.transition_runs} "
            f"intervals, {len(v.transition_overlaps)} overlaps, "
            f"{len(v.transition_token_errors)} token errors; stale tokens in overlaps: "
            f"{len(v.stale_tokens)} (logs {len(v.transition_stale_tokens)})"
        )


class Pool:
    """The member processes of a run, each writing its runs to its own file."""

    def __init__(self, url: str, handoff: str, settings: Settings, folder: Path) -> None:
        self._url, self._handoff, self._settings, self._folder = url, handoff, settings, folder
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self._count = 0

    def start(self) -> str:
        name = f"w{self._count}"
        self._count += 1
        env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
        command = [sys.executable, "-m", "tests.chaos_live.worker", self._url, name,
                   self._handoff, str(self._settings.ttl_s), str(self._settings.keys),
                   str(self._folder / f"{name}.jsonl")]  # fmt: skip
        self.processes[name] = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
            stderr=open(self._folder / f"{name}.err", "wb"),  # noqa: SIM115 - the child's
        )  # fmt: skip
        # The worker opens its file once it has joined: a fault before that would be no change.
        deadline = time.monotonic() + 30
        while not (self._folder / f"{name}.jsonl").exists() and time.monotonic() < deadline:
            if self.processes[name].poll() is not None:
                raise RuntimeError(f"worker {name} exited: {self.stderr(name)}")
            time.sleep(0.02)
        if not (self._folder / f"{name}.jsonl").exists():
            raise RuntimeError(f"worker {name} did not join within 30 s: {self.stderr(name)}")
        return name

    def stderr(self, name: str) -> str:
        return (self._folder / f"{name}.err").read_text()[-1500:]

    def live(self) -> list[str]:
        return [n for n, p in self.processes.items() if p.poll() is None]

    def leave(self, name: str) -> None:
        """SIGTERM: the member leaves gracefully; wait for it (bounded)."""
        process = self.processes[name]
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def stop_all(self) -> None:
        for name in self.live():
            self.processes[name].send_signal(signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def files(self) -> list[Path]:
        return [self._folder / f"{name}.jsonl" for name in self.processes]

    def transition_files(self) -> list[Path]:
        return [self._folder / f"{name}.transitions.jsonl" for name in self.processes]


def _leader(cluster: EtcdCluster) -> int:
    """The leader's index, asking again while none answers (a member's status call times out
    after 1 s, which a starved machine exceeds, and an election may be under way).

    :raises BackendError: when none answers within 10 s (the fault is then not injected)
    """
    deadline = time.monotonic() + 10
    while True:
        try:
            return cluster.leader()
        except RuntimeError as error:
            if time.monotonic() > deadline:
                raise BackendError(f"no leader to find within 10 s: {error}") from error
            time.sleep(0.1)


def _follower(cluster: EtcdCluster) -> int:
    leader = _leader(cluster)
    return next(i for i in range(len(cluster.processes)) if i != leader)


def _nemesis(
    fault: str, rng: random.Random, pool: Pool, cluster: EtcdCluster, store: ringkit.live.Store
) -> Callable[[], str]:
    """Return the action that injects one `fault` and says what it did."""
    ttl = pool._settings.ttl_s

    def graceful() -> str:
        live = pool.live()
        if len(live) > 2 and rng.random() < 0.5:
            victim = rng.choice(live)
            pool.leave(victim)
            return f"{victim} left"
        return f"{pool.start()} joined"

    def worker_stop() -> str:
        victim = rng.choice(pool.live())
        pid = pool.processes[victim].pid
        sigstop(pid)
        time.sleep(ttl + 1)
        os.kill(pid, signal.SIGCONT)
        return f"{victim} stopped {ttl + 1:g} s"

    def etcd_stop() -> str:
        index = _follower(cluster)
        sigstop(cluster.processes[index].pid)
        time.sleep(ttl + 1)
        os.kill(cluster.processes[index].pid, signal.SIGCONT)
        return f"etcd m{index} stopped {ttl + 1:g} s"

    def leader_kill() -> str:
        index = _leader(cluster)
        cluster.processes[index].kill()
        cluster.processes[index].wait()
        time.sleep(1.0)
        cluster.processes[index] = subprocess.Popen(
            cluster.commands[index], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        return f"etcd leader m{index} killed and restarted"

    def bad_records() -> str:
        backend, prefix = store.backend, store.prefix
        bad = {
            f"{prefix}members/zz-bad": b'{"name": "zz-bad", "weight": -1}',
            f"{prefix}members/zz-liar": (
                b'{"name": "w0", "state": "active", "zone": null, "weight": 1.0, "data": null,'
                b' "tokens": [1, 2], "ttl_s": 2.0, "holder": ""}'
            ),
            f"{prefix}_released/w0": b'{"name": "w9", "epoch": -5}',
        }
        for key, value in bad.items():
            backend.put_unless_newer(key, value, 2**62)
        time.sleep(1.0)
        for key in bad:
            backend.delete(key)
        return "bad records written and deleted"

    def restore() -> str:
        restart_etcd_members(cluster, list(range(len(cluster.processes))), empty=True)
        time.sleep(ttl + 1)  # the members register again, the stores raise the epoch base
        return f"etcd restored empty ({len(cluster.processes)} members)"

    return {
        "graceful": graceful,
        "worker_stop": worker_stop,
        "etcd_stop": etcd_stop,
        "leader_kill": leader_kill,
        "bad_records": bad_records,
        "restore": restore,
    }[fault]


def run_once(handoff: str, fault: str, seed: int, settings: Settings, folder: Path) -> RunResult:
    """Run members under one kind of fault for the load, then check their ownership history."""
    rng = random.Random(seed)
    result = RunResult(handoff, fault, seed)
    members = settings.etcd_members if fault not in ("etcd_stop", "leader_kill") else 3
    with etcd_cluster(members) as cluster:
        url = cluster.url(f"chaos-live-{seed}")
        pool = Pool(url, handoff, settings, folder)
        store = ringkit.live.connect(url)
        try:
            for _ in range(settings.workers):
                pool.start()
            store.wait_for(lambda s: len(s.ring) == settings.workers, timeout_s=30)
            inject = _nemesis(fault, rng, pool, cluster, store)
            ends = time.monotonic() + settings.load_s
            while time.monotonic() < ends:
                time.sleep(rng.uniform(1.0, 2.5))
                try:
                    result.faults.append((time.monotonic(), inject()))
                except RingkitError as error:  # etcd too slow for the nemesis itself: go on
                    result.faults.append((time.monotonic(), f"{fault} not injected: {error}"))
            time.sleep(settings.tail_s)
        finally:
            pool.stop_all()
            store.close()
            for process in cluster.processes:
                stop(process)
    result.verdict = check(
        load_runs(pool.files()),
        transitions=load_transition_runs(pool.transition_files()),
        lag_s=settings.ttl_s / 2,  # the stores' current_within_s: the default mode's overlap
    )
    return result
