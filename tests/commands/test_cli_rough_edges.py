"""What a user met on the command line, each fixed and pinned (every test failed before).

Names are the user's (node, zone, member and scenario names are printed as given, never read
as rich markup); ``ring watch`` takes ``--timeout-s inf`` and ``--json``; counts agree with
their nouns; a lease's time left is shown as the store reports it; ``simulate --list`` aligns
long names; ``plan`` pads its points; scenario ``[remedies]`` values have the page's bounds;
``demo cache`` names a missing client package before it starts a server.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

import ringkit.live
from ringkit import ConfigError, HashRing
from ringkit.cli import main
from ringkit.commands import ring as ring_command
from ringkit.live import Change, Subscription
from ringkit.sim import load_scenario
from ringkit.sim.remedies import Remedies
from ringkit.strategies.registry import STRATEGY_NAMES, build_placement

pytestmark = pytest.mark.timeout(60)
MARKUP = "[/]"  # rich's closing tag with nothing open: a MarkupError when read as markup
_names = itertools.count()


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def _memory_url() -> str:
    return f"memory://rough-edges-{next(_names)}"


def test_names_that_look_like_markup_are_printed_as_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = _run(
        capsys, "plan", "--nodes", f"{MARKUP},b,c", "--add", "[red]x", "--top", "3"
    )
    assert status == 0 and MARKUP in out and "[red]x" in out
    scenario = tmp_path / "markup.toml"
    scenario.write_text(
        f'name = "{MARKUP} [b]bold"\nnodes = ["{MARKUP}", ":cat:", "c"]\n'
        '[keys]\ncount = 100\n[strategy]\nname = "ring"\nvnodes = 8\n'
        '[[events]]\ntype = "add"\nnode = "[bold]d"\n'
    )
    status, out, _ = _run(capsys, "simulate", str(scenario))
    assert status == 0
    assert MARKUP in out and ":cat:" in out and "[bold]d" in out and "[b]bold" in out
    url = _memory_url()
    store = ringkit.live.connect(url)
    try:
        store.join(MARKUP, zone="[i]zone", ttl_s=5)
        status, out, _ = _run(capsys, "ring", "status", "--store", url)
    finally:
        store.close()
    assert status == 0 and MARKUP in out and "[i]zone" in out


def test_status_shows_a_lease_as_the_store_reports_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # etcd reports a lease's time to live in whole seconds; "7.0 s" claimed a precision it has not.
    url = _memory_url()
    store = ringkit.live.connect(url)
    try:
        store.join("w1", ttl_s=10)
        monkeypatch.setattr(ring_command, "_lease_left", lambda store, name: 7)
        status, out, _ = _run(capsys, "ring", "status", "--store", url)
    finally:
        store.close()
    line = next(line for line in out.splitlines() if " w1 " in line)
    assert status == 0 and " 7 s" in line and "7.0 s" not in line


def _watched(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Return an event set once `ring watch` has subscribed to its store."""
    subscribed = threading.Event()
    open_store = ring_command._open

    def opened(args: argparse.Namespace) -> ringkit.live.Store:
        store = open_store(args)
        subscribe = store.subscribe

        def subscribe_and_tell(callback: Callable[[Change], None]) -> Subscription:
            subscription = subscribe(callback)
            subscribed.set()
            return subscription

        store.subscribe = subscribe_and_tell
        return store

    monkeypatch.setattr(ring_command, "_open", opened)
    return subscribed


def _churn(url: str, watched: threading.Event) -> threading.Thread:
    def act() -> None:
        # A member that joined before the watch subscribed is no change to it: its first
        # change would be the member leaving (a fixed 0.3 s head start lost that race under
        # load). Wait for the subscription instead.
        assert watched.wait(120)
        writer = ringkit.live.connect(url)
        try:
            writer.join("w1", ttl_s=5)
        finally:
            writer.close()

    thread = threading.Thread(target=act, daemon=True)
    thread.start()
    return thread


def test_watch_takes_inf_as_never_and_says_1_member(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = _memory_url()
    anchor = ringkit.live.connect(url)  # keeps the memory:// ring alive between connections
    try:
        thread = _churn(url, _watched(monkeypatch))
        status, out, _ = _run(
            capsys, "ring", "watch", "--store", url, "--count", "1", "--timeout-s", "inf"
        )
        thread.join()
    finally:
        anchor.close()
    assert status == 0
    assert "ring 1 member;" in out and "1 members" not in out


def test_watch_json_prints_one_object_per_change(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = _memory_url()
    anchor = ringkit.live.connect(url)
    try:
        thread = _churn(url, _watched(monkeypatch))
        status, out, err = _run(
            capsys, "ring", "watch", "--store", url, "--count", "1", "--timeout-s", "20", "--json"
        )
        thread.join()
    finally:
        anchor.close()
    assert status == 0 and err.startswith("watching ")
    (line,) = out.splitlines()
    change = json.loads(line)
    assert change["joined"] == {"w1": "active"} and change["left"] == []
    assert change["ring_members"] == 1 and change["moved_fraction"] == 1.0


@pytest.mark.parametrize("value", ["nan", "0", "-1", "soon"])
def test_watch_refuses_a_timeout_that_is_no_duration(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["ring", "watch", "--store", "memory://x", "--timeout-s", value])
    assert stop.value.code == 2
    assert "--timeout-s" in capsys.readouterr().err


def test_simulate_list_aligns_every_summary(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _run(capsys, "simulate", "--list")
    lines = out.splitlines()
    starts = {len(line) - len(line.split("  ", 1)[1].lstrip()) for line in lines}
    assert status == 0 and len(lines) >= 5 and len(starts) == 1, lines


def test_plan_prints_points_as_fixed_width_hex(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _run(capsys, "plan", "--add", "D", "--top", "10")
    ranges = [line.split("│")[1].strip() for line in out.splitlines() if "│ (0x" in line]
    assert status == 0 and ranges
    for shown in ranges:
        start, end = shown.strip("(]").split(", ")
        assert len(start) == len(end) == 18, shown  # 0x and 16 digits


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("clients", 4097),
        ("near_cache_ttl_s", 86_401.0),
        ("requests_per_s", 1e12),
        ("near_cache_max_items", 100_001),
    ],
)
def test_remedies_have_the_pages_upper_bounds(field: str, value: float) -> None:
    with pytest.raises(ConfigError, match=f"remedies {field} must be"):
        Remedies(**{field: value})


def test_a_scenario_file_with_an_out_of_range_remedy_is_refused(tmp_path: Path) -> None:
    bundled = (
        Path(load_scenario.__code__.co_filename).parent / "scenarios" / "hot-key-remedies.toml"
    )
    text = bundled.read_text().replace("clients = 16 ", "clients = 1000000 ")
    scenario = tmp_path / "remedies.toml"
    scenario.write_text(text)
    with pytest.raises(ConfigError, match="remedies clients must be an integer >= 1, <= 4,096"):
        load_scenario(scenario)


@pytest.mark.parametrize("backend", ["redis", "memcached"])
def test_demo_cache_names_a_missing_client_before_starting_servers(
    backend: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ringkit.commands import demo

    module = {"redis": "redis", "memcached": "pymemcache"}[backend]
    monkeypatch.setitem(sys.modules, module, None)

    def no_servers(*args: object, **kwargs: object) -> None:
        raise AssertionError("a server was started")

    monkeypatch.setattr(demo, "local_servers", no_servers)
    status, _, err = _run(capsys, "demo", "cache", "--backend", backend)
    assert status == 1
    assert f"needs the {module} package" in err and f"ringkit[{backend}]" in err


@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
def test_every_placement_refuses_a_single_key_as_a_batch(strategy: str) -> None:
    placement = build_placement(strategy, ["a", "b", "c"])
    for method in (placement.node_for_many, placement.assign_many):
        with pytest.raises(TypeError, match=r"takes an iterable of keys, got the single str"):
            method("abc")


@pytest.mark.parametrize("keys", ["abc", b"abc", bytearray(b"abc")])
def test_a_batch_lookup_refuses_a_single_key(keys: str | bytes) -> None:
    ring = HashRing(["a", "b", "c"])
    with pytest.raises(TypeError, match="node_for_many takes an iterable of keys"):
        ring.node_for_many(keys)  # type: ignore[arg-type]
    assert ring.node_for_many([keys]) == [
        ring.node_for(bytes(keys) if not isinstance(keys, str) else keys)
    ]
