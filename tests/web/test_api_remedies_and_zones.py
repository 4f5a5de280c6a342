"""``/api/remedies`` and ``/api/fail_zone``: the library's numbers, 400s, the gate."""

from __future__ import annotations

import asyncio
import re
import threading
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ringkit import HashRing
from ringkit.nodes import Node
from ringkit.sim import Population, Remedies, Scenario, compare_remedies
from ringkit.sim.zones import fail_zone, spread_zones, zoned_nodes
from ringkit.strategies import registry
from tests.hypothesis_profiles import examples

pytest.importorskip("starlette", reason="needs the web extra")
httpx = pytest.importorskip("httpx", reason="needs the dev extra")

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from starlette.testclient import TestClient

from ringkit.web import app as app_module  # noqa: E402  (after the extra checks)
from ringkit.web.app import create_app  # noqa: E402
from ringkit.web.budget import ComputeGate  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")

HASHER = "fnv1a_32_mix"
TWELVE = [f"n{i:02d}" for i in range(12)]
ZONE_OF = spread_zones(TWELVE, 3)
ZONED = ",".join(f"{name}:1:{ZONE_OF[name]}" for name in TWELVE)


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(create_app(), raise_server_exceptions=False) as test_client:
        yield test_client


# -- /api/remedies -------------------------------------------------------------------------------


def test_remedies_are_the_simulators(client: TestClient) -> None:
    params = {
        "nodes": "A,B,C,D,E",
        "vnodes": "32",
        "keys": "2000",
        "zipf": "1.2",
        "spread": "2",
        "parts": "4",
        "top": "20",
        "near_cache_max_items": "100",
        "near_cache_ttl_s": "0.5",
        "clients": "8",
        "requests_per_s": "5000",
        "writes": "0.25",
    }
    answer = client.get("/api/remedies", params=params).json()
    remedies = Remedies(
        top=20,
        spread=2,
        parts=4,
        near_cache_max_items=100,
        near_cache_ttl_s=0.5,
        clients=8,
        requests_per_s=5000.0,
        writes=0.25,
    )
    assert answer["settings"] == {
        name: getattr(remedies, name) for name in Remedies.__dataclass_fields__
    }
    scenario = Scenario(
        Population(count=2000, zipf=1.2),
        tuple(Node(n) for n in "ABCDE"),
        options=registry.StrategyOptions(vnodes=32, hasher=HASHER),
    )
    expected = compare_remedies(scenario, remedies)
    assert [row["remedy"] for row in answer["rows"]] == ["none", "spread", "near_cache", "split"]
    for row, result in zip(answer["rows"], expected, strict=True):
        assert row["busiest"] == result.balance.busiest
        assert row["busiest_ratio"] == pytest.approx(result.busiest_ratio)
        assert row["server_calls"] == pytest.approx(result.server_calls)
        assert row["extra_items"] == result.extra_items
        assert row["worst_staleness_s"] == result.worst_staleness_s
        assert row["calls"] == pytest.approx(
            {name: load * answer["requests"] for name, load in result.balance.loads.items()}
        )
        assert sum(row["fair_calls"].values()) == pytest.approx(sum(row["calls"].values()))


def test_remedy_defaults_fit_the_nodes(client: TestClient) -> None:
    answer = client.get("/api/remedies", params={"zipf": "1"}).json()
    assert (answer["settings"]["spread"], answer["settings"]["parts"]) == (3, 3)
    answer = client.get("/api/remedies", params={"zipf": "1", "nodes": "A,B"}).json()
    assert (answer["settings"]["spread"], answer["settings"]["parts"]) == (2, 2)


BAD_REMEDIES = [
    ({}, "zipf", r"zipf is required: hot keys need Zipf popularity, got nothing"),
    ({"zipf": "5"}, "zipf", r"zipf must be a number in \[0, 4\], got '5'"),
    ({"zipf": "1", "spread": "4"}, "spread", r"spread must be in \[1, 3\], got '4'"),
    ({"zipf": "1", "parts": "0"}, "parts", r"parts must be in \[1, 3\], got '0'"),
    ({"zipf": "1", "top": "20001"}, "top", r"top must be in \[1, 20000\], got '20001'"),
    ({"zipf": "1", "top": "-1"}, "top", r"got '-1'"),
    ({"zipf": "1", "clients": "0"}, "clients", r"clients must be in \[1, 4096\], got '0'"),
    ({"zipf": "1", "writes": "1.5"}, "writes", r"writes must be a number in \[0, 1\], got '1.5'"),
    ({"zipf": "1", "writes": "nan"}, "writes", r"got 'nan'"),
    (
        {"zipf": "1", "near_cache_ttl_s": "0"},
        "near_cache_ttl_s",
        r"near_cache_ttl_s must be a number in \(0, 86400\], got '0'",
    ),
    (
        {"zipf": "1", "requests_per_s": "1e9"},
        "requests_per_s",
        r"requests_per_s must be a number in \[0, 999999\], got '1e9'",
    ),
    (
        {"zipf": "1", "near_cache_max_items": "x"},
        "near_cache_max_items",
        r"near_cache_max_items must be in \[1, 20000\], got 'x'",
    ),
    ({"zipf": "1", "remedy": "split"}, "remedy", r"unknown parameter 'remedy'; known: clients"),
    ({"zipf": "1", "vnodes": "0"}, "vnodes", r"vnodes must be in \[1, 1024\], got '0'"),
]


@pytest.mark.parametrize(("params", "param", "pattern"), BAD_REMEDIES)
def test_a_bad_remedies_parameter_is_a_400_naming_it(
    client: TestClient, params: dict[str, str], param: str, pattern: str
) -> None:
    response = client.get("/api/remedies", params=params)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == param
    assert re.search(pattern, error["message"]), error["message"]


# -- /api/fail_zone ------------------------------------------------------------------------------


@pytest.mark.parametrize("vnodes", [1, 4, 16, 160])
def test_fail_zone_counts_are_the_simulators_and_zone_aware_loses_nothing(
    client: TestClient, vnodes: int
) -> None:
    # The zone-failure proof on the page: 12 nodes, 3 zones, R = 3, at 1, 4, 16 and 160 vnodes.
    params = {"nodes": ZONED, "vnodes": str(vnodes), "keys": "5000", "zone": "z0", "replicas": "3"}
    answer = client.get("/api/fail_zone", params=params).json()
    keys = Population(count=5000)
    assert answer["failed"] == [name for name in TWELVE if ZONE_OF[name] == "z0"]
    assert (answer["replicas"], answer["quorum"], answer["keys"]) == (3, 2, 5000)
    for label, aware in (("zone_aware", True), ("zone_blind", False)):
        ring = HashRing(
            zoned_nodes(TWELVE, ZONE_OF, zone_aware=aware), vnodes=vnodes, hasher=HASHER
        )
        report = fail_zone(ring, ZONE_OF, "z0", keys, replicas=3)
        outcome = answer[label]
        assert (outcome["keys_lost"], outcome["keys_below_quorum"]) == (
            report.keys_lost,
            report.keys_below_quorum,
        )
        assert {row["name"]: row["keys"] for row in outcome["survivors"]} == report.loads["keys"]
        assert outcome["busiest"]["metric"] == "keys"
    assert answer["zone_aware"]["keys_lost"] == 0


def test_fail_zone_with_zipf_measures_survivors_by_requests(client: TestClient) -> None:
    params = {"nodes": ZONED, "vnodes": "16", "zipf": "1.1", "zone": "z2", "replicas": "2"}
    answer = client.get("/api/fail_zone", params=params).json()
    busiest = answer["zone_aware"]["busiest"]
    assert busiest["metric"] == "requests"
    survivors = answer["zone_aware"]["survivors"]
    assert sum(row["requests"] for row in survivors) == pytest.approx(100_000)
    assert busiest["load"] == max(row["requests"] for row in survivors)


def test_fail_zone_on_other_strategies(client: TestClient) -> None:
    for strategy in ("rendezvous", "jump", "maglev"):
        params = {"nodes": ZONED, "strategy": strategy, "zone": "z1", "replicas": "3"}
        response = client.get("/api/fail_zone", params=params)
        assert response.status_code == 200, response.text
        assert response.json()["failed"] == [n for n in TWELVE if ZONE_OF[n] == "z1"]


BAD_FAIL_ZONE = [
    ({"zone": "z0"}, "nodes", r"fail zone needs every node in a zone .* got none for 'A', 'B'"),
    ({"nodes": "A:1:z0,B"}, "nodes", r"got none for 'B'"),
    ({"nodes": ZONED}, "zone", r"zone is required \(one of z0, z1, z2\), got nothing"),
    ({"nodes": ZONED, "zone": "z9"}, "zone", r"zone must be one of z0, z1, z2, got 'z9'"),
    ({"nodes": ZONED, "zone": "z0", "replicas": "8"}, "replicas", r"\[1, 7\], got '8'"),
    ({"nodes": "A:1:a,B:1:b", "zone": "a", "replicas": "3"}, "replicas", r"\[1, 2\], got '3'"),
    ({"nodes": ZONED, "zone": "z0", "replicas": "0"}, "replicas", r"got '0'"),
    ({"nodes": ZONED, "zone": "z0", "keys": "0"}, "keys", r"keys must be in \[1, 20000\]"),
    ({"nodes": ZONED, "zone": "z0", "add": "X"}, "add", r"unknown parameter 'add'"),
]


@pytest.mark.parametrize(("params", "param", "pattern"), BAD_FAIL_ZONE)
def test_a_bad_fail_zone_parameter_is_a_400_naming_it(
    client: TestClient, params: dict[str, str], param: str, pattern: str
) -> None:
    response = client.get("/api/fail_zone", params=params)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == param
    assert re.search(pattern, error["message"]), error["message"]


_FUZZ_CLIENT = TestClient(create_app(), raise_server_exceptions=False)
_NUMBER = st.one_of(
    st.sampled_from(["0", "1", "2", "3", "0.5", "1e3", "-1", "", "x", "99999999", "nan"]),
    st.integers(0, 30).map(str),
)


@settings(max_examples=examples(60), deadline=None)
@given(
    params=st.dictionaries(
        st.sampled_from(
            [
                "nodes",
                "vnodes",
                "strategy",
                "keys",
                "zipf",
                "zone",
                "replicas",
                "top",
                "spread",
                "parts",
                "writes",
                "near_cache_ttl_s",
                "clients",
            ]
        ),
        _NUMBER,
        max_size=6,
    ),
    path=st.sampled_from(["/api/remedies", "/api/fail_zone"]),
    zoned=st.booleans(),
)
def test_fuzzed_queries_never_get_a_500(path: str, params: dict[str, str], zoned: bool) -> None:
    if zoned:
        params = {**params, "nodes": "A:1:z0,B:1:z1,C:2:z0", "zone": params.get("zone", "z0")}
    response = _FUZZ_CLIENT.get(path, params=params)
    assert response.status_code in (200, 400), (response.status_code, response.text)
    if response.status_code == 400:
        assert isinstance(response.json()["error"]["param"], str)


# -- the compute gate ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "name", "params"),
    [
        ("/api/remedies", "remedies_report", {"zipf": "1"}),
        ("/api/fail_zone", "fail_zone_report", {"nodes": ZONED, "zone": "z0"}),
    ],
)
def test_the_new_endpoints_go_through_the_compute_gate(
    monkeypatch: pytest.MonkeyPatch, path: str, name: str, params: dict[str, str]
) -> None:
    release, started = threading.Event(), threading.Semaphore(0)
    calls: list[object] = []

    def slow(query: object) -> dict[str, Any]:
        calls.append(query)
        started.release()
        release.wait(timeout=60)  # bounded: released below
        return {}

    monkeypatch.setattr(app_module, name, slow)
    gate = ComputeGate(workers=1, budget_s=1.0)
    app = create_app(gate=gate)

    async def scenario() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://ringkit") as client:
            answers = await asyncio.gather(*(client.get(path, params=params) for _ in range(3)))
            assert [a.status_code for a in answers] == [503, 503, 503]
            assert answers[0].headers["Retry-After"] == "1"
            assert len(calls) == 1  # one ran on the single worker; the queued two never started

    try:
        asyncio.run(scenario())
    finally:
        release.set()
        gate.close()
