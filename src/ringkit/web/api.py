"""What the JSON API answers, computed by the library from validated queries.

Each function takes a query from :mod:`ringkit.web.params` and returns a JSON-ready dict. The
placement comes from the strategy registry and is asked only through the placement protocol:
owners from its ``assign_many`` (the keys arrive as load), tokens from its ``ring``, points from
its ``hasher``, a change from its own ``add`` / ``remove`` / ``reweight`` (placements are
immutable values, so the old one is still there to compare with). What a change moves comes from
``ringkit.diff``, beside the same change on ``Modulo`` (``hash % N``) over the same keys; a
lookup's walk is ``HashRing.trace``; popularity is the simulator's ``Population``. Nothing here
switches on a placement's type.

Positions on the circle are points over 2**64, floats in [0, 1) for drawing; exact points and
tokens are given as hex strings where a person reads them.

>>> from ringkit.web.params import parse_ring_query
>>> report = ring_report(parse_ring_query({"add": "D"}))
>>> report["change"]["moved"] == sum(report["change"]["transfers"].values())
True
>>> [node["name"] for node in report["nodes"]]
['A', 'B', 'C', 'D']
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ringkit.errors import RingkitError, UnsupportedError
from ringkit.hashing import HASHERS, encode_key, points_many
from ringkit.movement import diff
from ringkit.nodes import Node
from ringkit.placement import Placement
from ringkit.ring import SPACE_64
from ringkit.ring.trace import Trace, trace_ring
from ringkit.sim import Population
from ringkit.stats import balance
from ringkit.strategies import registry
from ringkit.web.params import (
    DEFAULTS,
    LIMITS,
    Change,
    LookupQuery,
    ParamError,
    PlacementQuery,
    RingQuery,
)

__all__ = [
    "PALETTE",
    "REQUESTS",
    "build",
    "lookup_report",
    "meta",
    "population",
    "ring_report",
    "strategy_options",
]

# Kelly's colours of maximum contrast (Kelly 1965), with teal for his violet (too near his purple),
# ordered so that the first ones differ most. The page gives each node the first free colour;
# tests/web/test_api.py checks every pair stays apart (CIELAB distance).
PALETTE: tuple[str, ...] = (
    "#0067a5",
    "#f38400",
    "#008856",
    "#be0032",
    "#875692",
    "#a1caf1",
    "#f3c300",
    "#882d17",
    "#e68fac",
    "#8db600",
    "#00a3a3",
    "#848482",
    "#f99379",
    "#2b3d26",
    "#c2b280",
    "#b3446c",
)
REQUESTS = 100_000
HOT_KEYS = 10
VNODE_CHOICES = (1, 8, 32, 128)
# The walk shown is cut here (the library's trace is complete; a page lists a few steps).
_WALK_STEPS = 256
# The placement options a query may give, each alone with a valid value, to ask the registry.
_OPTION_PROBES: Mapping[str, registry.StrategyOptions] = {
    "vnodes": registry.StrategyOptions(vnodes=1),
    "hasher": registry.StrategyOptions(hasher=DEFAULTS["hasher"]),
    "replicas": registry.StrategyOptions(replicas=1),
}


def meta() -> dict[str, Any]:
    """Return what the page needs to build its controls: names, defaults, limits, colours."""
    return {
        "strategies": list(registry.STRATEGY_NAMES),
        "options": {name: strategy_options(name) for name in registry.STRATEGY_NAMES},
        "hashers": [{"name": name, "bits": HASHERS[name].bits} for name in sorted(HASHERS)],
        "defaults": dict(DEFAULTS),
        "limits": dict(LIMITS),
        "vnode_choices": list(VNODE_CHOICES),
        "palette": list(PALETTE),
        "requests": REQUESTS,
    }


@functools.cache
def strategy_options(strategy: str) -> list[str]:
    """Return the query options (``vnodes``, ``hasher``, ``replicas``) `strategy` uses.

    Asks the registry: an option the strategy does not use is refused with ``UnsupportedError``.

    >>> strategy_options("ring")
    ['vnodes', 'hasher', 'replicas']
    """
    used = []
    for option, options in _OPTION_PROBES.items():
        try:
            registry.build_placement(strategy, ["probe"], options)
        except UnsupportedError:
            continue
        except RingkitError:  # refused for another reason: the option itself was not refused
            pass
        used.append(option)
    return used


def population(query: RingQuery) -> Population:
    """Return the query's keys as the simulator's population: ``prefix`` then 1, 2, … (4 digits).

    >>> from ringkit.web.params import parse_ring_query
    >>> population(parse_ring_query({"keys": "3"})).names()
    ['booking-0001', 'booking-0002', 'booking-0003']
    """
    return Population(count=query.keys, prefix=query.prefix, zipf=query.zipf or 0.0)


def build(
    query: PlacementQuery, nodes: Sequence[Node] | None = None, *, replicas: int | None = None
) -> Placement:
    """Return the placement the query names, over `nodes` (default: the query's nodes).

    An option the query does not give is the page's default (``DEFAULTS``) when the strategy
    uses it, else not given at all; `replicas` is the preference-list length, or None.

    :raises ParamError: naming the option the strategy does not use, or ``strategy`` when it
        refuses these nodes or options
    """
    used = strategy_options(query.strategy)
    vnodes, hasher = query.vnodes, query.hasher
    if vnodes is None and "vnodes" in used:
        vnodes = int(DEFAULTS["vnodes"])
    if hasher is None and "hasher" in used:
        hasher = DEFAULTS["hasher"]
    options = registry.StrategyOptions(vnodes=vnodes, hasher=hasher, replicas=replicas)
    try:
        return registry.build_placement(query.strategy, nodes or query.nodes, options)
    except UnsupportedError as error:  # the strategy does not use an option the query gives
        given = {"vnodes": query.vnodes, "hasher": query.hasher, "replicas": replicas}
        refused = [(p, v) for p, v in given.items() if v is not None and p not in used]
        param, value = refused[0] if refused else ("strategy", query.strategy)
        raise ParamError(param, str(error), str(value)) from None
    except RingkitError as error:
        raise ParamError("strategy", str(error), query.strategy) from None


def ring_report(query: RingQuery) -> dict[str, Any]:
    """Return the placement, its keys and owners, counts, popularity and the change's movement.

    With a change, everything but ``change`` describes the placement *after* it.
    Runtime: O(K) hashes for K keys per placement built, plus building the placements.

    :raises ParamError: when the strategy refuses the nodes, an option or the change
    """
    keys_population = population(query)
    keys = keys_population.names()
    before = build(query.placement)
    after, nodes = before, query.placement.nodes
    if query.change is not None:
        after = _changed(before, query.change)
        nodes = _changed_nodes(query.placement.nodes, query.change)
    owners = _assigned(after, keys)
    index = {node.name: i for i, node in enumerate(nodes)}
    ring = after.ring
    report: dict[str, Any] = {
        "strategy": query.placement.strategy,
        "hasher": _hasher_name(after),
        "vnodes": None if ring is None else ring.vnodes,
        "nodes": _node_rows(after, nodes, owners),
        "tokens": None if ring is None else _tokens(ring.tokens, _token_owner_names(after), index),
        "keys": {
            "names": keys,
            "positions": _positions(points_many(keys, _drawing_hasher(after))),
            "owners": [index[owner] for owner in owners],
        },
        "busiest": _busiest(nodes, Counter(owners), "keys"),
        "popularity": None,
        "change": None,
    }
    if query.zipf is not None:
        report["popularity"] = _popularity(keys_population, nodes, owners, report["nodes"])
    if query.change is not None:
        report["change"] = _movement(query, before, after, keys)
    return report


def _changed(placement: Placement, change: Change) -> Placement:
    try:
        if change.kind == "add":
            return placement.add(change.node)
        if change.kind == "remove":
            return placement.remove(change.node.name)
        return placement.reweight(change.node.name, change.node.weight)
    except RingkitError as error:
        raise ParamError(change.kind, str(error), change.node.name) from None


def _changed_nodes(nodes: Sequence[Node], change: Change) -> tuple[Node, ...]:
    """Return the nodes after `change`, in page order: survivors in place, a newcomer last."""
    if change.kind == "add":
        return (*nodes, change.node)
    if change.kind == "remove":
        return tuple(node for node in nodes if node.name != change.node.name)
    return tuple(change.node if node.name == change.node.name else node for node in nodes)


def _assigned(placement: Placement, keys: Sequence[str]) -> list[str]:
    """Return the owners of `keys` arriving in order as load (``assign_many``)."""
    try:
        return placement.assign_many(keys)
    except RingkitError as error:
        raise ParamError("strategy", str(error), type(placement).__name__) from None


def _hasher_name(placement: Placement) -> str | None:
    hasher = placement.hasher
    return None if hasher is None else hasher.name


def _drawing_hasher(placement: Placement) -> str:
    """The hasher whose points place keys on the drawn circle: the placement's, or the page's."""
    return _hasher_name(placement) or DEFAULTS["hasher"]


def _positions(points: np.ndarray[Any, Any]) -> list[float]:
    # Six decimals of a turn is far below a pixel at any size the page draws.
    return np.round(points.astype(np.float64) / float(SPACE_64), 6).tolist()  # type: ignore[no-any-return]


def _fair(nodes: Sequence[Node]) -> list[float]:
    total = sum(node.weight for node in nodes)
    return [node.weight / total for node in nodes]


def _node_rows(
    placement: Placement, nodes: Sequence[Node], owners: Sequence[str]
) -> list[dict[str, Any]]:
    counts = Counter(owners)
    shares = placement.shares()
    tokens = Counter(_token_owner_names(placement))
    return [
        {
            "name": node.name,
            "weight": node.weight,
            "zone": node.zone,
            "keys": counts[node.name],
            "fair_keys": fair * len(owners),
            "share": shares.get(node.name, 0.0),
            "fair_share": fair,
            "tokens": tokens[node.name],
        }
        for node, fair in zip(nodes, _fair(nodes), strict=True)
    ]


def _token_owner_names(placement: Placement) -> list[str]:
    """Return the node of each token of the placement's ring (none without a ring)."""
    ring = placement.ring
    if ring is None:
        return []
    names = [node.name for node in ring.nodes]
    return [names[owner] for owner in ring.token_owners.tolist()]


def _tokens(
    tokens: np.ndarray[Any, Any], owners: Sequence[str], index: Mapping[str, int]
) -> dict[str, list[Any]]:
    return {"positions": _positions(tokens), "owners": [index[name] for name in owners]}


def _busiest(nodes: Sequence[Node], loads: Mapping[str, float], metric: str) -> dict[str, Any]:
    measured = balance(loads, {node.name: node.weight for node in nodes}, metric=metric)
    name = measured.busiest
    return {"node": name, "load": measured.loads[name], "ratio": measured.busiest_ratio}


def _popularity(
    keys: Population, nodes: Sequence[Node], owners: Sequence[str], rows: list[dict[str, Any]]
) -> dict[str, Any]:
    # Zipf: the key of rank r (its place in the key list) gets a share r**-s / H(count, s).
    requests = keys.request_shares(0, keys.count) * REQUESTS
    load: Counter[str] = Counter()
    for owner, amount in zip(owners, requests.tolist(), strict=True):
        load[owner] += amount
    for row in rows:
        row["requests"] = load[row["name"]]
        row["fair_requests"] = row["fair_share"] * REQUESTS
    hot = min(HOT_KEYS, len(owners))
    return {
        "zipf": keys.zipf,
        "requests": REQUESTS,
        "busiest": _busiest(nodes, load, "requests"),
        "hot_keys": [{"index": i, "requests": float(requests[i])} for i in range(hot)],
    }


def _movement(
    query: RingQuery, before: Placement, after: Placement, keys: Sequence[str]
) -> dict[str, Any]:
    """Return what the change moves (``ringkit.diff``), beside ``hash % N`` on the same keys.

    ``hash % N`` is ``Modulo`` over the node names in page order before and after the change:
    it has no weights, so a reweight moves nothing there.
    """
    assert query.change is not None
    movement = diff(before, after, keys=keys)
    moved = movement.moved_keys(keys)
    modulo = registry.StrategyOptions(hasher=_drawing_hasher(before))
    names_before = [node.name for node in query.placement.nodes]
    names_after = [node.name for node in _changed_nodes(query.placement.nodes, query.change)]
    baseline = diff(
        registry.build_placement("modulo", names_before, modulo),
        registry.build_placement("modulo", names_after, modulo),
        keys=keys,
    ).moved_keys(keys)
    position = {key: i for i, key in enumerate(keys)}
    exact = movement.basis != "keys"  # a diff over the key sample has no keyspace figures
    return {
        "kind": query.change.kind,
        "node": query.change.node.name,
        "weight": query.change.node.weight,
        "keys": len(keys),
        "moved": len(moved),
        "moved_fraction": len(moved) / len(keys),
        "moved_modulo": len(baseline),
        "moved_modulo_fraction": len(baseline) / len(keys),
        "moved_keys": [position[str(key)] for key, _, _ in moved],
        "moved_modulo_keys": [position[str(key)] for key, _, _ in baseline],
        "transfers": dict(sorted(Counter(f"{a}→{b}" for _, a, b in moved).items())),
        "basis": movement.basis if exact else None,
        "moved_share": movement.moved_fraction if exact else None,
        "optimum_share": movement.optimum_fraction if exact else None,
    }


def lookup_report(query: LookupQuery) -> dict[str, Any]:
    """Return one key's hash, point, owner, preference list and, on a ring, the clockwise walk.

    The walk is the trace of the placement's ring (``HashRing.trace``, :mod:`ringkit.ring.trace`);
    placements without a ring have none, and their hash and point come from their hasher.

    :raises ParamError: when the strategy refuses the nodes or an option
    """
    placement = build(query.placement, replicas=query.replicas)
    replicas = query.replicas or 1
    ring = placement.ring
    try:
        trace = None if ring is None else trace_ring(ring, query.key, replicas)
        owner = placement.node_for(query.key)
        preference = placement.nodes_for(query.key, replicas)
    except RingkitError as error:
        raise ParamError("strategy", str(error), query.placement.strategy) from None
    report: dict[str, Any] = {"key": query.key, **_hashed(placement, query.key, trace)}
    report.update(owner=owner, preference_list=preference, walk=_walk(trace))
    return report


def _hashed(placement: Placement, key: str, trace: Trace | None) -> dict[str, Any]:
    """Return the key's hasher, native hash, point and position: the trace's, or the hasher's."""
    if trace is not None:
        point, space = trace.point, trace.space
        return {
            "hasher": trace.hasher,
            "hash": trace.hash_hex,
            "point": f"0x{point:016x}",
            "position": point / space,
        }
    hasher = placement.hasher
    if hasher is None:  # the placement does not hash keys (ranges order them)
        return {"hasher": None, "hash": None, "point": None, "position": None}
    data = encode_key(key)
    point = hasher.point(data)
    return {
        "hasher": hasher.name,
        "hash": f"0x{hasher.function(data):0{hasher.bits // 4}x}",
        "point": f"0x{point:016x}",
        "position": point / SPACE_64,
    }


def _walk(trace: Trace | None) -> dict[str, Any] | None:
    """Return the trace's steps as the page draws them (the first ``_WALK_STEPS``)."""
    if trace is None:
        return None
    steps = [
        {
            "token": f"0x{step.token:016x}",
            "position": step.token / trace.space,
            "node": step.node,
            "first": step.first,
            "rank": step.rank,
            "held_back": step.held_back,
            "wrapped": step.wrapped,
        }
        for step in trace.steps[:_WALK_STEPS]
    ]
    return {"wrapped": trace.wrapped, "steps": steps, "complete": len(trace.steps) <= _WALK_STEPS}
