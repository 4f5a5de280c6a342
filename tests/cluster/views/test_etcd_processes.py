"""Guarantees across processes: writers, a coordinator and the view in etcd, one killed, one paused.

Three writer processes (tests/cluster/etcd_writer.py) share three redis-server processes and an
etcd view store; each logs every write the cluster acknowledged. A coordinator process
(``ringkit rebalance --view-store etcd://… --add``) adds a fourth server while they write. Once
the view in etcd is ``moving``, writer 0 is killed with SIGKILL and writer 1 is stopped with
SIGSTOP until the coordinator has finished (it then wakes with a stale view, its watch thread
stopped with it). Afterwards every acknowledged write must be readable with its last
acknowledged value; the killed writer's last write may have been in flight, so for it the next
value of a key is accepted too.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import pytest
import redis

from ringkit import HashRing
from ringkit.cluster import EtcdViewStore, ShardedClient
from ringkit.cluster.values.keys import EPOCH_KEY
from tests.cluster.etcd_writer import KEYS
from tests.servers import redis_server

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[3]
ENV = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}


def _acknowledged(log: Path) -> tuple[dict[str, int], list[str]]:
    """Return the last acknowledged value of each key in `log`, and its other lines."""
    last: dict[str, int] = {}
    other: list[str] = []
    for line in log.read_text().splitlines():
        key, _, value = line.partition(" ")
        if key.startswith("w") and value.isdigit():
            last[key] = int(value)
        else:
            other.append(line)
    return last, other


def _start(*args: str, stdout: int | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, *args], env=ENV, cwd=ROOT, stdout=stdout)


def _wait(predicate: object, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_acknowledged_writes_survive_a_rebalance_a_killed_and_a_paused_writer(
    tmp_path: Path, etcd_url: str
) -> None:
    with ExitStack() as stack:
        servers = [stack.enter_context(redis_server()) for _ in range(4)]
        urls = {f"s{i + 1}": f"redis://{s.address}/0" for i, s in enumerate(servers)}
        three = {name: urls[name] for name in ("s1", "s2", "s3")}
        stop = tmp_path / "stop"
        logs = [tmp_path / f"writer-{n}.log" for n in range(3)]
        writers = [
            _start(
                "-m",
                "tests.cluster.etcd_writer",
                etcd_url,
                json.dumps(three),
                str(n),
                str(logs[n]),
                str(stop),
            )
            for n in range(3)
        ]
        stack.callback(lambda: [w.kill() for w in writers])
        _wait(
            lambda: all(log.exists() and log.stat().st_size > 2000 for log in logs),
            30,
            "the writers to start",
        )
        listing = ",".join(f"{name}={url}" for name, url in three.items())
        coordinator = _start(
            "-m",
            "ringkit",
            "rebalance",
            "--servers",
            listing,
            "--view-store",
            etcd_url,
            "--replicas",  # no view anywhere yet: the clients' count is given
            "1",
            "--add",
            f"s4={urls['s4']}",
            "--keys-per-s",
            "150",
            "--batch",
            "5",
            "--no-progress",
            "--json",
            stdout=subprocess.PIPE,
        )
        stack.callback(coordinator.kill)
        store = EtcdViewStore(etcd_url)
        stack.callback(store.close)

        def moving() -> bool:
            view = store.load()
            return view is not None and view.state == "moving"

        _wait(moving, 30, "the moving view in etcd")
        time.sleep(0.2)  # the writers meet the moving view
        os.kill(writers[0].pid, signal.SIGKILL)
        os.kill(writers[1].pid, signal.SIGSTOP)
        output, _ = coordinator.communicate(timeout=60)
        report = json.loads(output)
        assert (report["outcome"], report["epoch"]) == ("done", 2)
        assert report["keys_streamed"] > 0
        os.kill(writers[1].pid, signal.SIGCONT)
        paused_at = logs[1].stat().st_size
        _wait(lambda: logs[1].stat().st_size > paused_at + 2000, 20, "the paused writer to go on")
        stop.touch()
        assert writers[0].wait(10) == -signal.SIGKILL
        assert [writers[n].wait(20) for n in (1, 2)] == [0, 0]
        final = store.load()
        assert final is not None and (final.epoch, final.state) == (2, "stable")
        for url in urls.values():
            assert redis.Redis.from_url(url).get(EPOCH_KEY) == b"2"
        checker = ShardedClient(HashRing(["s1"]), {"s1": urls["s1"]}, view_store=etcd_url)
        stack.callback(checker.close)
        assert checker.epoch == 2
        for number, log in enumerate(logs):
            last, other = _acknowledged(log)
            assert len(last) == KEYS, number
            if number > 0:
                assert other == ["epoch 2"], other  # the paused writer converged too
            found = checker.get_many(list(last))
            for key, value in last.items():
                accepted = {value, value + KEYS} if number == 0 else {value}
                assert found.get(key) in accepted, (number, key, value, found.get(key))
