"""Regions of the key space: set algebra checked point by point, and a member's arcs exactly."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from ringkit.live.regions import SPACE, Region
from ringkit.ring import Arc, HashRing

TOP = SPACE - 1
# Points near the edges of the space and a few in between: where wrap-around and adjacency
# mistakes show.
point = st.one_of(
    st.integers(0, 5), st.integers(TOP - 5, TOP), st.integers(0, TOP), st.sampled_from([2**63])
)
interval = st.tuples(point, point).map(sorted)
region = st.lists(interval, max_size=8).map(
    lambda pairs: Region.of_intervals(
        np.array([p[0] for p in pairs], np.uint64), np.array([p[1] for p in pairs], np.uint64)
    )
)


def holds(region: Region, p: int) -> bool:
    return any(first <= p <= last for first, last in region.intervals())


def probes(*regions: Region) -> set[int]:
    """Every edge of the regions and its neighbours: where membership can change."""
    found = {0, TOP}
    for r in regions:
        for first, last in r.intervals():
            found |= {first, last, max(first - 1, 0), min(last + 1, TOP)}
    return found


def normalised(r: Region) -> bool:
    pairs = r.intervals()
    inside = all(first <= last for first, last in pairs)
    apart = all(b[0] > a[1] + 1 for a, b in itertools.pairwise(pairs))
    return inside and apart and r.firsts.dtype == np.uint64


@given(region, region)
def test_union_intersection_difference_and_complement_hold_point_by_point(
    a: Region, b: Region
) -> None:
    results = {
        "union": (a.union(b), lambda x, y: x or y),
        "intersect": (a.intersect(b), lambda x, y: x and y),
        "subtract": (a.subtract(b), lambda x, y: x and not y),
    }
    for name, (result, rule) in results.items():
        assert normalised(result), (name, result)
        for p in probes(a, b, result):
            assert holds(result, p) == rule(holds(a, p), holds(b, p)), (name, p, a, b, result)
    complement = a.complement()
    assert normalised(complement)
    for p in probes(a, complement):
        assert holds(complement, p) != holds(a, p), (p, a, complement)
    assert bool(a) == bool(a.intervals())


@given(region)
def test_a_region_read_back_from_its_arcs_is_itself(r: Region) -> None:
    assert Region.of_arcs(r.arcs("m")) == r


@given(
    st.dictionaries(
        st.sampled_from("abcd"),
        st.lists(st.one_of(point, st.sampled_from([7, TOP])), min_size=1, max_size=6, unique=True),
        min_size=1,
    ),
    st.sampled_from("abcd"),
)
def test_a_members_region_is_the_union_of_its_arcs(tokens: dict[str, list[int]], name: str) -> None:
    """Read from the token table at once, including ties, a token at the top and a lone one."""
    ring = HashRing.from_tokens(tokens)
    expected = Region.of_arcs(ring.arcs(name)) if name in ring else Region.empty()
    assert Region.of_member(ring, name) == expected


def test_the_whole_circle_and_a_tied_token() -> None:
    lone = HashRing.from_tokens({"a": [5]})
    assert Region.of_member(lone, "a") == Region.whole()
    tied = HashRing.from_tokens({"a": [5, 9], "b": [9]})
    # b's token sits on a's: b owns no point, a owns all.
    assert not Region.of_member(tied, "b")
    assert Region.of_member(tied, "a") == Region.whole()
    assert Region.of_arcs([Arc(0, 0, "a", SPACE)]).arcs("a") == (Arc(0, 0, "a", SPACE),)


@given(
    st.dictionaries(
        st.sampled_from("abcd"),
        st.lists(st.one_of(point, st.sampled_from([7, TOP])), min_size=1, max_size=6, unique=True),
        min_size=1,
    ),
    region,
)
def test_the_holders_of_a_region_are_the_members_whose_arcs_meet_it(
    tokens: dict[str, list[int]], r: Region
) -> None:
    """Exactly those members, but for tied tokens (counted as holders too: never one too few)."""
    ring = HashRing.from_tokens(tokens)
    names = [node.name for node in ring.nodes]
    meets = {name for name in names if Region.of_member(ring, name).intersect(r)}
    holders = r.holders(ring)
    assert meets <= holders
    untied = len(set(ring.tokens.tolist())) == len(ring.tokens)
    if untied:
        assert holders == meets
