"""The JSON API answers what the library computes (errors and fuzzing: test_api_errors.py)."""

from __future__ import annotations

import itertools
import math
import warnings
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("starlette", reason="needs the web extra")
pytest.importorskip("httpx", reason="needs the dev extra")

with warnings.catch_warnings():
    # Starlette 1.x prefers the httpx2 fork for its TestClient; httpx still works.
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from starlette.testclient import TestClient

from ringkit import HashRing, Modulo, Node
from ringkit.movement import diff
from ringkit.sim import gatepass, run_scenario
from ringkit.strategies import registry
from ringkit.strategies.bounded import DEFAULT_BALANCE_FACTOR, BoundedLoad
from ringkit.web import api, params
from ringkit.web.app import create_app

pytestmark = pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")

SEED_KEYS = [f"booking-{i:04d}" for i in range(1, 301)]


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(create_app()) as test_client:
        yield test_client


def get(client: TestClient, path: str, **params: str) -> Any:
    response = client.get(path, params=params)
    assert response.status_code == 200, response.text
    return response.json()


def owners_by_name(report: dict[str, Any]) -> list[str]:
    names = [node["name"] for node in report["nodes"]]
    return [names[index] for index in report["keys"]["owners"]]


# -- answers equal the library's ---------------------------------------------------------------


def test_default_state_is_the_gatepass_lesson(client: TestClient) -> None:
    report = get(client, "/api/ring")
    assert [node["name"] for node in report["nodes"]] == ["A", "B", "C"]
    assert report["keys"]["names"] == SEED_KEYS
    assert (report["hasher"], report["vnodes"], report["strategy"]) == ("fnv1a_32_mix", 1, "ring")
    ring = HashRing(["A", "B", "C"], vnodes=1, hasher="fnv1a_32_mix")
    owners = ring.node_for_many(SEED_KEYS)
    assert owners_by_name(report) == owners
    counts = Counter(owners)
    assert {node["name"]: node["keys"] for node in report["nodes"]} == counts
    assert all(node["fair_keys"] == pytest.approx(100.0) for node in report["nodes"])
    busiest = max(counts, key=lambda name: counts[name])
    assert report["busiest"] == {
        "node": busiest,
        "load": counts[busiest],
        "ratio": pytest.approx(counts[busiest] / 100),
    }


def test_key_positions_are_the_ring_points(client: TestClient) -> None:
    report = get(client, "/api/ring", keys="50", prefix="user:", hasher="xxh3_64")
    ring = HashRing(["A", "B", "C"], vnodes=1, hasher="xxh3_64")
    keys = [f"user:{i:04d}" for i in range(1, 51)]
    assert report["keys"]["names"] == keys
    expected = [ring.point_for(key) / 2**64 for key in keys]
    assert report["keys"]["positions"] == pytest.approx(expected, abs=1e-6)


def test_tokens_are_the_rings(client: TestClient) -> None:
    report = get(client, "/api/ring", nodes="A:2,B,C:1:z", vnodes="8")
    ring = HashRing(
        [Node("A", weight=2.0), "B", Node("C", zone="z")], vnodes=8, hasher="fnv1a_32_mix"
    )
    names = [node["name"] for node in report["nodes"]]
    assert [names[i] for i in report["tokens"]["owners"]] == [
        ring.nodes[i].name for i in ring.token_owners.tolist()
    ]
    assert report["tokens"]["positions"] == pytest.approx(
        (ring.tokens.astype(float) / 2**64).tolist(), abs=1e-6
    )
    rows = {node["name"]: node for node in report["nodes"]}
    assert (rows["A"]["tokens"], rows["B"]["tokens"]) == (16, 8)
    assert rows["A"]["fair_share"] == pytest.approx(0.5)
    assert {name: row["share"] for name, row in rows.items()} == pytest.approx(ring.shares())
    assert rows["C"]["zone"] == "z"


@pytest.mark.parametrize(
    ("change", "apply", "apply_modulo"),
    [
        ({"add": "D"}, lambda p: p.add("D"), lambda p: p.add("D")),
        ({"remove": "B"}, lambda p: p.remove("B"), lambda p: p.remove("B")),
        # hash % N has no weights or zones: its baseline adds the name.
        (
            {"add": "E:2:z1"},
            lambda p: p.add(Node("E", weight=2.0, zone="z1")),
            lambda p: p.add("E"),
        ),
    ],
)
def test_change_moves_what_the_library_moves(
    client: TestClient, change: dict[str, str], apply: Any, apply_modulo: Any
) -> None:
    report = get(client, "/api/ring", vnodes="32", **change)
    ring = HashRing(["A", "B", "C"], vnodes=32, hasher="fnv1a_32_mix")
    modulo = Modulo(["A", "B", "C"], hasher="fnv1a_32_mix")
    before, after = ring.node_for_many(SEED_KEYS), apply(ring).node_for_many(SEED_KEYS)
    moved = [i for i in range(300) if before[i] != after[i]]
    m_before = modulo.node_for_many(SEED_KEYS)
    m_after = apply_modulo(modulo).node_for_many(SEED_KEYS)
    moved_modulo = [i for i in range(300) if m_before[i] != m_after[i]]
    result = report["change"]
    assert (result["moved"], result["moved_keys"]) == (len(moved), moved)
    assert result["moved_modulo"] == len(moved_modulo)
    assert result["moved_modulo_keys"] == moved_modulo
    assert result["moved_fraction"] == pytest.approx(len(moved) / 300)
    assert result["transfers"] == dict(Counter(f"{before[i]}→{after[i]}" for i in moved))
    assert owners_by_name(report) == after


@pytest.mark.parametrize("vnodes", [1, 8, 32, 128])
def test_the_lessons_sequence_matches_the_simulator(client: TestClient, vnodes: int) -> None:
    # The Gatepass lesson via ringkit.sim: A, B, C; add D; remove B. The page's API must agree
    # step by step.
    run = run_scenario(gatepass(vnodes=[vnodes])[0])
    nodes = "A,B,C"
    for step, change in zip(run.steps[1:], [{"add": "D"}, {"remove": "B"}], strict=True):
        report = get(client, "/api/ring", nodes=nodes, vnodes=str(vnodes), **change)
        counts = {node["name"]: node["keys"] for node in report["nodes"]}
        assert counts == step.keys_per_node
        assert report["change"]["moved_fraction"] == pytest.approx(step.moved["keys"])
        assert report["change"]["moved_modulo_fraction"] == pytest.approx(step.baseline_moved)
        nodes = ",".join(counts)


def test_change_reports_the_exact_keyspace_share_from_diff(client: TestClient) -> None:
    result = get(client, "/api/ring", vnodes="8", add="D")["change"]
    ring = HashRing(["A", "B", "C"], vnodes=8, hasher="fnv1a_32_mix")
    movement = diff(ring, ring.add("D"), keys=SEED_KEYS)
    assert result["basis"] == "points"
    # Minimal movement: the keyspace that moves is exactly the new node's share.
    assert result["moved_share"] == pytest.approx(ring.add("D").shares()["D"])
    assert result["optimum_share"] == pytest.approx(movement.optimum_fraction)
    assert result["moved"] == movement.keys_moved
    bounded = get(client, "/api/ring", strategy="bounded", add="D")["change"]
    assert (bounded["basis"], bounded["moved_share"]) == (None, None)


def test_add_moves_keys_only_to_the_new_node(client: TestClient) -> None:
    result = get(client, "/api/ring", vnodes="128", add="D")["change"]
    assert result["moved"] > 0
    assert all(path.endswith("→D") for path in result["transfers"])
    assert result["moved_modulo"] > result["moved"]


def test_remove_keeps_page_order_for_modulo(client: TestClient) -> None:
    report = get(client, "/api/ring", nodes="C,A,B", remove="A", strategy="modulo")
    assert [node["name"] for node in report["nodes"]] == ["C", "B"]
    assert owners_by_name(report) == Modulo(["C", "B"], hasher="fnv1a_32_mix").node_for_many(
        SEED_KEYS
    )
    assert report["tokens"] is None
    assert report["change"]["moved"] == report["change"]["moved_modulo"]


def test_reweight_moves_keys_on_the_ring_and_none_with_modulo(client: TestClient) -> None:
    report = get(client, "/api/ring", vnodes="8", reweight="B:3")
    ring = HashRing(["A", "B", "C"], vnodes=8, hasher="fnv1a_32_mix")
    before = ring.node_for_many(SEED_KEYS)
    after = ring.reweight("B", 3.0).node_for_many(SEED_KEYS)
    assert report["change"]["moved"] == sum(a != b for a, b in zip(before, after, strict=True))
    assert report["change"]["moved_modulo"] == 0
    assert [node["weight"] for node in report["nodes"]] == [1.0, 3.0, 1.0]


def test_zipf_popularity_sums_key_weights_per_node(client: TestClient) -> None:
    report = get(client, "/api/ring", zipf="1.2", vnodes="8")
    weights = 1 / np.arange(1, 301) ** 1.2
    requests = weights / weights.sum() * api.REQUESTS
    owners = owners_by_name(report)
    for node in report["nodes"]:
        mine = sum(r for r, owner in zip(requests, owners, strict=True) if owner == node["name"])
        assert node["requests"] == pytest.approx(mine)
        assert node["fair_requests"] == pytest.approx(api.REQUESTS / 3)
    popularity = report["popularity"]
    assert [key["index"] for key in popularity["hot_keys"]] == list(range(api.HOT_KEYS))
    assert popularity["hot_keys"][0]["requests"] == pytest.approx(requests[0])
    top = max(report["nodes"], key=lambda node: node["requests"])
    assert popularity["busiest"]["node"] == top["name"]
    assert popularity["busiest"]["ratio"] == pytest.approx(top["requests"] / (api.REQUESTS / 3))


def test_bounded_load_places_the_keys_as_load(client: TestClient) -> None:
    report = get(client, "/api/ring", strategy="bounded", vnodes="1", add="D")
    ring = HashRing(["A", "B", "C", "D"], vnodes=1, hasher="fnv1a_32_mix")
    bounded = BoundedLoad(ring, balance_factor=DEFAULT_BALANCE_FACTOR)
    owners = [bounded.acquire(key) for key in SEED_KEYS]
    assert owners_by_name(report) == owners
    cap = math.ceil(DEFAULT_BALANCE_FACTOR * 300 / 4)
    assert max(node["keys"] for node in report["nodes"]) <= cap
    names = [node["name"] for node in report["nodes"]]
    assert [names[i] for i in report["tokens"]["owners"]] == [
        ring.nodes[i].name for i in ring.token_owners.tolist()
    ]


def test_lookup_matches_the_ring(client: TestClient) -> None:
    found = get(client, "/api/lookup", key="booking-0042", vnodes="8", replicas="3")
    ring = HashRing(["A", "B", "C"], vnodes=8, hasher="fnv1a_32_mix")
    assert found["owner"] == ring.node_for("booking-0042")
    assert found["preference_list"] == ring.nodes_for("booking-0042", 3)
    point = ring.point_for("booking-0042")
    assert found["point"] == f"0x{point:016x}"
    first = ring.tokens[np.searchsorted(ring.tokens, point) % len(ring.tokens)]
    steps = found["walk"]["steps"]
    assert steps[0]["token"] == f"0x{int(first):016x}"
    assert steps[0]["node"] == found["owner"]
    ranked = sorted((step["rank"], step["node"]) for step in steps if step["rank"])
    assert [node for _, node in ranked] == found["preference_list"]
    assert found["walk"]["complete"]


def test_lookup_walk_marks_nodes_held_back_by_zones(client: TestClient) -> None:
    zones = {"A": "z1", "B": "z1", "C": "z2", "D": "z2"}
    nodes = ",".join(f"{name}:1:{zone}" for name, zone in zones.items())
    for i in range(1, 60):
        key = f"k{i}"
        found = get(client, "/api/lookup", key=key, nodes=nodes, vnodes="4", replicas="2")
        assert {zones[name] for name in found["preference_list"]} == {"z1", "z2"}
        firsts = [step for step in found["walk"]["steps"] if step["first"]]
        if any(step["held_back"] for step in firsts):
            held = next(step for step in firsts if step["held_back"])
            assert held["node"] not in found["preference_list"][: firsts.index(held) + 1]
            return
    pytest.fail("no key among 59 met a node held back by its zone")


def test_lookup_on_modulo_has_no_walk(client: TestClient) -> None:
    found = get(client, "/api/lookup", key="booking-0001", strategy="modulo", replicas="2")
    modulo = Modulo(["A", "B", "C"], hasher="fnv1a_32_mix")
    assert found["owner"] == modulo.node_for("booking-0001")
    assert found["preference_list"] == modulo.nodes_for("booking-0001", 2)
    assert found["walk"] is None


def test_meta_lists_the_registry_and_limits(client: TestClient) -> None:
    meta = get(client, "/api/meta")
    assert meta["strategies"] == list(registry.STRATEGY_NAMES)
    assert meta["defaults"]["hasher"] == "fnv1a_32_mix"
    assert meta["limits"]["nodes"] == 64 and meta["limits"]["keys"] == 20_000
    assert meta["limits"]["vnodes"] == 1024
    assert len(meta["palette"]) == 16


def _lab(colour: str) -> tuple[float, float, float]:
    """CIELAB (D65) of an sRGB hex colour."""
    rgb = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb)
    xyz = (
        (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047,
        0.2126 * r + 0.7152 * g + 0.0722 * b,
        (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883,
    )
    fx, fy, fz = (t ** (1 / 3) if t > 216 / 24389 else (24389 / 27 * t + 16) / 116 for t in xyz)
    return 116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)


def test_sixteen_colours_stay_distinguishable() -> None:
    # A CIELAB distance of about 2.3 is just noticeable; 20 is plainly a different colour.
    labs = [_lab(colour) for colour in api.PALETTE]
    assert len(set(api.PALETTE)) == 16
    closest = min(math.dist(a, b) for a, b in itertools.combinations(labs, 2))
    assert closest >= 20


def test_page_and_static_files_are_served(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert "/static/app.js" in page.text
    for name in ("app.js", "style.css"):
        assert client.get(f"/static/{name}").status_code == 200


def test_unknown_path_is_a_json_404(client: TestClient) -> None:
    response = client.get("/api/nothing")
    assert response.status_code == 404
    assert response.json()["error"]["message"] == "Not Found"


def test_docs_describe_every_parameter_and_endpoint() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "web.md").read_text()
    for name in sorted(params._RING_PARAMS | params._LOOKUP_PARAMS):
        described = (f"| `{name}` |", f"`{name}` (required)", f"`{name}` (default")
        assert any(form in text for form in described), name
    for path in ("/api/meta", "/api/ring", "/api/lookup"):
        assert f"GET {path}" in text


@pytest.mark.parametrize("replicas", ["1", "3"])
def test_lookup_renders_the_rings_trace(client: TestClient, replicas: str) -> None:
    nodes = "A:1:z1,B:1:z1,C:2:z2,D"
    params = {"key": "booking-0042", "nodes": nodes, "vnodes": "8", "replicas": replicas}
    found = get(client, "/api/lookup", **params)
    ring = HashRing(
        [Node("A", zone="z1"), Node("B", zone="z1"), Node("C", weight=2.0, zone="z2"), "D"],
        vnodes=8,
        hasher="fnv1a_32_mix",
    )
    trace = ring.trace("booking-0042", int(replicas))
    assert (found["hash"], found["point"]) == (trace.hash_hex, f"0x{trace.point:016x}")
    assert (found["owner"], found["preference_list"]) == (trace.owner, list(trace.preference_list))
    assert found["walk"]["wrapped"] == trace.wrapped
    assert [
        (s["token"], s["node"], s["first"], s["rank"], s["held_back"], s["wrapped"])
        for s in found["walk"]["steps"]
    ] == [
        (f"0x{s.token:016x}", s.node, s.first, s.rank, s.held_back, s.wrapped) for s in trace.steps
    ]


def test_lookup_on_bounded_load_walks_its_ring(client: TestClient) -> None:
    found = get(client, "/api/lookup", key="booking-0007", strategy="bounded", replicas="2")
    ring = HashRing(["A", "B", "C"], vnodes=1, hasher="fnv1a_32_mix")
    assert [step["node"] for step in found["walk"]["steps"]] == [
        step.node for step in ring.trace("booking-0007", 2).steps
    ]
