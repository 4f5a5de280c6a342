"""ScheduledRemap: a versioned hash moved slice by slice; all or nothing for touched keys."""

from __future__ import annotations

import math

import hypothesis.strategies as st
import pytest
from hypothesis import given

from ringkit import ConfigError, HashRing, ScheduledRemap

KEYS = [f"session:{i}" for i in range(4000)]
NODES = ["a", "b", "c", "d"]


def test_version_zero_is_the_plain_ring() -> None:
    remap = ScheduledRemap(NODES, vnodes=40)
    assert remap.node_for_many(KEYS) == HashRing(NODES, vnodes=40).node_for_many(KEYS)
    assert remap.nodes_for("k", 2) == HashRing(NODES, vnodes=40).nodes_for("k", 2)


def test_a_step_touches_its_slice_and_moves_it_all_or_nothing() -> None:
    remap = ScheduledRemap(NODES)
    step = remap.advance(0.25)
    report = remap.report(step, KEYS)
    assert report.moved_untouched == 0
    # Touched keys: Binomial(4000, 1/4): mean 1000, sd ~27; 5 sd either side.
    assert abs(report.touched - 1000) < 5 * math.sqrt(4000 * 0.25 * 0.75)
    # Each touched key is re-rolled over 4 nodes: it moves with probability ~3/4 (shares of a
    # 160-vnode ring are within a few per cent of 1/4); 5 sd of a binomial over ~1000 keys.
    assert abs(report.moved_fraction_of_touched - 0.75) < 0.03 + 5 * math.sqrt(0.75 * 0.25 / 1000)


def test_four_quarter_steps_complete_the_version() -> None:
    remap = ScheduledRemap(NODES)
    for _ in range(4):
        remap = remap.advance(0.25)
    assert (remap.version, remap.progress) == (1, 0.0)
    assert remap.node_for_many(KEYS) == ScheduledRemap(NODES, version=1).node_for_many(KEYS)


@given(st.lists(st.floats(0.01, 0.6), min_size=1, max_size=5))
def test_keys_move_only_when_the_cursor_reaches_them(fractions: list[float]) -> None:
    remap = ScheduledRemap(NODES, vnodes=20)
    keys = KEYS[:300]
    for fraction in fractions:
        later = remap.advance(fraction)
        report = remap.report(later, keys)
        assert report.moved_untouched == 0
        for key in keys:
            assert later.version_for(key) - remap.version_for(key) in (0, 1)
        remap = later


def test_membership_changes_keep_the_cursor() -> None:
    remap = ScheduledRemap(NODES).advance(0.5)
    bigger = remap.add("e")
    assert bigger.progress == 0.5 and bigger.version == 0
    for key, before, after in zip(
        KEYS, remap.node_for_many(KEYS), bigger.node_for_many(KEYS), strict=True
    ):
        assert after in (before, "e"), key
    assert bigger.remove("e") == remap and remap.discard("zz") is remap
    assert len(remap) == 4 and "a" in remap and list(remap) == NODES
    assert "progress=0.500" in repr(remap)
    assert sum(remap.shares().values()) == pytest.approx(1.0)


def test_bad_input() -> None:
    with pytest.raises(ConfigError, match=r"fraction must be in \(0, 1\], got 0"):
        ScheduledRemap(NODES).advance(0)
    with pytest.raises(ConfigError, match="version must be an int >= 0, got -1"):
        ScheduledRemap(NODES, version=-1)
