"""The statistics of random spacings, measured on real (hashed) rings, within bounds derived here.

Each draw is a ring whose node names carry a draw number, so draws are independent and
deterministic (no unseeded randomness).
"""

from __future__ import annotations

import math
import statistics

from ringkit import HashRing


def harmonic(n: int) -> float:
    return sum(1 / k for k in range(1, n + 1))


def draw_shares(nodes: int, vnodes: int, draw: int) -> list[float]:
    ring = HashRing([f"draw{draw}-node{i}" for i in range(nodes)], vnodes=vnodes)
    return list(ring.shares().values())


def test_with_one_vnode_the_largest_share_is_near_h_n_over_n() -> None:
    # The largest of N uniform spacings has mean H_N / N (0.29 for N = 10).
    # Bound: 4 standard errors of the mean over the draws, from the sample itself.
    n, draws = 10, 300
    largest = [max(draw_shares(n, 1, d)) for d in range(draws)]
    mean = statistics.fmean(largest)
    standard_error = statistics.stdev(largest) / math.sqrt(draws)
    assert abs(mean - harmonic(n) / n) < 4 * standard_error
    assert mean > 2.5 / n  # far above the fair share of 1/N


def test_coefficient_of_variation_falls_like_one_over_sqrt_v() -> None:
    # A node's share is a sum of V of the N·V spacings: Beta(V, (N-1)V), whose CV is
    # sqrt((N-1) / (N·V + 1)) ≈ 1/sqrt(V). The sample CV over k = nodes × draws shares has a
    # relative standard error of about sqrt((kurtosis - 1) / 4k) <= sqrt(8 / 4k) (exponential
    # tails at V = 1); we allow 4 of those.
    n, draws = 40, 12
    k = n * draws
    tolerance = 4 * math.sqrt(8 / (4 * k))
    measured = {}
    for v in (1, 4, 16, 64, 256):
        shares = [s for d in range(draws) for s in draw_shares(n, v, d)]
        cv = statistics.pstdev(shares) / statistics.fmean(shares)
        expected = math.sqrt((n - 1) / (n * v + 1))
        assert abs(cv / expected - 1) < tolerance, (v, cv, expected)
        measured[v] = cv
    assert measured[256] < measured[16] < measured[1]
    assert abs(measured[1] / measured[256] / 16 - 1) < 2 * tolerance  # 1/sqrt(V): 16x apart
