"""Scenarios: a key population and a sequence of membership events, measured step by step.

A :class:`Scenario` places a :class:`~ringkit.sim.population.Population` on a placement built by
name (``ringkit.strategies.registry``) and replays events: ``add``, ``remove``, ``reweight``,
``fail`` (optionally with a per-node capacity, so that overloaded survivors fail in turn: the
cascade virtual nodes prevent, since a failed node's keys spread over many survivors),
``stale`` (a client k membership changes behind sends keys to the wrong node: the cost of
disagreeing views) and ``fail_zone`` (every node of one zone at once, ``ringkit.sim.zones``).
With ``zones = Z`` the nodes are spread round-robin over zones ``z0`` … ``z{Z-1}`` in the order
the scenario first names them (the starting nodes, then the nodes events add), and with
``replicas = R`` (a strategy option) keys have R copies: preference lists zone-aware (one node
per zone first) or, with ``zone_aware=False``, the next R nodes whatever their zone. Every step
counts the keys that lost every replica (``keys_lost``) and those below a quorum
(``keys_below_quorum``, lost ones included): nonzero only where nodes failed. After each step
it measures balance by keys, bytes and requests, the fraction of keys that moved, the same
change under a baseline placement (``hash % N`` by default) and the hot keys. Every pass streams
the keys in chunks, so the population can be far larger than memory.

:func:`gatepass` is the Gatepass lesson: 300 booking keys on A, B, C, then add D, then remove B.

>>> run = run_scenario(gatepass(vnodes=(128,))[0])
>>> [step.event for step in run.steps]
['start', 'add D', 'remove B']
>>> run.steps[1].moved["keys"] < run.steps[1].baseline_moved
True
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from ringkit.errors import ConfigError
from ringkit.nodes import Node
from ringkit.placement import Placement, unknown_node
from ringkit.sim.balancers import Balancers
from ringkit.sim.measure import PassContext, Progress, measure_pass
from ringkit.sim.population import HashCache, Population
from ringkit.sim.remedies import Remedies
from ringkit.sim.zones import (
    FailureReport,
    fail_nodes,
    spread_zones,
    stale_replicas,
    zone_names,
    zoned_nodes,
)
from ringkit.stats import METRICS, Balance, balance
from ringkit.strategies.registry import StrategyOptions, build_placement, options_for

__all__ = [
    "EVENT_TYPES",
    "Event",
    "HotKey",
    "Run",
    "Scenario",
    "Step",
    "gatepass",
    "run_scenario",
]

EVENT_TYPES: tuple[str, ...] = ("add", "remove", "reweight", "fail", "stale", "fail_zone")
# Up to this many keys a run keeps their hashes between passes (8 bytes per key and hasher);
# larger populations are hashed again on every pass, so memory stays one chunk.
HASH_CACHE_KEYS = 16_000_000


@dataclass(frozen=True, slots=True)
class Event:
    """One membership event. `capacity` (fail): each node carries at most `capacity` × its
    `load` before the failure. `behind` (stale): how many membership changes the client missed.
    `zone` (fail_zone): the zone whose nodes all fail at once."""

    kind: str
    node: str = ""
    weight: float = 1.0
    capacity: float | None = None
    load: str = "keys"
    behind: int = 1
    zone: str = ""

    def __post_init__(self) -> None:
        if self.kind not in EVENT_TYPES:
            raise ConfigError(
                f"event kind must be one of {', '.join(EVENT_TYPES)}, got {self.kind!r}"
            )
        if self.kind not in ("stale", "fail_zone") and not self.node:
            raise ConfigError(f"{self.kind} event must name a node, got {self.node!r}")
        if self.kind == "fail_zone" and (not self.zone or self.node or self.capacity):
            raise ConfigError(
                f"fail_zone event takes a zone and neither node nor capacity, got zone="
                f"{self.zone!r} node={self.node!r} capacity={self.capacity!r}"
            )
        if self.capacity is not None and not self.capacity > 1:
            raise ConfigError(f"capacity must be > 1 (× the load before), got {self.capacity!r}")
        if self.load not in METRICS:
            raise ConfigError(f"load must be one of {', '.join(METRICS)}, got {self.load!r}")
        if self.behind < 1:
            raise ConfigError(f"behind must be >= 1, got {self.behind!r}")

    @property
    def label(self) -> str:
        """A short description: ``add D``, ``fail C``, ``stale 1 behind``."""
        if self.kind == "reweight":
            return f"reweight {self.node} to {self.weight:g}"
        if self.kind == "stale":
            return f"stale {self.behind} behind"
        if self.kind == "fail_zone":
            return f"fail zone {self.zone}"
        return f"{self.kind} {self.node}"


@dataclass(frozen=True, slots=True)
class Scenario:
    """A population, starting nodes, a strategy with options, a baseline and events.

    `zones`: spread the nodes over that many zones (None: the nodes' own zones, if any);
    `zone_aware`: whether preference lists take one node per zone first. Keys have
    ``options.replicas`` copies (1 when not given).
    `remedies`: the hot-key remedies to compare on the start (:mod:`ringkit.sim.remedies`).
    `balancers`: the load balancers' layouts to compare on a join (:mod:`ringkit.sim.balancers`).
    """

    population: Population
    nodes: tuple[Node, ...]
    strategy: str = "ring"
    options: StrategyOptions = field(default_factory=StrategyOptions)
    baseline: str | None = "modulo"
    events: tuple[Event, ...] = ()
    hot_keys: int = 5
    name: str = "scenario"
    zones: int | None = None
    zone_aware: bool = True
    remedies: Remedies | None = None
    balancers: Balancers | None = None

    def __post_init__(self) -> None:
        if self.zones is not None:
            zone_names(self.zones)  # refuses a count < 1, naming it
        if not isinstance(self.zone_aware, bool):
            raise ConfigError(f"zone_aware must be true or false, got {self.zone_aware!r}")
        replicas = self.replicas
        if isinstance(replicas, bool) or not isinstance(replicas, int):
            raise ConfigError(f"replicas must be an integer, got {replicas!r}")
        if not 1 <= replicas <= len(self.nodes):
            raise ConfigError(
                f"replicas must be in [1, {len(self.nodes)}] for {len(self.nodes)} nodes, "
                f"got {replicas!r}"
            )
        known = zone_names(self.zones) if self.zones is not None else ()
        for event in self.events:
            if event.kind == "fail_zone" and event.zone not in known:
                raise ConfigError(
                    f"fail_zone zone must be one of {', '.join(known)}, got {event.zone!r}"
                    if known
                    else f"fail_zone needs zones (zones = Z), got zone {event.zone!r} with none"
                )

    @property
    def replicas(self) -> int:
        """Copies of each key: the strategy's ``replicas`` option, 1 when not given."""
        return 1 if self.options.replicas is None else self.options.replicas

    def zone_map(self) -> dict[str, str]:
        """Each node's zone: round-robin over ``z0`` … in the order the scenario names nodes.

        The starting nodes come first, then the nodes events add; a node removed and added
        again keeps its zone. Without ``zones``, the nodes' own zones.
        """
        if self.zones is None:
            return {node.name: node.zone for node in self.nodes if node.zone is not None}
        return spread_zones(_universe(self), self.zones)

    def start_placement(self, zone_of: dict[str, str] | None = None) -> Placement:
        """The strategy over the starting nodes, in their zones (`zone_of`: ``zone_map()``).

        :raises ConfigError: for an unknown strategy or options it refuses
        """
        zones = self.zone_map() if zone_of is None else zone_of
        return build_placement(self.strategy, _placed_nodes(self, zones), self.options)


@dataclass(frozen=True, slots=True)
class HotKey:
    """A popular key: its name, its share of all requests and the node it is pinned to."""

    key: str
    request_share: float
    node: str


@dataclass(frozen=True, slots=True)
class Step:
    """The measurement after one event (``start`` for the initial placement)."""

    event: str
    nodes: tuple[str, ...]
    balance: dict[str, Balance]
    moved: dict[str, float]
    optimum: float | None
    baseline_moved: float | None
    hot_keys: tuple[HotKey, ...]
    failed: tuple[tuple[str, ...], ...] = ()
    stale: dict[str, float] | None = None
    baseline_stale: float | None = None
    keys_lost: int = 0
    keys_below_quorum: int = 0
    lost: dict[str, float] | None = None
    failover: dict[str, Balance] | None = None
    stale_replicas: dict[str, float] | None = None

    @property
    def keys_per_node(self) -> dict[str, int]:
        """Keys per node (exact counts; empty when every node failed)."""
        if not self.balance:
            return {}
        return {name: int(load) for name, load in self.balance["keys"].loads.items()}


@dataclass(frozen=True, slots=True)
class Run:
    """A scenario's steps."""

    scenario: Scenario
    steps: tuple[Step, ...] = field(default_factory=tuple)


def gatepass(
    *, vnodes: Sequence[int] = (1, 8, 32, 128), keys: int = 300, hasher: str = "fnv1a_32_mix"
) -> list[Scenario]:
    """Return the Gatepass lesson, one scenario per vnode count: A, B, C; add D; remove B."""
    population = Population(count=keys, prefix="booking-", start=1, width=4)
    events = (Event("add", "D"), Event("remove", "B"))
    return [
        Scenario(
            population=population,
            nodes=tuple(Node(name) for name in "ABC"),
            options=StrategyOptions(vnodes=v, hasher=hasher),
            events=events,
            name=f"vnodes={v}",
        )
        for v in vnodes
    ]


# -- running -------------------------------------------------------------------------------------


def _universe(scenario: Scenario) -> dict[str, int]:
    names = [node.name for node in scenario.nodes]
    names += [event.node for event in scenario.events if event.kind == "add"]
    return {name: index for index, name in enumerate(dict.fromkeys(names))}


def _apply(placement: Placement, event: Event, zone: str | None = None) -> Placement:
    """Return `placement` after `event` (a weight-blind placement refuses weights).

    An added node joins `zone`; a fail_zone event is applied by the caller, which knows the
    zone's nodes.
    """
    if event.kind == "add":
        return placement.add(Node(event.node, weight=event.weight, zone=zone))
    if event.kind == "reweight":
        if event.node not in placement:
            raise unknown_node(event.node, tuple(placement), "placement")
        return placement.reweight(event.node, event.weight)
    if event.kind in ("remove", "fail"):
        return placement.remove(event.node)
    return placement


def _apply_to_baseline(baseline: Placement, event: Event) -> Placement:
    """Return the baseline after `event`: membership only, since it is built from names.

    The baseline (``hash % N`` by default) shows what the same membership change costs a naive
    placement; weights are the strategy's concern, so a reweight leaves the baseline as it is.
    """
    if event.kind == "add":
        return baseline.add(event.node)
    if event.kind == "reweight":
        return baseline
    return _apply(baseline, event)


def _balances(
    placement: Placement, loads: dict[str, npt.NDArray[np.float64]], universe: dict[str, int]
) -> dict[str, Balance]:
    weights = {node.name: node.weight for node in placement.nodes}
    return {
        metric: balance(
            {name: float(loads[metric][universe[name]]) for name in weights},
            weights,
            metric=metric,
        )
        for metric in METRICS
    }


def _hot_keys(scenario: Scenario, placement: Placement) -> tuple[HotKey, ...]:
    population = scenario.population
    count = min(scenario.hot_keys, population.count)
    if count == 0 or population.zipf == 0:
        return ()
    names = population.names(0, count)
    shares = population.request_shares(0, count)
    owners = placement.node_for_many(names)
    return tuple(
        HotKey(key, float(share), node)
        for key, share, node in zip(names, shares.tolist(), owners, strict=True)
    )


def _optimum(old: Placement, new: Placement, event: Event) -> float | None:
    """The least fraction of keys any placement must move for this change (fair shares)."""
    if event.kind == "fail_zone":
        total = sum(node.weight for node in old.nodes)
        return sum(node.weight for node in old.nodes if node.name not in new) / total
    if event.kind not in ("add", "remove", "fail"):
        return None
    holder = new if event.kind == "add" else old
    total = sum(node.weight for node in holder.nodes)
    weight = next(node.weight for node in holder.nodes if node.name == event.node)
    return weight / total


def _cascade(
    ctx: PassContext[Scenario], placement: Placement, event: Event, before: dict[str, float]
) -> tuple[Placement | None, tuple[tuple[str, ...], ...]]:
    """Fail `event.node`; then fail every survivor whose load passes its capacity, in rounds.

    Returns the surviving placement (None when every node failed) and the rounds of failures.
    """
    assert event.capacity is not None
    capacity = {name: load * event.capacity for name, load in before.items()}
    rounds: list[tuple[str, ...]] = [(event.node,)]
    current = placement.remove(event.node)
    while True:
        loads = measure_pass(ctx, [current]).loads[0][event.load]
        # A relative tolerance: a node exactly at capacity holds.
        over = tuple(n for n in current if loads[ctx.universe[n]] > capacity[n] * (1 + 1e-12))
        if not over:
            return current, tuple(rounds)
        rounds.append(over)
        if len(over) == len(current):
            return None, tuple(rounds)
        for name in over:
            current = current.remove(name)


@dataclass
class _State:
    placement: Placement
    baseline: Placement | None
    history: list[Placement]
    baseline_history: list[Placement]
    down: bool = False
    zone_of: dict[str, str] = field(default_factory=dict)
    zone_aware: bool = True

    def zone(self, name: str) -> str | None:
        """The zone a node added by an event joins (None: a zone-blind placement)."""
        return self.zone_of.get(name) if self.zone_aware else None


def _without(placement: Placement, names: Iterable[str]) -> Placement:
    for name in names:
        placement = placement.remove(name)
    return placement


def _losses(ctx: PassContext[Scenario], old: Placement, failed: Iterable[str]) -> dict[str, Any]:
    """Step fields for the nodes `failed` at once: keys lost, below quorum, survivors' loads."""
    report: FailureReport = fail_nodes(
        old,
        tuple(failed),
        ctx.scenario.population,
        replicas=ctx.scenario.replicas,
        cache=ctx.cache,
    )
    weights = {node.name: node.weight for node in old.nodes if node.name not in report.failed}
    failover = (
        {m: balance(report.loads[m], weights, metric=m) for m in METRICS} if weights else None
    )
    return {
        "keys_lost": report.keys_lost,
        "keys_below_quorum": report.keys_below_quorum,
        "lost": report.lost,
        "failover": failover,
    }


def _outage(event: Event, failed: tuple[tuple[str, ...], ...], losses: dict[str, Any]) -> Step:
    """The step after a cascade took down every node: every key has lost its node."""
    return Step(
        event=event.label,
        nodes=(),
        balance={},
        moved=dict.fromkeys(METRICS, 1.0),
        optimum=None,
        baseline_moved=None,
        hot_keys=(),
        failed=failed,
        **losses,
    )


def _failures(
    ctx: PassContext[Scenario], state: _State, event: Event
) -> tuple[Placement | None, tuple[tuple[str, ...], ...]]:
    """Fail what `event` fails: the survivors (None: every node failed) and the failed rounds."""
    old = state.placement
    if event.kind == "fail_zone":
        names = tuple(name for name in old if state.zone_of.get(name) == event.zone)
        survivors = _without(old, names) if len(names) < len(old) else None
        return survivors, (names,) if names else ()
    if event.capacity is None:
        return old.remove(event.node), ((event.node,),)
    before = measure_pass(ctx, [old]).loads[0][event.load]
    loads_before = {name: float(before[ctx.universe[name]]) for name in old}
    return _cascade(ctx, old, event, loads_before)


def _step(ctx: PassContext[Scenario], state: _State, event: Event) -> Step:
    old, old_base = state.placement, state.baseline
    failed: tuple[tuple[str, ...], ...] = ()
    losses: dict[str, Any] = {}
    if event.kind == "stale":
        return _stale_step(ctx, state, event)
    if event.kind in ("fail", "fail_zone"):
        survivors, rounds = _failures(ctx, state, event)
        losses = _losses(ctx, old, (name for r in rounds for name in r))
        if survivors is None:
            state.down = True
            return _outage(event, rounds, losses)
        new = survivors
        # A plain node failure has one round: the table shows cascades only.
        failed = rounds if event.capacity is not None or event.kind == "fail_zone" else ()
    else:
        new = _apply(old, event, state.zone(event.node))
    new_base = None
    if old_base is not None and event.kind == "fail_zone":
        new_base = _without(old_base, (name for r in failed for name in r))
    elif old_base is not None:
        new_base = _apply_to_baseline(old_base, event)
    placements = [old, new] + ([old_base, new_base] if old_base and new_base else [])
    pairs = [(0, 1)] + ([(2, 3)] if len(placements) == 4 else [])
    result = measure_pass(ctx, placements, pairs)
    state.placement, state.baseline = new, new_base
    state.history.append(new)
    if new_base is not None:
        state.baseline_history.append(new_base)
    return Step(
        event=event.label,
        nodes=tuple(new),
        balance=_balances(new, result.loads[1], ctx.universe),
        moved=result.moved[0],
        optimum=_optimum(old, new, event),
        baseline_moved=result.moved[1]["keys"] if len(pairs) == 2 else None,
        hot_keys=_hot_keys(ctx.scenario, new),
        failed=failed,
        **losses,
    )


def _stale_step(ctx: PassContext[Scenario], state: _State, event: Event) -> Step:
    if event.behind >= len(state.history):
        raise ConfigError(
            f"stale behind must be < {len(state.history)} (the membership changes so far), "
            f"got {event.behind}"
        )
    current, view = state.placement, state.history[-1 - event.behind]
    placements = [current, view]
    pairs = [(0, 1)]
    if state.baseline is not None:
        placements += [state.baseline, state.baseline_history[-1 - event.behind]]
        pairs.append((2, 3))
    result = measure_pass(ctx, placements, pairs)
    replicas = ctx.scenario.replicas
    return Step(
        event=event.label,
        nodes=tuple(current),
        balance=_balances(current, result.loads[0], ctx.universe),
        moved=dict.fromkeys(METRICS, 0.0),
        optimum=None,
        baseline_moved=None,
        hot_keys=_hot_keys(ctx.scenario, current),
        stale=result.moved[0],
        baseline_stale=result.moved[1]["keys"] if len(pairs) == 2 else None,
        stale_replicas=(
            stale_replicas(
                current, view, ctx.scenario.population, replicas=replicas, cache=ctx.cache
            )
            if replicas > 1
            else None
        ),
    )


def _baseline(scenario: Scenario) -> Placement | None:
    """Return the baseline over the scenario's node names, with the options that apply to it."""
    if scenario.baseline is None:
        return None
    names = [node.name for node in scenario.nodes]
    options = options_for(scenario.baseline, scenario.options)
    return build_placement(scenario.baseline, names, options)


def run_scenario(scenario: Scenario, *, progress: Progress | None = None) -> Run:
    """Replay `scenario` and measure every step; `progress(done, total)` follows each pass.

    Runtime: O(keys) per step (a cascade takes one pass per round), streamed in chunks.

    A cascade that takes down every node ends the run with a step that has no nodes.

    :raises ConfigError: for an unknown strategy, an event on a node that is not there, or a
        stale view older than the scenario
    """
    universe = _universe(scenario)
    cache: HashCache | None = {} if scenario.population.count <= HASH_CACHE_KEYS else None
    ctx = PassContext(scenario, universe, progress, cache)
    zone_of = scenario.zone_map()
    start = scenario.start_placement(zone_of)
    base = _baseline(scenario)
    state = _State(start, base, [start], [base] if base is not None else [])
    state.zone_of, state.zone_aware = zone_of, scenario.zone_aware
    first = measure_pass(ctx, [start])
    steps = [
        Step(
            event="start",
            nodes=tuple(start),
            balance=_balances(start, first.loads[0], universe),
            moved=dict.fromkeys(METRICS, 0.0),
            optimum=None,
            baseline_moved=0.0 if base is not None else None,
            hot_keys=_hot_keys(scenario, start),
        )
    ]
    for event in scenario.events:
        if state.down:
            break  # every node failed: nothing is left to change or measure
        steps.append(_step(ctx, state, event))
    return Run(scenario, tuple(steps))


def _placed_nodes(scenario: Scenario, zone_of: dict[str, str]) -> tuple[Node, ...]:
    """The starting nodes in their zones, or without zones when placement is zone-blind."""
    if scenario.zones is not None:
        return zoned_nodes(scenario.nodes, zone_of, zone_aware=scenario.zone_aware)
    if scenario.zone_aware:
        return scenario.nodes
    return tuple(Node(n.name, weight=n.weight, address=n.address) for n in scenario.nodes)


def with_vnodes(scenario: Scenario, vnodes: Iterable[int]) -> list[Scenario]:
    """Return one copy of `scenario` per vnode count (named ``vnodes=V``)."""
    return [
        replace(scenario, options=replace(scenario.options, vnodes=v), name=f"vnodes={v}")
        for v in vnodes
    ]
