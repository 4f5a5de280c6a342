"""Every placement strategy on the same keys and the same membership change, side by side.

For each strategy in the registry: how evenly it spreads the keys (busiest node × fair share),
what fraction of keys the change moves against the least possible (the new node's fair share,
1/(N+1) for equal weights; the removed node's share), how fast it looks a key up (one at a
time and in a batch), how much memory it holds and how long it takes to build.

>>> rows = compare(nodes=4, keys=2000, repeats=1, strategies=("modulo", "ring"))
>>> [row.strategy for row in rows], rows[0].optimum
(['modulo', 'ring'], 0.2)
"""

from __future__ import annotations

import statistics
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ringkit.errors import ConfigError, RingkitError
from ringkit.nodes import Node
from ringkit.placement import Placement, check_token_count, count_text
from ringkit.sim.measure import PassContext, measure_pass
from ringkit.sim.population import Population
from ringkit.sim.scenario import Event, Scenario
from ringkit.stats import balance
from ringkit.strategies.registry import (
    STRATEGY_NAMES,
    StrategyOptions,
    build_placement,
    options_for,
)

__all__ = ["CHANGES", "Comparison", "compare"]

CHANGES: tuple[str, ...] = ("add", "remove")
# Scalar lookups are timed on at most this many keys: enough for a stable per-key figure.
_SCALAR_KEYS = 20_000
Progress = Callable[[int, int], None]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Comparison:
    """One strategy's figures; `error` is set (and the figures are None) when it cannot run."""

    strategy: str
    busiest_ratio: float | None
    busiest_after: float | None
    moved: float | None
    optimum: float
    lookup_ns: float | None
    batch_ns: float | None
    memory_bytes: int | None
    build_ms: float | None
    error: str | None = None


def _timed(function: Callable[[], object], repeats: int, *, warm_up: bool = True) -> float:
    """Median seconds of `repeats` calls (after one warm-up call unless told otherwise)."""
    if warm_up:
        function()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _measured_build(build: Callable[[], Placement]) -> tuple[Placement, int]:
    """Build once; return the placement and the bytes it still holds (tracemalloc sees numpy)."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        placement = build()
        return placement, tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def _one(name: str, scenario: Scenario, event: Event, repeats: int, optimum: float) -> Comparison:
    def build() -> Placement:
        # One set of options for all: each strategy takes the ones it uses.
        return build_placement(name, scenario.nodes, options_for(name, scenario.options))

    try:
        placement, memory = _measured_build(build)
        after = placement.add(event.node) if event.kind == "add" else placement.remove(event.node)
        universe = {n: i for i, n in enumerate(dict.fromkeys([*placement, *after]))}
        context = PassContext(scenario, universe, None, {})
        result = measure_pass(context, [placement, after], [(0, 1)])
        keys = scenario.population.key_bytes()
        scalar, node_for = keys[:_SCALAR_KEYS], placement.node_for
        lookup = _timed(lambda: [node_for(k) for k in scalar], repeats) / len(scalar)
        batch = _timed(lambda: placement.node_for_many(keys), repeats) / len(keys)
        build_s = _timed(build, repeats, warm_up=False)  # the measured build warmed it up
    except RingkitError as error:
        return Comparison(name, None, None, None, optimum, None, None, None, None, str(error))
    balances = [
        _busiest(p, loads, universe)
        for p, loads in zip((placement, after), result.loads, strict=True)
    ]
    return Comparison(
        strategy=name,
        busiest_ratio=balances[0],
        busiest_after=balances[1],
        moved=result.moved[0]["keys"],
        optimum=optimum,
        lookup_ns=lookup * 1e9,
        batch_ns=batch * 1e9,
        memory_bytes=memory,
        build_ms=build_s * 1e3,
    )


def _busiest(placement: Placement, loads: dict[str, FloatArray], universe: dict[str, int]) -> float:
    weights = {node.name: node.weight for node in placement.nodes}
    counts = {name: float(loads["keys"][universe[name]]) for name in weights}
    return balance(counts, weights).busiest_ratio


def compare(
    *,
    nodes: int = 10,
    keys: int = 100_000,
    change: str = "add",
    options: StrategyOptions | None = None,
    strategies: Sequence[str] = STRATEGY_NAMES,
    repeats: int = 5,
    seed: int = 0,
    progress: Progress | None = None,
) -> list[Comparison]:
    """Return one :class:`Comparison` per strategy: `keys` keys on `nodes` nodes, then `change`
    (``add`` a node, or ``remove`` the last one), timings the median of `repeats`.

    A strategy that cannot make the change (or refuses the options) gets a row with `error`.

    Runtime: O(strategies · keys · repeats).

    :raises ConfigError: when nodes < 2 for a removal, keys or repeats < 1, `strategies` is
        empty, or `change` or a strategy name is unknown
    """
    if change not in CHANGES:
        raise ConfigError(f"change must be one of {', '.join(CHANGES)}, got {change!r}")
    if nodes < (2 if change == "remove" else 1):
        raise ConfigError(f"nodes must be >= {2 if change == 'remove' else 1}, got {nodes!r}")
    check_token_count(nodes + 1, what=f"{count_text(nodes)} nodes", fix="compare fewer nodes")
    if repeats < 1:
        raise ConfigError(f"repeats must be >= 1, got {repeats!r}")
    if not strategies:
        # Before this, `compare --strategies ''` ended in an IndexError traceback
        raise ConfigError(f"strategies must name at least one strategy, got {list(strategies)!r}")
    for name in strategies:
        if name not in STRATEGY_NAMES:
            raise ConfigError(f"unknown strategy {name!r}; known: {', '.join(STRATEGY_NAMES)}")
    width = len(str(nodes + 1))
    names = [f"node-{i:0{width}d}" for i in range(1, nodes + 2)]
    event = Event("add", names[-1]) if change == "add" else Event("remove", names[nodes - 1])
    scenario = Scenario(
        population=Population(count=keys, prefix=f"key-{seed}-", width=0),
        nodes=tuple(Node(n) for n in names[:nodes]),
        options=options or StrategyOptions(),
        events=(event,),
    )
    optimum = 1 / (nodes + 1) if change == "add" else 1 / nodes
    rows = []
    for i, name in enumerate(strategies):
        rows.append(_one(name, scenario, event, repeats, optimum))
        if progress is not None:
            progress(i + 1, len(strategies))
    return rows
