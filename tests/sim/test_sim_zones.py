"""Zone failures and stale views with replicas: exact counts, checked by brute force.

The claim under test: a 12-node, 3-zone, R = 3 ring at 1, 4, 16 and 160 vnodes. Placed
zone-blind (the next three nodes clockwise), a zone failure loses keys at some of these counts,
depending on where the tokens fall; placed zone-aware (one replica per zone first, Cassandra's
NetworkTopologyStrategy) it loses none at any. Every figure is recounted here by code that
shares nothing with ``ringkit.sim.zones`` but the ring's public tokens and key points.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ringkit.errors import ConfigError, UnknownNodeError
from ringkit.nodes import Node
from ringkit.ring import HashRing
from ringkit.sim import (
    Event,
    Population,
    Scenario,
    fail_each_zone,
    fail_nodes,
    fail_zone,
    quorum,
    run_scenario,
    spread_zones,
    stale_replicas,
    zone_names,
    zoned_nodes,
)
from ringkit.strategies.options import StrategyOptions
from tests.hypothesis_profiles import examples

NAMES = [f"node-{i:02d}" for i in range(1, 13)]
ZONE_OF = spread_zones(NAMES, 3)
KEYS = Population(count=12_000, prefix="user-")
VNODES = (1, 4, 16, 160)
# Keys lost when each zone fails, zone-blind, for the fixed names, keys and xxh3_64 (found by
# running it: which counts lose keys depends on where the tokens fall).
BLIND_LOST = {
    1: {"z0": 0, "z1": 0, "z2": 0},
    4: {"z0": 308, "z1": 424, "z2": 827},
    16: {"z0": 0, "z1": 62, "z2": 417},
    160: {"z0": 217, "z1": 137, "z2": 311},
}


# -- an independent recount ----------------------------------------------------------------------


def _preference(
    table: tuple[list[int], list[str]], point: int, replicas: int, zones: dict[str, str] | None
) -> list[str]:
    """The key's first `replicas` distinct nodes clockwise; with `zones`, new zones first."""
    tokens, owners = table
    start = bisect_left(tokens, point)
    walk: list[str] = []
    seen_zones: set[str] = set()
    for step in range(len(tokens)):
        name = owners[(start + step) % len(tokens)]
        if name not in walk:
            walk.append(name)
            seen_zones.add(zones[name] if zones else name)
        if len(seen_zones) >= replicas:
            break
    if zones is None:
        return walk[:replicas]
    first_of_zone = [n for i, n in enumerate(walk) if zones[n] not in {zones[m] for m in walk[:i]}]
    rest = [n for n in walk if n not in first_of_zone]
    return (first_of_zone + rest)[:replicas]


def _recount(
    ring: HashRing, failed: set[str], replicas: int, zones: dict[str, str] | None
) -> tuple[int, int, Counter[str]]:
    table = (ring.tokens.tolist(), [ring.nodes[i].name for i in ring.token_owners.tolist()])
    lost = below = 0
    served: Counter[str] = Counter()
    for key in KEYS.names():
        preference = _preference(table, ring.point_for(key), replicas, zones)
        alive = [n for n in preference if n not in failed]
        lost += not alive
        below += len(alive) < replicas // 2 + 1
        if alive:
            served[alive[0]] += 1
    return lost, below, served


@pytest.mark.parametrize("vnodes", VNODES)
@pytest.mark.parametrize("zone_aware", [True, False], ids=["zone-aware", "zone-blind"])
def test_zone_failure_on_12_nodes_3_zones_r3(vnodes: int, zone_aware: bool) -> None:
    ring = HashRing(zoned_nodes(NAMES, ZONE_OF, zone_aware=zone_aware), vnodes=vnodes)
    each = fail_each_zone(ring, ZONE_OF, KEYS, replicas=3)
    for zone in zone_names(3):
        report = fail_zone(ring, ZONE_OF, zone, KEYS, replicas=3)
        assert each[zone] == report
        failed = {name for name in NAMES if ZONE_OF[name] == zone}
        assert set(report.failed) == failed and len(failed) == 4
        lost, below, served = _recount(ring, failed, 3, ZONE_OF if zone_aware else None)
        assert report.keys_lost == lost
        assert report.keys_below_quorum == below
        assert report.loads["keys"] == {n: float(served[n]) for n in NAMES if n not in failed}
        assert report.lost["keys"] == lost / KEYS.count
        if zone_aware:
            assert report.keys_lost == 0  # one replica per zone: a zone takes one of three
            assert report.keys_below_quorum == 0
        else:
            assert report.keys_lost == BLIND_LOST[vnodes][zone]


def test_zone_blind_loses_keys_at_some_vnode_counts_only() -> None:
    losing = {v for v, by_zone in BLIND_LOST.items() if any(by_zone.values())}
    assert losing == {4, 16, 160}  # and z0 alone loses none at 1 or 16
    assert {v for v, by_zone in BLIND_LOST.items() if by_zone["z0"]} == {4, 160}


def test_node_failures_with_one_replica_lose_exactly_the_nodes_keys() -> None:
    ring = HashRing(NAMES[:4], vnodes=8)
    report = fail_nodes(ring, ["node-02"], KEYS, replicas=1)
    owned = Counter(ring.node_for_many(KEYS.names()))
    assert report.keys_lost == report.keys_below_quorum == owned["node-02"]
    # One replica: no next replica to fail over to, so survivors keep their own keys only.
    assert report.loads["keys"] == {n: float(c) for n, c in owned.items() if n != "node-02"}


def test_other_placements_are_asked_key_by_key() -> None:
    from ringkit.strategies.registry import build_placement

    placement = build_placement("rendezvous", NAMES[:6], StrategyOptions())
    report = fail_nodes(placement, NAMES[:2], Population(count=500), replicas=2)
    lost = sum(
        set(placement.nodes_for(k, 2)) <= set(NAMES[:2]) for k in Population(count=500).names()
    )
    assert report.keys_lost == lost


@settings(max_examples=examples(25), deadline=None)
@given(
    nodes=st.integers(2, 9),
    zones=st.integers(2, 4),
    replicas=st.integers(2, 4),
    vnodes=st.sampled_from([1, 2, 8]),
)
def test_zone_aware_never_loses_a_key_to_one_zone(
    nodes: int, zones: int, replicas: int, vnodes: int
) -> None:
    names = [f"n{i}" for i in range(nodes)]
    zone_of = spread_zones(names, zones)
    replicas = min(replicas, zones, nodes)
    ring = HashRing(zoned_nodes(names, zone_of), vnodes=vnodes)
    keys = Population(count=300)
    for zone in set(zone_of.values()):
        report = fail_zone(ring, zone_of, zone, keys, replicas=replicas)
        assert report.keys_lost == 0 or replicas == 1
        assert report.keys_below_quorum >= report.keys_lost
        served = sum(report.loads["keys"].values())
        assert served + report.keys_lost == keys.count


def test_stale_replica_sets_match_a_recount() -> None:
    before = HashRing(zoned_nodes(NAMES, ZONE_OF), vnodes=16)
    after = before.remove("node-01").remove("node-04")
    shares = stale_replicas(after, before, KEYS, replicas=3)
    differ = wrong = 0
    for key in KEYS.names():
        now, old = set(after.nodes_for(key, 3)), set(before.nodes_for(key, 3))
        differ += now != old
        wrong += not now & old
    assert shares == {
        "replica_set_differs": differ / KEYS.count,
        "all_replicas_wrong": wrong / KEYS.count,
        "some_replica_right": (KEYS.count - wrong) / KEYS.count,
    }


# -- through scenarios ---------------------------------------------------------------------------


def _scenario(*events: Event, zone_aware: bool = False, vnodes: int = 4) -> Scenario:
    return Scenario(
        population=KEYS,
        nodes=tuple(Node(name) for name in NAMES),
        options=StrategyOptions(vnodes=vnodes, replicas=3),
        events=events,
        zones=3,
        zone_aware=zone_aware,
    )


def test_scenario_fail_zone_step_counts_what_fail_zone_counts() -> None:
    run = run_scenario(_scenario(Event("fail_zone", zone="z2"), Event("stale")))
    start, failure, stale = run.steps
    assert (start.keys_lost, start.keys_below_quorum) == (0, 0)
    assert failure.event == "fail zone z2"
    assert failure.keys_lost == BLIND_LOST[4]["z2"]
    assert failure.failed == (("node-03", "node-06", "node-09", "node-12"),)
    assert failure.failover is not None
    assert set(failure.failover["keys"].loads) == set(failure.nodes)
    assert sum(failure.failover["keys"].loads.values()) == KEYS.count - failure.keys_lost
    assert stale.stale_replicas is not None
    assert stale.stale_replicas["all_replicas_wrong"] == failure.keys_lost / KEYS.count
    assert stale.keys_lost == 0


def test_scenario_nodes_added_later_continue_the_round_robin() -> None:
    scenario = _scenario(Event("add", "late-1"), Event("add", "late-2"))
    assert scenario.zone_map()["late-1"] == "z0" and scenario.zone_map()["late-2"] == "z1"
    run = run_scenario(scenario)
    assert [s.keys_lost for s in run.steps] == [0, 0, 0]


def test_the_start_placement_puts_the_starting_nodes_in_their_zones() -> None:
    # What run_scenario starts from and compare_remedies compares on: zone-aware, each node in
    # the zone the scenario's round-robin gives it; zone-blind, the same nodes without zones.
    aware = _scenario(zone_aware=True)
    placed = aware.start_placement()
    assert {node.name: node.zone for node in placed.nodes} == ZONE_OF
    assert run_scenario(aware).steps[0].nodes == tuple(node.name for node in placed.nodes)
    blind = _scenario().start_placement()
    assert [node.name for node in blind.nodes] == NAMES
    assert all(node.zone is None for node in blind.nodes)


def test_scenario_zone_failure_of_every_node_is_an_outage() -> None:
    scenario = Scenario(
        population=Population(count=100),
        nodes=(Node("a"), Node("b")),
        events=(Event("fail_zone", zone="z0"), Event("add", "c")),
        zones=1,
    )
    run = run_scenario(scenario)
    assert [s.event for s in run.steps] == ["start", "fail zone z0"]
    assert run.steps[-1].nodes == () and run.steps[-1].keys_lost == 100


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: zone_names(0), "zones must be an integer >= 1, got 0"),
        (lambda: spread_zones(["a"], -2), "zones must be an integer >= 1, got -2"),
        (lambda: _scenario(Event("fail_zone", zone="z7")), "must be one of z0, z1, z2, got 'z7'"),
        (lambda: Event("fail_zone"), "fail_zone event takes a zone.*got zone=''"),
        (lambda: Event("fail_zone", node="a", zone="z0"), "node='a'"),
        (
            lambda: Scenario(KEYS, (Node("a"),), events=(Event("fail_zone", zone="z0"),)),
            "fail_zone needs zones \\(zones = Z\\), got zone 'z0' with none",
        ),
        (
            lambda: Scenario(KEYS, (Node("a"),), options=StrategyOptions(replicas=2)),
            r"replicas must be in \[1, 1\] for 1 nodes, got 2",
        ),
        (lambda: Scenario(KEYS, (Node("a"),), zones=0), "zones must be an integer >= 1, got 0"),
        (
            lambda: Scenario(KEYS, (Node("a"),), zone_aware="yes"),  # type: ignore[arg-type]
            "zone_aware must be true or false, got 'yes'",
        ),
        (
            lambda: fail_zone(HashRing(["a"]), {"a": "z0"}, "z1", KEYS, replicas=1),
            "zone must be one of z0, got 'z1'",
        ),
        (
            lambda: fail_nodes(HashRing(["a"]), [], KEYS, replicas=0),
            "replicas must be an integer >= 1, got 0",
        ),
        (lambda: zoned_nodes(["a"], {}), "node 'a' has no zone in the zone map"),
    ],
)
def test_bad_zone_input_is_refused_naming_the_value(make: object, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        make()  # type: ignore[operator]


def test_failing_an_unknown_node_names_it() -> None:
    with pytest.raises(UnknownNodeError, match="node 'zz' is not in the placement"):
        fail_nodes(HashRing(["a"]), ["zz"], KEYS, replicas=1)


def test_quorum_is_a_majority() -> None:
    assert [quorum(r) for r in (1, 2, 3, 4, 5)] == [1, 2, 2, 3, 3]
