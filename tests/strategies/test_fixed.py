"""FixedPartitions: fixed token space, controller quotas, zone rule, minimal moves, epochs."""

from __future__ import annotations

import json
from collections import Counter

import hypothesis.strategies as st
import networkx as nx
import pytest
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from tests.hypothesis_profiles import examples

from ringkit import (
    ConfigError,
    DuplicateNodeError,
    EmptyRingError,
    FixedPartitions,
    Node,
    UnknownNodeError,
)
from ringkit.strategies.fixed.controller import compute_quotas, zone_key, zone_limit


def replica_counts(table: FixedPartitions) -> Counter[str]:
    return Counter(name for row in table.partition_owners() for name in row)


def test_keys_map_to_their_partition_and_its_primary() -> None:
    table = FixedPartitions(["a", "b", "c"], partitions=64)
    keys = [f"key-{i}" for i in range(500)]
    owners = table.partition_owners()
    expected = [owners[table.partition_for(key)][0] for key in keys]
    assert [table.node_for(key) for key in keys] == expected
    assert table.node_for_many(keys) == expected


def test_partition_is_the_point_scaled_to_q() -> None:
    table = FixedPartitions(["a"], partitions=1000, hasher="fnv1a_32")
    point = table._hasher.point(b"booking:42")
    assert table.partition_for("booking:42") == point * 1000 // 2**64


def test_partitions_never_change_with_membership() -> None:
    table = FixedPartitions(["a", "b"], partitions=32)
    keys = [f"k{i}" for i in range(200)]
    before = [table.partition_for(key) for key in keys]
    after = table.add("c").remove("a")
    assert [after.partition_for(key) for key in keys] == before


def test_quotas_follow_weights_within_one_replica() -> None:
    table = FixedPartitions({"small": 1.0, "big": 3.0}, partitions=100)
    assert table.quotas() == {"big": 75, "small": 25}
    assert table.shares()["big"] == pytest.approx(0.75, abs=1 / 100)


def test_shares_are_exact_and_sum_to_one() -> None:
    table = FixedPartitions(["a", "b", "c"], partitions=7)
    shares = table.shares()
    assert sum(shares.values()) == pytest.approx(1.0, abs=1e-12)
    primaries = Counter(row[0] for row in table.partition_owners())
    for name, share in shares.items():
        assert share == pytest.approx(primaries[name] / 7, abs=1e-15)


def test_join_moves_exactly_the_new_quota() -> None:
    table = FixedPartitions([f"n{i}" for i in range(10)], partitions=1024)
    bigger = table.add("n10")
    assert bigger.plan is not None
    assert bigger.plan.moved == bigger.plan.minimum == bigger.quotas()["n10"] == 93
    changed = sum(
        old != new
        for old, new in zip(table.partition_owners(), bigger.partition_owners(), strict=True)
    )
    assert changed == 93
    assert all(move.destination == "n10" for move in bigger.plan.moves)


def test_zone_rule_holds_for_replicas() -> None:
    nodes = [Node(f"n{i}", zone=f"z{i % 3}") for i in range(9)]
    table = FixedPartitions(nodes, partitions=256, replicas=3)
    zones = {node.name: node.zone for node in nodes}
    for row in table.partition_owners():
        assert len({zones[name] for name in row}) == 3


def test_zone_rule_comes_before_weight() -> None:
    # Zone a holds two thirds of the weight but may hold only one replica per partition.
    nodes = [Node("a1", weight=4, zone="a"), Node("b1", zone="b"), Node("c1", zone="c")]
    table = FixedPartitions(nodes, partitions=10, replicas=3)
    assert table.quotas() == {"a1": 10, "b1": 10, "c1": 10}


def test_fewer_zones_than_replicas_spread_as_evenly_as_they_can() -> None:
    nodes = [Node(f"n{i}", zone=f"z{i % 2}") for i in range(6)]
    table = FixedPartitions(nodes, partitions=64, replicas=3)
    assert zone_limit([3, 3], 3) == 2
    for row in table.partition_owners():
        assert max(Counter(int(name[1:]) % 2 for name in row).values()) == 2


def test_objectives_trade_sources_for_spread() -> None:
    nodes = [Node(f"n{i}", zone=f"z{i % 3}") for i in range(9)]
    new = Node("x", zone="z0")
    few = FixedPartitions(nodes, partitions=512, replicas=3).add(new).plan
    spread = FixedPartitions(nodes, partitions=512, replicas=3, objective="spread").add(new).plan
    assert few is not None and spread is not None
    assert few.moved == few.minimum == spread.moved == spread.minimum
    assert few.sources < spread.sources
    assert spread.max_per_source < few.max_per_source
    for move in few.moves:
        assert move.source != "x"


def test_source_holds_the_partition_before_the_move() -> None:
    table = FixedPartitions([f"n{i}" for i in range(6)], partitions=128, replicas=2)
    after = table.remove("n3")
    assert after.plan is not None
    for move in after.plan.moves:
        assert move.source in table.partition_owners()[move.partition]
        assert move.donor == "n3"


def test_fewer_nodes_than_replicas_then_more() -> None:
    table = FixedPartitions(["a", "b"], partitions=16, replicas=3)
    assert {len(row) for row in table.partition_owners()} == {2}
    grown = table.add("c")
    assert grown.plan is not None and grown.plan.moved == grown.plan.minimum == 16
    assert {len(row) for row in grown.partition_owners()} == {3}
    shrunk = grown.remove("a")
    assert shrunk.plan is not None and shrunk.plan.moved == 0
    shrunk._check()


def test_epoch_counts_changes_and_serialises() -> None:
    table = FixedPartitions([Node("a", zone="x"), Node("b", weight=2.0)], partitions=32, replicas=2)
    later = table.add("c").reweight("a", 3.0)
    assert (table.epoch, later.epoch) == (0, 2)
    data = json.loads(json.dumps(later.to_dict()))
    again = FixedPartitions.from_dict(data)
    assert again == later
    assert again.epoch == 2
    assert again.node_for("k") == later.node_for("k")


def test_nodes_for_is_distinct_and_starts_with_the_replica_list() -> None:
    table = FixedPartitions([f"n{i}" for i in range(5)], partitions=16, replicas=2)
    row = table.partition_owners()[table.partition_for("k")]
    assert table.nodes_for("k", 2) == list(row)
    everyone = table.nodes_for("k", 10)
    assert everyone[:2] == list(row) and sorted(everyone) == sorted(table)


def test_protocol_basics() -> None:
    table = FixedPartitions(["a", "b"], partitions=8)
    assert len(table) == 2 and "a" in table and "z" not in table and list(table) == ["a", "b"]
    assert table.discard("z") is table
    assert "partitions=8" in repr(table) and "epoch=0" in repr(table)
    assert table == FixedPartitions(["b", "a"], partitions=8)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"partitions": 0}, r"partitions must be in \[1, 16777216\], got 0"),
        ({"replicas": 0}, r"replicas must be in \[1, 64\], got 0"),
        ({"objective": "fast"}, r"objective must be one of fewest_sources, spread, got 'fast'"),
        ({"partitions": 2.5}, r"partitions must be an int, got float"),
    ],
)
def test_bad_options(options: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        FixedPartitions(["a"], **options)  # type: ignore[arg-type]


def test_bad_membership_and_lookups() -> None:
    table = FixedPartitions(["a"], partitions=4)
    with pytest.raises(DuplicateNodeError, match="'a' is already"):
        table.add("a")
    with pytest.raises(UnknownNodeError, match="node 'z' is not in the placement"):
        table.remove("z")
    with pytest.raises(EmptyRingError, match=r"node_for\(\) on an empty placement"):
        FixedPartitions(partitions=4).node_for("k")
    with pytest.raises(ConfigError, match="n must be >= 1, got 0"):
        table.nodes_for("k", 0)


def test_from_dict_refuses_a_broken_table() -> None:
    data = FixedPartitions(["a", "b"], partitions=4, replicas=2).to_dict()
    data["owners"][0] = [0, 0]
    with pytest.raises(ConfigError, match="partition 0 repeats a node"):
        FixedPartitions.from_dict(data)
    with pytest.raises(ConfigError, match="got kind='HashRing'"):
        FixedPartitions.from_dict({"kind": "HashRing", "version": 1})


def test_compute_quotas_refuses_too_few_nodes() -> None:
    with pytest.raises(ConfigError, match="replicas must be <= the node count 1, got 2"):
        compute_quotas([Node("a")], 4, 2, {})


def fewest_moves(old: FixedPartitions, new: FixedPartitions) -> int:
    """The true minimum number of replica moves from `old` to `new`'s quotas under the zone rule,
    by min-cost flow: partition -> (partition, zone) [cap: zone limit] -> node [cost 0 if the
    node holds the partition now, else 1] -> sink [cap: quota]. An oracle, independent of the
    controller's greedy."""
    quotas = new.quotas()
    if not quotas:
        return 0
    zones = {node.name: zone_key(node) for node in new.nodes}
    width = min(new.replicas, len(zones))
    limit = zone_limit(list(Counter(zones.values()).values()), width)
    graph = nx.DiGraph()
    for p, row in enumerate(old.partition_owners()):
        graph.add_edge("source", ("p", p), capacity=width, weight=0)
        for name, zone in zones.items():
            graph.add_edge(("p", p), ("z", p, zone), capacity=limit, weight=0)
            graph.add_edge(("z", p, zone), ("n", p, name), capacity=1, weight=int(name not in row))
            graph.add_edge(("n", p, name), name, capacity=1, weight=0)
    for name, quota in quotas.items():
        graph.add_edge(name, "sink", capacity=quota, weight=0)
    flow = nx.max_flow_min_cost(graph, "source", "sink")
    assert sum(flow["source"].values()) == width * old.partition_count
    return int(nx.cost_of_flow(graph, flow))


NAMES = [f"n{i}" for i in range(8)]


class FixedPartitionsMachine(RuleBasedStateMachine):
    """Every membership sequence: the zone rule holds, quotas are met, and no plan moves fewer
    replicas than the flow-optimal minimum (R = 3); with R = 1 exactly Σ max(0, quota − count).
    """

    replicas = 3

    def __init__(self) -> None:
        super().__init__()
        self.table = FixedPartitions(partitions=24, replicas=self.replicas)

    @rule(
        index=st.integers(0, 7),
        zone=st.sampled_from(["a", "b", "c", "d", None]),
        weight=st.sampled_from([1.0, 1.0, 2.0, 0.5]),
    )
    def add(self, index: int, zone: str | None, weight: float) -> None:
        name = NAMES[index]
        if name in self.table:
            return
        self.apply(self.table.add(Node(name, weight=weight, zone=zone)))

    @precondition(lambda self: len(self.table) > 0)
    @rule(data=st.data())
    def remove(self, data: st.DataObject) -> None:
        self.apply(self.table.remove(data.draw(st.sampled_from(list(self.table)))))

    @precondition(lambda self: len(self.table) > 0)
    @rule(data=st.data(), weight=st.sampled_from([0.5, 1.0, 3.0]))
    def reweight(self, data: st.DataObject, weight: float) -> None:
        name = data.draw(st.sampled_from(list(self.table)))
        self.apply(self.table.reweight(name, weight))

    def apply(self, table: FixedPartitions) -> None:
        before = replica_counts(self.table)
        assert table.plan is not None
        # The formula is a floor; the zone and distinct-node rules can force detours (the flow
        # oracle counts them). With one replica there is no such rule: the floor is exact.
        if self.replicas == 1:
            assert table.plan.moved == table.plan.minimum
        else:
            assert table.plan.moved >= fewest_moves(self.table, table) >= table.plan.minimum
        assert table.plan.minimum == sum(
            max(0, count - before.get(name, 0)) for name, count in replica_counts(table).items()
        )
        changed = sum(
            len(set(new) - set(old))
            for old, new in zip(
                self.table.partition_owners(), table.partition_owners(), strict=True
            )
        )
        assert changed == table.plan.moved
        self.table = table

    @invariant()
    def zone_rule_and_quotas(self) -> None:
        self.table._check()
        members = self.table.nodes
        if members:
            width = min(self.replicas, len(members))
            quotas = compute_quotas(members, 24, width, replica_counts(self.table))
            assert dict(replica_counts(self.table)) == {k: v for k, v in quotas.items() if v}
            zones = [zone_key(node) for node in members]
            assert zone_limit(list(Counter(zones).values()), width) >= 1


class OneReplicaMachine(FixedPartitionsMachine):
    replicas = 1


_SETTINGS = settings(max_examples=examples(25), stateful_step_count=10, deadline=None)
FixedPartitionsMachine.TestCase.settings = _SETTINGS
OneReplicaMachine.TestCase.settings = _SETTINGS
test_fixed_partitions_machine = FixedPartitionsMachine.TestCase
test_one_replica_machine = OneReplicaMachine.TestCase


def test_join_matches_the_flow_optimum_on_a_zoned_cluster() -> None:
    nodes = [Node(f"n{i}", zone=f"z{i % 3}") for i in range(6)]
    table = FixedPartitions(nodes, partitions=48, replicas=3)
    bigger = table.add(Node("x", zone="z1"))
    assert bigger.plan is not None
    assert bigger.plan.moved == bigger.plan.minimum == fewest_moves(table, bigger)


def test_a_replica_that_leaves_a_node_and_comes_back_in_one_plan_is_not_a_move() -> None:
    """A detour the zone rule forces (n3 gives partition 23 to n1 and takes it from n2) is one
    move, n2 → n1: the plan counts each replica that changed hands once."""
    table = FixedPartitions(partitions=24, replicas=3)
    table = table.add(Node("n6", zone="a")).add(Node("n3", zone="a")).reweight("n3", 3.0)
    before = table.add(Node("n2", zone="a")).add(Node("n0", zone="a"))
    after = before.add(Node("n1", zone="b"))
    changed = sum(
        len(set(new) - set(old))
        for old, new in zip(before.partition_owners(), after.partition_owners(), strict=True)
    )
    assert after.plan.moved == changed == 25
    assert all(move.donor != move.destination for move in after.plan.moves)
