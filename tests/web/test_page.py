"""The simulator page in real headless Chromium: what it shows is what the library computes.

Runs the app with uvicorn on a free loopback port in a background thread and drives Debian's
``chromium`` with the ``playwright`` package (``playwright install`` cannot download browsers
here). Missing either: skipped locally, a failure under CI=true. Screenshots go to the folder in
``RINGKIT_SCREENSHOTS`` if set (docs/web.png is one of them), else to a temporary folder.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ringkit import HashRing, Modulo

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
]
SEED_KEYS = [f"booking-{i:04d}" for i in range(1, 301)]
HASHER = "fnv1a_32_mix"


def _require(ready: bool, reason: str) -> None:
    if not ready:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (required under CI=true)", pytrace=False)
        pytest.skip(reason, allow_module_level=True)


try:
    import uvicorn  # noqa: F401  # the web extra, checked here to skip or fail the module
    from playwright.sync_api import Page, sync_playwright

    from ringkit.web.app import create_app
    from tests.web.serving import serving
except ImportError as error:  # pragma: no cover - depends on the machine
    _require(False, f"needs playwright and the web extra: {error}")
_require(os.path.exists(CHROMIUM), f"needs Debian's chromium at {CHROMIUM}")


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with serving(create_app()) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = os.environ.get("RINGKIT_SCREENSHOTS")
    path = Path(folder) if folder else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def page(browser: Any, base_url: str) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    opened = context.new_page()
    opened.set_default_timeout(15_000)
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    opened.goto(base_url)
    opened.wait_for_selector("body[data-ready=true]")
    yield opened
    context.close()
    assert errors == [], f"JavaScript errors on the page: {errors}"


def settle(page: Page) -> None:
    """Wait until the page has drawn the answer to the last request, and check it was no error."""
    page.wait_for_function("document.body.dataset.busy === 'false'")
    assert page.is_hidden("#error"), page.text_content("#error")


def text(where: Any, selector: str) -> str:
    """Return the text of the first element matching `selector`, stripped."""
    found = where.query_selector(selector)
    assert found is not None, selector
    return str(found.text_content() or "").strip()


def bars(page: Page) -> dict[str, str]:
    """Return the number each bar shows, by node."""
    rows = page.query_selector_all(".bar-row")
    return {str(row.get_attribute("data-node")): text(row, ".bar-value") for row in rows}


def moved(old: Any, new: Any) -> int:
    before, after = old.node_for_many(SEED_KEYS), new.node_for_many(SEED_KEYS)
    return sum(a != b for a, b in zip(before, after, strict=True))


def test_the_lesson_scenario_shows_the_librarys_numbers(page: Page, shots: Path) -> None:
    ring = HashRing(["A", "B", "C"], vnodes=1, hasher=HASHER)
    modulo = Modulo(["A", "B", "C"], hasher=HASHER)
    counts = Counter(ring.node_for_many(SEED_KEYS))
    assert bars(page) == {name: str(count) for name, count in counts.items()}

    # Add node D: moved on the ring and with hash % N, as the library counts them.
    assert page.input_value("#add-name") == "D"
    page.click("#add-button")
    settle(page)
    assert text(page, "#last-change-note") == "of the keys moved: added D"
    assert text(page, "#moved-ring") == str(moved(ring, ring.add("D")))
    assert text(page, "#moved-modulo") == str(moved(modulo, modulo.add("D")))
    page.screenshot(path=str(shots / "web-add-d.png"))
    ring, modulo = ring.add("D"), modulo.add("D")

    # Remove B: only B's keys move on the ring; hash % N shifts the indices after it.
    page.click("button[aria-label='Remove node B']")
    settle(page)
    assert text(page, "#moved-ring") == str(moved(ring, ring.remove("B")))
    assert text(page, "#moved-modulo") == str(moved(modulo, modulo.remove("B")))
    assert [row.get_attribute("data-node") for row in page.query_selector_all(".bar-row")] == [
        "A", "C", "D",
    ]  # fmt: skip

    # Give A twice the weight: it gets a second vnode; hash % N ignores weights.
    ring, modulo = ring.remove("B"), modulo.remove("B")
    page.fill("input[aria-label='Weight of node A']", "2")
    page.press("input[aria-label='Weight of node A']", "Tab")
    settle(page)
    assert text(page, "#last-change-note") == "of the keys moved: weight 2 for A"
    assert text(page, "#moved-ring") == str(moved(ring, ring.reweight("A", 2.0)))
    assert text(page, "#moved-modulo") == "0"
    page.fill("input[aria-label='Weight of node A']", "1")
    page.press("input[aria-label='Weight of node A']", "Tab")
    settle(page)

    # 128 vnodes: the busiest node's ratio to its fair share, as the library's owners give it.
    page.check("input[name=vnodes][value='128']")
    settle(page)
    fine = HashRing(["A", "C", "D"], vnodes=128, hasher=HASHER)
    busiest = max(Counter(fine.node_for_many(SEED_KEYS)).values())
    assert text(page, "#busiest-ratio") == f"{busiest / 100:.2f}"
    assert text(page, "#last-change") == "no change yet"

    # Look up a key, typed and submitted from the keyboard.
    page.fill("#lookup-key", "booking-0042")
    page.fill("#lookup-replicas", "2")
    page.press("#lookup-key", "Enter")
    settle(page)
    assert text(page, "#lookup-owner") == fine.node_for("booking-0042")
    assert text(page, "#lookup-preference") == ", ".join(fine.nodes_for("booking-0042", 2))
    native = fine.hasher.function(b"booking-0042")
    assert f"hash = 0x{native:08x}" in text(page, "#lookup-line")
    assert page.query_selector_all("#lookup-walk li")
    page.screenshot(path=str(shots / "web-1280x800.png"))


def test_zipf_switch_shows_requests_and_hot_keys(page: Page) -> None:
    page.check("#zipf-on")
    settle(page)
    assert text(page, "#bars-title") == "Requests per node"
    assert len(page.query_selector_all("#ring .hot")) == 10
    assert text(page, "#ring .hot-label") == "#1"


def test_every_control_has_a_label_and_the_key_figures_fit_1280x800(page: Page) -> None:
    unlabelled = page.evaluate(
        """() => [...document.querySelectorAll('input, select, button')]
            .filter((el) => !(el.labels && el.labels.length) && !el.getAttribute('aria-label')
                            && !el.textContent.trim())
            .map((el) => el.outerHTML)"""
    )
    assert unlabelled == []
    for selector in ("#ring", "#bars", "#busiest-ratio", "#moved-ring", "#moved-modulo"):
        box = page.locator(selector).bounding_box()
        assert box is not None and box["y"] + box["height"] <= 800, selector
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280


def test_every_control_is_reachable_with_the_tab_key(page: Page) -> None:
    # Tab stops at one radio per group (the checked one); arrow keys move inside the group.
    count = page.evaluate(
        """() => {
            const controls = [...document.querySelectorAll('input, select, button, a[href]')]
              .filter((el) => !el.disabled && !(el.type === 'radio' && !el.checked));
            controls.forEach((el, i) => { el.dataset.tabCheck = String(i); });
            return controls.length;
        }"""
    )
    reached: set[str | None] = set()
    for _ in range(count + 5):
        page.keyboard.press("Tab")
        reached.add(page.evaluate("document.activeElement.dataset.tabCheck"))
    assert {str(i) for i in range(count)} <= reached


def test_phone_width_has_no_sideways_scrolling(page: Page, shots: Path) -> None:
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    box = page.locator("#ring").bounding_box()
    assert box is not None and box["width"] >= 300
    page.screenshot(path=str(shots / "web-phone.png"), full_page=True)


def test_strategies_without_vnodes_get_none_sent(page: Page) -> None:
    # The API refuses an option the strategy does not use: the page sends only the used ones.
    page.select_option("#strategy", "modulo")
    settle(page)
    assert page.is_disabled("input[name=vnodes][value='8']")
    modulo = Modulo(["A", "B", "C"], hasher=HASHER)
    assert bars(page) == {
        name: str(count) for name, count in Counter(modulo.node_for_many(SEED_KEYS)).items()
    }
    page.fill("#lookup-key", "booking-0042")
    page.press("#lookup-key", "Enter")
    settle(page)
    assert text(page, "#lookup-owner") == modulo.node_for("booking-0042")
    page.select_option("#strategy", "ranges")
    settle(page)
    assert page.is_disabled("#hasher")
    page.select_option("#strategy", "ring")
    settle(page)
    assert not page.is_disabled("input[name=vnodes][value='8']")


# -- layout and state faults, each checked where it showed ---------------------------------------


def test_keys_per_node_panel_has_no_scrollbar(page: Page) -> None:
    # The fair-share marks stuck out of the last bar row by a few pixels and the panel scrolled.
    for vnodes in ("1", "128"):
        page.check(f"input[name=vnodes][value='{vnodes}']")
        settle(page)
        sizes = page.evaluate(
            "(() => { const b = document.getElementById('bars');"
            " return [b.scrollHeight, b.clientHeight]; })()"
        )
        assert sizes[0] <= sizes[1], sizes


def test_error_banner_goes_once_the_input_is_valid(page: Page) -> None:
    # A refresh also looks the key up again: with replicas 0 that lookup fails. Fixing the
    # replicas field must clear the banner without another submit.
    page.fill("#lookup-replicas", "0")
    page.fill("#keys", "200")
    page.press("#keys", "Tab")
    page.wait_for_function("document.body.dataset.busy === 'false'")
    assert "replicas" in text(page, "#error")
    page.fill("#lookup-replicas", "2")
    page.press("#lookup-replicas", "Tab")
    settle(page)
    # A refused setting: the banner goes with the next valid value.
    page.fill("#keys", "0")
    page.press("#keys", "Tab")
    page.wait_for_function("document.body.dataset.busy === 'false'")
    assert page.is_visible("#error")
    page.fill("#keys", "300")
    page.press("#keys", "Tab")
    settle(page)
    # A bad value fixed before its answer came back: the late error answer is dropped.
    page.fill("#lookup-replicas", "0")
    page.press("#lookup-replicas", "Tab")
    page.fill("#lookup-replicas", "3")
    page.press("#lookup-replicas", "Tab")
    settle(page)


def test_last_change_card_shows_a_number_or_says_no_change_yet(page: Page) -> None:
    assert text(page, "#last-change") == "no change yet"
    page.click("#add-button")
    settle(page)
    ring = HashRing(["A", "B", "C"], vnodes=1, hasher=HASHER)
    share = moved(ring, ring.add("D")) / len(SEED_KEYS)
    assert text(page, "#last-change") == f"{100 * share:.1f}%"
    assert text(page, "#last-change-note") == "of the keys moved: added D"


def test_lesson_cards_show_values_at_load(page: Page) -> None:
    # Before any change the cards show what adding the suggested node would move.
    ring = HashRing(["A", "B", "C"], vnodes=1, hasher=HASHER)
    modulo = Modulo(["A", "B", "C"], hasher=HASHER)
    assert text(page, "#moved-ring") == str(moved(ring, ring.add("D")))
    assert text(page, "#moved-modulo") == str(moved(modulo, modulo.add("D")))
    assert "if D is added" in text(page, "#moved-ring-title")


def test_hot_key_labels_stay_clear_of_the_lookup_label(page: Page) -> None:
    page.check("#zipf-on")
    settle(page)
    for i in range(1, 11):
        page.fill("#lookup-key", f"booking-{i:04d}")
        page.press("#lookup-key", "Enter")
        settle(page)
        overlaps = page.evaluate(
            """() => {
                const box = (el) => el.getBoundingClientRect();
                const label = box(document.querySelector('#ring .lookup-label'));
                return [...document.querySelectorAll('#ring .hot-label')].map(box)
                  .filter((hot) => hot.left < label.right && label.left < hot.right
                                   && hot.top < label.bottom && label.top < hot.bottom).length;
            }"""
        )
        assert overlaps == 0, f"booking-{i:04d}"


# -- the hot-key remedy switch and the fail-zone action ------------------------------------------


def _remedy_rows(page: Page) -> dict[str, list[str]]:
    rows = page.query_selector_all("#remedy-rows tr")
    return {
        str(row.get_attribute("data-remedy")): [
            str(cell.text_content()).strip() for cell in row.query_selector_all("th, td")
        ]
        for row in rows
    }


def test_remedy_switch_shows_the_simulators_numbers(page: Page, shots: Path) -> None:
    from ringkit.nodes import Node
    from ringkit.sim import Population, Remedies, Scenario, compare_remedies
    from ringkit.strategies.registry import StrategyOptions

    assert page.is_hidden("#remedies-table")  # no Zipf requests: nothing to remedy
    page.check("input[name=vnodes][value='128']")
    page.check("#zipf-on")
    settle(page)
    page.fill("#remedy-parts", "3")
    page.press("#remedy-parts", "Tab")
    settle(page)
    scenario = Scenario(
        Population(count=300, zipf=1.0),
        tuple(Node(n) for n in "ABC"),
        options=StrategyOptions(vnodes=128, hasher=HASHER),
    )
    remedies = Remedies(spread=3, parts=3, writes=0.1)
    expected = {r.remedy: r for r in compare_remedies(scenario, remedies)}
    rows = _remedy_rows(page)
    assert list(rows) == ["none", "spread", "near_cache", "split"]
    for remedy, cells in rows.items():
        assert cells[1] == f"{expected[remedy].busiest_ratio:.2f}", remedy
        assert cells[2] == f"{expected[remedy].server_calls:.2f}", remedy
    assert rows["spread"][3:] == ["32 on nodes", "2", "0", "0 s"]
    assert rows["near_cache"][3:] == ["4,800 in clients", "0", "0", "1 s"]  # 16 × 300 keys
    assert rows["split"][3:] == ["32 on nodes", "0", "2", "0 s"]

    # The switch: the bars show the server calls under the chosen remedy, from the same answer.
    page.check("input[name=remedy][value='split']")
    settle(page)
    assert text(page, "#bars-title") == "Server calls per node with split keys"
    assert text(page, "#busiest-ratio") == f"{expected['split'].busiest_ratio:.2f}"
    calls = {
        name: str(round(load * 100_000)) for name, load in expected["split"].balance.loads.items()
    }
    assert bars(page) == calls
    assert page.get_attribute("#remedy-rows tr.chosen", "data-remedy") == "split"
    page.screenshot(path=str(shots / "web-remedies.png"), full_page=True)

    # A setting: all writes, and spreading now costs more calls than it saves.
    page.fill("#remedy-writes", "100")
    page.press("#remedy-writes", "Tab")
    settle(page)
    heavy = compare_remedies(scenario, Remedies(spread=3, parts=3, writes=1.0))
    assert _remedy_rows(page)["spread"][2] == f"{heavy[1].server_calls:.2f}"
    page.check("input[name=remedy][value='none']")
    settle(page)
    assert text(page, "#bars-title") == "Requests per node"


def test_a_bad_remedy_setting_is_named_and_cleared_once_fixed(page: Page) -> None:
    page.check("#zipf-on")
    settle(page)
    page.fill("#remedy-parts", "9")
    page.press("#remedy-parts", "Tab")
    page.wait_for_function("document.body.dataset.busy === 'false'")
    assert text(page, "#error") == "parts: parts must be in [1, 3], got '9'"
    page.fill("#remedy-parts", "2")
    page.press("#remedy-parts", "Tab")
    settle(page)


def test_fail_zone_shows_keys_lost_with_and_without_zone_awareness(page: Page, shots: Path) -> None:
    from ringkit.sim import Population
    from ringkit.sim.zones import fail_zone, spread_zones, zoned_nodes

    assert page.is_disabled("#failzone-button")  # the nodes have no zones yet
    names = ["A", "B", "C", "D", "E", "F"]
    for name in names[3:]:
        page.fill("#add-name", name)
        page.click("#add-button")
        settle(page)
    page.fill("#zone-count", "3")
    page.click("#zones-button")
    settle(page)
    zone_of = spread_zones(names, 3)
    assert page.input_value("input[aria-label='Zone of node D']") == zone_of["D"] == "z0"
    page.select_option("#failzone-zone", "z0")
    page.fill("#failzone-replicas", "3")
    page.click("#failzone-button")
    settle(page)
    assert text(page, "#failzone-line").startswith("Zone z0 failed: A, D.")
    keys = Population(count=300)
    shown = {
        str(row.get_attribute("data-placement")): [
            str(cell.text_content()).strip() for cell in row.query_selector_all("td")
        ]
        for row in page.query_selector_all("#failzone-rows tr")
    }
    for label, aware in (("zone-aware", True), ("zone-blind", False)):
        ring = HashRing(zoned_nodes(names, zone_of, zone_aware=aware), vnodes=1, hasher=HASHER)
        report = fail_zone(ring, zone_of, "z0", keys, replicas=3)
        assert shown[label][:2] == [str(report.keys_lost), str(report.keys_below_quorum)], label
    assert shown["zone-aware"][0] == "0"  # one replica in each zone: nothing is lost
    assert len(page.query_selector_all("#ring .failed-tick")) == 2  # A and D, 1 vnode each
    # Load on the survivors: each key fails over to its first live replica.
    survivors = ", ".join(f"{name} {round(keys_)}" for name, keys_ in report.loads["keys"].items())
    assert f"zone-blind: {survivors}." in text(page, "#failzone-survivors")
    page.screenshot(path=str(shots / "web-fail-zone.png"), full_page=True)

    # The failure is computed again for new settings: 8 vnodes, then every node in one zone.
    page.check("input[name=vnodes][value='8']")
    settle(page)
    ring = HashRing(zoned_nodes(names, zone_of, zone_aware=False), vnodes=8, hasher=HASHER)
    blind = fail_zone(ring, zone_of, "z0", keys, replicas=3)
    assert text(page, "#failzone-rows tr[data-placement=zone-blind] td") == str(blind.keys_lost)
    page.fill("#zone-count", "1")
    page.click("#zones-button")
    settle(page)
    assert text(page, "#failzone-rows tr[data-placement=zone-aware]") == (
        "zone-aware300300none left"
    )
    # The API bounds replicas by the nodes (6 here) and the page shows its refusal.
    page.fill("#failzone-replicas", "7")
    page.click("#failzone-button")
    page.wait_for_function("document.body.dataset.busy === 'false'")
    assert text(page, "#error") == "replicas: replicas must be in [1, 6], got '7'"
