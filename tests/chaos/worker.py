"""One client process of a chaos run: random set / delete / incr / get, every operation recorded.

Run as ``python -m tests.chaos.worker CONFIG.json``. It builds its own ``ShardedClient`` (its
own connections, health, hints and view: another process in every sense), prints ``ready``,
waits for the stop time (on the shared clock of ``history.now_ns``) on stdin, runs operations
until then, re-admits the servers it marked down, and writes its history to the path the config
names. Values are unique per run (``p<process>-<n>``), which is what lets the checker tell which
write a read saw.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ringkit import HashRing
from ringkit.cluster import HotKeys, NearCache, ShardedClient
from ringkit.cluster.core.health import OpEvent
from ringkit.errors import RingkitError
from tests.chaos.history import Op, now_ns, write_history

__all__ = [
    "Observer",
    "WorkerConfig",
    "child_environment",
    "counter_keys",
    "main",
    "register_keys",
    "remedies",
]


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    """What one client process does: its servers, client options, key space and output."""

    process: int
    seed: int
    urls: dict[str, str]
    client: dict[str, Any]  # ShardedClient options: replicas, write_quorum, read, timeouts
    keys: int
    counters: int
    history_path: str
    near_ttl_s: float | None = None  # a near-cache of this ttl_s, caching every key read
    split_parts: int | None = None  # HotKeys(remedy="split", parts=...), every counter split
    view_check_s: float = 0.1
    pause_s: float = 0.002


def child_environment() -> dict[str, str]:
    """The environment of a child process (worker, coordinator): ringkit and tests importable."""
    root = Path(__file__).resolve().parents[2]
    path = [str(root / "src"), str(root), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path)}


def remedies(near_ttl_s: float | None, split_parts: int | None) -> dict[str, Any]:
    """The hot-key remedies of a configuration as ``ShardedClient`` options, fresh per client.

    The near-cache caches every key read (``hot_only=False``), so that every read can be
    answered from it; split counters use ``remedy="split"``, which every process that reads a
    split counter must use (docs/cluster.md, "Split counters").
    """
    options: dict[str, Any] = {}
    if near_ttl_s is not None:
        options["near_cache"] = NearCache(max_items=1024, ttl_s=near_ttl_s, hot_only=False)
    if split_parts is not None:
        options["hot_keys"] = HotKeys(remedy="split", parts=split_parts)
    return options


def register_keys(count: int) -> list[str]:
    """The keys written with set / delete (few, so that processes collide on them)."""
    return [f"k:{n}" for n in range(count)]


def counter_keys(count: int) -> list[str]:
    """The keys counted with incr, apart from the registers (they carry no version)."""
    return [f"c:{n}" for n in range(count)]


def _choose(rng: random.Random, config: WorkerConfig, n: int) -> tuple[str, str, object]:
    """Return (kind, key, value written) for operation `n`."""
    roll = rng.random()
    if config.counters and roll < 0.1:
        key = rng.choice(counter_keys(config.counters))
        return ("incr", key, None) if rng.random() < 0.7 else ("get", key, None)
    key = rng.choice(register_keys(config.keys))
    if roll < 0.4:
        return "set", key, f"p{config.process}-{n}"
    if roll < 0.5:
        return "delete", key, None
    return "get", key, None


def _run_one(client: ShardedClient, kind: str, key: str, value: object) -> object:
    if kind == "set":
        client.set(key, value)
        return value
    if kind == "delete":
        client.delete(key)
        return None
    if kind == "incr":
        return client.incr(key)
    return client.get(key)


class Observer:
    """A client hook: which server answered the current read, and when each one failed.

    A server that fails a call is marked down at once (docs/cluster.md, "Failures and
    timeouts"), so the last failure this process saw is when it last marked the server down.
    """

    def __init__(self) -> None:
        self.served_by: str | None = None
        self.marked_down_ns: dict[str, int] = {}

    def __call__(self, event: OpEvent) -> None:
        if event.outcome == "error":
            self.marked_down_ns[event.server] = now_ns()
        elif event.outcome == "hit":
            self.served_by = event.server


def run(config: WorkerConfig, stop_ns: int, errors: dict[str, int]) -> list[Op]:
    """Run operations until `stop_ns`; return them. `errors` counts the exceptions by type."""
    rng = random.Random(f"{config.seed}/{config.process}")
    observer = Observer()
    options = {**config.client, **remedies(config.near_ttl_s, config.split_parts)}
    client = ShardedClient(HashRing(list(config.urls)), config.urls, hooks=[observer], **options)
    if config.split_parts is not None:
        # Split by hand, at each counter's first incr by this process (App Engine's sharded
        # counters are split by design, not when found hot): from the start of the run, every
        # process switches every counter, racing the others to publish its marker.
        for key in counter_keys(config.counters):
            options["hot_keys"].split(key)
    client.view_check_s = config.view_check_s  # follow membership changes without a refusal
    ops: list[Op] = []
    n = 0
    while (start := now_ns()) < stop_ns:
        kind, key, value = _choose(rng, config, n)
        observer.served_by = None
        try:
            result: Any = _run_one(client, kind, key, value)
            outcome = "ok"
        except RingkitError as error:
            # A write that raised may have reached some replica (now, or when a hung server
            # resumes): unknown. A read that raised returned nothing: it had no effect.
            errors[type(error).__name__] = errors.get(type(error).__name__, 0) + 1
            result, outcome = value, "fail" if kind == "get" else "unknown"
        server = observer.served_by if kind == "get" and result is not None else None
        marked = None if server is None else observer.marked_down_ns.get(server)
        ops.append(
            Op(
                config.process,
                kind,
                key,
                result,
                start,
                now_ns(),
                outcome,
                server=server,
                marked_down_ns=marked,
            )
        )
        n += 1
        time.sleep(rng.random() * config.pause_s)
    _repair(client, config.client.get("dead_timeout_s", 1.0))
    client.close()
    return ops


#: How long a worker keeps re-admitting the servers it marked down once its operations stop.
REPAIR_S = 10.0


def _repair(client: ShardedClient, dead_timeout_s: float) -> None:
    """Re-admit every server this process marked down (its hints applied) before it leaves.

    The final reads are made by a fresh client, which never noticed any failure, after every
    fault healed and the servers were repaired: docs/cluster.md lets a process that never
    noticed a failure read a server's stale values until some process repairs it. A fault that
    ended just before the stop used to leave that repair to chance (the processes that marked
    the server down stopped before its dead timeout passed, and a paused server kept its old
    values for the final reads).
    """
    deadline = time.monotonic() + REPAIR_S
    while time.monotonic() < deadline:
        try:
            if not client.check_health():
                return
        except RingkitError:
            pass  # a server still unreachable: probed again after its dead timeout
        time.sleep(dead_timeout_s)


def main(argv: list[str]) -> int:
    config = WorkerConfig(**json.loads(Path(argv[0]).read_text()))
    print("ready", flush=True)
    stop_ns = int(sys.stdin.readline())
    errors: dict[str, int] = {}
    ops = run(config, stop_ns, errors)
    write_history(Path(config.history_path), ops)
    print(json.dumps(errors), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
