"""Movement.plan and the cost model: transfers, waves, limits, sizes, bad input."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringkit import ConfigError, HashRing, MigrationPlan, Transfer, diff
from ringkit.hashing import Hasher
from ringkit.movement import build_plan

POINTS = {b"k1": 5, b"k2": 20, b"k3": 30, b"k4": 45, b"k5": 55, b"k6": 70, b"k7": 80, b"k8": 95}
SEED_003 = Hasher("seed003", POINTS.__getitem__, 64)
KEYS = [f"k{i}" for i in range(1, 9)]


def textbook_ring() -> HashRing:
    return HashRing.from_tokens(
        {"A": [10], "B": [35], "C": [60], "D": [85]}, space=100, hasher=SEED_003
    )


def test_textbook_plan_is_one_range_read_with_its_key_and_bytes() -> None:
    old = textbook_ring()
    movement = diff(old, old.add("E", tokens=[50]))
    plan = movement.plan(
        KEYS, [100 * i for i in range(1, 9)], setup_s=2.0, bandwidth_bytes_per_s=100.0
    )
    assert plan.transfers == (
        Transfer("C", "E", 35, 50, 15, keys=1, size_bytes=400, duration_s=6.0, wave=0),
    )
    assert str(plan.transfers[0]) == "arc (35, 50] from C to E"
    assert (plan.duration_s, plan.sources, plan.destinations) == (6.0, 1, 1)
    assert (plan.total_keys, plan.total_bytes) == (1, 400)


def test_without_sizes_bytes_are_the_arcs_share_of_total_bytes() -> None:
    old = textbook_ring()
    plan = diff(old, old.remove("C")).plan(
        setup_s=1.0, bandwidth_bytes_per_s=10.0, total_bytes=1000
    )
    (transfer,) = plan.transfers
    assert (transfer.keys, transfer.size_bytes) == (None, None)
    assert transfer.duration_s == pytest.approx(1.0 + 0.25 * 1000 / 10.0)
    assert plan.total_keys is None and plan.total_bytes is None


def test_keys_given_to_diff_are_the_plans_default() -> None:
    old = textbook_ring()
    plan = diff(old, old.remove("C"), keys=KEYS).plan()
    assert plan.transfers[0].keys == 2  # k4 (45) and k5 (55) leave C for D


def test_a_join_fetches_many_arcs_from_many_sources() -> None:
    old = HashRing([f"n{i}" for i in range(16)], vnodes=64)
    movement = diff(old, old.add("joiner"))
    plan = movement.plan(max_streams_per_source=1, total_bytes=10**12)
    per_source = Counter(arc.source for arc in movement.arcs)
    assert len(plan.transfers) == len(movement.arcs)
    assert plan.sources == len(per_source) and plan.destinations == 1
    assert len(plan.waves) == max(per_source.values())
    assert plan.duration_s == pytest.approx(sum(plan.wave_durations_s))


def test_a_destination_limit_spreads_a_join_over_waves() -> None:
    old = HashRing([f"n{i}" for i in range(8)], vnodes=16)
    movement = diff(old, old.add("joiner"))
    plan = movement.plan(max_streams_per_destination=4)
    assert len(plan.waves) == -(-len(movement.arcs) // 4)
    assert all(len(wave) <= 4 for wave in plan.waves)


candidates = st.lists(
    st.tuples(
        st.sampled_from("ABCD"),
        st.sampled_from("WXYZ"),
        st.integers(0, 99),
        st.integers(0, 99),
        st.integers(1, 100),
        st.none(),
        st.integers(0, 10**6),
    ),
    max_size=40,
)


@given(candidates, st.integers(1, 4), st.none() | st.integers(1, 4))
def test_waves_respect_the_stream_limits_and_the_cost_model(
    drawn, per_source: int, per_destination: int | None
) -> None:
    plan = build_plan(
        drawn,
        space=100,
        max_streams_per_source=per_source,
        max_streams_per_destination=per_destination,
        setup_s=0.5,
        bandwidth_bytes_per_s=1000.0,
    )
    assert isinstance(plan, MigrationPlan)
    assert sorted(
        (t.source, t.destination, t.start, t.end, t.length, t.keys, t.size_bytes)
        for t in plan.transfers
    ) == sorted(drawn)
    for index, wave in enumerate(plan.waves):
        assert wave, "no empty waves"
        assert max(Counter(t.source for t in wave).values()) <= per_source
        if per_destination is not None:
            assert max(Counter(t.destination for t in wave).values()) <= per_destination
        assert plan.wave_durations_s[index] == max(t.duration_s for t in wave)
    for transfer in plan.transfers:
        assert transfer.duration_s == pytest.approx(0.5 + (transfer.size_bytes or 0) / 1000.0)
    assert plan.duration_s == pytest.approx(sum(plan.wave_durations_s))


def test_bad_plan_options_are_refused_naming_the_value() -> None:
    old = textbook_ring()
    movement = diff(old, old.add("E", tokens=[50]))
    with pytest.raises(ConfigError, match="max_streams_per_source must be an int >= 1, got 0"):
        movement.plan(max_streams_per_source=0)
    with pytest.raises(ConfigError, match="max_streams_per_destination must be an int >= 1, got 0"):
        movement.plan(max_streams_per_destination=0)
    with pytest.raises(ConfigError, match="setup_s must be a finite number >= 0, got -1"):
        movement.plan(setup_s=-1)
    with pytest.raises(
        ConfigError, match="bandwidth_bytes_per_s must be a finite number > 0, got 0"
    ):
        movement.plan(bandwidth_bytes_per_s=0)
    with pytest.raises(ConfigError, match="sizes need keys"):
        movement.plan(sizes=[1, 2])
    with pytest.raises(ConfigError, match="got 2 sizes for 8 keys"):
        movement.plan(KEYS, [1, 2])
    with pytest.raises(ConfigError, match="sizes must be >= 0, got -5"):
        movement.plan(KEYS, [-5] + [1] * 7)
