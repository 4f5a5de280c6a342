"""ringkit.diff beyond rings: partition tables, maglev tables, any placement over keys, modulo."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringkit import (
    AllocatedRing,
    ConfigError,
    HashRing,
    Maglev,
    Modulo,
    MovedArc,
    UnsupportedError,
    diff,
)
from ringkit.compat import redis_cluster
from ringkit.hashing import HASHERS, get_hasher, hash_many
from ringkit.movement.units import modulo_fraction, modulo_order, native_hashes
from ringkit.strategies.registry import STRATEGY_NAMES, build_placement
from tests.movement.movement_helpers import StandInMaglev, StandInPartitions

# -- partition tables (the FixedPartitions contract) --------------------------------------------


def test_partition_tables_are_compared_partition_by_partition() -> None:
    old = StandInPartitions([["A"], ["B"], ["C"], ["A"], ["B"], ["C"]], "ABC")
    new = StandInPartitions([["A"], ["D"], ["C"], ["D"], ["B"], ["C"]], "ABCD")
    movement = diff(old, new)
    assert movement.basis == "partitions"
    # (0, 1] is partition 1 and (2, 3] partition 3
    assert movement.arcs == (MovedArc(0, 1, "B", "D", 1), MovedArc(2, 3, "A", "D", 1))
    assert movement.moved_fraction == 2 / 6
    assert movement.moved_points(range(6)) == [(1, "B", "D"), (3, "A", "D")]
    assert movement.moved_keys([7, 9, 12]) == [(7, "B", "D"), (9, "A", "D")]


def test_adjacent_partitions_coalesce_across_the_wrap() -> None:
    old = StandInPartitions([["A"], ["B"], ["B"], ["A"]], "AB")
    new = StandInPartitions([["C"], ["B"], ["B"], ["C"]], "BC")
    movement = diff(old, new)
    assert movement.arcs == (MovedArc(2, 0, "A", "C", 2),)  # partitions 3 and 0


@given(
    st.lists(
        st.lists(st.sampled_from("ABCDE"), min_size=2, max_size=2, unique=True),
        min_size=1,
        max_size=12,
    ),
    st.data(),
)
def test_partition_replica_moves_equal_brute_force(old_rows, data: st.DataObject) -> None:
    count = len(old_rows)
    new_rows = data.draw(
        st.lists(
            st.lists(st.sampled_from("ABCDE"), min_size=2, max_size=2, unique=True),
            min_size=count,
            max_size=count,
        )
    )
    old = StandInPartitions(old_rows, sorted({n for row in old_rows for n in row}))
    new = StandInPartitions(new_rows, sorted({n for row in new_rows for n in row}))
    movement = diff(old, new, replicas=2)
    streams = {(p, d) for p, _, d in movement.moved_points(range(count))}
    assert streams == {(p, n) for p in range(count) for n in new_rows[p] if n not in old_rows[p]}
    gains = sum(len(set(new_rows[p]) - set(old_rows[p])) for p in range(count))
    assert movement.moved_total == gains
    assert movement.moved_fraction == gains / (2 * count)


def test_partition_tables_of_different_sizes_need_keys() -> None:
    old = StandInPartitions([["A"], ["B"]], "AB")
    new = StandInPartitions([["A"], ["B"], ["A"]], "AB")
    with pytest.raises(ConfigError, match="needs keys="):
        diff(old, new)
    movement = diff(old, new, keys=list(range(12)))
    assert movement.basis == "keys"
    assert movement.keys_moved == sum(
        old.node_for_many([k]) != new.node_for_many([k]) for k in range(12)
    )


# -- maglev tables ------------------------------------------------------------------------------


def test_maglev_tables_are_compared_slot_by_slot() -> None:
    old = StandInMaglev("ABCABCA")
    new = StandInMaglev("ABDABCD")
    movement = diff(old, new)
    assert movement.basis == "slots"
    assert movement.arcs == (MovedArc(1, 2, "C", "D", 1), MovedArc(5, 6, "A", "D", 1))
    assert movement.moved_fraction == 2 / 7
    assert movement.moved_keys([2, 3, 6, 13]) == [(2, "C", "D"), (6, "A", "D"), (13, "A", "D")]


def test_maglev_with_replicas_falls_back_to_keys() -> None:
    old, new = StandInMaglev("ABCABCA"), StandInMaglev("ABDABCD")
    movement = diff(old, new, replicas=2, keys=list(range(14)))
    assert movement.basis == "keys"
    assert movement.keys_moved == 4


# -- any placement, over keys -------------------------------------------------------------------


@given(st.lists(st.integers(0, 10**6), min_size=1, max_size=60, unique=True), st.integers(1, 3))
def test_modulo_over_keys_equals_brute_force_and_its_own_baseline(keys, replicas: int) -> None:
    old = Modulo(["A", "B", "C", "D"])  # the default hasher: Modulo does not expose its own
    new = old.remove("B").add("E")
    movement = diff(old, new, replicas=replicas, keys=keys)
    expected = [
        (k, s, d)
        for k in keys
        for s, d in zip(
            [n for n in old.nodes_for(k, replicas) if n not in new.nodes_for(k, replicas)],
            [n for n in new.nodes_for(k, replicas) if n not in old.nodes_for(k, replicas)],
            strict=True,
        )
    ]
    assert movement.moved_keys(keys) == expected
    assert movement.keys_moved == len(expected)
    # hash % N beside it is this very placement, so it moves exactly as much
    assert movement.modulo_keys_moved == movement.keys_moved


def test_a_diff_over_keys_has_no_arcs_but_plans_per_pair() -> None:
    old = Modulo(["A", "B", "C"])
    new = old.add("D")
    keys = [f"key-{i}" for i in range(300)]
    movement = diff(old, new, keys=keys)
    assert movement.arcs == ()
    plan = movement.plan(sizes=[10] * len(keys))
    moved = movement.moved_keys(keys)
    assert sum(t.keys or 0 for t in plan.transfers) == len(moved)
    assert plan.total_bytes == 10 * len(moved)
    assert {(t.source, t.destination) for t in plan.transfers} == {(s, d) for _, s, d in moved}
    assert str(plan.transfers[0]).endswith(
        f"keys from {plan.transfers[0].source} to {plan.transfers[0].destination}"
    )
    with pytest.raises(UnsupportedError, match="use moved_keys"):
        movement.moved_points([1])
    with pytest.raises(UnsupportedError, match="has no arcs"):
        movement.gained("D")


def test_placements_without_structure_need_keys() -> None:
    with pytest.raises(ConfigError, match="diff of Modulo and Modulo needs keys="):
        diff(Modulo(["A"]), Modulo(["A", "B"]))


# -- the hash % N baseline ------------------------------------------------------------------------


@given(st.lists(st.sampled_from("ABCDEFGH"), min_size=1, max_size=8, unique=True), st.data())
def test_modulo_order_is_what_modulo_add_and_remove_leave(old_names, data: st.DataObject) -> None:
    removed = data.draw(
        st.lists(st.sampled_from(old_names), unique=True, max_size=len(old_names) - 1)
    )
    added = data.draw(st.lists(st.sampled_from("IJK"), unique=True))
    placement = Modulo(old_names)
    for name in removed:
        placement = placement.remove(name)
    for name in added:
        placement = placement.add(name)
    survivors = sorted(set(old_names) - set(removed))  # their order in `new` does not matter
    assert modulo_order(old_names, survivors + added) == list(placement)


@given(
    st.lists(st.sampled_from("ABCDEFGH"), min_size=1, max_size=8, unique=True),
    st.data(),
    st.integers(1, 3),
)
def test_modulo_fraction_equals_enumeration_over_every_residue(
    old_names, data: st.DataObject, replicas: int
) -> None:
    new_names = data.draw(
        st.lists(st.sampled_from("ABCDEFGHIJ"), min_size=1, max_size=9, unique=True)
    )
    order = modulo_order(old_names, new_names)
    n, m = len(old_names), len(order)
    lcm = n * m // math.gcd(n, m)
    moved = 0
    for x in range(lcm):
        before = {old_names[(x + i) % n] for i in range(min(replicas, n))}
        after = {order[(x + i) % m] for i in range(min(replicas, m))}
        moved += len(after - before)
    assert modulo_fraction(old_names, new_names, replicas) == pytest.approx(
        moved / (lcm * min(replicas, m))
    )


def test_ring_movement_stands_beside_modulo() -> None:
    old = HashRing([f"n{i}" for i in range(9)], vnodes=64)
    movement = diff(old, old.add("n9"), keys=[f"k{i}" for i in range(5000)])
    assert movement.modulo_fraction == pytest.approx(9 / 10)
    assert movement.optimum_fraction == pytest.approx(1 / 10)
    assert movement.keys_moved is not None and movement.modulo_keys_moved is not None
    assert movement.keys_moved < movement.modulo_keys_moved


@given(
    st.lists(
        st.text(max_size=8) | st.binary(max_size=8) | st.integers(-(10**6), 10**6), max_size=20
    ),
    st.sampled_from(sorted(HASHERS)),
)
def test_native_hashes_equal_hash_many_for_every_hasher(keys, name: str) -> None:
    assert native_hashes(keys, get_hasher(name)).tolist() == hash_many(keys, name).tolist()


def test_native_hashes_refuse_a_bad_key_like_hash_many() -> None:
    with pytest.raises(TypeError, match="float"):
        native_hashes(["a", 1.5], get_hasher("xxh3_64"))  # type: ignore[list-item]


@given(st.sampled_from(["add", "remove"]), st.lists(st.integers(0, 10**9), max_size=60))
def test_the_real_maglev_is_diffed_slot_by_slot(change: str, keys: list[int]) -> None:
    old = Maglev(["A", "B", "C", "D"], table_size=251)
    new = old.add("E") if change == "add" else old.remove("B")
    movement = diff(old, new)
    assert movement.basis == "slots"
    changed = [slot for slot in range(251) if old.table[slot] != new.table[slot]]
    assert movement.moved_total == len(changed)
    assert movement.moved_fraction == len(changed) / 251
    assert movement.moved_keys(keys) == [
        (k, old.node_for(k), new.node_for(k)) for k in keys if old.node_for(k) != new.node_for(k)
    ]


def test_the_sampled_replicated_modulo_fraction_is_within_its_standard_error() -> None:
    old = [f"n{i}" for i in range(300)]
    new = [*old[:150], *old[151:], "x", "y"]  # lcm(300, 301) = 90,300 residues > 2**16
    order = modulo_order(old, new)
    moved = 0
    for x in range(300 * 301):
        before = {old[x % 300], old[(x + 1) % 300]}
        moved += len({order[x % 301], order[(x + 1) % 301]} - before)
    exact = moved / (300 * 301 * 2)
    # standard error of a 65,536-residue sample: sqrt(p(1 - p) / 65,536) < 0.002
    assert modulo_fraction(old, new, 2) == pytest.approx(exact, abs=0.01)


@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
def test_every_registered_strategy_diffs_as_its_own_lookups_say(strategy: str) -> None:
    old = build_placement(strategy, ["A", "B", "C", "D"])
    new = old.add("E")
    keys = [f"key-{i}" for i in range(400)]
    movement = diff(old, new, keys=keys)
    before, after = old.node_for_many(keys), new.node_for_many(keys)
    expected = [(k, b, a) for k, b, a in zip(keys, before, after, strict=True) if b != a]
    assert movement.moved_keys(keys) == expected
    assert movement.keys_moved == len(expected)
    assert movement.plan().total_keys == len(expected)


# -- exact units from the protocol (segmentation), whatever the placement's type ----------------


def test_allocated_rings_are_compared_token_by_token() -> None:
    old = AllocatedRing(["A", "B", "C"], tokens=4)
    movement = diff(old, old.add("D"))
    assert movement.basis == "points"
    assert movement.moved_fraction == pytest.approx(old.add("D").shares()["D"])


def test_redis_cluster_slot_tables_are_compared_slot_by_slot() -> None:
    old = redis_cluster({"a": ["0-8191"], "b": ["8192-16383"]})
    new = redis_cluster({"a": ["0-4095"], "b": ["8192-16383"], "c": ["4096-8191"]})
    movement = diff(old, new)
    assert movement.basis == "slots"
    assert movement.moved_fraction == pytest.approx(4096 / 16384)
