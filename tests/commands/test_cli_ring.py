"""``ringkit ring status`` and ``ringkit ring watch`` against memory:// and a real etcd.

The status table and its JSON are checked against the store's own snapshot (shares from the
ring, leases from the store); watch is run with --count and --timeout-s while members join and
leave on another thread, and must print exactly those changes. Bad and unreachable stores exit
1 with a message naming them, never a traceback, within a bounded time.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import ringkit.live
from ringkit.cli import main
from ringkit.live import Store
from tests.commands.interrupting import INTERRUPTIBLE, interruptible_ringkit
from tests.servers import EtcdCluster, etcd_server, free_port

pytestmark = pytest.mark.timeout(60)
_names = itertools.count()


@pytest.fixture(scope="module")
def etcd() -> Iterator[EtcdCluster]:
    with etcd_server() as cluster:
        yield cluster


@pytest.fixture(params=["memory", "etcd"])
def url(request: pytest.FixtureRequest) -> str:
    name = f"cli-ring-{next(_names)}"
    if request.param == "memory":
        return f"memory://{name}"
    cluster: EtcdCluster = request.getfixturevalue("etcd")
    return cluster.url(name)


@pytest.fixture
def store(url: str) -> Iterator[Store]:
    opened = ringkit.live.connect(url)
    yield opened
    opened.close()


def later(delay_s: float, action: Callable[[], object]) -> threading.Thread:
    thread = threading.Thread(target=lambda: (time.sleep(delay_s), action()), daemon=True)
    thread.start()
    return thread


def test_status_json_is_the_snapshot(
    store: Store, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store.join("w1", zone="eu-1a", weight=2, ttl_s=5, data={"port": 7001})
    store.join("w2", zone="eu-1b", ttl_s=5)
    store.join("w3", ttl_s=5, ready=False)
    snapshot = store.snapshot()
    assert main(["ring", "status", "--store", url, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["epoch"] == snapshot.epoch
    assert 0 <= report["confirmed_age_s"] < 5  # the read at connect confirmed it
    assert report["ring"]["nodes"] == ["w1", "w2"]
    shares = snapshot.ring.shares()
    rows = {row["name"]: row for row in report["members"]}
    assert set(rows) == {"w1", "w2", "w3"}
    for name, info in snapshot.members.items():
        row = rows[name]
        assert (row["state"], row["zone"], row["weight"], row["data"]) == (
            info.state,
            info.zone,
            info.weight,
            info.data,
        )
        assert row["tokens"] == len(info.tokens) and row["ttl_s"] == info.ttl_s
        assert row["share"] == shares.get(name, 0.0)
        assert 0 < row["lease_remaining_s"] <= 5
    assert rows["w3"]["state"] == "joining" and rows["w3"]["share"] == 0.0
    assert rows["w1"]["share"] + rows["w2"]["share"] == pytest.approx(1.0)


def test_status_table_shows_each_member(
    store: Store, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store.join("cache-a", zone="eu-1a", ttl_s=5)
    store.join("cache-b", ttl_s=5)
    snapshot = store.snapshot()
    assert main(["ring", "status", "--store", url]) == 0
    out = capsys.readouterr().out
    assert f"live ring at epoch {snapshot.epoch}: 2 in the ring" in out
    assert re.search(r"confirmed current \d+\.\d s ago", out)
    for name, share in snapshot.ring.shares().items():
        line = next(line for line in out.splitlines() if f" {name} " in line)
        assert "active" in line and f"{share * 100:.1f}%" in line and "160" in line
    assert "eu-1a" in out


def test_status_of_an_empty_ring(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ring", "status", "--store", url]) == 0
    assert "no members" in capsys.readouterr().out


def test_watch_prints_a_join_and_a_leave(
    store: Store, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store.join("w1", ttl_s=5)
    store.join("w2", ttl_s=5)
    joined: list[ringkit.live.Member] = []

    def churn() -> None:
        joined.append(store.join("w3", ttl_s=5))
        joined[0].leave()

    later(0.5, churn)
    assert main(["ring", "watch", "--store", url, "--count", "3", "--timeout-s", "20"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("watching ")
    join, leaving, gone = lines[1:]
    assert "+w3 (active); ring 3 members" in join
    # w3 joins with 1/3 of the fair shares: the least any placement could move is 33.3%.
    assert "(least possible 33.3%)" in join
    assert "w3 active→leaving; ring 2 members" in leaving
    assert "-w3; ring 2 members; moved 0.0% of the keyspace (least possible 0.0%)" in gone


def test_watch_stops_at_its_timeout(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    started = time.monotonic()
    assert main(["ring", "watch", "--store", url, "--timeout-s", "0.5"]) == 0
    assert time.monotonic() - started < 5
    assert capsys.readouterr().out.startswith("watching ")


def test_watch_with_too_few_changes_is_an_error(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ring", "watch", "--store", url, "--count", "2", "--timeout-s", "0.3"]) == 1
    assert "got 0" in capsys.readouterr().err


def test_a_bad_store_url_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ring", "status", "--store", "redis://h:1/x"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ringkit: error: store URL scheme must be one of etcd, etcds, memory")
    assert "'redis://h:1/x'" in err and "Traceback" not in err


def test_a_password_is_never_shown(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ring", "status", "--store", "etcd://ops:s3cret@h:99999/x"]) == 1
    err = capsys.readouterr().err
    assert "port" in err and "s3cret" not in err


def test_an_unreachable_etcd_fails_in_bounded_time(capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()
    started = time.monotonic()
    assert main(["ring", "watch", "--store", f"etcd://127.0.0.1:{port}/x"]) == 1
    assert time.monotonic() - started < 15
    err = capsys.readouterr().err
    assert err.startswith("ringkit: error: cannot read the live ring")
    assert f"127.0.0.1:{port}" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "argv",
    [
        ["ring", "status"],
        ["ring", "watch", "--store", "memory://x", "--count", "0"],
        ["ring", "watch", "--store", "memory://x", "--timeout-s", "-1"],
        ["ring"],
    ],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2


@pytest.mark.timeout(120)
def test_ctrl_c_stops_watch_cleanly() -> None:
    root = Path(__file__).resolve().parents[2]
    process = subprocess.Popen(
        interruptible_ringkit("ring", "watch", "--store", "memory://ctrl-c"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(root / "src")},
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline().startswith("watching memory://ctrl-c from epoch 0")
    process.send_signal(signal.SIGINT)
    try:
        # Generous: on a loaded machine (tests in parallel) 10 s ran out before the exit.
        _, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 130
    assert err == "stopped\n"


# A SIGINT the kernel delivers to a thread other than the main one: Python runs the handler in
# the main thread, which must not be blocked without a timeout meanwhile.
SIGINT_TO_ANOTHER_THREAD = (
    INTERRUPTIBLE
    + """
import sys, threading, time
from ringkit.cli import main

class Watched:
    def __init__(self, out):
        self.out, self.started = out, threading.Event()
    def write(self, text):
        if text.startswith("watching"):
            self.started.set()
        return self.out.write(text)
    def flush(self):
        self.out.flush()

sys.stdout = Watched(sys.stdout)

def interrupt():
    sys.stdout.started.wait(60)
    time.sleep(0.3)  # the main thread waits for a change by now
    signal.pthread_kill(threading.get_ident(), signal.SIGINT)  # to this thread, not the main one

threading.Thread(target=interrupt, daemon=True).start()
sys.exit(main(["ring", "watch", "--store", "memory://ctrl-c-thread"]))
"""
)


@pytest.mark.timeout(120)
def test_ctrl_c_taken_by_another_thread_stops_watch() -> None:
    """A watch of a quiet ring hung for good when the SIGINT reached one of its other threads."""
    root = Path(__file__).resolve().parents[2]
    process = subprocess.Popen(
        [sys.executable, "-c", SIGINT_TO_ANOTHER_THREAD],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(root / "src")},
        text=True,
    )
    try:
        out, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 130, err
    assert err == "stopped\n"
    assert out.startswith("watching memory://ctrl-c-thread from epoch 0")


def test_status_table_fits_80_columns_without_cutting_member_names(
    store: Store, url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: the status table was wider than 80 columns and cut names short."""
    store.join("cache-eu-west-1a-0001", zone="eu-west-1a", ttl_s=5)
    store.join("cache-eu-west-1b-0002", zone="eu-west-1b", ttl_s=5)
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["ring", "status", "--store", url]) == 0
    out = capsys.readouterr().out
    assert [line for line in out.splitlines() if len(line) > 80] == []
    assert "cache-eu-west-1a-0001" in out and "cache-eu-west-1b-0002" in out
    assert "eu-west-1a" in out
    assert "…" not in out
