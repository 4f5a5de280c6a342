"""Invariants of the ring, checked by hypothesis on rings small enough to enumerate every point."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hypothesis import assume, given
from hypothesis import strategies as st

from ringkit import HashRing, Node
from tests.hypothesis_strategies import (
    key_lists,
    node_name_sets,
    node_names,
    small_vnodes,
    token_layouts,
)


def brute_owner(layout: dict[str, list[int]], point: int) -> str:
    """The owner by the definition: the first (token, name) >= point, else the first overall."""
    pairs = sorted((token, name) for name, tokens in layout.items() for token in tokens)
    for token, name in pairs:
        if token >= point:
            return name
    return pairs[0][1]


@given(token_layouts())
def test_every_point_is_owned_by_the_first_token_at_or_after_it_with_wrap(
    case: tuple[dict[str, list[int]], int],
) -> None:
    layout, space = case
    ring = HashRing.from_tokens(layout, space=space)
    ring._check()
    owners = [ring.node_for_point(p) for p in range(space)]
    assert owners == [brute_owner(layout, p) for p in range(space)]
    assert [ring.nodes[i].name for i in ring.owner_indices(list(range(space)))] == owners
    # Shares are exact: the points each node owns, counted one by one.
    assert ring.owned_points() == {name: owners.count(name) for name in layout}


@given(token_layouts(), node_names, st.lists(st.integers(0, 10**6), min_size=1, max_size=4))
def test_adding_a_node_moves_exactly_its_share_and_only_to_it(
    case: tuple[dict[str, list[int]], int], new: str, raw_tokens: list[int]
) -> None:
    layout, space = case
    assume(new not in layout)
    tokens = sorted({t % space for t in raw_tokens})
    before = HashRing.from_tokens(layout, space=space)
    after = before.add(new, tokens=tokens)
    after._check()
    moved = [p for p in range(space) if before.node_for_point(p) != after.node_for_point(p)]
    assert all(after.node_for_point(p) == new for p in moved)
    assert len(moved) == after.owned_points()[new]  # the moved fraction is its share, exactly
    assert after.remove(new) == before


@given(token_layouts(max_nodes=6))
def test_removing_a_node_moves_only_its_points_to_its_clockwise_successors(
    case: tuple[dict[str, list[int]], int],
) -> None:
    layout, space = case
    assume(len(layout) >= 2)
    gone = sorted(layout)[0]
    before = HashRing.from_tokens(layout, space=space)
    after = before.remove(gone)
    rest = {name: tokens for name, tokens in layout.items() if name != gone}
    for p in range(space):
        if before.node_for_point(p) != gone:
            assert after.node_for_point(p) == before.node_for_point(p)
        else:
            assert after.node_for_point(p) == brute_owner(rest, p)


@given(node_name_sets, small_vnodes, key_lists, st.randoms(use_true_random=False))
def test_insertion_order_does_not_matter(
    names: list[str], vnodes: int, keys: list[str | bytes | int], rng: object
) -> None:
    shuffled = list(names)
    rng.shuffle(shuffled)  # type: ignore[attr-defined]
    one = HashRing(names, vnodes=vnodes)
    incremental = HashRing([], vnodes=vnodes)
    for name in shuffled:
        incremental = incremental.add(name)
    incremental._check()
    assert one == incremental
    assert one.node_for_many(keys) == incremental.node_for_many(keys)


@given(node_name_sets, small_vnodes, key_lists, node_names)
def test_hashed_ring_add_moves_keys_only_to_the_new_node(
    names: list[str], vnodes: int, keys: list[str | bytes | int], new: str
) -> None:
    assume(new not in names)
    before = HashRing(names, vnodes=vnodes)
    after = before.add(new)
    for old_owner, new_owner in zip(
        before.node_for_many(keys), after.node_for_many(keys), strict=True
    ):
        assert new_owner in (old_owner, new)


@given(node_name_sets, small_vnodes, key_lists, st.integers(1, 10))
def test_replicas_are_distinct_and_start_with_the_owner(
    names: list[str], vnodes: int, keys: list[str | bytes | int], n: int
) -> None:
    ring = HashRing(names, vnodes=vnodes)
    for key in keys:
        replicas = ring.nodes_for(key, n)
        assert len(replicas) == min(n, len(names)) == len(set(replicas))
        assert replicas[0] == ring.node_for(key)


@given(
    st.lists(st.tuples(node_names, st.sampled_from(["z1", "z2", "z3"])), min_size=1, max_size=8,
             unique_by=lambda pair: pair[0]),
    small_vnodes,
    key_lists,
)  # fmt: skip
def test_replicas_cover_as_many_zones_as_they_can(
    pairs: list[tuple[str, str]], vnodes: int, keys: list[str | bytes | int]
) -> None:
    ring = HashRing([Node(name, zone=zone) for name, zone in pairs], vnodes=vnodes)
    zone_of = dict(pairs)
    zones = len(set(zone_of.values()))
    for key in keys:
        replicas = ring.nodes_for(key, zones)
        assert len({zone_of[name] for name in replicas}) == zones


def test_same_owners_in_processes_with_different_hash_seeds() -> None:
    # Python salts str hashes per process; ringkit must not depend on hash().
    script = (
        "import ringkit;"
        "r = ringkit.HashRing(['a', 'b', 'c', 'd'], vnodes=32);"
        "print(','.join(r.node_for_many([f'k{i}' for i in range(300)])))"
    )
    src = str(Path(__file__).resolve().parents[2] / "src")
    outputs = set()
    for seed in ("0", "1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": src}
        result = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
        )
        outputs.add(result.stdout.strip())
    local = ",".join(
        HashRing(["a", "b", "c", "d"], vnodes=32).node_for_many([f"k{i}" for i in range(300)])
    )
    assert outputs == {local}
