"""Members in separate processes on a real etcd: agreement, crash, pause.

Each member is ``python -m tests.live.worker`` (tests/live/worker.py), reporting every epoch it
holds and whether it owns its keys, as JSON lines with wall-clock times.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from ringkit.ring import HashRing
from tests.live.worker import KEYS
from tests.servers import EtcdCluster

pytestmark = pytest.mark.timeout(90)

ROOT = Path(__file__).resolve().parents[2]
TTL_S = 2.0


class Worker:
    """One member process and the lines it printed."""

    def __init__(self, url: str, name: str) -> None:
        env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
        self.name = name
        # stderr goes to a file so that a worker that dies says why in the failure message.
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.live.worker", url, name, str(TTL_S)],
            stdout=subprocess.PIPE, stderr=self.stderr, env=env, cwd=ROOT,
        )  # fmt: skip
        self.lines: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            self.lines.append(json.loads(raw))

    def epochs(self) -> list[dict[str, Any]]:
        return [line for line in list(self.lines) if line["kind"] == "epoch"]

    def latest(self) -> dict[str, Any] | None:
        # The highest epoch, not the last line: the worker prints the snapshot it read after
        # joining from its main thread, and the dispatcher thread may print a later epoch first.
        return max(self.epochs(), key=lambda line: line["epoch"], default=None)

    def describe(self) -> str:
        """Its state for a failure message: exit status, latest epoch, the end of its stderr."""
        self.stderr.seek(0)
        tail = self.stderr.read()[-1500:].decode(errors="replace")
        return (
            f"{self.name}: exit {self.process.poll()}, {len(self.lines)} lines, "
            f"latest {self.latest()}, stderr: {tail or '(empty)'}"
        )

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.stderr.close()


@pytest.fixture
def workers(etcd: EtcdCluster, request: pytest.FixtureRequest) -> Iterator[list[Worker]]:
    url = etcd.url(f"procs-{request.node.name}")
    started = [Worker(url, f"w{i}") for i in range(5)]
    yield started
    for worker in started:
        worker.stop()


def wait_until(
    condition: Callable[[], bool], timeout_s: float, what: str, group: Sequence[Worker] = ()
) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() >= deadline:
            states = "\n".join(w.describe() for w in group)
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}\n{states}")
        time.sleep(0.02)


def agreed(group: list[Worker], ring: list[str]) -> bool:
    latest = [w.latest() for w in group]
    return all(line is not None and line["ring"] == ring for line in latest) and (
        len({(line["epoch"], line["digest"]) for line in latest if line is not None}) == 1
    )


def test_five_processes_agree_then_survive_a_kill_and_a_pause(workers: list[Worker]) -> None:
    names = [w.name for w in workers]
    wait_until(lambda: agreed(workers, names), 40, "five processes to agree on one epoch", workers)
    # The ring every process computed is HashRing of the members: same owners for 10,000 keys.
    expected = HashRing(names).node_for_many(KEYS)
    import hashlib

    assert workers[0].latest()["digest"] == hashlib.sha1("\n".join(expected).encode()).hexdigest()

    # SIGKILL one: the survivors converge on the ring without it, together. How fast (ttl_s plus
    # one watch delivery) is measured by benchmarks/bench_live.py and the chaos-live runs, not
    # here: a loaded CI machine stretches any wall-clock bound. Only epochs after the agreed one
    # count: a survivor that started before the victim joined also held a ring of the survivors
    # alone, at startup.
    agreed_epoch = workers[1].latest()["epoch"]
    victim, survivors = workers[0], workers[1:]
    victim.process.send_signal(signal.SIGKILL)
    wait_until(lambda: agreed(survivors, names[1:]), 60, "survivors to drop the killed", workers)
    # Every survivor reached the ring without the victim at the same first epoch: they all follow
    # one history of etcd, so no two hold different rings for one epoch.
    first_epochs = {
        next(
            line["epoch"]
            for line in w.epochs()
            if line["epoch"] > agreed_epoch and line["ring"] == names[1:]
        )
        for w in survivors
    }
    assert len(first_epochs) == 1, first_epochs

    # SIGSTOP one past its TTL, then SIGCONT: it learns it was dropped and rejoins, and never
    # claims its keys under the old lease after it wakes.
    paused = survivors[0]
    old_lease = next(line["lease"] for line in reversed(paused.lines) if line["kind"] == "owns")
    paused.process.send_signal(signal.SIGSTOP)
    others = survivors[1:]
    wait_until(lambda: agreed(others, names[2:]), 60, "others to drop the paused member", workers)
    resumed_at = time.time()
    paused.process.send_signal(signal.SIGCONT)
    wait_until(
        lambda: any(
            line["kind"] == "owns" and line["owns"] and line["dropped"] >= 1
            for line in list(paused.lines)
        ),
        60,
        "the paused member to rejoin",
        workers,
    )
    after = [line for line in paused.lines if line["kind"] == "owns" and line["t"] >= resumed_at]
    assert after and not any(line["owns"] and line["lease"] == old_lease for line in after)
    assert all(line["lease"] != old_lease for line in after if line["owns"])
    wait_until(lambda: agreed(survivors, names[1:]), 60, "everyone to see it back", workers)
