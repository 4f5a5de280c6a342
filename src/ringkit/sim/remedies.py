"""Hot-key remedies side by side: what each does to the busiest node, and what it costs.

A ring spreads keys, not requests: under Zipf popularity the hottest key pins its traffic to one
node however many vnodes there are. The remedies the literature names ("replicate the hot key,
cache it locally in each app server, or add a random suffix"; Nishtala et al., NSDI 2013, for
memcache at Facebook; DeCandia et al. 2007, 6.2, for Dynamo's load imbalance) each trade that
load for something else, and :func:`compare_remedies` computes all of them exactly, from the
Zipf request shares and the placement, with no sampling:

- ``none``: every request of a key goes to its owner (the simulator's request balance).
- ``spread``: the `top` most requested keys keep ``spread`` read copies on the first ``spread``
  nodes of their preference list, as ringkit's client does (:mod:`ringkit.cluster.core.hotkeys`);
  reads rotate over them, and every update also writes the ``spread - 1`` copies before it is
  acknowledged (:mod:`ringkit.cluster.core.hotcopies`), so no read is stale.
- ``near_cache``: each of `clients` app servers keeps its `near_cache_max_items` most requested
  keys in local memory for `near_cache_ttl_s`; a read of a cached key reaches a node only when
  the entry has expired or this client's own write invalidated it. Other clients' writes are seen
  at the latest after the TTL: the worst staleness. Holding exactly the most requested keys is
  what ``NearCache(hot_only=True)`` does with a sketch that finds them, and the most any cache of
  that many items can hold (Zipf requests are independent); the default LRU
  (``hot_only=False``) holds fewer of them, so its figures are a bound it approaches.
- ``split``: the `top` keys are each kept as ``parts`` sub-keys on distinct nodes (a hot
  counter as sub-counters): an update goes to one part at random, a read must read every part
  (``get`` sums them). The parts go where ringkit's client puts them (:func:`split_nodes`).

The load model: a share `writes` of every key's requests are updates, the rest reads, and the
requests of a key of rank r are its Zipf share ``r**-s / H(count, s)`` of `requests_per_s`, in
Poisson arrivals spread evenly over the clients. A near-cache entry then lives ``E[min(TTL,
Exp(mu))]`` (mu: the client's own write rate of the key) and the next read after it misses, so a
client fetches the key ``lambda / (1 + lambda * E[...])`` times a second for a read rate
``lambda`` (the renewal argument of Jung, Berger and Balakrishnan, "Modeling TTL-based Internet
caches", INFOCOM 2003). Loads are *server calls* in units of client requests: without a remedy
they sum to 1. Placement is one replica per key, the cache case.

>>> from ringkit.nodes import Node
>>> from ringkit.sim.population import Population
>>> from ringkit.sim.scenario import Scenario
>>> scenario = Scenario(Population(count=1000, zipf=1.1), tuple(Node(n) for n in "ABCDEF"))
>>> rows = {row.remedy: row for row in compare_remedies(scenario, Remedies(top=4, parts=6))}
>>> rows["spread"].busiest_ratio < rows["none"].busiest_ratio
True
>>> rows["near_cache"].worst_staleness_s, rows["spread"].extra_items
(1.0, 8)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from ringkit.errors import ConfigError
from ringkit.placement import Placement
from ringkit.sim.measure import owner_indices
from ringkit.sim.population import Population
from ringkit.stats import Balance, balance

__all__ = [
    "REMEDIES",
    "Remedies",
    "RemedyResult",
    "RemedyScenario",
    "compare_remedies",
    "near_cache_factors",
    "split_nodes",
]

REMEDIES: tuple[str, ...] = ("none", "spread", "near_cache", "split")
# Spreading or splitting loops over the hot keys in Python (one preference list each).
MAX_TOP = 100_000
# Upper bounds of the other settings, the same for a scenario file as for the web page (which
# imports them): past them the model is no longer a cache in front of app servers (a lease of
# a day, a million requests a second over 4,096 app servers are already far out).
MAX_CLIENTS = 4096
MAX_NEAR_CACHE_ITEMS = MAX_TOP
MAX_TTL_S = 86_400.0
MAX_REQUESTS_PER_S = 999_999.0
# ringkit.cluster.remedies.splits: part n >= 1 of a split key is routed by the hash tag
# "split.<n>", and the client tries this many suffixes per part for owners distinct from the
# others'.
SPLIT_ROUTE = "split.{}"
SPLIT_TRIES_PER_PART = 64

FloatArray = npt.NDArray[np.float64]


def _integer(name: str, value: object, low: int, high: int | None = None) -> None:
    upper = "" if high is None else f", <= {high:,}"
    fits = isinstance(value, int) and low <= value <= (value if high is None else high)
    if isinstance(value, bool) or not fits:
        raise ConfigError(f"remedies {name} must be an integer >= {low}{upper}, got {value!r}")


def _positive(name: str, value: object, high: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= high:
        raise ConfigError(f"remedies {name} must be a number in (0, {high:,g}], got {value!r}")


@dataclass(frozen=True, slots=True)
class Remedies:
    """The remedies' settings and the load they are compared under (see the module docstring).

    `top`: keys spread or split (the most requested); `spread`: read copies per spread key
    (``HotKeys(spread=…)``); `parts`: sub-keys per split key; `near_cache_max_items` and
    `near_cache_ttl_s`: each client's near-cache (``NearCache(max_items=…, ttl_s=…)``);
    `clients`: app servers; `requests_per_s`: all clients together; `writes`: the share of
    requests that are updates, in [0, 1].
    """

    top: int = 16
    spread: int = 3
    parts: int = 8
    near_cache_max_items: int = 1000
    near_cache_ttl_s: float = 1.0
    clients: int = 16
    requests_per_s: float = 100_000.0
    writes: float = 0.1

    def __post_init__(self) -> None:
        _integer("top", self.top, 1, MAX_TOP)
        _integer("spread", self.spread, 1)
        _integer("parts", self.parts, 1)
        _integer("near_cache_max_items", self.near_cache_max_items, 1, MAX_NEAR_CACHE_ITEMS)
        _integer("clients", self.clients, 1, MAX_CLIENTS)
        _positive("near_cache_ttl_s", self.near_cache_ttl_s, MAX_TTL_S)
        _positive("requests_per_s", self.requests_per_s, MAX_REQUESTS_PER_S)
        writes = self.writes
        if isinstance(writes, bool) or not isinstance(writes, (int, float)) or not 0 <= writes <= 1:
            raise ConfigError(f"remedies writes must be a number in [0, 1], got {writes!r}")

    def check_nodes(self, nodes: int) -> None:
        """Check that `nodes` nodes can hold the copies and parts, each on a distinct node.

        :raises ConfigError: naming `spread` or `parts` when it exceeds `nodes`
        """
        for name, value in (("spread", self.spread), ("parts", self.parts)):
            if value > nodes:
                raise ConfigError(
                    f"remedies {name} must be <= the number of nodes ({nodes}), got {value}; "
                    "copies and parts go to distinct nodes"
                )


@dataclass(frozen=True, slots=True)
class RemedyResult:
    """One remedy's outcome.

    `balance`: server calls per node (in client requests) against the fair shares of all server
    calls; `server_calls`: their total per client request; `busiest_load`: the busiest node's
    calls over its fair share of the *client* requests (what it must be provisioned for: the no
    remedy total is the yardstick, so extra calls count against a remedy and calls a near-cache
    saves count for it); `extra_items`: items held besides one per key, on the cache nodes or, for
    a near-cache, in the app servers (`held_in`); `extra_writes_per_update` and
    `extra_reads_per_read`: server calls added to one update or read of a remedied key;
    `worst_staleness_s`: how old a value a read may return after another client's write.
    """

    remedy: str
    balance: Balance
    server_calls: float
    busiest_load: float
    extra_items: int
    held_in: str
    extra_writes_per_update: int
    extra_reads_per_read: int
    worst_staleness_s: float

    @property
    def busiest_ratio(self) -> float:
        """The busiest node's server calls × its fair share of them."""
        return self.balance.busiest_ratio

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict (``ringkit simulate --json`` and the web API print it)."""
        return {
            "remedy": self.remedy,
            "busiest": self.balance.busiest,
            "busiest_ratio": self.balance.busiest_ratio,
            "busiest_load": self.busiest_load,
            "server_calls": self.server_calls,
            "calls_per_node": self.balance.loads,
            "extra_items": self.extra_items,
            "held_in": self.held_in or None,
            "extra_writes_per_update": self.extra_writes_per_update,
            "extra_reads_per_read": self.extra_reads_per_read,
            "worst_staleness_s": self.worst_staleness_s,
        }


def near_cache_factors(shares: FloatArray, remedies: Remedies) -> FloatArray:
    """Return the server calls per client request of keys with request `shares`, near-cached.

    Updates all reach a node; reads reach one once per entry lifetime ``E[min(T, Exp(mu))]``
    plus the wait for the next read (Poisson arrivals, per client): a factor
    ``1 / (1 + lambda * E[...])`` of them.

    >>> near_cache_factors(np.array([0.5]), Remedies(clients=1, requests_per_s=2.0, writes=0))
    array([0.5])
    """
    per_client = shares * remedies.requests_per_s / remedies.clients
    reads = per_client * (1.0 - remedies.writes)  # lambda, per second
    own_writes = per_client * remedies.writes  # mu: this client's own invalidations
    ttl = remedies.near_cache_ttl_s
    with np.errstate(divide="ignore", invalid="ignore"):
        lifetime = np.where(own_writes > 0, -np.expm1(-own_writes * ttl) / own_writes, ttl)
    read_factor = 1.0 / (1.0 + reads * lifetime)
    return remedies.writes + (1.0 - remedies.writes) * read_factor


def _pass_loads(
    placement: Placement, population: Population, remedies: Remedies, universe: dict[str, int]
) -> dict[str, FloatArray]:
    """One streaming pass: every key at its owner, near-cached or not; the hot keys left out
    of ``spread`` and ``split``, which place them on their preference lists afterwards."""
    size, top = len(universe), min(remedies.top, population.count)
    cached = min(remedies.near_cache_max_items, population.count)
    loads = {remedy: np.zeros(size) for remedy in REMEDIES}
    for chunk in population.chunks():
        owners = owner_indices(placement, chunk, universe)
        shares = chunk.requests.copy()
        loads["none"] += np.bincount(owners, weights=shares, minlength=size)
        near = max(0, min(cached, chunk.stop) - chunk.start)
        shares[:near] *= near_cache_factors(shares[:near], remedies)
        loads["near_cache"] += np.bincount(owners, weights=shares, minlength=size)
        hot = max(0, min(top, chunk.stop) - chunk.start)
        cold = np.bincount(owners[hot:], weights=chunk.requests[hot:], minlength=size)
        loads["spread"] += cold
        loads["split"] += cold
    return loads


def split_nodes(placement: Placement, parts: int) -> tuple[str, ...]:
    """Return the nodes that hold parts 1, 2, … of split keys, in the order the client tries.

    Part ``n >= 1`` of a split key is named ``{split.<n>}<key>`` and routed by its hash tag
    ``split.<n>`` (:mod:`ringkit.cluster.remedies.splits`), so its node is the same for every key:
    the owner of ``split.<n>``. A key's parts are its owner (part 0 is the key itself) and the first
    ``parts - 1`` of these nodes other than its owner; the client gives up after 64 suffixes per
    part, so a key may get fewer parts on a placement that hides nodes from these names.

    >>> from ringkit.ring import HashRing
    >>> sorted(split_nodes(HashRing(["A", "B", "C"]), 3))
    ['A', 'B', 'C']
    """
    found: dict[str, None] = {}
    for suffix in range(1, SPLIT_TRIES_PER_PART * parts):
        found.setdefault(placement.node_for(SPLIT_ROUTE.format(suffix)))
        if len(found) == len(placement):
            break
    return tuple(found)


def _place_hot_keys(
    placement: Placement,
    population: Population,
    remedies: Remedies,
    universe: dict[str, int],
    loads: dict[str, FloatArray],
) -> int:
    """Add the top keys' spread and split calls to `loads`: copies on the preference list,
    parts on the owner and the split nodes. Return the parts beyond one per key."""
    top, writes = min(remedies.top, population.count), remedies.writes
    spread, parts = remedies.spread, remedies.parts
    names = population.names(0, top)
    shares = population.request_shares(0, top).tolist()
    others = split_nodes(placement, parts)
    extra_parts = 0
    for key, share in zip(names, shares, strict=True):
        copies = placement.nodes_for(key, spread)
        for name in copies:  # reads rotate; every update writes every copy
            loads["spread"][universe[name]] += share * ((1 - writes) / spread + writes)
        owner = copies[0]
        held = [owner, *[name for name in others if name != owner][: parts - 1]]
        for name in held:  # reads read every part; an update goes to one
            loads["split"][universe[name]] += share * ((1 - writes) + writes / len(held))
        extra_parts += len(held) - 1
    return extra_parts


class RemedyScenario(Protocol):
    """What comparing remedies asks of a scenario (a :class:`~ringkit.sim.scenario.Scenario`)."""

    @property
    def population(self) -> Population: ...

    @property
    def replicas(self) -> int: ...

    @property
    def remedies(self) -> Remedies | None: ...

    def start_placement(self) -> Placement: ...


def compare_remedies(
    scenario: RemedyScenario, remedies: Remedies | None = None, placement: Placement | None = None
) -> tuple[RemedyResult, ...]:
    """Return the outcome of each remedy in :data:`REMEDIES` order, on the scenario's start.

    `remedies` defaults to the scenario's (else :class:`Remedies`' defaults); `placement` to the
    scenario's strategy over its starting nodes, in their zones (as ``run_scenario`` starts).
    Runtime: one streaming pass over the keys, plus a preference list per top key.

    :raises ConfigError: when `spread` or `parts` exceeds the number of nodes, or the scenario
        gives keys more than one replica
    """
    settings = remedies or scenario.remedies or Remedies()
    if scenario.replicas != 1:
        raise ConfigError(
            f"remedies model one copy of each key (a cache), got replicas={scenario.replicas}"
        )
    if placement is None:
        placement = scenario.start_placement()
    weights = {node.name: node.weight for node in placement.nodes}
    settings.check_nodes(len(weights))
    universe = {name: index for index, name in enumerate(weights)}
    population = scenario.population
    loads = _pass_loads(placement, population, settings, universe)
    extra_parts = _place_hot_keys(placement, population, settings, universe, loads)
    costs = _costs(settings, population.count, extra_parts)
    total_weight = sum(weights.values())
    results = []
    for remedy in REMEDIES:
        load = {name: max(0.0, float(loads[remedy][i])) for name, i in universe.items()}
        measured = balance(load, weights, metric="requests")
        items, held_in, writes, reads, stale = costs[remedy]
        results.append(
            RemedyResult(
                remedy=remedy,
                balance=measured,
                server_calls=math.fsum(load.values()),
                busiest_load=load[measured.busiest] * total_weight / weights[measured.busiest],
                extra_items=items,
                held_in=held_in,
                extra_writes_per_update=writes,
                extra_reads_per_read=reads,
                worst_staleness_s=stale,
            )
        )
    return tuple(results)


def _costs(
    settings: Remedies, count: int, extra_parts: int
) -> dict[str, tuple[int, str, int, int, float]]:
    """Per remedy: extra items, where they are held, extra writes per update, extra reads per
    read, worst staleness in seconds (copies are written before the update is acknowledged)."""
    top = min(settings.top, count)
    return {
        "none": (0, "", 0, 0, 0.0),
        "spread": (top * (settings.spread - 1), "nodes", settings.spread - 1, 0, 0.0),
        "near_cache": (
            settings.clients * min(settings.near_cache_max_items, count),
            "clients",
            0,
            0,
            float(settings.near_cache_ttl_s),
        ),
        "split": (extra_parts, "nodes", 0, settings.parts - 1, 0.0),
    }
