"""Balance by keys, bytes and requests, with the theory beside the measurement.

A placement balances *positions*; what an operator feels is keys, bytes and requests per node (the
skew a ring cannot fix: DeCandia et al. 2007, section 6.2, on Dynamo). :func:`balance` measures any
of the three from loads per node against each node's *fair share* (weight / total weight): the
busiest node as a multiple of its fair load, max/mean and the coefficient of variation (CV) of load
over fair load.

The theory it is compared with is that of random spacings (Pyke 1965; Karger et al. 1997): with V
vnodes per node a node's share is a sum of V spacings, so its CV is about ``1/sqrt(V)``
(:func:`cv_theory`; :func:`cv_exact` gives the exact Beta value); the expected largest share is
``worst_share(n, v)``; with one token per node it is the largest of n spacings, ``H_n / n``
(:func:`expected_largest_share`). :func:`draw_shares` draws many seeded rings at once with numpy
(tokens uniform on the circle, as a good hash places them) so that sweeps and advice rest on
hundreds of rings, not one.

>>> round(worst_share(10, 1), 2), round(worst_share(10, 256), 2)
(0.31, 0.11)
>>> round(expected_largest_share(10), 3)
0.293
>>> b = balance({"A": 137, "B": 82, "C": 81}, {"A": 1, "B": 1, "C": 1})
>>> b.busiest, round(b.busiest_ratio, 2)
('A', 1.37)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ringkit.errors import ConfigError

__all__ = [
    "METRICS",
    "Balance",
    "balance",
    "cv_exact",
    "cv_theory",
    "draw_shares",
    "expected_largest_share",
    "harmonic",
    "imbalance",
    "moved_fraction",
    "worst_share",
]

METRICS: tuple[str, ...] = ("keys", "bytes", "requests")

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Balance:
    """How evenly one quantity (`metric`: keys, bytes or requests) is spread over the nodes.

    ``loads`` and ``fair`` are per node, in the same unit; ``busiest_ratio`` is the largest
    load / fair load (1.0 is perfect), ``max_over_mean`` the largest load over the mean load,
    ``cv`` the coefficient of variation of load / fair load across nodes.
    """

    metric: str
    loads: dict[str, float]
    fair: dict[str, float]
    busiest: str
    busiest_ratio: float
    max_over_mean: float
    cv: float

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return {
            "metric": self.metric,
            "loads": self.loads,
            "fair": self.fair,
            "busiest": self.busiest,
            "busiest_ratio": self.busiest_ratio,
            "max_over_mean": self.max_over_mean,
            "cv": self.cv,
        }


def balance(
    loads: Mapping[str, float], weights: Mapping[str, float], *, metric: str = "keys"
) -> Balance:
    """Return the balance of `loads` against the fair shares given by node `weights`.

    Nodes in `weights` missing from `loads` have load 0. With zero total load every ratio is 1.

    >>> balance({"A": 2, "B": 1}, {"A": 2.0, "B": 1.0}).busiest_ratio
    1.0

    Runtime: O(N).

    :raises ConfigError: when `weights` is empty, a weight is not > 0, a load is negative, a
        loaded node has no weight, or `metric` is unknown
    """
    _check_metric(metric)
    if not weights:
        raise ConfigError("balance needs at least one node, got none")
    for name, w in weights.items():
        if not w > 0:
            raise ConfigError(f"weight of node {name!r} must be > 0, got {w!r}")
    for name, value in loads.items():
        if name not in weights:
            raise ConfigError(f"node {name!r} has a load but no weight")
        if value < 0:
            raise ConfigError(f"load of node {name!r} must be >= 0, got {value!r}")
    names = list(weights)
    load = np.array([float(loads.get(name, 0.0)) for name in names])
    weight = np.array([float(weights[name]) for name in names])
    total = float(load.sum())
    fair = total * weight / weight.sum()
    ratio = load / fair if total > 0 else np.ones(len(names))
    busiest = int(np.argmax(ratio))
    mean = total / len(names)
    return Balance(
        metric=metric,
        loads=dict(zip(names, load.tolist(), strict=True)),
        fair=dict(zip(names, fair.tolist(), strict=True)),
        busiest=names[busiest],
        busiest_ratio=float(ratio[busiest]),
        max_over_mean=float(load.max() / mean) if total > 0 else 1.0,
        cv=float(ratio.std() / ratio.mean()),
    )


def _check_metric(metric: str) -> None:
    if metric not in METRICS:
        raise ConfigError(f"unknown metric {metric!r}; known: {', '.join(METRICS)}")


def moved_fraction(before: npt.ArrayLike, after: npt.ArrayLike) -> float:
    """Return the fraction of positions where `before` and `after` differ (0 for no keys).

    >>> moved_fraction(["A", "B", "C", "A"], ["A", "D", "C", "D"])
    0.5

    :raises ConfigError: when the two have different lengths
    """
    old, new = np.asarray(before), np.asarray(after)
    if old.shape != new.shape:
        raise ConfigError(
            f"before and after must have the same length, got {len(old)} and {len(new)}"
        )
    return float(np.count_nonzero(old != new) / len(old)) if len(old) else 0.0


# -- theory (random spacings: Pyke 1965; Karger et al. 1997) --------------------------------------


def _check_nv(n: int, v: int) -> None:
    if n < 1:
        raise ConfigError(f"n must be >= 1, got {n!r}")
    if v < 1:
        raise ConfigError(f"vnodes must be >= 1, got {v!r}")


def harmonic(n: int) -> float:
    """Return the n-th harmonic number ``1 + 1/2 + … + 1/n``.

    >>> harmonic(3)
    1.8333333333333333
    """
    return math.fsum(1 / k for k in range(1, n + 1))


def expected_largest_share(n: int) -> float:
    """Return the expected largest of n uniform spacings of a circle, ``H_n / n`` (V = 1).

    :raises ConfigError: when `n` < 1
    """
    _check_nv(n, 1)
    return harmonic(n) / n


def worst_share(n: int, v: int) -> float:
    """Return the estimated expected largest node share: ``(1/n)·(1 + sqrt(2·ln n / v))``.

    :raises ConfigError: when `n` or `v` < 1
    """
    _check_nv(n, v)
    return (1 / n) * (1 + math.sqrt(2 * math.log(n) / v))


def cv_theory(v: int) -> float:
    """Return the rule of thumb for the CV of node shares: ``1 / sqrt(v)``.

    :raises ConfigError: when `v` < 1
    """
    _check_nv(1, v)
    return 1 / math.sqrt(v)


def cv_exact(n: int, v: int) -> float:
    """Return the exact CV of one node's share when n·v tokens are uniform on the circle.

    A node's share is then Beta(v, m - v) with m = n·v, whose CV is ``sqrt((m-v) / (v·(m+1)))``;
    for large n this is ``1/sqrt(v)``.

    >>> round(cv_exact(1000, 100), 4), cv_theory(100)
    (0.0999, 0.1)

    :raises ConfigError: when `n` or `v` < 1
    """
    _check_nv(n, v)
    m = n * v
    return math.sqrt((m - v) / (v * (m + 1)))


# -- seeded ring draws ---------------------------------------------------------------------------

# Batches keep draws × tokens under ~4M floats (32 MB) however large n·v is.
_BATCH_FLOATS = 1 << 22


def draw_shares(n: int, v: int, draws: int, *, seed: int = 0, replicas: int = 1) -> FloatArray:
    """Return a (draws, n) array: each row the node shares of one random ring.

    Each ring has n nodes with v tokens each, uniform on the circle (seeded by `seed`). With one
    replica no ring is built: the n·v arcs of uniform points are independent exponentials
    divided by their sum, and a node's v arcs sum to a Gamma(v) variable, so the shares are
    exactly ``G_i / sum(G)`` with ``G_i ~ Gamma(v)`` (a Dirichlet draw). With `replicas` R > 1 a
    node holds every arc for which it is among the first R distinct nodes clockwise, so the
    tokens are drawn and sorted; its share is that keyspace divided by R (rows sum to 1).

    >>> draw_shares(3, 1, 2, seed=1).sum(axis=1).round(12).tolist()
    [1.0, 1.0]

    Runtime: O(draws · n) for one replica; O(draws · n·v · log(n·v)) for more, vectorised.

    :raises ConfigError: when n, v, draws or replicas < 1, or replicas > n
    """
    _check_nv(n, v)
    if draws < 1:
        raise ConfigError(f"draws must be >= 1, got {draws!r}")
    if not 1 <= replicas <= n:
        raise ConfigError(f"replicas must be in [1, {n}] for {n} nodes, got {replicas!r}")
    rng = np.random.default_rng(seed)
    if replicas == 1:
        gamma = rng.gamma(float(v), size=(draws, n))
        return np.asarray(gamma / gamma.sum(axis=1, keepdims=True), dtype=np.float64)
    m = n * v
    batch = max(1, _BATCH_FLOATS // (m * replicas))
    owners = np.repeat(np.arange(n), v)
    parts = []
    for start in range(0, draws, batch):
        rows = min(batch, draws - start)
        tokens = rng.random((rows, m))
        order = np.argsort(tokens, axis=1)
        sorted_tokens = np.take_along_axis(tokens, order, axis=1)
        # Token j owns (token j-1, token j]; token 0's arc wraps from the last token.
        arcs = np.diff(sorted_tokens, axis=1, prepend=sorted_tokens[:, -1:] - 1.0)
        holders = _holders(owners[order], replicas)
        parts.append(_sum_by_node(holders, arcs, n) / replicas)
    return np.concatenate(parts)


def _holders(owners: npt.NDArray[np.int64], replicas: int) -> npt.NDArray[np.int64]:
    """For each token's arc, the first `replicas` distinct owners clockwise: (rows, m, R)."""
    found = np.full((*owners.shape, replicas), -1, dtype=np.int64)
    found[..., 0] = owners
    count = np.ones(owners.shape, dtype=np.int64)
    step = 1
    while replicas > 1 and (count < replicas).any() and step < owners.shape[1]:
        candidate = np.roll(owners, -step, axis=1)
        new = (count < replicas) & (found != candidate[..., None]).all(axis=2)
        rows, cols = np.nonzero(new)
        found[rows, cols, count[rows, cols]] = candidate[rows, cols]
        count += new
        step += 1
    return found


def _sum_by_node(holders: npt.NDArray[np.int64], arcs: FloatArray, n: int) -> FloatArray:
    rows = holders.shape[0]
    offset = (np.arange(rows) * n)[:, None, None]
    weights = np.broadcast_to(arcs[..., None], holders.shape)
    sums = np.bincount((holders + offset).ravel(), weights=weights.ravel(), minlength=rows * n)
    result: FloatArray = np.asarray(sums, dtype=np.float64).reshape(rows, n)
    return result


def imbalance(shares: FloatArray) -> FloatArray:
    """Return max/mean of each row of a (draws, n) share array (the busiest node × fair).

    >>> imbalance(np.array([[0.5, 0.25, 0.25]])).tolist()
    [1.5]
    """
    return np.asarray(shares.max(axis=1) * shares.shape[1] / shares.sum(axis=1), dtype=np.float64)


def summarize(values: Sequence[float] | FloatArray) -> dict[str, float]:
    """Return mean, median, p99 and max of `values` (a JSON-ready dict)."""
    array = np.asarray(values, dtype=np.float64)
    return {
        "mean": float(array.mean()),
        "median": float(np.median(array)),
        "p99": float(np.quantile(array, 0.99)),
        "max": float(array.max()),
    }
