"""``ringkit demo workers``: tenants owned by exactly one live worker before and after a kill.

With ``memory://`` the workers are threads and the kill stops one's heartbeat; with no
``--store`` the command starts its own etcd and the workers are processes, one killed with
SIGKILL. Either way, before the kill every tenant is owned by exactly one of all the workers,
afterwards by exactly one survivor, the owners are those of the ring the library builds from
the members (``HashRing`` of their names: join hashes tokens as ``HashRing`` does), and only
the killed worker's tenants move.
"""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import time
from typing import Any

import pytest

from ringkit.cli import main
from ringkit.commands import workers
from ringkit.ring import HashRing

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
    assert 1.0 < report["converge_s"] < 10  # the lease TTL (2 s) is the wait


def test_the_table_names_the_moves(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"memory://demo-workers-{next(_names)}"
    assert main(["demo", "workers", "--store", url, "--workers", "2", "--tenants", "6"]) == 0
    out = capsys.readouterr().out
    assert "2 workers, worker-" in out and "killed (heartbeat stopped)" in out
    assert "tenants moved, all from worker-" in out and " → worker-" in out


@pytest.mark.server  # the command starts its own etcd, which no test helper shows
@pytest.mark.skipif(shutil.which("etcd") is None, reason="needs etcd (apt-get install etcd-server)")
def test_processes_on_a_throwaway_etcd(capsys: pytest.CaptureFixture[str]) -> None:
    started = time.monotonic()
    assert main(["demo", "workers", "--workers", "3", "--tenants", "12", "--json"]) == 0
    assert time.monotonic() - started < 30
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
