"""The JSON API computes at most N requests at once and sheds the rest with 503 + Retry-After."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import BrokenExecutor
from pathlib import Path
from typing import Any

import pytest

from ringkit.cli import main
from ringkit.errors import ConfigError

pytest.importorskip("starlette", reason="needs the web extra")
httpx = pytest.importorskip("httpx", reason="needs the dev extra")

from starlette.exceptions import HTTPException  # noqa: E402  (after the extra checks)

from ringkit.web import api  # noqa: E402
from ringkit.web.app import create_app  # noqa: E402
from ringkit.web.budget import ComputeGate  # noqa: E402


class SlowReports:
    """A stand-in for ``api.ring_report`` that holds its thread until released."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.running = self.most = self.calls = 0

    def __call__(self, query: object) -> dict[str, Any]:
        with self.lock:
            self.running += 1
            self.calls += 1
            self.most = max(self.most, self.running)
        self.release.wait(timeout=60)  # bounded: the test releases it long before
        with self.lock:
            self.running -= 1
        return {"nodes": []}


async def _until(condition: Any, limit_s: float = 30.0) -> None:
    for _ in range(int(limit_s * 100)):  # each check yields to the event loop
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached")


def test_web_api_caps_computations_and_sheds_with_503_retry_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Regression: 40 maximal requests at once made /api/meta take 10.8 s and
    # memory grow from 77 to 409 MB: nothing capped the computations or bounded their wait.
    slow = SlowReports()
    monkeypatch.setattr(api, "ring_report", slow)
    gate = ComputeGate(workers=2, budget_s=1.0)
    app = create_app(gate=gate)

    async def scenario() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://ringkit") as client:
            heavy = [asyncio.create_task(client.get("/api/ring")) for _ in range(12)]
            await _until(lambda: slow.running == 2)
            meta = await client.get("/api/meta")  # answered while every worker is busy
            assert meta.status_code == 200 and slow.running == 2
            responses = await asyncio.gather(*heavy)
            for response in responses:
                assert response.status_code == 503
                assert response.headers["Retry-After"] == "1"
                assert "busy" in response.json()["error"]["message"]
            # Two computed at once, the ten queued behind them were dropped, never started.
            assert (slow.most, slow.calls) == (2, 2)
            slow.release.set()
            await _until(lambda: slow.running == 0)
            after = await client.get("/api/ring")  # the workers are free again
            assert after.status_code == 200 and slow.calls == 3

    try:
        asyncio.run(scenario())
    finally:
        slow.release.set()
        gate.close()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"workers": 0}, "workers must be an int >= 1, got 0"),
        ({"budget_s": float("inf")}, "budget_s must be a finite number > 0, got inf"),
        ({"budget_s": 0}, "budget_s must be a finite number > 0, got 0"),
    ],
)
def test_compute_gate_refuses_bad_sizes(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ComputeGate(**options)


@pytest.mark.parametrize(
    "argv",
    [["--budget-s", "0"], ["--budget-s", "nan"], ["--budget-s", "x"], ["--compute-workers", "0"]],
)
def test_serve_refuses_bad_gate_sizes(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["serve", *argv])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert argv[1] in err and "Traceback" not in err


def _compute_until_released(started: str, release: str) -> int:
    """Hold this worker's interpreter busy until file `release` exists; return the worker's pid.

    A busy loop in Python on purpose: it holds its process's GIL as a maximal ring computation
    does, which on a thread of the server's own process slows every request the loop answers.
    """
    Path(started, str(os.getpid())).touch()
    deadline = time.monotonic() + 120  # bounded: the test releases it long before
    while not os.path.exists(release) and time.monotonic() < deadline:
        pass
    return os.getpid()


def test_worker_processes_compute_while_the_loop_answers_meta_and_the_page(
    tmp_path: Path,
) -> None:
    # Regression: on the gate's threads, 40 maximal requests (Python code holding the GIL) left
    # the event loop a slice of the GIL between theirs, and /api/meta took up to 1.6-4.3 s.
    started, release = tmp_path / "started", tmp_path / "release"
    started.mkdir()
    gate = ComputeGate(workers=2, budget_s=300.0, processes=True)
    app = create_app(gate=gate)

    async def scenario() -> None:
        heavy = [
            asyncio.create_task(gate.run(_compute_until_released, str(started), str(release)))
            for _ in range(2)
        ]
        # Both computing at once (spawning a worker imports the library: generous bound).
        await _until(lambda: len(list(started.iterdir())) == 2, limit_s=240)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://ringkit") as client:
            meta, page = await client.get("/api/meta"), await client.get("/")
            assert (meta.status_code, page.status_code) == (200, 200)
            assert not any(task.done() for task in heavy)  # answered while both computed
            release.touch()
            pids = await asyncio.gather(*heavy)
            assert len(set(pids)) == 2 and os.getpid() not in pids  # two other processes
            # The API's own computations and refusals cross the process boundary intact.
            ring = await client.get("/api/ring", params={"add": "D"})
            assert [node["name"] for node in ring.json()["nodes"]] == ["A", "B", "C", "D"]
            refused = await client.get("/api/ring", params={"strategy": "jump", "remove": "A"})
            assert refused.status_code == 400
            assert refused.json()["error"]["param"] == "remove"
            assert "use Rendezvous for arbitrary removal" in refused.json()["error"]["message"]

    try:
        asyncio.run(scenario())
    finally:
        release.touch()
        gate.close()


def test_serve_computes_in_worker_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    gates: list[ComputeGate] = []
    monkeypatch.setattr("ringkit.commands.serve.check_port_free", lambda host, port: None)
    monkeypatch.setattr("uvicorn.run", lambda app, **options: gates.append(app.state.gate))
    assert main(["serve", "--port", "8123", "--compute-workers", "3"]) == 0
    [gate] = gates
    assert (gate.processes, gate.workers) == (True, 3)
    gate.close()


def _killed() -> None:
    """Die as a worker the OOM killer chose would."""
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_dead_worker_fails_its_request_only_and_closing_answers_503(tmp_path: Path) -> None:
    gate = ComputeGate(workers=1, budget_s=300.0, processes=True)

    async def scenario() -> None:
        with pytest.raises(BrokenExecutor):
            await gate.run(_killed)
        assert await gate.run(os.getpid) != os.getpid()  # a new pool for the next request
        started, release = tmp_path / "started", tmp_path / "release"
        started.mkdir()
        running = asyncio.create_task(gate.run(_compute_until_released, str(started), str(release)))
        await _until(lambda: any(started.iterdir()), limit_s=240)
        gate.close()  # a server shutting down waits for no computation
        with pytest.raises(HTTPException) as refused:
            await running
        assert refused.value.status_code == 503 and refused.value.detail == (
            "the server is shutting down"
        )

    try:
        asyncio.run(scenario())
    finally:
        gate.close()


_SERVER_WITH_A_WORKER = """
import os, sys, time
from ringkit.web.budget import ComputeGate
gate = ComputeGate(workers=1, processes=True)
print(gate._executor.submit(os.getpid).result(timeout=240), flush=True)
time.sleep(600)
"""


def _gone(pid: int) -> bool:
    """True when process `pid` has exited (a zombie nobody reaped yet counts as exited)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "\nState:\tZ" in status


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_worker_processes_exit_when_the_server_is_killed() -> None:
    # A server killed with SIGKILL shuts nothing down: its workers must notice on their own.
    src = str(Path(__file__).resolve().parents[2] / "src")
    server = subprocess.Popen(
        [sys.executable, "-c", _SERVER_WITH_A_WORKER],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,  # its resource tracker reports the killed pool's semaphores
        env={**os.environ, "PYTHONPATH": src},
    )
    try:
        assert server.stdout is not None
        worker = int(server.stdout.readline())
        assert worker != server.pid and not _gone(worker)
    finally:
        server.send_signal(signal.SIGKILL)
        server.wait(timeout=30)
    deadline = time.monotonic() + 60
    while not _gone(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(worker)
