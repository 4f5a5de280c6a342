"""``/api/live`` and ``ringkit serve --store``: the live ring as JSON, answered by long poll.

Against ``memory://`` and a real etcd. The answer equals the store's snapshot (members,
shares, tokens, epoch); a long poll with ``after_epoch`` returns as soon as a member joins
(well before its wait ends) with the new epoch; without a store, and for bad parameters, a
400 naming the parameter.
"""

from __future__ import annotations

import itertools
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="needs the web extra")
pytest.importorskip("httpx", reason="needs the dev extra")

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from starlette.testclient import TestClient

import ringkit.live
from ringkit.cli import main
from ringkit.live import Snapshot, Store
from ringkit.ring import HashRing
from ringkit.web.app import create_app
from ringkit.web.live import LiveView
from tests.servers import EtcdCluster, etcd_server

pytestmark = [
    pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`"),
    pytest.mark.timeout(60),
]
_names = itertools.count()


@pytest.fixture(scope="module")
def etcd() -> Iterator[EtcdCluster]:
    with etcd_server() as cluster:
        yield cluster


@pytest.fixture(params=["memory", "etcd"])
def store(request: pytest.FixtureRequest) -> Iterator[Store]:
    name = f"web-live-{next(_names)}"
    if request.param == "memory":
        url = f"memory://{name}"
    else:
        cluster: EtcdCluster = request.getfixturevalue("etcd")
        url = cluster.url(name)
    opened = ringkit.live.connect(url)
    yield opened
    opened.close()


@pytest.fixture
def client(store: Store) -> Iterator[TestClient]:
    with TestClient(create_app(LiveView(store))) as test_client:
        yield test_client


def check_equal(report: dict[str, Any], snapshot: Snapshot) -> None:
    assert report["epoch"] == snapshot.epoch
    ring = snapshot.ring
    assert isinstance(ring, HashRing)
    assert report["ring"]["nodes"] == [node.name for node in ring.nodes]
    assert report["ring"]["tokens"] == [f"{t:#018x}" for t in ring.tokens.tolist()]
    assert report["ring"]["owners"] == ring.token_owners.tolist()
    assert report["ring"]["positions"] == [round(t / 2**64, 6) for t in ring.tokens.tolist()]
    shares = ring.shares()
    assert [m["name"] for m in report["members"]] == list(snapshot.members)
    for row in report["members"]:
        info = snapshot.members[row["name"]]
        assert (row["state"], row["zone"], row["weight"], row["tokens"]) == (
            info.state,
            info.zone,
            info.weight,
            len(info.tokens),
        )
        assert row["share"] == shares.get(row["name"], 0.0)
        assert 0 < row["lease_remaining_s"] <= info.ttl_s


def test_live_answers_the_snapshot(store: Store, client: TestClient) -> None:
    store.join("w1", zone="eu-1a", ttl_s=5)
    store.join("w2", weight=2, ttl_s=5)
    reply = client.get("/api/live")
    assert reply.status_code == 200
    check_equal(reply.json(), store.snapshot())
    assert client.get("/api/meta").json()["live"] is True


def test_a_long_poll_returns_when_a_member_joins(store: Store, client: TestClient) -> None:
    store.join("w1", ttl_s=5)
    epoch = client.get("/api/live").json()["epoch"]
    threading.Timer(0.3, lambda: store.join("w2", ttl_s=5)).start()
    started = time.monotonic()
    reply = client.get("/api/live", params={"after_epoch": str(epoch), "wait_s": "20"})
    assert time.monotonic() - started < 10  # woken by the join, not by the end of its wait
    report = reply.json()
    assert report["epoch"] > epoch and report["ring"]["nodes"] == ["w1", "w2"]
    check_equal(report, store.snapshot())


def test_a_long_poll_without_a_change_ends_at_its_wait(store: Store, client: TestClient) -> None:
    epoch = store.snapshot().epoch
    started = time.monotonic()
    report = client.get("/api/live", params={"after_epoch": str(epoch), "wait_s": "0.3"}).json()
    assert 0.25 < time.monotonic() - started < 5
    assert report["epoch"] == epoch and report["members"] == []


@pytest.mark.parametrize(
    ("params", "param"),
    [
        ({"after_epoch": "-1"}, "after_epoch"),
        ({"after_epoch": "x"}, "after_epoch"),
        ({"wait_s": "31"}, "wait_s"),
        ({"epoch": "1"}, "epoch"),
    ],
)
def test_bad_parameters_are_400s_naming_them(
    client: TestClient, params: dict[str, str], param: str
) -> None:
    reply = client.get("/api/live", params=params)
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert error["param"] == param and error["value"] == next(iter(params.values()))
    assert param in error["message"]


def test_without_a_store_live_is_a_400_naming_the_store() -> None:
    with TestClient(create_app()) as plain:
        reply = plain.get("/api/live")
        assert reply.status_code == 400
        error = reply.json()["error"]
        assert error["param"] == "store" and "ringkit serve --store" in error["message"]
        assert plain.get("/api/meta").json()["live"] is False


def test_closing_the_view_wakes_a_waiting_poll(store: Store) -> None:
    view = LiveView(store)
    threading.Timer(0.2, view.close).start()
    started = time.monotonic()
    view.wait_after(store.snapshot().epoch, 20)
    assert time.monotonic() - started < 5


def test_serve_with_a_bad_store_exits_1_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--store", "memory://"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ringkit: error: store URL memory:// needs a NAME")


def test_serve_with_a_store_passes_it_to_the_app(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    uvicorn = pytest.importorskip("uvicorn")
    servers: list[Any] = []
    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets=None: servers.append(self))
    assert main(["serve", "--store", "memory://serve-live", "--port", "8123"]) == 0
    config = servers[0].config
    assert isinstance(config.app.state.live, LiveView) and config.port == 8123
    assert "live ring of memory://serve-live on http://127.0.0.1:8123/" in capsys.readouterr().out


def test_ctrl_c_answers_a_waiting_long_poll_and_stops(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "ringkit", "serve", "--store", "memory://x", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(root / "src")},
        text=True,
    )
    try:
        assert server.stdout is not None and "live ring of memory://x" in server.stdout.readline()
        base = f"http://127.0.0.1:{port}/api/live"
        deadline = time.monotonic() + 20
        while True:  # until uvicorn listens
            try:
                urllib.request.urlopen(base, timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        answers: list[int] = []

        def poll() -> None:
            with urllib.request.urlopen(f"{base}?after_epoch=0&wait_s=30", timeout=40) as reply:
                answers.append(reply.status)

        waiting = threading.Thread(target=poll)
        waiting.start()
        time.sleep(0.5)
        started = time.monotonic()
        server.send_signal(signal.SIGINT)
        _, err = server.communicate(timeout=15)
        waiting.join(timeout=5)
        assert time.monotonic() - started < 5
        assert server.returncode == 0 and answers == [200]
        assert "Traceback" not in err and "ERROR" not in err
    finally:
        server.kill()
