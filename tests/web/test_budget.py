"""The JSON API computes at most N requests at once and sheds the rest with 503 + Retry-After."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from ringkit.cli import main
from ringkit.errors import ConfigError

pytest.importorskip("starlette", reason="needs the web extra")
httpx = pytest.importorskip("httpx", reason="needs the dev extra")

from ringkit.web import api  # noqa: E402  (after the extra checks)
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


async def _until(condition: Any) -> None:
    for _ in range(3000):  # at most ~30 s; each check yields to the event loop
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
