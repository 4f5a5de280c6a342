"""The page and /api/live under the loads a user met: each fixed and pinned (each failed before).

40 idle long polls took every thread of anyio's default pool and starved ``/`` and /api/live;
with the store unreachable, /api/live waited out a lease read per member; the page showed
whichever select option came first until its script ran, not the documented defaults.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import warnings
from typing import Any

import pytest

pytest.importorskip("starlette", reason="needs the web extra")
httpx = pytest.importorskip("httpx", reason="needs the dev extra")
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from starlette.testclient import TestClient

import ringkit.live  # noqa: E402
from ringkit.errors import BackendError  # noqa: E402
from ringkit.web.app import LIVE_WAITERS, create_app  # noqa: E402
from ringkit.web.live import LiveView  # noqa: E402
from ringkit.web.params import DEFAULTS  # noqa: E402

pytestmark = [
    pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`"),
    pytest.mark.timeout(90),
]
_names = itertools.count()
IDLE_POLLS = 40


def _selected(page: str, select: str) -> list[str]:
    body = re.search(rf'<select id="{select}">(.*?)</select>', page, re.S)
    assert body is not None, select
    return re.findall(r'<option value="([^"]+)" selected>', body.group(1))


def test_the_page_selects_the_documented_defaults_before_its_script_runs() -> None:
    page = TestClient(create_app()).get("/").text
    assert _selected(page, "hasher") == [DEFAULTS["hasher"]]
    assert _selected(page, "strategy") == [DEFAULTS["strategy"]]


def test_idle_long_polls_do_not_starve_the_page_or_a_live_read() -> None:
    store = ringkit.live.connect(f"memory://web-rough-{next(_names)}")
    store.join("w1", ttl_s=30)
    view = LiveView(store)
    app = create_app(view)
    epoch = store.snapshot().epoch

    async def scenario() -> tuple[list[int], int, int]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            polls = [
                asyncio.create_task(
                    client.get("/api/live", params={"after_epoch": epoch, "wait_s": 25})
                )
                for _ in range(IDLE_POLLS)
            ]
            # Until the waiters' pool is full: every long poll is waiting or was turned away.
            waiters = app.state.live_waiters
            while waiters.borrowed_tokens < LIVE_WAITERS:
                await asyncio.sleep(0.01)
            # The waits last 25 s; these must not queue behind them.
            page, live = await asyncio.wait_for(
                asyncio.gather(client.get("/"), client.get("/api/live")), timeout=15
            )
            view.close()  # wakes the long polls
            answers = await asyncio.gather(*polls)
        return [answer.status_code for answer in answers], page.status_code, live.status_code

    statuses, page, live = asyncio.run(scenario())
    assert page == 200 and live == 200
    assert statuses.count(200) == LIVE_WAITERS
    assert statuses.count(503) == IDLE_POLLS - LIVE_WAITERS


class _Unreachable:
    """A store whose lease reads fail as an unreachable etcd's do, counting them."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.lease_reads = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def lease_remaining_s(self, name: str) -> float:
        self.lease_reads += 1
        raise BackendError("etcd at 127.0.0.1:1 is unreachable (timed out after 6 s)")


def test_an_unreachable_store_costs_one_lease_read_not_one_per_member() -> None:
    store = ringkit.live.connect(f"memory://web-rough-{next(_names)}")
    for index in range(5):
        store.join(f"w{index}", ttl_s=30)
    unreachable = _Unreachable(store)
    view = LiveView(unreachable)  # type: ignore[arg-type]
    try:
        report = view.report(store.snapshot())
    finally:
        store.close()
    assert unreachable.lease_reads == 1
    assert [member["lease_remaining_s"] for member in report["members"]] == [None] * 5
