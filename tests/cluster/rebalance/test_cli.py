"""``ringkit rebalance``: a coordinator process killed with SIGKILL is resumed by another."""

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
from ringkit.cli import main
from ringkit.cluster import ShardedClient
from ringkit.cluster.views.view import ClusterView, write_view
from tests.servers import redis_server

KEYS = [f"seat:{i}" for i in range(2000)]
SRC = str(Path(__file__).resolve().parents[3] / "src")


def _checkpointed(url: str) -> int:
    host, port = url.removeprefix("redis://").removesuffix("/0").split(":")
    data = redis.Redis(host=host, port=int(port)).get(b"ringkit:checkpoint")
    return len(json.loads(data)["done"]) if data else 0


def test_sigkilled_coordinator_is_resumed_by_another_process(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with ExitStack() as stack:
        servers = [stack.enter_context(redis_server()) for _ in range(3)]
        urls = {f"s{i + 1}": f"redis://{s.address}/0" for i, s in enumerate(servers)}
        base = {name: urls[name] for name in ("s1", "s2")}
        client = ShardedClient(HashRing(list(base)), base)
        client.set_many({key: key for key in KEYS})
        listing = ",".join(f"{name}={url}" for name, url in base.items())
        command = [
            sys.executable, "-m", "ringkit", "rebalance", "--servers", listing,
            "--add", f"s3={urls['s3']}", "--keys-per-s", "500", "--batch", "20",
            "--no-progress",
        ]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": SRC}
        process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while _checkpointed(urls["s1"]) < 5 and time.monotonic() < deadline:
            time.sleep(0.02)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
        assert client.refresh_view().state == "moving"
        assert client.get_many(KEYS) == {key: key for key in KEYS}  # served mid-move
        status = main(["rebalance", "--servers", listing, "--resume", "--json"])
        report = json.loads(capsys.readouterr().out)
        assert status == 0 and report["outcome"] == "done"
        assert report["transfers_skipped"] >= 5
        fresh = ShardedClient(HashRing(list(urls)), urls)
        assert fresh.get_many(KEYS) == {key: key for key in KEYS}
        assert fresh.epoch == 3  # the first client's 1, moving 2, final 3: from the servers
        view_file = tmp_path / "view.json"
        assert main(["rebalance", "--servers", listing, "--status", "--json"]) == 0
        shown = json.loads(capsys.readouterr().out)
        assert (shown["epoch"], shown["state"]) == (3, "stable")
        view_file.write_text(json.dumps(shown))
        assert main(["rebalance", "--view", str(view_file), "--remove", "s9"]) == 1
        assert "'s9' is not in the ring" in capsys.readouterr().err


def test_usage_errors_name_the_bad_value(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["rebalance", "--servers", "a:1", "--status"])
    assert exit_info.value.code == 2
    assert "expected NAME=URL, got 'a:1'" in capsys.readouterr().err
    assert main(["rebalance", "--servers", "a=memory://cli-a", "--view", "v", "--status"]) == 1
    assert "give --servers or --view, not both" in capsys.readouterr().err
    assert main(["rebalance", "--servers", "a=http://x", "--status"]) == 1
    assert "got 'http://x'" in capsys.readouterr().err


def test_placement_options_are_refused_with_a_view(capsys: pytest.CaptureFixture[str]) -> None:
    # A view carries its own placement: --vnodes there would be silently ignored.
    assert main(["rebalance", "--view", "v.json", "--vnodes", "8", "--status"]) == 1
    assert "--vnodes applies with --servers" in capsys.readouterr().err


def _assert_status_shows_the_files_view(
    urls: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The servers hold the first client's view (epoch 1, 1 replica); the file, the view the
    # operator keeps for the clients of `--view-store file://` (epoch 4, 2 replicas). `--status`
    # through that store must show the file's: it showed the servers' instead.
    with ShardedClient(HashRing(list(urls)), urls) as client:
        client.set("seat:1", "1")  # the first client publishes epoch 1
    path = tmp_path / "view.json"
    write_view(ClusterView(4, HashRing(list(urls)), urls, replicas=2), path)
    store = f"file://{path}"
    assert main(["rebalance", "--view-store", store, "--status", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["epoch"], shown["replicas"]) == (4, 2)
    assert main(["rebalance", "--view-store", store, "--status"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"cluster view at epoch 4 (stable, from {store}): 2 servers, 2 replicas")
    # Without the store, the same servers answer with their own view.
    listing = ",".join(f"{name}={url}" for name, url in urls.items())
    assert main(["rebalance", "--servers", listing, "--status", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["epoch"] == 1


def test_status_through_a_file_store_shows_the_files_view_not_the_servers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    urls = {name: f"memory://status-file-store-{tmp_path.name}-{name}" for name in ("s1", "s2")}
    _assert_status_shows_the_files_view(urls, tmp_path, capsys)


def test_status_through_a_file_store_shows_the_files_view_on_redis_servers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with ExitStack() as stack:
        servers = [stack.enter_context(redis_server()) for _ in range(2)]
        urls = {f"s{i + 1}": f"redis://{s.address}/0" for i, s in enumerate(servers)}
        _assert_status_shows_the_files_view(urls, tmp_path, capsys)
