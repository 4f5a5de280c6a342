"""The JSON API refuses every bad parameter with a 400 naming it, and no input gets a 500."""

from __future__ import annotations

import logging
import re
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("starlette", reason="needs the web extra")
pytest.importorskip("httpx", reason="needs the dev extra")

with warnings.catch_warnings():
    # Starlette 1.x prefers the httpx2 fork for its TestClient; httpx still works.
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from starlette.testclient import TestClient

from ringkit import Modulo
from ringkit.errors import UnsupportedError
from ringkit.strategies import registry
from ringkit.web import api
from ringkit.web.app import create_app

pytestmark = pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(create_app()) as test_client:
        yield test_client


# -- every bad parameter is a 400 that names it ------------------------------------------------

TOO_MANY = ",".join(f"n{i}" for i in range(65))
SIXTY_FOUR = ",".join(f"n{i}" for i in range(64))

BAD_RING = [
    ({"vnode": "8"}, "vnode", r"unknown parameter 'vnode'; known: add, hasher"),
    ({"nodes": ""}, "nodes", r"node name must be 1-32 .*got ''"),
    ({"nodes": "A,,B"}, "nodes", r"node name must be .*got ''"),
    ({"nodes": "A,A"}, "nodes", r"node 'A' is listed twice"),
    ({"nodes": TOO_MANY}, "nodes", r"at most 64, got 65"),
    ({"nodes": "A:1:z:x"}, "nodes", r"NAME\[:WEIGHT\[:ZONE\]\], got 'A:1:z:x'"),
    ({"nodes": "A b"}, "nodes", r"got 'A b'"),
    ({"nodes": "-A"}, "nodes", r"got '-A'"),
    ({"nodes": "A" * 33}, "nodes", r"node name must be 1-32"),
    ({"nodes": "A:0"}, "nodes", r"weight must be a number in \(0, 16\], got '0'"),
    ({"nodes": "A:17"}, "nodes", r"got '17'"),
    ({"nodes": "A:-1"}, "nodes", r"got '-1'"),
    ({"nodes": "A:nan"}, "nodes", r"got 'nan'"),
    ({"nodes": "A:inf"}, "nodes", r"got 'inf'"),
    ({"nodes": "A:1e3"}, "nodes", r"got '1e3'"),
    ({"nodes": "A:"}, "nodes", r"got ''"),
    ({"nodes": "A:1:"}, "nodes", r"zone of node 'A' must be .*got ''"),
    ({"nodes": "A:1:z z"}, "nodes", r"got 'z z'"),
    ({"vnodes": "0"}, "vnodes", r"vnodes must be in \[1, 1024\], got '0'"),
    ({"vnodes": "1025"}, "vnodes", r"got '1025'"),
    ({"vnodes": "-3"}, "vnodes", r"got '-3'"),
    ({"vnodes": "8.0"}, "vnodes", r"got '8.0'"),
    ({"vnodes": "١٢"}, "vnodes", r"got '١٢'"),
    ({"vnodes": "99999999999"}, "vnodes", r"got '99999999999'"),
    (
        {"nodes": SIXTY_FOUR.replace("n0", "n0:2"), "vnodes": "1024"},
        "vnodes",
        r"66560 tokens, more than 65536",
    ),
    ({"hasher": "xxh64"}, "hasher", r"unknown hasher 'xxh64'; known: fnv1a_32"),
    ({"strategy": "rings"}, "strategy", r"unknown strategy 'rings'; known: .*ring"),
    ({"keys": "0"}, "keys", r"keys must be in \[1, 20000\], got '0'"),
    ({"keys": "20001"}, "keys", r"got '20001'"),
    ({"keys": ""}, "keys", r"got ''"),
    ({"prefix": "p" * 33}, "prefix", r"at most 32 printable characters"),
    ({"prefix": "a\nb"}, "prefix", r"got 'a\\nb'"),
    ({"zipf": "5"}, "zipf", r"zipf must be a number in \[0, 4\], got '5'"),
    ({"zipf": "x"}, "zipf", r"got 'x'"),
    ({"zipf": ""}, "zipf", r"got ''"),
    ({"add": "A"}, "add", r"node 'A' is already in the nodes"),
    ({"add": "D:0"}, "add", r"weight must be .*got '0'"),
    ({"add": "D!"}, "add", r"got 'D!'"),
    ({"nodes": SIXTY_FOUR, "add": "x"}, "add", r"at most 64, got 65"),
    (
        {"nodes": ",".join(f"n{i}" for i in range(63)), "vnodes": "1024", "add": "x:2"},
        "add",
        r"66560 tokens",
    ),
    ({"remove": "Z"}, "remove", r"node 'Z' is not in the nodes \('A', 'B', 'C'\)"),
    ({"nodes": "A", "remove": "A"}, "remove", r"cannot remove 'A', the last node"),
    ({"reweight": "Z:2"}, "reweight", r"node 'Z' is not in the nodes"),
    ({"reweight": "B"}, "reweight", r"weight must be .*got ''"),
    ({"reweight": "B:0"}, "reweight", r"got '0'"),
    ({"nodes": SIXTY_FOUR, "vnodes": "1024", "reweight": "n3:2"}, "reweight", r"66560 tokens"),
    ({"add": "D", "remove": "B"}, "remove", r"at most one change .*got add and remove"),
    ({"remove": "B", "reweight": "A:2"}, "reweight", r"got remove and reweight"),
    ({"nodes": "A" + ",A" * 5000}, "nodes", r"at most 8192 characters, got 10001"),
]

BAD_LOOKUP = [
    ({}, "key", r"key is required, got nothing"),
    ({"key": ""}, "key", r"key must be 1 to 256 characters, got 0"),
    ({"key": "k" * 257}, "key", r"got 257"),
    ({"key": "k", "replicas": "0"}, "replicas", r"replicas must be in \[1, 64\], got '0'"),
    ({"key": "k", "replicas": "65"}, "replicas", r"got '65'"),
    ({"key": "k", "keys": "10"}, "keys", r"unknown parameter 'keys'; known: hasher, key"),
    ({"key": "k", "vnodes": "0"}, "vnodes", r"got '0'"),
    ({"key": "k", "nodes": "A,A"}, "nodes", r"listed twice"),
    ({"key": "k", "hasher": "crc32"}, "hasher", r"unknown hasher 'crc32'"),
    ({"key": "k", "strategy": "x"}, "strategy", r"unknown strategy 'x'"),
]


def check_400(response: Any, param: str, pattern: str) -> None:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param
    assert set(error) == {"param", "message", "value"}
    assert re.search(pattern, error["message"]), error


@pytest.mark.parametrize(("params", "param", "pattern"), BAD_RING)
def test_bad_ring_parameter_is_400(
    client: TestClient, params: dict[str, str], param: str, pattern: str
) -> None:
    response = client.get("/api/ring", params=params)
    check_400(response, param, pattern)
    value = response.json()["error"]["value"]
    if param in params and len(params[param]) <= 64:  # the value, or the offending node in it
        assert value is not None and value in params[param]


@pytest.mark.parametrize(("params", "param", "pattern"), BAD_LOOKUP)
def test_bad_lookup_parameter_is_400(
    client: TestClient, params: dict[str, str], param: str, pattern: str
) -> None:
    check_400(client.get("/api/lookup", params=params), param, pattern)


def test_repeated_parameter_is_400(client: TestClient) -> None:
    response = client.get("/api/ring?vnodes=8&vnodes=16")
    check_400(response, "vnodes", r"vnodes is given twice, got '8' and '16'")


class _NoRemove(Modulo):
    def remove(self, name: str) -> Modulo:
        raise UnsupportedError(f"this placement cannot remove {name!r}; use ring")


class _NoPlacement(Modulo):
    def node_for_many(self, keys: Any) -> list[str]:
        raise UnsupportedError("this placement places nothing")


def test_library_refusals_are_400(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    extra = {"noremove": _NoRemove, "noplace": _NoPlacement}
    build = registry.build_placement

    def build_with_extra(strategy: str, nodes: Any, options: Any = None) -> Any:
        if strategy in extra:
            return extra[strategy](nodes)
        return build(strategy, nodes, options)

    monkeypatch.setattr(registry, "build_placement", build_with_extra)
    monkeypatch.setattr(registry, "STRATEGY_NAMES", (*registry.STRATEGY_NAMES, *extra))
    response = client.get("/api/ring", params={"strategy": "noremove", "remove": "B"})
    check_400(response, "remove", r"this placement cannot remove 'B'; use ring")
    response = client.get("/api/ring", params={"strategy": "noplace"})
    check_400(response, "strategy", r"this placement places nothing")


def test_unexpected_failure_is_a_generic_500_and_a_log_entry(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(query: object) -> dict[str, Any]:
        raise RuntimeError("secret internals")

    monkeypatch.setattr(api, "ring_report", broken)
    client = TestClient(create_app(), raise_server_exceptions=False)
    with caplog.at_level(logging.ERROR, logger="ringkit.web"):
        response = client.get("/api/ring")
    assert response.status_code == 500
    assert response.json() == {
        "error": {"param": None, "message": "internal error; see the server log", "value": None}
    }
    assert "secret" not in response.text
    assert any(
        record.exc_info and "secret internals" in str(record.exc_info[1])
        for record in caplog.records
    )


# -- fuzz: no input gets a 500 -----------------------------------------------------------------

_NAMES = st.sampled_from(["A", "B", "C", "D", "n-1", "x.y", "", "A b", "é", "Z" * 33, ":"])
_NUMBERS = st.sampled_from(
    [
        "0",
        "1",
        "2",
        "8",
        "16",
        "17",
        "128",
        "1024",
        "1025",
        "20000",
        "20001",
        "-1",
        "1.5",
        "0.0001",
        "1e9",
        "nan",
        "inf",
        "",
        " 1",
        "0x10",
        "٣",
        "99999999999999",
    ]
)
_NODE = st.one_of(
    _NAMES,
    st.builds(lambda n, w: f"{n}:{w}", _NAMES, _NUMBERS),
    st.builds(lambda n, w, z: f"{n}:{w}:{z}", _NAMES, _NUMBERS, _NAMES),
    st.text(max_size=12),
)
_NODES = st.lists(_NODE, max_size=6).map(",".join)
_VALUE = st.one_of(_NUMBERS, _NAMES, _NODE, st.text(max_size=20))
_PARAM = st.sampled_from(
    [
        "nodes",
        "vnodes",
        "hasher",
        "strategy",
        "keys",
        "prefix",
        "zipf",
        "add",
        "remove",
        "reweight",
        "key",
        "replicas",
        "bogus",
    ]
)
_KNOWN = {
    "nodes": _NODES,
    "hasher": st.sampled_from(["fnv1a_32_mix", "sha1", "xxh3_64", "nope", ""]),
    "strategy": st.one_of(st.sampled_from(registry.STRATEGY_NAMES), _VALUE),
}


@st.composite
def _params(draw: st.DrawFn) -> list[tuple[str, str]]:
    names = draw(st.lists(_PARAM, max_size=6))
    return [(name, draw(_KNOWN.get(name, _VALUE))) for name in names]


_FUZZ_CLIENT = TestClient(create_app(), raise_server_exceptions=False)


@given(params=_params(), path=st.sampled_from(["/api/ring", "/api/lookup"]))
def test_fuzzed_parameters_never_get_a_500(path: str, params: list[tuple[str, str]]) -> None:
    response = _FUZZ_CLIENT.get(path, params=params)
    assert response.status_code in (200, 400), (response.status_code, response.text)
    body = response.json()
    if response.status_code == 400:
        assert isinstance(body["error"]["param"], str) and body["error"]["message"]
    else:
        assert body["owner" if path == "/api/lookup" else "nodes"]


_VALID_NAME = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,5}", fullmatch=True)
_VALID_NODE = st.builds(
    lambda name, weight, zone: (
        name + (f":{weight}" if weight else "") + (f":{zone}" if weight and zone else "")
    ),
    _VALID_NAME,
    st.one_of(st.none(), st.sampled_from(["1", "0.5", "2", "16", "0.01", "3.25"])),
    st.one_of(st.none(), st.sampled_from(["z1", "z2", "eu-1"])),
)


def _mostly(valid: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(valid, valid, valid, _VALUE)


@st.composite
def _near_valid(draw: st.DrawFn, lookup: bool) -> dict[str, str]:
    nodes = draw(st.lists(_VALID_NODE, min_size=1, max_size=6))
    params = {
        "nodes": draw(_mostly(st.just(",".join(nodes)))),
        "vnodes": draw(_mostly(st.integers(1, 64).map(str))),
        "hasher": draw(st.sampled_from(["fnv1a_32_mix", "fnv1a_32", "murmur3_32", "xxh3_64"])),
        "strategy": draw(st.sampled_from(registry.STRATEGY_NAMES)),
    }
    names = [node.split(":")[0] for node in nodes]
    if lookup:
        params["key"] = draw(st.text(min_size=1, max_size=20))
        params["replicas"] = draw(_mostly(st.integers(1, 8).map(str)))
        return params
    params["keys"] = draw(_mostly(st.integers(1, 400).map(str)))
    if draw(st.booleans()):
        params["zipf"] = draw(_mostly(st.sampled_from(["0", "0.8", "1", "1.5", "4"])))
    change = draw(st.sampled_from(["add", "remove", "reweight", None]))
    if change == "add":
        params["add"] = draw(_mostly(_VALID_NODE))
    elif change == "remove":
        params["remove"] = draw(_mostly(st.sampled_from(names)))
    elif change == "reweight":
        params["reweight"] = draw(_mostly(st.sampled_from(names).map(lambda n: f"{n}:2")))
    return params


@given(params=_near_valid(lookup=False))
def test_fuzzed_ring_queries_answer_consistently(params: dict[str, str]) -> None:
    response = _FUZZ_CLIENT.get("/api/ring", params=params)
    assert response.status_code in (200, 400), (response.status_code, response.text)
    if response.status_code == 400:
        return
    report = response.json()
    total = len(report["keys"]["names"])
    assert sum(node["keys"] for node in report["nodes"]) == total
    assert len(report["keys"]["owners"]) == total
    if report["change"] is not None:
        assert 0 <= report["change"]["moved"] <= total
        assert sum(report["change"]["transfers"].values()) == report["change"]["moved"]


@given(params=_near_valid(lookup=True))
def test_fuzzed_lookups_answer_consistently(params: dict[str, str]) -> None:
    response = _FUZZ_CLIENT.get("/api/lookup", params=params)
    assert response.status_code in (200, 400), (response.status_code, response.text)
    if response.status_code == 200:
        found = response.json()
        assert found["preference_list"][0] == found["owner"]
        assert len(set(found["preference_list"])) == len(found["preference_list"])


@pytest.mark.parametrize(
    "query", ["key=%FF", "key=%00", "key=%ED%A0%80", "nodes=%FF", "%FF=1", "key=a&&&=", "="]
)
def test_raw_odd_query_strings_never_get_a_500(query: str) -> None:
    for path in ("/api/ring", "/api/lookup"):
        response = _FUZZ_CLIENT.get(f"{path}?{query}")
        assert response.status_code in (200, 400), (response.status_code, response.text)


@given(query=st.from_regex(r"[A-Za-z0-9%&=:,._+\-]{0,60}", fullmatch=True))
def test_fuzzed_raw_query_strings_never_get_a_500(query: str) -> None:
    for path in ("/api/ring", "/api/lookup"):
        response = _FUZZ_CLIENT.get(f"{path}?{query}")
        assert response.status_code in (200, 400), (response.status_code, response.text)


# -- the library refuses options a strategy does not use -----------------------------------------


@pytest.mark.parametrize(
    ("path", "params"), [("/api/ring", {}), ("/api/lookup", {"key": "booking-0001"})]
)
def test_an_option_the_strategy_does_not_use_is_a_400_naming_it(
    client: TestClient, path: str, params: dict[str, str]
) -> None:
    response = client.get(path, params={**params, "strategy": "modulo", "vnodes": "8"})
    check_400(response, "vnodes", r"vnodes")
    assert response.json()["error"]["value"] == "8"
    # Not given, an option is not sent: the page's default vnodes applies to rings only.
    assert client.get(path, params={**params, "strategy": "modulo"}).status_code == 200


@pytest.mark.parametrize("strategy", ["modulo", "jump", "multiprobe"])
def test_a_reweight_on_a_weight_blind_placement_is_a_400(client: TestClient, strategy: str) -> None:
    response = client.get("/api/ring", params={"strategy": strategy, "reweight": "B:3"})
    check_400(response, "reweight", r".")
    assert response.json()["error"]["value"] == "B"
