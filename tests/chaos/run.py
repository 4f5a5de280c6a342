"""One seeded chaos run: servers, client processes, a nemesis, final reads, and the check.

A run starts the servers (``tests/servers.py``), sets the counters to 0, starts `processes`
client processes (``worker.py``) that all begin at once and stop at one instant of the shared
clock, and meanwhile injects faults of one kind (``nemesis.py``) from `warmup_s` until `tail_s`
before the end: the tail leaves the clients time to notice that the last fault healed and
repair what it needs. Then a fresh client of the same configuration reads every key once (the
final reads) and the merged history is checked (``checker.py``).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from ringkit import HashRing
from ringkit.cluster import ShardedClient
from ringkit.errors import RingkitError
from tests.chaos.checker import Anomaly, Verdict, check
from tests.chaos.history import Op, now_ns, read_history
from tests.chaos.nemesis import BACKENDS, FAULTS, Cluster, Timing, cluster
from tests.chaos.worker import (
    WorkerConfig,
    child_environment,
    counter_keys,
    register_keys,
    remedies,
)

__all__ = ["CONFIGS", "Case", "RunResult", "Settings", "run_once"]


@dataclass(frozen=True, slots=True)
class Config:
    """A client configuration and whether docs/cluster.md promises it never reads stale.

    `near_ttl_s` gives every client a near-cache with that ``ttl_s`` (the one documented
    exception to the guarantee, within its bound); `split_parts` gives it
    ``HotKeys(remedy="split", parts=split_parts)`` and splits every counter.
    """

    options: dict[str, Any]
    strict: bool
    counters: bool  # incr is refused with read="all" (counters carry no version)
    near_ttl_s: float | None = None
    split_parts: int | None = None


_DEFAULTS = {"replicas": 2, "write_quorum": 1, "read": "first"}
_QUORUM = {"replicas": 2, "write_quorum": 2, "read": "first"}
# Short, so that a run of a few seconds sees many entries expire and be filled again.
NEAR_TTL_S = 0.3

#: The configurations of docs/cluster.md, "What is guaranteed, under which faults", and the
#: hot-key remedies of "Hot keys" on top of them.
CONFIGS: dict[str, Config] = {
    "defaults": Config(_DEFAULTS, False, True),
    "quorum": Config(_QUORUM, True, True),
    "read_all": Config({"replicas": 2, "write_quorum": 1, "read": "all"}, True, False),
    "near_defaults": Config(_DEFAULTS, False, True, near_ttl_s=NEAR_TTL_S),
    "near_quorum": Config(_QUORUM, True, True, near_ttl_s=NEAR_TTL_S),
    "split": Config(_DEFAULTS, False, True, split_parts=3),
}


#: The configurations whose clients have a near-cache (their runs report the reads it hid).
NEAR_CONFIGS = frozenset(name for name, config in CONFIGS.items() if config.near_ttl_s)


@dataclass(frozen=True, slots=True)
class Case:
    """A fault kind against a backend under a client configuration."""

    fault: str
    backend: str
    config: str

    def __post_init__(self) -> None:
        if self.fault not in FAULTS:
            raise ValueError(f"unknown fault kind {self.fault!r}; known: {', '.join(FAULTS)}")
        if self.backend not in BACKENDS[self.fault]:
            raise ValueError(f"fault {self.fault!r} does not apply to {self.backend!r}")
        if self.config not in CONFIGS:
            raise ValueError(f"unknown configuration {self.config!r}; known: {', '.join(CONFIGS)}")

    @property
    def label(self) -> str:
        return f"{self.fault}/{self.backend}/{self.config}"


@dataclass(frozen=True, slots=True)
class Settings:
    """The size and pace of a run (seconds, counts)."""

    processes: int = 3
    servers: int = 3
    keys: int = 24
    counters: int = 4
    load_s: float = 4.0
    warmup_s: float = 0.4
    tail_s: float = 1.2
    timeout_s: float = 0.25
    dead_timeout_s: float = 0.2
    timing: Timing = field(default_factory=Timing)


@dataclass
class RunResult:
    """What one run did and found."""

    seed: int
    case: Case
    faults: list[str]
    verdict: Verdict
    errors: dict[str, int]
    history: list[Op]

    @property
    def line(self) -> str:
        """The one-line summary ``make chaos`` prints per run."""
        v = self.verdict
        stale = _tally(anomaly.kind for anomaly in v.stale)
        text = (
            f"seed={self.seed} fault={self.case.label} ops={v.operations} reads={v.reads} "
            f"faults={len(self.faults)} violations={len(v.violations)}"
        )
        if v.violations:
            text += f" ({_tally(anomaly.category for anomaly in v.violations)})"
        text += f" stale={len(v.stale)}"
        if v.stale:
            text += (
                f" ({stale}; up to {v.stale_max_ms:.1f} ms after the ack,"
                f" within {v.stale_span_ms:.0f} ms)"
            )
        if self.case.config in NEAR_CONFIGS:
            text += f" near_hidden={len(v.near_hidden)}"
            if v.near_hidden:
                text += f" (up to {v.near_hidden_max_ms:.1f} ms after the ack)"
        return f"{text} counter_low={len(v.counter_low)} errors={sum(self.errors.values())}"

    def excerpts(self, anomalies: list[Anomaly] | None = None, limit: int = 3) -> list[str]:
        """The first `anomalies` (default: violations), each with its key's history before it."""
        chosen = self.verdict.violations if anomalies is None else anomalies
        return [excerpt(self.history, anomaly) for anomaly in chosen[:limit]]


def _tally(names: Iterable[str]) -> str:
    """``kind count, kind count`` in name order."""
    return ", ".join(f"{name} {count}" for name, count in sorted(Counter(names).items()))


def excerpt(history: list[Op], anomaly: Anomaly, before: int = 12) -> str:
    """`anomaly`, then the operations on its key up to the read (the last `before` of them)."""
    read = anomaly.read
    since = (anomaly.superseded_by or read).invoke_ns
    ops = sorted(
        (op for op in history if op.key == read.key and op.invoke_ns <= read.complete_ns),
        key=lambda op: op.invoke_ns,
    )
    shown = [op for op in ops if op.invoke_ns < since][-before:]
    shown += [op for op in ops if op.invoke_ns >= since][: 2 * before]
    lines = [anomaly.describe()] + [f"    {Anomaly('', op).describe()[2:]}" for op in shown]
    return "\n".join(lines)


def _seed_counters(urls: dict[str, str], options: dict[str, Any], names: list[str]) -> list[Op]:
    ops: list[Op] = []
    with ShardedClient(HashRing(list(urls)), urls, **options) as client:
        for key in names:
            start = now_ns()
            client.set(key, 0)
            ops.append(Op(-1, "set", key, 0, start, now_ns(), "ok"))
    return ops


def _start_workers(
    case: Case, seed: int, settings: Settings, urls: dict[str, str], workdir: Path
) -> list[subprocess.Popen[str]]:
    config = CONFIGS[case.config]
    options = {
        **config.options,
        "timeout_s": settings.timeout_s,
        "dead_timeout_s": settings.dead_timeout_s,
    }
    workers = []
    for process in range(settings.processes):
        worker = WorkerConfig(
            process,
            seed,
            urls,
            options,
            settings.keys,
            settings.counters if config.counters else 0,
            str(workdir / f"history-{process}.jsonl"),
            near_ttl_s=config.near_ttl_s,
            split_parts=config.split_parts,
        )
        path = workdir / f"worker-{process}.json"
        path.write_text(json.dumps(asdict(worker)))
        workers.append(
            subprocess.Popen(
                [sys.executable, "-m", "tests.chaos.worker", str(path)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=(workdir / f"worker-{process}.log").open("w"),
                text=True,
                env=child_environment(),
            )
        )
    for process, worker in enumerate(workers):
        assert worker.stdout is not None
        if worker.stdout.readline().strip() != "ready":
            _kill_leftovers(workers)
            log = (workdir / f"worker-{process}.log").read_text()[-3000:]
            raise RuntimeError(f"worker {process} did not start:\n{log}")
    return workers


def _kill_leftovers(workers: list[subprocess.Popen[str]]) -> None:
    """Kill the workers still running when a run fails half-way (they started, so they are ours)."""
    for worker in workers:
        if worker.poll() is None:
            worker.kill()
            worker.wait()


def _nemesis(the_cluster: Cluster, case: Case, rng: random.Random, until_ns: int) -> list[str]:
    faults: list[str] = []
    fault = FAULTS[case.fault]
    while now_ns() < until_ns:
        faults.append(fault(the_cluster, rng))
        time.sleep(rng.uniform(0.5, 1.5) * the_cluster.timing.gap_s)
    return faults


def _final_reads(the_cluster: Cluster, case: Case, settings: Settings) -> list[Op]:
    """Read every key once from a fresh client (another process in all but name).

    The client has the configuration's remedies: split counters are summed only by a client
    with ``remedy="split"`` (others read part 0); its near-cache, empty, answers no read.
    """
    urls = the_cluster.urls()
    config = CONFIGS[case.config]
    options = {
        **config.options,
        **remedies(config.near_ttl_s, config.split_parts),
        "timeout_s": 2.0,
    }
    ops: list[Op] = []
    with ShardedClient(HashRing(list(urls)), urls, **options) as client:
        if the_cluster.kind == "redis":
            client.refresh_view()
        for key in register_keys(settings.keys) + counter_keys(settings.counters):
            start = now_ns()
            try:
                value, outcome = client.get(key), "ok"
            except RingkitError:
                value, outcome = None, "fail"
            ops.append(Op(-1, "get", key, value, start, now_ns(), outcome, final=True))
    return ops


def _rebase(op: Op, start_ns: int) -> Op:
    """`op` with its times counted from the start of the run (readable in a report)."""
    marked = None if op.marked_down_ns is None else op.marked_down_ns - start_ns
    return replace(
        op,
        invoke_ns=op.invoke_ns - start_ns,
        complete_ns=op.complete_ns - start_ns,
        marked_down_ns=marked,
    )


def _collect(
    workers: list[subprocess.Popen[str]], workdir: Path, timeout_s: float
) -> tuple[list[Op], dict[str, int]]:
    """Wait for the workers; return their merged histories and error counts by type."""
    history: list[Op] = []
    errors: Counter[str] = Counter()
    for process, worker in enumerate(workers):
        out, _ = worker.communicate(timeout=timeout_s)
        if worker.returncode != 0:
            log = (workdir / f"worker-{process}.log").read_text()[-3000:]
            raise RuntimeError(f"worker {process} exited with {worker.returncode}:\n{log}")
        errors.update(json.loads(out.splitlines()[-1]))
        history += read_history(workdir / f"history-{process}.jsonl")
    return history, dict(errors)


def run_once(case: Case, seed: int, settings: Settings, workdir: Path) -> RunResult:
    """Run `case` once with `seed`; bounded by `settings.load_s` plus start-up and checking."""
    rng = random.Random(seed)
    config = CONFIGS[case.config]
    spare = case.fault in ("membership", "coordinator_resume", "coordinator_rollback")
    with cluster(
        case.backend,
        servers=settings.servers,
        spare=spare,
        replicas=config.options["replicas"],
        timing=settings.timing,
        log_dir=workdir,
        rng=rng,
    ) as the_cluster:
        urls = the_cluster.urls()
        counters = counter_keys(settings.counters) if config.counters else []
        history = _seed_counters(urls, config.options, counters)
        workers = _start_workers(case, seed, settings, urls, workdir)
        the_cluster.stack.callback(_kill_leftovers, workers)
        start_ns = now_ns()
        stop_ns = start_ns + int(settings.load_s * 1e9)
        for worker in workers:
            assert worker.stdin is not None
            worker.stdin.write(f"{stop_ns}\n")
            worker.stdin.flush()
        time.sleep(settings.warmup_s)
        faults = _nemesis(the_cluster, case, rng, stop_ns - int(settings.tail_s * 1e9))
        ops, errors = _collect(workers, workdir, settings.load_s + 60)
        history += ops + _final_reads(the_cluster, case, settings)
    windows = [
        replace(w, start_ns=w.start_ns - start_ns, end_ns=w.end_ns - start_ns)
        for w in the_cluster.windows
    ]
    history = [_rebase(op, start_ns) for op in history]
    verdict = check(
        history,
        strict=config.strict,
        windows=windows,
        near_ttl_ns=round((config.near_ttl_s or 0) * 1e9),
        split_counters=config.split_parts is not None,
    )
    return RunResult(seed, case, faults, verdict, errors, history)
