"""RangePartitions: order-preserving placement, exact range queries, hot-range splits."""

from __future__ import annotations

import itertools

import hypothesis.strategies as st
import pytest
from hypothesis import given

from ringkit import (
    ConfigError,
    DuplicateNodeError,
    EmptyRingError,
    RangePartitions,
    UnknownNodeError,
)

ALPHABET = [b"", b"\x00", b"a", b"m", b"z", b"\xff"]
UNIVERSE = sorted({a + b for a, b in itertools.product(ALPHABET, repeat=2)})


@st.composite
def tables(draw: st.DrawFn) -> RangePartitions:
    splits = sorted(
        draw(st.sets(st.sampled_from([u for u in UNIVERSE if u]), min_size=2, max_size=8))
    )
    count = draw(st.integers(1, min(4, len(splits) + 1)))
    return RangePartitions([f"n{i}" for i in range(count)], splits=splits)


@given(tables(), st.sampled_from(UNIVERSE), st.sampled_from(UNIVERSE))
def test_range_queries_match_brute_force(table: RangePartitions, start: bytes, end: bytes) -> None:
    table._check()
    expected = list(dict.fromkeys(table.node_for(k) for k in UNIVERSE if start <= k < end))
    assert table.nodes_for_range(start, end) == expected
    assert table.nodes_for_range(None, end) == list(
        dict.fromkeys(table.node_for(k) for k in UNIVERSE if k < end)
    )
    assert table.nodes_for_range(start, None) == list(
        dict.fromkeys(table.node_for(k) for k in UNIVERSE if k >= start)
    )


@given(tables(), st.lists(st.sampled_from(UNIVERSE), min_size=1, max_size=30))
def test_keys_follow_their_order(table: RangePartitions, keys: list[bytes]) -> None:
    ordered = sorted(keys)
    ranges = [table.range_for(key) for key in ordered]
    assert ranges == sorted(ranges)
    assert table.node_for_many(keys) == [table.node_for(key) for key in keys]


def test_range_scan_touches_one_or_two_nodes() -> None:
    table = RangePartitions(["a", "b", "c", "d"])
    assert table.nodes_for_range("user:100", "user:200") == ["b"]
    assert len(RangePartitions(["a", "b"], splits=["m"]).nodes_for_range("l", "n")) == 2


def test_split_hot_fixes_a_hot_range() -> None:
    keys = [f"user:{i:05d}" for i in range(1000)] + [f"z{i}" for i in range(50)]
    table = RangePartitions(["a", "b", "c", "d"])
    before = table.load(keys)
    assert max(before) == 1050  # every key starts with a byte in [0x40, 0x80): one range
    fixed = table.split_hot(keys, max_fraction=0.3)
    fixed._check()
    after = fixed.load(keys)
    assert max(after) <= 0.3 * len(keys)
    assert sum(after) == len(keys)
    assert [fixed.node_for(k) for k in keys[:3]] == fixed.node_for_many(keys[:3])


def test_one_hot_key_cannot_be_split() -> None:
    table = RangePartitions(["a", "b"])
    assert table.split_hot(["same"] * 10, max_fraction=0.5) == table


def test_add_and_remove_keep_every_key_placed() -> None:
    table = RangePartitions(["a", "b"])
    bigger = table.add("c")
    bigger._check()
    assert set(bigger.owners) == {"a", "b", "c"}
    smaller = bigger.remove("a")
    smaller._check()
    assert "a" not in smaller.owners and set(smaller.owners) == {"b", "c"}
    assert smaller.discard("zz") is smaller
    assert sum(bigger.shares().values()) == pytest.approx(1.0)


def test_nodes_for_walks_following_ranges() -> None:
    table = RangePartitions(["a", "b", "c"], splits=["h", "p"])
    assert table.nodes_for("kiwi", 2) == ["b", "c"]
    assert table.nodes_for("zebra", 5) == ["c", "a", "b"]


def test_bad_input() -> None:
    with pytest.raises(ConfigError, match="splits must be strictly increasing"):
        RangePartitions(["a", "b"], splits=["m", "c"])
    with pytest.raises(ConfigError, match=r"at least one range per node \(3\), got 1 splits"):
        RangePartitions(["a", "b", "c"], splits=["m"])
    table = RangePartitions(["a", "b"], splits=["m"])
    with pytest.raises(ConfigError, match="split point 'm' is already a split point"):
        table.split("m")
    with pytest.raises(ConfigError, match="max_fraction must be in"):
        table.split_hot([], max_fraction=0)
    with pytest.raises(UnknownNodeError, match="node 'x' is not in the placement"):
        table.remove("x")
    with pytest.raises(DuplicateNodeError, match="'a' is already"):
        table.add("a")
    with pytest.raises(EmptyRingError, match="nodes_for_range"):
        RangePartitions().nodes_for_range("a", "b")
