"""The load-balancer lesson on the page: ``/api/balancers`` and its section, in Chromium.

The page's numbers must be the library's: the same users under ``ringkit.compat``'s HAProxy,
nginx, Envoy ring hash and Maglev layouts and ``hash % N``, as
:func:`ringkit.sim.balancers.compare_balancers` computes them.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from ringkit.sim.balancers import BALANCER_LAYOUTS, compare_balancers

pytest.importorskip("starlette", reason="needs the web extra")
pytest.importorskip("httpx", reason="needs the dev extra")
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from starlette.testclient import TestClient

from ringkit.web.app import create_app
from tests.web import test_page
from tests.web.test_page import Page

# The page tests' fixtures: one server and one Chromium for the module, a fresh page per test.
base_url, browser, page, shots = (
    test_page.base_url,
    test_page.browser,
    test_page.page,
    test_page.shots,
)
pytestmark = pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")

USERS = [f"user-{i}" for i in range(1, 2001)]


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(create_app()) as test_client:
        yield test_client


def test_the_api_answers_with_compare_balancers_numbers(client: TestClient) -> None:
    body = client.get("/api/balancers", params={"backends": "3", "users": "2000"}).json()
    expected = compare_balancers(["web-1", "web-2", "web-3"], "web-4", USERS)
    assert body["join"] == "web-4"
    assert body["rows"] == [result.to_dict() for result in expected]


@pytest.mark.parametrize(
    ("params", "param"),
    [({"backends": "0"}, "backends"), ({"users": "20001"}, "users"), ({"nodes": "3"}, "nodes")],
)
def test_bad_parameters_are_a_400_naming_them(
    client: TestClient, params: dict[str, str], param: str
) -> None:
    reply = client.get("/api/balancers", params=params)
    assert reply.status_code == 400
    assert reply.json()["error"]["param"] == param


def test_the_page_shows_each_layouts_moves_side_by_side(page: Page, shots: Path) -> None:
    page.wait_for_selector("body[data-balancers='web-5']")
    page.fill("#balancers-backends", "3")
    page.fill("#balancers-users", "2000")
    page.click("#balancers-button")
    page.wait_for_selector("body[data-balancers='web-4']")
    rows = page.query_selector_all("#balancers-rows tr")
    assert [row.get_attribute("data-layout") for row in rows] == list(BALANCER_LAYOUTS)
    expected = compare_balancers(["web-1", "web-2", "web-3"], "web-4", USERS)
    shown = [row.query_selector(".lb-moved").get_attribute("data-moved") for row in rows]
    assert shown == [str(result.moved) for result in expected]
    assert "hash % N" in (rows[-1].text_content() or "")
    page.query_selector("#balancers-table").screenshot(path=str(shots / "balancers.png"))
