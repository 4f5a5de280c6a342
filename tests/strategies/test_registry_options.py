"""Options by name: defaults filled in, unused options refused, weights refused where ignored."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ringkit import (
    FixedPartitions,
    JumpHash,
    Modulo,
    MultiProbe,
    Node,
    Placement,
    Population,
    RangePartitions,
    Scenario,
    UnknownNodeError,
    UnsupportedError,
)
from ringkit.sim import Event, run_scenario
from ringkit.strategies.registry import (
    STRATEGY_NAMES,
    StrategyOptions,
    accepted_options,
    build_placement,
    options_for,
    resolve_options,
)

NAMES = ["a", "b", "c"]


def test_vnodes_given_to_modulo_is_refused_naming_the_value() -> None:
    with pytest.raises(
        UnsupportedError,
        match=r"modulo does not use vnodes, got vnodes=64; use strategy 'bounded', 'ring' or "
        r"'scheduled' for virtual nodes",
    ):
        build_placement("modulo", NAMES, StrategyOptions(vnodes=64))


REFUSALS = [
    ("jump", StrategyOptions(vnodes=8), "jump does not use vnodes, got vnodes=8"),
    ("ring", StrategyOptions(table_size=13), "ring does not use table_size, got table_size=13"),
    ("maglev", StrategyOptions(probes=5), "got probes=5; use strategy 'multiprobe'"),
    ("ranges", StrategyOptions(hasher="md5"), "ranges does not use hasher, got hasher='md5'"),
]


@pytest.mark.parametrize(("strategy", "options", "match"), REFUSALS)
def test_every_unused_option_is_refused(
    strategy: str, options: StrategyOptions, match: str
) -> None:
    with pytest.raises(UnsupportedError, match=match):
        build_placement(strategy, NAMES, options)


@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
def test_replicas_is_accepted_by_every_strategy(strategy: str) -> None:
    placement = build_placement(strategy, NAMES, StrategyOptions(replicas=2))
    assert len(placement.nodes_for("k", 2)) == 2
    assert "replicas" in accepted_options(strategy)


def test_tables_are_built_with_the_replicas_asked_for() -> None:
    table = build_placement("fixed", NAMES, StrategyOptions(replicas=2, partitions=16))
    assert isinstance(table, FixedPartitions) and table.replicas == 2


def test_defaults_are_filled_for_the_options_a_strategy_uses() -> None:
    assert resolve_options("ring").given() == {"vnodes": 160, "hasher": "xxh3_64"}
    assert resolve_options("maglev", StrategyOptions(table_size=13)).table_size == 13
    assert resolve_options("modulo").given() == {"hasher": "xxh3_64"}
    assert options_for("modulo", StrategyOptions(vnodes=8, hasher="md5")).given() == {
        "hasher": "md5"
    }


@pytest.mark.parametrize(
    ("build", "subject"),
    [
        (lambda nodes: Modulo(nodes), "modulo"),
        (lambda nodes: JumpHash(nodes), "jump hash"),
        (lambda nodes: MultiProbe(nodes), "multi-probe"),
        (lambda nodes: RangePartitions(nodes), "range partitions"),
    ],
)
def test_weight_blind_placements_refuse_weights(
    build: Callable[[list[Any]], Placement], subject: str
) -> None:
    weighted = [Node("a"), Node("b", weight=2.5)]
    with pytest.raises(
        UnsupportedError, match=rf"{subject} cannot weight nodes, got weight 2.5 for node 'b'; use "
    ):
        build(weighted)
    placement = build(["a", "b"])
    with pytest.raises(UnsupportedError, match=r"got weight 0.5 for node 'c'; use "):
        placement.add(Node("c", weight=0.5))
    with pytest.raises(UnsupportedError, match=r"got weight 3.0 for node 'a'; use "):
        placement.reweight("a", 3.0)
    assert placement.add(Node("c", weight=1.0)).nodes[-1].name == "c"


def test_modulo_message_names_the_weighted_alternatives() -> None:
    with pytest.raises(
        UnsupportedError,
        match=r"modulo cannot weight nodes, got weight 2.0 for node 'a'; use Rendezvous or "
        r"HashRing for weighted nodes",
    ):
        Modulo(["a", "b"]).reweight("a", 2.0)


def test_reweight_of_an_unknown_node_is_refused() -> None:
    with pytest.raises(UnknownNodeError, match="node 'zz' is not in the ring"):
        build_placement("ring", NAMES).reweight("zz", 2.0)


def test_a_scenario_reweighting_a_weight_blind_placement_is_refused() -> None:
    scenario = Scenario(
        population=Population(count=10),
        nodes=tuple(Node(name) for name in NAMES),
        strategy="jump",
        events=(Event("reweight", "c", weight=2.0),),
    )
    with pytest.raises(UnsupportedError, match=r"jump hash cannot weight nodes, got weight 2\.0"):
        run_scenario(scenario)


def test_the_modulo_baseline_is_built_from_names() -> None:
    scenario = Scenario(
        population=Population(count=200),
        nodes=(Node("a", weight=2.0), Node("b")),
        options=StrategyOptions(vnodes=16),
        events=(Event("add", "c", weight=3.0), Event("reweight", "a", weight=1.0)),
    )
    steps = run_scenario(scenario).steps
    assert steps[1].baseline_moved is not None and steps[1].baseline_moved > 0
    assert steps[2].baseline_moved == 0.0  # hash % N has no weights: nothing moves there
