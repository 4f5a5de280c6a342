"""ringkit.diff on rings: the textbook example, brute-force properties, replicas, bad input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ringkit
from ringkit import ConfigError, EmptyRingError, HashRing, MovedArc, UnknownNodeError, diff
from ringkit.hashing import Hasher
from ringkit.movement.segments import exact_sum
from tests.movement.movement_helpers import (
    IDENTITY,
    brute_streams,
    point_ring,
    points_of,
    replica_sets,
    token_maps,
)

SEED_003_POINTS = {
    b"k1": 5,
    b"k2": 20,
    b"k3": 30,
    b"k4": 45,
    b"k5": 55,
    b"k6": 70,
    b"k7": 80,
    b"k8": 95,
}
SEED_003 = Hasher("seed003", SEED_003_POINTS.__getitem__, 64)


def textbook_ring() -> HashRing:
    return HashRing.from_tokens(
        {"A": [10], "B": [35], "C": [60], "D": [85]}, space=100, hasher=SEED_003
    )


# -- the textbook example, corrected --------------------------------------------------------------


def test_textbook_adding_e_at_50_moves_only_the_arc_35_50_from_c_to_e() -> None:
    old = textbook_ring()
    movement = diff(old, old.add("E", tokens=[50]))
    assert movement.arcs == (MovedArc(35, 50, "C", "E", 15),)
    assert str(movement.arcs[0]) == "arc (35, 50] from C to E"
    assert movement.moved_total == 15
    assert movement.moved_fraction == 0.15
    assert movement.pairs() == {("C", "E"): 15}


def test_textbook_only_k4_moves_not_k5() -> None:
    old = textbook_ring()
    movement = diff(old, old.add("E", tokens=[50]))
    keys = [f"k{i}" for i in range(1, 9)]
    assert movement.moved_keys(keys) == [("k4", "C", "E")]
    assert movement.moved_points([5, 20, 30, 45, 55, 70, 80, 95]) == [(45, "C", "E")]


def test_textbook_keys_given_to_diff_are_counted_beside_modulo() -> None:
    old = textbook_ring()
    keys = [f"k{i}" for i in range(1, 9)]
    movement = diff(old, old.add("E", tokens=[50]), keys=keys)
    assert (movement.keys_total, movement.keys_moved) == (8, 1)
    # hash % 4 -> hash % 5 over the eight points, nodes in order A, B, C, D, then E:
    expected = sum("ABCD"[p % 4] != "ABCDE"[p % 5] for p in SEED_003_POINTS.values())
    assert movement.modulo_keys_moved == expected
    assert movement.modulo_fraction == pytest.approx(4 / 5)


def test_textbook_removing_c_hands_its_whole_arc_to_d() -> None:
    old = textbook_ring()
    movement = diff(old, old.remove("C"))
    assert movement.arcs == (MovedArc(35, 60, "C", "D", 25),)
    assert movement.optimum_fraction == pytest.approx(0.25)


# -- exactness against brute force -------------------------------------------------------------


def _moved_points(old: HashRing, new: HashRing) -> set[int]:
    return {p for p in range(old.space) if old.node_for(p) != new.node_for(p)}


@given(st.integers(1, 60).flatmap(lambda s: st.tuples(st.just(s), token_maps(s), token_maps(s))))
def test_union_of_moved_arcs_is_exactly_the_points_whose_owner_differs(drawn) -> None:
    space, before, after = drawn
    old, new = point_ring(before, space), point_ring(after, space)
    movement = diff(old, new)
    covered: list[int] = []
    for arc in movement.arcs:
        points = points_of(arc.start, arc.end, space)
        assert arc.length == len(points)
        assert {(old.node_for(p), new.node_for(p)) for p in points} == {
            (arc.source, arc.destination)
        }
        covered += points
    assert sorted(covered) == sorted(_moved_points(old, new))  # disjoint and complete
    assert movement.moved_total == len(covered)


@given(st.integers(1, 40).flatmap(lambda s: st.tuples(st.just(s), token_maps(s), token_maps(s))))
def test_moved_arcs_are_coalesced(drawn) -> None:
    space, before, after = drawn
    movement = diff(point_ring(before, space), point_ring(after, space))
    ends = {(arc.end, arc.source, arc.destination) for arc in movement.arcs}
    for arc in movement.arcs:
        if arc.length < space:  # a neighbour ending where this arc starts must differ
            assert (arc.start, arc.source, arc.destination) not in ends


@given(
    st.integers(1, 50).flatmap(lambda s: st.tuples(st.just(s), token_maps(s), token_maps(s))),
    st.lists(st.integers(0, 10_000), max_size=40),
)
def test_key_level_moves_equal_brute_force(drawn, keys: list[int]) -> None:
    space, before, after = drawn
    old, new = point_ring(before, space), point_ring(after, space)
    movement = diff(old, new)
    expected = [
        (k, old.node_for(k), new.node_for(k)) for k in keys if old.node_for(k) != new.node_for(k)
    ]
    assert movement.moved_keys(keys) == expected
    points = list(range(space))
    assert movement.moved_points(points) == [
        (p, old.node_for(p), new.node_for(p)) for p in sorted(_moved_points(old, new))
    ]


@given(
    st.integers(2, 60).flatmap(lambda s: st.tuples(st.just(s), token_maps(s, min_nodes=2))),
    st.data(),
)
def test_a_removal_sends_arcs_only_from_the_removed_node_to_its_clockwise_successors(
    drawn, data: st.DataObject
) -> None:
    space, tokens = drawn
    old = point_ring(tokens, space)
    removed = data.draw(st.sampled_from(sorted(tokens)))
    new = old.remove(removed)
    movement = diff(old, new)
    for arc in movement.arcs:
        assert arc.source == removed
        # the successor: the first surviving token clockwise from the arc's end
        successor = min((int(t) for t in new.tokens), key=lambda t: (t - arc.end) % space)
        assert arc.destination == new.node_for(successor)
    assert movement.moved_total == sum(old.node_for(p) == removed for p in range(space))
    assert movement.moved_total == old.owned_points()[removed]


@given(st.integers(1, 80).flatmap(lambda s: st.tuples(st.just(s), token_maps(s))), st.data())
def test_moved_fraction_after_an_add_equals_the_new_nodes_share_exactly(
    drawn, data: st.DataObject
) -> None:
    space, tokens = drawn
    old = point_ring(tokens, space)
    new_tokens = data.draw(st.lists(st.integers(0, space - 1), min_size=1, max_size=4, unique=True))
    new = old.add("N", tokens=new_tokens)
    movement = diff(old, new)
    share = sum(new.node_for(p) == "N" for p in range(space))
    assert movement.moved_total == share == new.owned_points()["N"]
    assert movement.moved_fraction == share / space == new.shares()["N"]
    assert {arc.destination for arc in movement.arcs} <= {"N"}


def test_moved_fraction_is_exact_in_the_64_bit_space() -> None:
    old = HashRing([f"n{i}" for i in range(20)], vnodes=50)
    new = old.add("joiner")
    movement = diff(old, new)
    assert movement.moved_total == new.owned_points()["joiner"]
    assert sum(arc.length for arc in movement.arcs) == movement.moved_total
    assert movement.moved_fraction == pytest.approx(new.shares()["joiner"], rel=1e-12)


def test_a_whole_circle_move_has_the_whole_space_as_its_length() -> None:
    old = HashRing.from_tokens({"A": [7]}, hasher=IDENTITY)
    new = HashRing.from_tokens({"B": [7]}, hasher=IDENTITY)
    movement = diff(old, new)
    assert movement.arcs == (MovedArc(7, 7, "A", "B", 2**64),)
    assert movement.moved_fraction == 1.0


def test_identical_rings_move_nothing() -> None:
    ring = HashRing(["a", "b", "c"], vnodes=16)
    movement = diff(ring, HashRing(["c", "b", "a"], vnodes=16))
    assert movement.arcs == () and movement.moved_total == 0 and movement.pairs() == {}
    assert movement.moved_keys(["x", "y"]) == []


# -- replicas ----------------------------------------------------------------------------------


@given(
    st.integers(1, 40).flatmap(lambda s: st.tuples(st.just(s), token_maps(s), token_maps(s))),
    st.integers(1, 4),
)
def test_gained_and_lost_replica_ranges_equal_brute_force(drawn, replicas: int) -> None:
    space, before, after = drawn
    old, new = point_ring(before, space), point_ring(after, space)
    movement = diff(old, new, replicas=replicas)
    old_sets, new_sets = replica_sets(old, replicas), replica_sets(new, replicas)
    for node in sorted({*before, *after}):
        gained = {p for arc in movement.gained(node) for p in points_of(arc.start, arc.end, space)}
        lost = {p for arc in movement.lost(node) for p in points_of(arc.start, arc.end, space)}
        assert gained == {
            p for p in range(space) if node in new_sets[p] and node not in old_sets[p]
        }
        assert lost == {p for p in range(space) if node in old_sets[p] and node not in new_sets[p]}
    streams = {
        (p, arc.destination) for arc in movement.arcs for p in points_of(arc.start, arc.end, space)
    }
    assert streams == brute_streams(old_sets, new_sets)


@given(
    st.integers(3, 40).flatmap(lambda s: st.tuples(st.just(s), token_maps(s, min_nodes=3))),
    st.data(),
)
def test_with_three_replicas_the_plan_restores_exactly_three_distinct_copies(
    drawn, data: st.DataObject
) -> None:
    space, tokens = drawn
    old = point_ring(tokens, space)
    change = data.draw(st.sampled_from(["add", "remove"]))
    if change == "add" or len(tokens) == 3:
        new = old.add(
            "N",
            tokens=data.draw(
                st.lists(st.integers(0, space - 1), min_size=1, max_size=3, unique=True)
            ),
        )
    else:
        new = old.remove(data.draw(st.sampled_from(sorted(tokens))))
    movement = diff(old, new, replicas=3)
    plan = movement.plan(max_streams_per_source=1)
    holders = [set(old.nodes_for(p, 3)) for p in range(space)]
    for transfer in plan.transfers:
        for p in points_of(transfer.start, transfer.end, space):
            assert transfer.source in holders[p], "a source must hold what it sends"
            holders[p].add(transfer.destination)
    for p in range(space):
        dropped = {
            n
            for n in holders[p]
            if any(p in points_of(a.start, a.end, space) for a in movement.lost(n))
        }
        assert holders[p] - dropped == set(new.nodes_for(p, 3))
        assert len(holders[p] - dropped) == min(3, len(new))


@given(
    st.integers(2, 30).flatmap(lambda s: st.tuples(st.just(s), token_maps(s, min_nodes=2))),
    st.integers(1, 4),
    st.sampled_from(["z1", "z2"]),
)
def test_zoned_rings_follow_the_rings_own_preference_lists(drawn, replicas: int, zone: str) -> None:
    space, tokens = drawn
    zones = {name: (zone if i % 2 else "z0") for i, name in enumerate(sorted(tokens))}
    old = point_ring(tokens, space, zones)
    new = old.remove(sorted(tokens)[0])
    movement = diff(old, new, replicas=replicas)
    streams = {
        (p, arc.destination) for arc in movement.arcs for p in points_of(arc.start, arc.end, space)
    }
    assert streams == brute_streams(replica_sets(old, replicas), replica_sets(new, replicas))


def test_replicas_on_a_large_ring_add_send_copies_only_to_the_new_node() -> None:
    old = HashRing([f"n{i}" for i in range(12)], vnodes=32)
    movement = diff(old, old.add("joiner"), replicas=3)
    assert {arc.destination for arc in movement.arcs} == {"joiner"}
    # each source gives up the copy the joiner takes over, so no source is the joiner
    assert "joiner" not in {arc.source for arc in movement.arcs}
    assert movement.moved_fraction == pytest.approx(movement.moved_total / (3 * 2**64))


# -- bad input ---------------------------------------------------------------------------------


def test_bad_replicas_are_refused_naming_the_value() -> None:
    ring = HashRing(["a"])
    with pytest.raises(ConfigError, match="replicas must be >= 1, got 0"):
        diff(ring, ring, replicas=0)
    with pytest.raises(TypeError, match="replicas must be int, got float"):
        diff(ring, ring, replicas=1.5)  # type: ignore[arg-type]


def test_an_empty_side_is_refused() -> None:
    with pytest.raises(EmptyRingError, match="the new placement is empty"):
        diff(HashRing(["a"]), HashRing())


def test_points_outside_the_space_are_refused_naming_the_value() -> None:
    movement = diff(textbook_ring(), textbook_ring().add("E", tokens=[50]))
    with pytest.raises(ConfigError, match=r"point must be in \[0, 100\), got 150"):
        movement.moved_points([5, 150])
    with pytest.raises(ConfigError, match="got -1"):
        movement.moved_points([-1])
    with pytest.raises(TypeError, match="points must be ints, got float"):
        movement.moved_points([1.5])
    with pytest.raises(TypeError, match="points must be ints, got an array of float64"):
        movement.moved_points(np.array([1.5]))


def test_a_single_string_is_not_a_key_list() -> None:
    movement = diff(textbook_ring(), textbook_ring())
    with pytest.raises(TypeError, match="keys must be an iterable of keys, got a single str"):
        movement.moved_keys("k1")


def test_gained_for_an_unknown_node_names_it() -> None:
    movement = diff(textbook_ring(), textbook_ring().add("E", tokens=[50]))
    with pytest.raises(UnknownNodeError, match="node 'Z' is not in the diff"):
        movement.gained("Z")


def test_rings_of_different_spaces_need_keys() -> None:
    small = HashRing.from_tokens({"A": [1]}, space=10)
    with pytest.raises(ConfigError, match="diff of HashRing and HashRing needs keys="):
        diff(small, HashRing(["A"]))
    movement = diff(small, HashRing(["A", "B"]), keys=["x", "y", "z"])
    assert movement.basis == "keys" and movement.keys_total == 3


def test_exports() -> None:
    for name in ("diff", "Movement", "MovedArc", "MigrationPlan", "Transfer"):
        assert name in ringkit.__all__


@given(
    st.sampled_from([10**9 + 7, 2**40, 2**64]),
    st.data(),
)
def test_moved_points_in_large_spaces_equal_brute_force(space: int, data: st.DataObject) -> None:
    token = st.integers(0, space - 1)
    before = {n: data.draw(st.lists(token, min_size=1, max_size=5, unique=True)) for n in "ABC"}
    after = {**before, "D": data.draw(st.lists(token, min_size=1, max_size=5, unique=True))}
    del after[data.draw(st.sampled_from("ABC"))]
    old, new = point_ring(before, space), point_ring(after, space)
    points = data.draw(st.lists(token, max_size=50)) + [int(t) for t in old.tokens]
    moved = diff(old, new).moved_points(points)
    assert moved == [
        (p, old.node_for_point(p), new.node_for_point(p))
        for p in points
        if old.node_for_point(p) != new.node_for_point(p)
    ]


@given(st.lists(st.integers(0, 2**64 - 1), max_size=300))
def test_exact_sum_never_loses_a_point(values: list[int]) -> None:
    assert exact_sum(np.array(values, dtype=np.uint64)) == sum(values)
