"""Balance measurement and the theory beside it (random spacings)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringkit import HashRing
from ringkit.errors import ConfigError
from ringkit.stats import (
    balance,
    cv_exact,
    cv_theory,
    draw_shares,
    expected_largest_share,
    harmonic,
    imbalance,
    moved_fraction,
    summarize,
    worst_share,
)


def test_spacing_theory_worst_share_figures() -> None:
    # The estimate gives worst_share(10, 1) ~0.31 and worst_share(10, 256) ~0.11.
    assert worst_share(10, 1) == pytest.approx(0.3146, abs=1e-4)
    assert worst_share(10, 256) == pytest.approx(0.1134, abs=1e-4)


def test_spacing_theory_largest_arc_figures() -> None:
    # H_N / N: about 0.29 of the circle for N = 10, about 0.052 for N = 100.
    assert expected_largest_share(10) == pytest.approx(0.2929, abs=1e-4)
    assert expected_largest_share(100) == pytest.approx(0.0519, abs=1e-4)
    assert harmonic(1) == 1.0


def test_cv_theory_and_exact() -> None:
    assert cv_theory(100) == 0.1
    assert cv_theory(1) == 1.0
    # Beta(v, m - v) tends to 1/sqrt(v) as n grows.
    assert cv_exact(10_000, 256) == pytest.approx(cv_theory(256), rel=1e-3)
    assert cv_exact(3, 1) == pytest.approx(math.sqrt(2 / 4))


def test_balance_against_weights() -> None:
    b = balance({"A": 137, "B": 82, "C": 81}, {"A": 1.0, "B": 1.0, "C": 1.0})
    assert b.busiest == "A"
    assert b.busiest_ratio == pytest.approx(1.37)
    assert b.max_over_mean == pytest.approx(1.37)
    assert b.fair == {"A": 100.0, "B": 100.0, "C": 100.0}
    weighted = balance({"big": 200, "small": 100}, {"big": 2.0, "small": 1.0})
    assert weighted.busiest_ratio == pytest.approx(1.0)
    assert weighted.cv == pytest.approx(0.0)
    assert weighted.max_over_mean == pytest.approx(200 / 150)


def test_balance_of_no_load_is_even() -> None:
    b = balance({}, {"A": 1.0, "B": 1.0})
    assert b.busiest_ratio == 1.0
    assert b.loads == {"A": 0.0, "B": 0.0}


@pytest.mark.parametrize(
    ("loads", "weights", "metric", "match"),
    [
        ({"A": 1}, {}, "keys", "at least one node, got none"),
        ({"A": 1}, {"A": 0.0}, "keys", "weight of node 'A' must be > 0, got 0.0"),
        ({"A": -1}, {"A": 1.0}, "keys", "load of node 'A' must be >= 0, got -1"),
        ({"Z": 1}, {"A": 1.0}, "keys", "node 'Z' has a load but no weight"),
        ({"A": 1}, {"A": 1.0}, "watts", "unknown metric 'watts'; known: keys, bytes, requests"),
    ],
)
def test_balance_refuses_bad_input(
    loads: dict[str, float], weights: dict[str, float], metric: str, match: str
) -> None:
    with pytest.raises(ConfigError, match=match):
        balance(loads, weights, metric=metric)


def test_moved_fraction() -> None:
    assert moved_fraction([], []) == 0.0
    assert moved_fraction([1, 2, 3, 4], [1, 2, 0, 0]) == 0.5
    with pytest.raises(ConfigError, match="same length, got 2 and 1"):
        moved_fraction([1, 2], [1])


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: worst_share(0, 1), "n must be >= 1, got 0"),
        (lambda: worst_share(3, 0), "vnodes must be >= 1, got 0"),
        (lambda: cv_theory(0), "vnodes must be >= 1, got 0"),
        (lambda: draw_shares(3, 1, 0), "draws must be >= 1, got 0"),
        (lambda: draw_shares(3, 1, 1, replicas=4), r"replicas must be in \[1, 3\] .* got 4"),
    ],
)
def test_theory_refuses_bad_input(call: object, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        call()  # type: ignore[operator]


@given(
    n=st.integers(1, 12),
    v=st.integers(1, 20),
    replicas=st.integers(1, 3),
    seed=st.integers(0, 2**32 - 1),
)
def test_draw_shares_rows_sum_to_one(n: int, v: int, replicas: int, seed: int) -> None:
    shares = draw_shares(n, v, 3, seed=seed, replicas=min(replicas, n))
    assert shares.shape == (3, n)
    np.testing.assert_allclose(shares.sum(axis=1), 1.0, rtol=1e-9)
    assert (shares >= 0).all()
    # With R replicas no node can hold more than every arc once: share <= 1 / R.
    assert (shares <= 1 / min(replicas, n) + 1e-9).all()


def test_draw_shares_is_seeded() -> None:
    np.testing.assert_array_equal(draw_shares(5, 4, 7, seed=3), draw_shares(5, 4, 7, seed=3))
    assert not np.array_equal(draw_shares(5, 4, 7, seed=3), draw_shares(5, 4, 7, seed=4))


def test_draw_shares_match_theory() -> None:
    # 2,000 rings of 10 nodes, 1 token: the mean largest share estimates H_10/10 = 0.2929 with a
    # standard error below 0.003 (the largest spacing has sd < 0.12 here), so 0.015 is 5 sigma.
    largest = draw_shares(10, 1, 2000, seed=1).max(axis=1)
    assert largest.mean() == pytest.approx(expected_largest_share(10), abs=0.015)
    # CV of a node's share at v = 64 (n = 20): Beta gives 0.1221; 400 rings x 20 nodes estimate
    # it within a few percent.
    shares = draw_shares(20, 64, 400, seed=2)
    assert shares.std() / shares.mean() == pytest.approx(cv_exact(20, 64), rel=0.05)


def test_draw_shares_agree_with_hashed_rings() -> None:
    # Uniform draws model a good hash: 100 real xxh3 rings (10 nodes x 16 vnodes, names varied
    # per ring) have a mean busiest/fair within a few standard errors of the drawn ones (sd of
    # max/mean at v=16 is ~0.16, so 100 rings give a standard error ~0.016, 400 draws ~0.008;
    # 0.08 is 4.5 sigma).
    hashed = [
        max(HashRing([f"r{r}-n{i}" for i in range(10)], vnodes=16).shares().values()) * 10
        for r in range(100)
    ]
    drawn = imbalance(draw_shares(10, 16, 400, seed=5))
    assert float(np.mean(hashed)) == pytest.approx(float(drawn.mean()), abs=0.08)


def test_replicas_smooth_the_load() -> None:
    # A node's replica load sums R neighbouring arcs' worth, so it is smoother than R = 1.
    single = imbalance(draw_shares(12, 4, 300, seed=9)).mean()
    triple = imbalance(draw_shares(12, 4, 300, seed=9, replicas=3)).mean()
    assert triple < single


def test_summarize() -> None:
    s = summarize([1.0, 2.0, 3.0, 4.0])
    assert s["mean"] == 2.5
    assert s["median"] == 2.5
    assert s["max"] == 4.0
    assert 3.9 < s["p99"] <= 4.0
