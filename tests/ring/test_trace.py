"""``HashRing.trace``: the walk a lookup takes, readable by hand with a transparent hash."""

from __future__ import annotations

import dataclasses

import pytest

from ringkit import HashRing, Node, Trace
from ringkit.errors import ConfigError, EmptyRingError
from ringkit.hashing import Hasher

# The key's own number is its hash (groupcache's transparent hash): point = key % 360.
DECIMAL = Hasher("decimal", lambda data: int(data))


@pytest.fixture
def ring() -> HashRing:
    return HashRing.from_tokens({"A": [40], "B": [160], "C": [300]}, space=360, hasher=DECIMAL)


def test_a_point_between_tokens_belongs_to_the_next_token(ring: HashRing) -> None:
    trace = ring.trace(75)
    assert (trace.point, trace.hash_value, trace.hasher) == (75, 75, "decimal")
    assert (trace.owner, trace.preference_list, trace.wrapped) == ("B", ("B",), False)
    assert (trace.token, trace.token_index) == (160, 1)
    [step] = trace.steps
    assert (step.token, step.node, step.first, step.rank) == (160, "B", True, 1)
    assert not step.held_back and not step.wrapped


def test_a_point_past_the_last_token_wraps_to_the_first(ring: HashRing) -> None:
    trace = ring.trace(310, replicas=2)
    assert (trace.owner, trace.preference_list, trace.wrapped) == ("A", ("A", "B"), True)
    assert [(s.token, s.node, s.rank, s.wrapped) for s in trace.steps] == [
        (40, "A", 1, True),
        (160, "B", 2, True),
    ]


def test_a_point_exactly_on_a_token_belongs_to_that_token(ring: HashRing) -> None:
    trace = ring.trace(160, replicas=3)
    assert (trace.owner, trace.token, trace.wrapped) == ("B", 160, False)
    assert [(s.token, s.node, s.rank, s.wrapped) for s in trace.steps] == [
        (160, "B", 1, False),
        (300, "C", 2, False),
        (40, "A", 3, True),
    ]


def test_the_walk_skips_repeat_visits_until_the_list_is_complete() -> None:
    ring = HashRing.from_tokens({"A": [10, 20], "B": [30]}, space=100, hasher=DECIMAL)
    trace = ring.trace(5, replicas=2)
    assert [(s.token, s.node, s.first, s.rank) for s in trace.steps] == [
        (10, "A", True, 1),
        (20, "A", False, None),
        (30, "B", True, 2),
    ]
    assert not any(step.held_back for step in trace.steps)


def test_zones_hold_back_a_node_whose_zone_has_a_replica() -> None:
    # A and B share zone z1: walking from 5, B comes before C but ranks after it.
    nodes = {Node("A", zone="z1"): [10], Node("B", zone="z1"): [20], Node("C", zone="z2"): [30]}
    ring = HashRing.from_tokens(nodes, space=100, hasher=DECIMAL)
    trace = ring.trace(5, replicas=2)
    assert trace.preference_list == ("A", "C")
    assert [(s.node, s.rank, s.held_back) for s in trace.steps] == [
        ("A", 1, False),
        ("B", None, True),
        ("C", 2, False),
    ]
    full = ring.trace(5, replicas=3)
    assert full.preference_list == ("A", "C", "B")
    assert [(s.node, s.rank, s.held_back) for s in full.steps] == [
        ("A", 1, False),
        ("B", 3, True),
        ("C", 2, False),
    ]


@pytest.mark.parametrize("replicas", [1, 2, 3, 5])
def test_the_trace_agrees_with_the_lookups(replicas: int) -> None:
    ring = HashRing([Node("a", zone="x"), Node("b", zone="x"), "c", "d"], vnodes=8)
    for i in range(200):
        key = f"booking-{i:04d}"
        trace = ring.trace(key, replicas)
        assert trace.owner == trace.steps[0].node == ring.node_for(key)
        assert list(trace.preference_list) == ring.nodes_for(key, replicas)
        assert trace.point == ring.point_for(key)
        assert trace.token >= trace.point or trace.wrapped
        ranked = sorted((s.rank, s.node) for s in trace.steps if s.rank is not None)
        assert [node for _, node in ranked] == list(trace.preference_list)


def test_the_native_hash_is_shown_at_its_width() -> None:
    ring = HashRing(["A", "B", "C"], vnodes=8, hasher="fnv1a_32_mix")
    trace = ring.trace("booking-0001")
    assert trace.hash_hex == "0xf93f2e70"
    assert trace.point == trace.hash_value << 32


def test_a_trace_is_immutable(ring: HashRing) -> None:
    trace = ring.trace(75)
    assert isinstance(trace, Trace)
    with pytest.raises(dataclasses.FrozenInstanceError):
        trace.owner = "C"  # type: ignore[misc]


def test_bad_input_is_refused(ring: HashRing) -> None:
    with pytest.raises(EmptyRingError, match="empty ring"):
        HashRing().trace("k")
    with pytest.raises(ConfigError, match="n must be >= 1, got 0"):
        ring.trace(75, replicas=0)
