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

from ringkit.errors import ConfigError, RingkitError
from ringkit.nodes import Node
from ringkit.placement import Placement
from ringkit.population import Population
from ringkit.sim import Event, Scenario, run_scenario
from ringkit.strategies.registry import STRATEGY_NAMES, StrategyOptions, build_placement

__all__ = ["CHANGES", "Comparison", "compare"]

CHANGES: tuple[str, ...] = ("add", "remove")
# Scalar lookups are timed on at most this many keys: enough for a stable per-key figure.
_SCALAR_KEYS = 20_000
Progress = Callable[[int, int], None]


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


def _timed(function: Callable[[], object], repeats: int) -> float:
    """Median seconds of `repeats` calls after one warm-up call."""
    function()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _memory(build: Callable[[], Placement]) -> int:
    """Bytes still allocated by a fresh build (numpy reports its buffers to tracemalloc)."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        placement = build()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    del placement
    return after - before


def _one(
    name: str, scenario: Scenario, keys: list[str], repeats: int, optimum: float
) -> Comparison:
    def build() -> Placement:
        return build_placement(name, scenario.nodes, scenario.options)

    try:
        run = run_scenario(
            Scenario(
                population=scenario.population,
                nodes=scenario.nodes,
                strategy=name,
                options=scenario.options,
                baseline=None,
                events=scenario.events,
                hot_keys=0,
            )
        )
        placement = build()
        scalar = keys[:_SCALAR_KEYS]
        node_for = placement.node_for
        lookup = _timed(lambda: [node_for(k) for k in scalar], repeats) / len(scalar)
        batch = _timed(lambda: placement.node_for_many(keys), repeats) / len(keys)
        build_s = _timed(build, repeats)
    except RingkitError as error:
        return Comparison(name, None, None, None, optimum, None, None, None, None, str(error))
    return Comparison(
        strategy=name,
        busiest_ratio=run.steps[0].balance["keys"].busiest_ratio,
        busiest_after=run.steps[1].balance["keys"].busiest_ratio,
        moved=run.steps[1].moved["keys"],
        optimum=optimum,
        lookup_ns=lookup * 1e9,
        batch_ns=batch * 1e9,
        memory_bytes=_memory(build),
        build_ms=build_s * 1e3,
    )


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

    :raises ConfigError: when nodes < 2 for a removal, keys or repeats < 1, or `change` or a
        strategy name is unknown
    """
    if change not in CHANGES:
        raise ConfigError(f"change must be one of {', '.join(CHANGES)}, got {change!r}")
    if nodes < (2 if change == "remove" else 1):
        raise ConfigError(f"nodes must be >= {2 if change == 'remove' else 1}, got {nodes!r}")
    if repeats < 1:
        raise ConfigError(f"repeats must be >= 1, got {repeats!r}")
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
    key_names = scenario.population.keys()
    rows = []
    for i, name in enumerate(strategies):
        rows.append(_one(name, scenario, key_names, repeats, optimum))
        if progress is not None:
            progress(i + 1, len(strategies))
    return rows
