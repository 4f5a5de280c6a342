"""Hot-key remedies (ringkit.sim.remedies): hand-computed cases, a brute-force recount, errors."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ringkit import HashRing
from ringkit.cli import main
from ringkit.errors import ConfigError
from ringkit.nodes import Node
from ringkit.sim import Population, Scenario, load_bundled_scenario, parse_scenario, run_scenario
from ringkit.sim.remedies import (
    MAX_REQUESTS_PER_S,
    REMEDIES,
    Remedies,
    compare_remedies,
    near_cache_factors,
    split_nodes,
)
from ringkit.strategies.registry import StrategyOptions
from tests.hypothesis_profiles import examples

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
HASHER = "fnv1a_32_mix"


def _gatepass_three(remedies: Remedies) -> dict[str, dict[str, float]]:
    """booking-0001 … 0003 on A, B, C with 1 vnode; Zipf s = 1: shares 6/11, 3/11, 2/11."""
    scenario = Scenario(
        Population(count=3, zipf=1.0),
        tuple(Node(n) for n in "ABC"),
        options=StrategyOptions(vnodes=1, hasher=HASHER),
        remedies=remedies,
    )
    return {r.remedy: r.balance.loads for r in compare_remedies(scenario)}


def test_the_hand_computed_case() -> None:
    # The ring's preference lists, pinned: 0001 -> C, B, A; 0002 -> A, C, B; 0003 -> C, B, A.
    ring = HashRing(["A", "B", "C"], vnodes=1, hasher=HASHER)
    assert [ring.nodes_for(f"booking-000{i}", 3) for i in (1, 2, 3)] == [
        ["C", "B", "A"],
        ["A", "C", "B"],
        ["C", "B", "A"],
    ]
    one, two, three = 6 / 11, 3 / 11, 2 / 11
    # Half the requests are updates; one client sending 11 requests a second, a 1 s TTL.
    remedies = Remedies(top=1, spread=2, parts=3, near_cache_max_items=1, writes=0.5)
    loads = _gatepass_three(replace(remedies, clients=1, requests_per_s=11.0))
    assert loads["none"] == pytest.approx({"A": two, "B": 0.0, "C": one + three})
    # spread: 0001's reads split over C and B (a quarter each), its updates write both.
    assert loads["spread"] == pytest.approx({"A": two, "B": one * 0.75, "C": one * 0.75 + three})
    # split over C, B, A: every read reads all three parts, an update goes to one.
    part = one * (0.5 + 0.5 / 3)
    assert loads["split"] == pytest.approx({"A": two + part, "B": part, "C": part + three})
    # near-cache of 1 item: 0001 is read 3 times and written 3 times a second; an entry lives
    # E[min(1, Exp(3))] = (1 - e^-3) / 3 s, and the next read after it fetches.
    lifetime = (1 - math.exp(-3)) / 3
    near = one * (0.5 + 0.5 / (1 + 3 * lifetime))
    assert loads["near_cache"] == pytest.approx({"A": two, "B": 0.0, "C": near + three})


def test_the_costs_of_each_remedy() -> None:
    scenario = load_bundled_scenario("hot-key-remedies")[0]
    rows = {r.remedy: r for r in compare_remedies(scenario)}
    assert list(rows) == list(REMEDIES)
    settings_ = scenario.remedies
    assert settings_ is not None
    assert [rows[r].extra_items for r in REMEDIES] == [0, 16 * 2, 16 * 1000, 16 * 7]
    assert [rows[r].held_in for r in REMEDIES] == ["", "nodes", "clients", "nodes"]
    assert [rows[r].extra_writes_per_update for r in REMEDIES] == [0, 2, 0, 0]
    assert [rows[r].extra_reads_per_read for r in REMEDIES] == [0, 0, 0, 7]
    assert [rows[r].worst_staleness_s for r in REMEDIES] == [0, 0, settings_.near_cache_ttl_s, 0]
    # Totals follow from the hot keys' share S: spread adds w(k-1)S, split (1-w)(P-1)S.
    hot = float(scenario.population.request_shares(0, 16).sum())
    assert rows["none"].server_calls == pytest.approx(1.0)
    assert rows["spread"].server_calls == pytest.approx(1 + 0.1 * 2 * hot)
    assert rows["split"].server_calls == pytest.approx(1 + 0.9 * 7 * hot)
    # Every remedy takes load off the busiest node; the near-cache also saves calls.
    none = rows["none"].busiest_ratio
    assert all(rows[r].busiest_ratio < none for r in ("spread", "near_cache", "split"))
    assert rows["near_cache"].server_calls < 0.5


def test_no_remedy_is_the_simulators_request_balance() -> None:
    scenario = load_bundled_scenario("hot-key-remedies")[0]
    start = run_scenario(scenario).steps[0].balance["requests"]
    none = compare_remedies(scenario)[0]
    assert none.balance.busiest == start.busiest
    assert none.busiest_ratio == pytest.approx(start.busiest_ratio)
    assert none.balance.loads == pytest.approx(start.loads)


def _recount(scenario: Scenario, remedies: Remedies) -> dict[str, dict[str, float]]:
    """Every key, one at a time, in plain Python: the model written out once more."""
    ring = HashRing(scenario.nodes, vnodes=scenario.options.vnodes, hasher=HASHER)
    population = scenario.population
    total = math.fsum((r + 1) ** -population.zipf for r in range(population.count))
    w = remedies.writes
    loads = {remedy: dict.fromkeys((n.name for n in scenario.nodes), 0.0) for remedy in REMEDIES}
    for rank in range(population.count):
        key = population.key(rank)
        share = (rank + 1) ** -population.zipf / total
        preference = ring.nodes_for(key, len(scenario.nodes))
        owner = preference[0]
        loads["none"][owner] += share
        if rank < remedies.top:
            for node in preference[: remedies.spread]:
                loads["spread"][node] += share * ((1 - w) / remedies.spread + w)
            # ringkit.cluster.remedies.splits.choose_suffixes: part n routes by the tag "split.<n>".
            held = [owner]
            for suffix in range(1, 64 * remedies.parts):
                if len(held) == remedies.parts:
                    break
                if ring.node_for(f"split.{suffix}") not in held:
                    held.append(ring.node_for(f"split.{suffix}"))
            for node in held:
                loads["split"][node] += share * ((1 - w) + w / remedies.parts)
        else:
            loads["spread"][owner] += share
            loads["split"][owner] += share
        if rank < remedies.near_cache_max_items:
            per_client = share * remedies.requests_per_s / remedies.clients
            reads, own = per_client * (1 - w), per_client * w
            ttl = remedies.near_cache_ttl_s
            life = (1 - math.exp(-own * ttl)) / own if own else ttl
            loads["near_cache"][owner] += share * w + share * (1 - w) / (1 + reads * life)
        else:
            loads["near_cache"][owner] += share
    return loads


@pytest.mark.parametrize("writes", [0.0, 0.3, 1.0])
def test_a_brute_force_recount_gives_every_load(writes: float) -> None:
    scenario = Scenario(
        Population(count=3000, prefix="page-", zipf=1.2),
        tuple(Node(f"n{i}") for i in range(5)),
        options=StrategyOptions(vnodes=16, hasher=HASHER),
    )
    remedies = Remedies(
        top=40, spread=3, parts=4, near_cache_max_items=200, clients=7, writes=writes
    )
    expected = _recount(scenario, remedies)
    for row in compare_remedies(scenario, remedies):
        assert row.balance.loads == pytest.approx(expected[row.remedy], rel=1e-9, abs=1e-15)


@settings(max_examples=examples(40), deadline=None)
@given(
    writes=st.floats(0, 1),
    ttl=st.floats(0.001, 100),
    clients=st.integers(1, 64),
    rate=st.floats(1, MAX_REQUESTS_PER_S),  # the bound a scenario and the page accept
)
def test_a_near_cache_never_adds_calls_and_passes_every_update(
    writes: float, ttl: float, clients: int, rate: float
) -> None:
    remedies = Remedies(near_cache_ttl_s=ttl, clients=clients, requests_per_s=rate, writes=writes)
    factors = near_cache_factors(Population(count=50, zipf=1.0).request_shares(0, 50), remedies)
    assert ((factors >= writes - 1e-12) & (factors <= 1 + 1e-12)).all()
    assert (factors[:-1] <= factors[1:] + 1e-12).all()  # hotter keys are cached better


@pytest.mark.parametrize(
    ("given_", "message"),
    [
        ({"top": 0}, "remedies top must be an integer >= 1, <= 100,000, got 0"),
        ({"top": 100_001}, "remedies top must be an integer >= 1, <= 100,000, got 100001"),
        ({"spread": True}, "remedies spread must be an integer >= 1, got True"),
        ({"parts": 2.5}, "remedies parts must be an integer >= 1, got 2.5"),
        ({"near_cache_max_items": 0}, "remedies near_cache_max_items must be an integer"),
        ({"clients": -1}, "remedies clients must be an integer >= 1, <= 4,096, got -1"),
        (
            {"near_cache_ttl_s": 0},
            r"remedies near_cache_ttl_s must be a number in \(0, 86,400\], got 0",
        ),
        (
            {"requests_per_s": math.inf},
            r"remedies requests_per_s must be a number in \(0, 999,999\], got inf",
        ),
        ({"writes": 1.5}, r"remedies writes must be a number in \[0, 1\], got 1.5"),
        ({"writes": math.nan}, r"remedies writes must be a number in \[0, 1\], got nan"),
    ],
)
def test_bad_settings_are_refused_naming_the_value(given_: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Remedies(**given_)  # type: ignore[arg-type]


def test_more_copies_or_parts_than_nodes_is_refused() -> None:
    scenario = Scenario(Population(count=10, zipf=1.0), tuple(Node(n) for n in "ABC"))
    with pytest.raises(ConfigError, match=r"remedies parts must be <= the number of nodes \(3\)"):
        compare_remedies(scenario, Remedies(parts=4))
    with pytest.raises(ConfigError, match=r"remedies spread must be <= .* got 5"):
        compare_remedies(scenario, Remedies(spread=5, parts=2))


_FILE = """
nodes = ["A", "B", "C"]
[keys]
count = 100
zipf = 1.0
[remedies]
"""


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("top = 0", "demo.toml: remedies top must be an integer >= 1, <= 100,000, got 0"),
        ("spread = 4", r"demo.toml: remedies spread must be <= the number of nodes \(3\), got 4"),
        ('writes = "many"', "demo.toml: remedies writes must be a number in .* got 'many'"),
        ("near_cache = 3", "demo.toml: unknown field 'remedies.near_cache'; accepted: top, "),
    ],
)
def test_a_bad_remedies_table_names_file_field_and_value(table: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_scenario(_FILE + table, "demo.toml")


def test_simulate_prints_the_remedies_as_a_table_and_json(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = str(EXAMPLES / "hot-key-remedies.toml")
    assert main(["simulate", path]) == 0
    out = capsys.readouterr().out
    for label in ("none", "spread", "near-cache", "split", "16,000 clients", "extra items"):
        assert label in out
    assert main(["simulate", path, "--json", "--vnodes", "1,160"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [doc["vnodes"] for doc in data["remedies"]] == [1, 160]
    rows = data["remedies"][1]["rows"]
    assert [row["remedy"] for row in rows] == list(REMEDIES)
    scenario = load_bundled_scenario("hot-key-remedies")[0]
    expected = compare_remedies(scenario)
    assert [row["busiest_ratio"] for row in rows] == pytest.approx(
        [r.busiest_ratio for r in expected]
    )
    assert data["remedies"][1]["settings"]["near_cache_max_items"] == 1000
    assert main(["simulate", "gatepass", "--json"]) == 0
    assert "remedies" not in json.loads(capsys.readouterr().out)


def test_remedies_refuse_replicated_keys() -> None:
    with pytest.raises(
        ConfigError, match=r"demo.toml: remedies model one copy .* strategy.replicas = 3; drop"
    ):
        parse_scenario(
            "nodes = 6\nzones = 3\n[strategy]\nreplicas = 3\n[keys]\nzipf = 1.0\n[remedies]\n",
            "demo.toml",
        )
    scenario = Scenario(
        Population(count=10, zipf=1.0),
        tuple(Node(n) for n in "ABC"),
        options=StrategyOptions(replicas=2),
    )
    with pytest.raises(ConfigError, match="got replicas=2"):
        compare_remedies(scenario, Remedies(parts=3))


def test_copies_and_parts_follow_zone_aware_preference_lists() -> None:
    # With zones = 3, a hot key's three copies land one per zone, as the client's would.
    text = "nodes = 6\nzones = 3\n[keys]\ncount = 50\nzipf = 1.0\n[strategy]\nvnodes = 4\n"
    (scenario,) = parse_scenario(text + "[remedies]\ntop = 1\nspread = 3\nparts = 3\nwrites = 0\n")
    zone_of = scenario.zone_map()
    spread = compare_remedies(scenario)[1].balance.loads
    share = scenario.population.request_shares(0, 1)[0]
    ring = HashRing(
        [Node(n.name, zone=zone_of[n.name]) for n in scenario.nodes], vnodes=4, hasher="xxh3_64"
    )
    copies = ring.nodes_for(scenario.population.key(0), 3)
    assert sorted(zone_of[name] for name in copies) == ["z0", "z1", "z2"]
    blind = HashRing(scenario.nodes, vnodes=4, hasher="xxh3_64")
    rest = {name: 0.0 for name in zone_of}
    for rank in range(1, 50):
        key = scenario.population.key(rank)
        rest[blind.node_for(key)] += float(scenario.population.request_shares(rank, rank + 1)[0])
    expected = {name: rest[name] + (share / 3 if name in copies else 0.0) for name in rest}
    assert spread == pytest.approx(expected)


def test_split_parts_of_every_key_share_the_nodes_of_the_split_tags() -> None:
    # Part n of any key routes by the tag "split.<n>" (ringkit.cluster.remedies.splits), so with
    # fewer parts than nodes the hot keys' parts pile onto the same few nodes: reads of every part
    # of every split key reach them.
    nodes = tuple(Node(f"n{i}") for i in range(8))
    ring = HashRing(nodes, vnodes=64)
    tags = split_nodes(ring, 3)
    assert tags[:3] == tuple(dict.fromkeys(ring.node_for(f"split.{n}") for n in range(1, 9)))[:3]
    scenario = Scenario(Population(count=500, zipf=1.0), nodes, options=StrategyOptions(vnodes=64))
    none, _, _, split = compare_remedies(scenario, Remedies(top=20, parts=3, writes=0.0))
    # Read-only: a split key's every part is read at its full rate; beyond what its owner
    # already served, the load lands on the first two split tags that are not the owner.
    expected = dict.fromkeys(none.balance.loads, 0.0)
    shares = scenario.population.request_shares(0, 20).tolist()
    for key, share in zip(scenario.population.names(0, 20), shares, strict=True):
        owner = ring.node_for(key)
        for name in [tag for tag in tags if tag != owner][:2]:
            expected[name] += share
    added = {name: split.balance.loads[name] - none.balance.loads[name] for name in expected}
    assert added == pytest.approx(expected, abs=1e-12)
    assert {name for name, load in added.items() if load > 1e-12} <= set(tags[:3])
    assert split.extra_items == 20 * 2


@settings(max_examples=examples(30), deadline=None)
@given(
    nodes=st.integers(2, 9),
    count=st.integers(1, 300),
    zipf=st.floats(0, 2),
    top=st.integers(1, 400),
    writes=st.floats(0, 1),
    data=st.data(),
)
def test_totals_follow_from_the_hot_keys_share(
    nodes: int, count: int, zipf: float, top: int, writes: float, data: st.DataObject
) -> None:
    # Whatever the placement: spreading adds w(k-1)S calls, splitting (1-w)(P-1)S, where S is
    # the remedied keys' share of requests; a near-cache never adds any; no load is negative.
    spread, parts = data.draw(st.integers(1, nodes)), data.draw(st.integers(1, nodes))
    scenario = Scenario(
        Population(count=count, zipf=zipf),
        tuple(Node(f"n{i}") for i in range(nodes)),
        options=StrategyOptions(vnodes=8),
    )
    remedies = Remedies(top=top, spread=spread, parts=parts, writes=writes)
    rows = {r.remedy: r for r in compare_remedies(scenario, remedies)}
    hot = float(scenario.population.request_shares(0, min(top, count)).sum())
    assert rows["none"].server_calls == pytest.approx(1.0)
    assert rows["spread"].server_calls == pytest.approx(1 + writes * (spread - 1) * hot)
    if rows["split"].extra_items == min(top, count) * (parts - 1):  # every part found a node
        assert rows["split"].server_calls == pytest.approx(1 + (1 - writes) * (parts - 1) * hot)
    assert rows["near_cache"].server_calls <= 1.0 + 1e-9
    for row in rows.values():
        assert min(row.balance.loads.values()) >= 0
        assert row.busiest_ratio >= 1.0 - 1e-9


@settings(max_examples=examples(40), deadline=None)
@given(
    nodes=st.integers(min_value=2, max_value=12),
    parts=st.integers(min_value=2, max_value=16),
    key=st.text(alphabet="abcdefghij:0123456789", min_size=1, max_size=20),
)
def test_split_parts_land_where_the_cache_client_puts_them(
    nodes: int, parts: int, key: str
) -> None:
    # sim/remedies cannot import the cache client (layers), so it restates the client's naming
    # rule; this holds the two together: the nodes the model gives a split key's parts are the
    # first owners of the parts ringkit.cluster.remedies.splits chooses for it.
    from ringkit.cluster.core.routing import Router
    from ringkit.cluster.remedies.splits import choose_suffixes, part_key
    from ringkit.cluster.views.view import ClusterView

    names = [f"cache-{i}" for i in range(nodes)]
    ring = HashRing(names, vnodes=16)
    router = Router(ClusterView(0, ring, {n: f"memory://{n}" for n in names}))
    raw = key.encode()
    client_nodes = [router.replica_names(raw)[0]] + [
        router.replica_names(part_key(raw, suffix))[0]
        for suffix in choose_suffixes(router, raw, parts)
    ]
    owner = client_nodes[0]
    model_nodes = [owner, *[n for n in split_nodes(ring, parts) if n != owner][: parts - 1]]
    assert sorted(set(client_nodes)) == sorted(set(model_nodes))
