"""The live view in real headless Chromium: the page shows a live ring and follows a join.

uvicorn serves ``create_app(LiveView(store))`` for an in-process ``memory://`` store on a free
loopback port; members join from the test's thread, and the page (long-polling
``/api/live``) must show the new epoch, member and shares as the library computes them,
without a reload. Needs Debian's chromium and playwright (see tests/web/test_page.py).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import ringkit.live
from ringkit.live import Store
from tests.web.test_page import CHROMIUM_ARGS, _require

try:
    import uvicorn  # noqa: F401  # the web extra, checked here to skip or fail the module
    from playwright.sync_api import Page, sync_playwright

    from ringkit.web.app import create_app
    from ringkit.web.live import LiveView
    from tests.web.serving import serving
except ImportError as error:  # pragma: no cover - depends on the machine
    _require(False, f"needs playwright and the web extra: {error}")
CHROMIUM = "/usr/bin/chromium"
_require(Path(CHROMIUM).exists(), f"needs Debian's chromium at {CHROMIUM}")
pytestmark = pytest.mark.timeout(90)
_names = itertools.count()


@pytest.fixture
def store() -> Iterator[Store]:
    opened = ringkit.live.connect(f"memory://live-page-{next(_names)}")
    yield opened
    opened.close()


@pytest.fixture
def base_url(store: Store) -> Iterator[str]:
    view = LiveView(store)
    with serving(create_app(view), timeout_graceful_shutdown=1) as url:
        try:
            yield url
        finally:
            view.close()  # wakes any waiting long poll before uvicorn shuts down


@pytest.fixture
def page(base_url: str) -> Iterator[Page]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        opened = browser.new_page(viewport={"width": 1280, "height": 800})
        opened.set_default_timeout(15_000)
        errors: list[str] = []
        opened.on("pageerror", lambda error: errors.append(str(error)))
        opened.goto(base_url)
        yield opened
        browser.close()
        assert errors == [], f"JavaScript errors on the page: {errors}"


def shown(page: Page) -> dict[str, dict[str, Any]]:
    rows = {}
    for row in page.query_selector_all("tr.live-member"):
        cells = [str(c.text_content()).strip() for c in row.query_selector_all("td")]
        rows[str(row.get_attribute("data-member"))] = {"state": cells[1], "share": cells[5]}
    return rows


def test_the_page_follows_the_live_ring(store: Store, page: Page, tmp_path: Path) -> None:
    store.join("w1", zone="eu-1a", ttl_s=10)
    store.join("w2", ttl_s=10, ready=False)
    page.wait_for_selector("body[data-ready=true]")
    epoch = store.snapshot().epoch
    page.wait_for_function(f"document.body.dataset.liveEpoch === '{epoch}'")
    assert page.is_hidden("main.layout") and page.is_visible("#live")
    assert page.text_content("#live-epoch") == str(epoch)
    assert shown(page) == {
        "w1": {"state": "active", "share": "100.0%"},
        "w2": {"state": "joining", "share": "0.0%"},
    }

    # A third member joins, from outside the page: it shows the new epoch without a reload.
    store.join("w3", ttl_s=10)
    snapshot = store.snapshot()
    page.wait_for_function(f"document.body.dataset.liveEpoch === '{snapshot.epoch}'")
    shares = snapshot.ring.shares()
    assert shown(page) == {
        "w1": {"state": "active", "share": f"{shares['w1'] * 100:.1f}%"},
        "w2": {"state": "joining", "share": "0.0%"},
        "w3": {"state": "active", "share": f"{shares['w3'] * 100:.1f}%"},
    }
    ticks = page.query_selector_all("#live-ring .tokens line")
    assert len(ticks) == len(snapshot.ring.tokens)  # every token of the ring is drawn
    assert "2 in the ring" in str(page.text_content("#live-ring"))
    page.screenshot(path=str(tmp_path / "web-live.png"))
    if os.environ.get("RINGKIT_SCREENSHOTS"):
        page.screenshot(path=str(Path(os.environ["RINGKIT_SCREENSHOTS"]) / "web-live.png"))
