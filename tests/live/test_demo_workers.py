"""``ringkit demo workers``: tenants owned by exactly one live worker before and after a kill.

With ``memory://`` the workers are threads and the kill stops one's heartbeat; with no
``--store`` the command starts its own etcd and the workers are processes, one killed with
SIGKILL. Either way, before the kill every tenant is owned by exactly one of all the workers,
afterwards by exactly one survivor, the owners are those of the ring the library builds from
the members (``HashRing`` of their names: join hashes tokens as ``HashRing`` does), and only
the killed worker's tenants move.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ringkit.cli import main
from ringkit.commands import workers
from ringkit.ring import HashRing
from tests.servers import free_port, require_binary

pytestmark = pytest.mark.timeout(60)
_names = itertools.count()


def check_report(report: dict[str, Any], count: int, tenants: int) -> None:
    names = [f"worker-{i}" for i in range(1, count + 1)]
    expected = workers.tenant_names(tenants)
    assert report["workers"] == names
    victim = report["killed"]
    survivors = [name for name in names if name != victim]
    for owned, alive in ((report["owned_before"], names), (report["owned_after"], survivors)):
        assert sorted(owned) == alive
        every = [tenant for name in alive for tenant in owned[name]]
        assert sorted(every) == expected  # each tenant exactly once, by a live worker
        ring = HashRing(alive)
        assert all(ring.node_for(t) == name for name in alive for t in owned[name])
    moved = report["moved"]
    assert set(moved) == set(report["owned_before"][victim])  # only the victim's tenants
    assert all(old == victim and new in survivors for old, new in moved.values())
    assert report["epoch_after"] > report["epoch_before"]


def test_threads_on_memory(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"memory://demo-workers-{next(_names)}"
    argv = ["demo", "workers", "--store", url, "--workers", "3", "--tenants", "12", "--json"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    check_report(report, 3, 12)
    assert report["kill"] == "heartbeat stopped"
    assert report["converge_s"] > 1.0  # the lease TTL (2 s) is the wait, however loaded the machine


def test_the_table_names_the_moves(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"memory://demo-workers-{next(_names)}"
    assert main(["demo", "workers", "--store", url, "--workers", "2", "--tenants", "6"]) == 0
    out = capsys.readouterr().out
    assert "2 workers, worker-" in out and "killed (heartbeat stopped)" in out
    assert "tenants moved, all from worker-" in out and " → worker-" in out


@pytest.mark.server  # the command starts its own etcd, which no test helper shows
@pytest.mark.skipif(shutil.which("etcd") is None, reason="needs etcd (apt-get install etcd-server)")
def test_processes_on_a_throwaway_etcd(capsys: pytest.CaptureFixture[str]) -> None:
    # No wall-clock bound: the demo's own --timeout-s ends a run that cannot converge (and the
    # test's timeout a hung one); under a loaded CI machine a good run took 30 s.
    assert main(["demo", "workers", "--workers", "3", "--tenants", "12", "--json"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    check_report(report, 3, 12)
    assert report["kill"] == "SIGKILL"
    assert "starting a throwaway etcd" in captured.err
    # Every worker process and the temporary etcd are gone.
    port = captured.err.split("etcd://127.0.0.1:")[1].split("/")[0]
    leftovers = subprocess.run(["pgrep", "-f", f"127.0.0.1:{port}"], capture_output=True)
    assert leftovers.stdout == b""


def test_without_etcd_it_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert main(["demo", "workers", "--workers", "2"]) == 1
    err = capsys.readouterr().err
    assert "apt-get install etcd-server" in err and err.startswith("ringkit: error: ")


def test_a_bad_store_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "workers", "--store", "zk://h/x"]) == 1
    assert "'zk://h/x'" in capsys.readouterr().err


def test_one_worker_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["demo", "workers", "--workers", "1"])
    assert exit_.value.code == 2
    assert "must be >= 2 (one is killed), got 1" in capsys.readouterr().err


@pytest.mark.parametrize("store", [None, "etcd://127.0.0.1:2379/demo"], ids=["own-etcd", "etcd"])
def test_without_the_etcd_client_it_names_the_extra_before_starting_anything(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], store: str | None
) -> None:
    monkeypatch.setitem(sys.modules, "pyetcd", None)  # as if ringkit[etcd] were not installed

    def started(*args: object, **kwargs: object) -> None:
        raise AssertionError("nothing may be started without the etcd client")

    monkeypatch.setattr(workers, "local_etcd", started)
    monkeypatch.setattr(subprocess, "Popen", started)
    started_at = time.monotonic()
    argv = ["demo", "workers", "--workers", "2", "--timeout-s", "30"]
    assert main([*argv, *(["--store", store] if store else [])]) == 1
    assert time.monotonic() - started_at < 10  # at once, not after --timeout-s
    err = capsys.readouterr().err
    assert err.startswith("ringkit: error: ") and "pip install 'ringkit[etcd]'" in err


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (from /proc, as pgrep -P reads it)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            # The command name, in parentheses, may hold spaces: the fields follow the last ')'.
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                found.append(int(stat.parent.name))
    return found


def _alive(pid: int) -> bool:
    """True while `pid` runs (a zombie waiting to be reaped by its new parent is not running)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait_for(condition: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@pytest.mark.server  # the command starts its own etcd, which no test helper shows
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the kernel's parent-death signal")
def test_kill_9_of_the_demo_leaves_no_etcd_and_no_worker_running() -> None:
    require_binary("etcd", "etcd-server")
    count = 3
    demo = subprocess.Popen(
        [sys.executable, "-m", "ringkit", "demo", "workers", "--workers", str(count)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # etcd and every worker are running (each worker reaches its join within the wait)
        assert _wait_for(lambda: len(_children(demo.pid)) == count + 1, 45)
        children = _children(demo.pid)
        time.sleep(0.5)  # the workers are past their start
        demo.kill()
        demo.wait()
        assert _wait_for(lambda: not any(_alive(pid) for pid in children), 20), [
            Path(f"/proc/{pid}/cmdline").read_bytes() for pid in children if _alive(pid)
        ]
    finally:
        demo.kill()
        demo.wait()
        for pid in _children(demo.pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        workers._remove_stale_data(Path(tempfile.gettempdir()))  # the killed demo's etcd data


@pytest.mark.server
def test_300_workers_end_soon_after_the_timeout(capsys: pytest.CaptureFixture[str]) -> None:
    require_binary("etcd", "etcd-server")
    started = time.monotonic()
    assert main(["demo", "workers", "--workers", "300", "--timeout-s", "3"]) == 1
    # The deadline, then at most a few seconds for the started workers to revoke their leases:
    # not 300 processes started at once and stopped one after another (over 60 s).
    assert time.monotonic() - started < 3 + 20
    err = capsys.readouterr().err
    assert "of 300 workers joined within --timeout-s 3" in err or "must agree" in err
    port = err.split("etcd://127.0.0.1:")[1].split("/")[0]
    leftovers = ["pgrep", "-f", f"127.0.0.1:{port}"]
    assert _wait_for(lambda: subprocess.run(leftovers, capture_output=True).stdout == b"", 10)


@pytest.mark.server
def test_a_worker_that_cannot_start_ends_the_run_with_its_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Nothing listens on the port: each worker's join fails; the first failure ends the run
    # with the worker's own error instead of "no report from any worker" after --timeout-s.
    url = f"etcd://127.0.0.1:{free_port()}/demo"
    assert main(["demo", "workers", "--store", url, "--workers", "2", "--timeout-s", "50"]) == 1
    err = capsys.readouterr().err
    assert "exited with status 1: ringkit.errors.BackendError: etcd at 127.0.0.1:" in err


def test_the_data_of_a_killed_demos_etcd_is_deleted_by_the_next(tmp_path: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    for name in (f"ringkit-demo-etcd-{gone.pid}-x1", f"ringkit-demo-etcd-{os.getpid()}-x2"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "member").write_text("wal")
    (tmp_path / "ringkit-demo-etcd-notapid").mkdir()
    workers._remove_stale_data(tmp_path)
    left = sorted(path.name for path in tmp_path.iterdir())
    assert left == [f"ringkit-demo-etcd-{os.getpid()}-x2", "ringkit-demo-etcd-notapid"]
