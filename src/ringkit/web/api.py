"""What the JSON API answers, computed by the library from validated queries.

Each function takes a query from :mod:`ringkit.web.params` and returns a JSON-ready dict. The
placement comes from the strategy registry; owners from its ``node_for_many``; the ring's tokens,
points, walk and preference list from ``HashRing`` itself; a change is the placement's own
``add`` / ``remove`` / ``reweight`` (placements are immutable values, so the old one is still there
to compare with), replayed on ``Modulo`` (``hash % N``) over the same keys.

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

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ringkit.commands.lookup import lookup_report as ring_lookup_report
from ringkit.errors import RingkitError
from ringkit.hashing import HASHERS, get_hasher, points_many
from ringkit.movement import diff
from ringkit.nodes import Node
from ringkit.placement import Placement
from ringkit.ring import SPACE_64, HashRing
from ringkit.sim import Population
from ringkit.stats import balance
from ringkit.strategies import registry
from ringkit.strategies.bounded import BoundedLoad
from ringkit.strategies.modulo import Modulo
from ringkit.web.params import (
    DEFAULTS,
    LIMITS,
    Change,
    LookupQuery,
    ParamError,
    PlacementQuery,
    RingQuery,
)

__all__ = ["PALETTE", "REQUESTS", "lookup_report", "meta", "population", "ring_report"]

# Kelly's colours of maximum contrast (Kelly 1965), with teal for his violet (too near his purple),
# ordered so that the first ones differ most. The page gives each node the first free colour;
# tests/web/test_api.py checks every pair stays apart (CIELAB distance).
PALETTE: tuple[str, ...] = (
    "#0067a5", "#f38400", "#008856", "#be0032", "#875692", "#a1caf1", "#f3c300", "#882d17",
    "#e68fac", "#8db600", "#00a3a3", "#848482", "#f99379", "#2b3d26", "#c2b280", "#b3446c",
)  # fmt: skip
REQUESTS = 100_000
HOT_KEYS = 10
VNODE_CHOICES = (1, 8, 32, 128)
_WALK_STEPS = 256


def meta() -> dict[str, Any]:
    """Return what the page needs to build its controls: names, defaults, limits, colours."""
    return {
        "strategies": list(registry.STRATEGY_NAMES),
        "hashers": [{"name": name, "bits": HASHERS[name].bits} for name in sorted(HASHERS)],
        "defaults": dict(DEFAULTS),
        "limits": dict(LIMITS),
        "vnode_choices": list(VNODE_CHOICES),
        "palette": list(PALETTE),
        "requests": REQUESTS,
    }


def population(query: RingQuery) -> Population:
    """Return the query's keys as the simulator's population: ``prefix`` then 1, 2, … (4 digits).

    >>> from ringkit.web.params import parse_ring_query
    >>> population(parse_ring_query({"keys": "3"})).names()
    ['booking-0001', 'booking-0002', 'booking-0003']
    """
    return Population(count=query.keys, prefix=query.prefix, zipf=query.zipf or 0.0)


def build(query: PlacementQuery, nodes: Sequence[Node] | None = None) -> Placement:
    """Return the placement the query names, over `nodes` (default: the query's nodes).

    :raises ParamError: (param ``strategy``) when the strategy refuses these nodes or options
    """
    options = registry.StrategyOptions(vnodes=query.vnodes, hasher=query.hasher)
    try:
        return registry.build_placement(query.strategy, nodes or query.nodes, options)
    except RingkitError as error:
        raise ParamError("strategy", str(error), query.strategy) from None


def ring_report(query: RingQuery) -> dict[str, Any]:
    """Return the placement, its keys and owners, counts, popularity and the change's movement.

    With a change, everything but ``change`` describes the placement *after* it.
    Runtime: O(K) hashes for K keys per placement built, plus building the placements.

    :raises ParamError: when the strategy refuses the nodes or the change
    """
    keys_population = population(query)
    keys = keys_population.names()
    before = build(query.placement)
    after, nodes = before, query.placement.nodes
    if query.change is not None:
        after = _changed(before, query.change, query.placement)
        nodes = _changed_nodes(query.placement.nodes, query.change)
    owners = _owners(after, keys)
    index = {node.name: i for i, node in enumerate(nodes)}
    points = points_many(keys, query.placement.hasher)
    report: dict[str, Any] = {
        "strategy": query.placement.strategy,
        "hasher": query.placement.hasher,
        "vnodes": query.placement.vnodes,
        "nodes": _node_rows(after, nodes, owners),
        "tokens": _tokens(after, index),
        "keys": {
            "names": keys,
            "positions": _positions(points),
            "owners": [index[owner] for owner in owners],
        },
        "busiest": _busiest(nodes, Counter(owners), "keys"),
        "popularity": None,
        "change": None,
    }
    if query.zipf is not None:
        report["popularity"] = _popularity(keys_population, nodes, owners, report["nodes"])
    if query.change is not None:
        report["change"] = _movement(query, before, after, keys, owners)
    return report


def _changed(placement: Placement, change: Change, query: PlacementQuery) -> Placement:
    try:
        if change.kind == "add":
            return placement.add(change.node)
        if change.kind == "remove":
            return placement.remove(change.node.name)
        if isinstance(placement, HashRing):
            return placement.reweight(change.node.name, change.node.weight)
    except RingkitError as error:
        raise ParamError(change.kind, str(error), change.node.name) from None
    # A placement without reweight: the same nodes, in the same order, one with a new weight.
    return build(query, _changed_nodes(query.nodes, change))


def _changed_nodes(nodes: Sequence[Node], change: Change) -> tuple[Node, ...]:
    if change.kind == "add":
        return (*nodes, change.node)
    if change.kind == "remove":
        return tuple(node for node in nodes if node.name != change.node.name)
    return tuple(change.node if node.name == change.node.name else node for node in nodes)


def _owners(placement: Placement, keys: Sequence[str]) -> list[str]:
    try:
        if isinstance(placement, BoundedLoad):
            # The keys are the load: each is acquired in turn on a fresh load table, so a node at
            # its cap passes the next keys on clockwise (a pure lookup would count no load).
            fresh = BoundedLoad(placement.ring, balance_factor=placement.balance_factor)
            return [fresh.acquire(key) for key in keys]
        return placement.node_for_many(keys)
    except RingkitError as error:
        raise ParamError("strategy", str(error), type(placement).__name__) from None


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


def _ring_of(placement: Placement) -> HashRing | None:
    """Return the hash ring a placement keeps its tokens in, if it has one."""
    if isinstance(placement, BoundedLoad):
        return placement.ring
    return placement if isinstance(placement, HashRing) else None


def _token_owner_names(placement: Placement) -> list[str]:
    ring = _ring_of(placement)
    if ring is None:
        return []
    names = [node.name for node in ring.nodes]
    return [names[owner] for owner in ring.token_owners.tolist()]


def _tokens(placement: Placement, index: Mapping[str, int]) -> dict[str, list[Any]] | None:
    ring = _ring_of(placement)
    if ring is None:
        return None
    return {
        "positions": _positions(ring.tokens),
        "owners": [index[name] for name in _token_owner_names(placement)],
    }


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
    query: RingQuery,
    before: Placement,
    after: Placement,
    keys: Sequence[str],
    owners: Sequence[str],
) -> dict[str, Any]:
    assert query.change is not None
    old = _owners(before, keys)
    moved = [i for i, (a, b) in enumerate(zip(old, owners, strict=True)) if a != b]
    modulo = Modulo(query.placement.nodes, hasher=query.placement.hasher)
    # hash % N ignores weights: a reweight moves nothing there.
    modulo_after: Placement = modulo
    if query.change.kind != "reweight":
        modulo_after = _changed(modulo, query.change, query.placement)
    modulo_old = modulo.node_for_many(keys)
    modulo_new = modulo_after.node_for_many(keys)
    moved_modulo = [i for i in range(len(keys)) if modulo_old[i] != modulo_new[i]]
    transfers = Counter(f"{old[i]}→{owners[i]}" for i in moved)
    return {
        "kind": query.change.kind,
        "node": query.change.node.name,
        "weight": query.change.node.weight,
        "keys": len(keys),
        "moved": len(moved),
        "moved_fraction": len(moved) / len(keys),
        "moved_modulo": len(moved_modulo),
        "moved_modulo_fraction": len(moved_modulo) / len(keys),
        "moved_keys": moved,
        "moved_modulo_keys": moved_modulo,
        "transfers": dict(sorted(transfers.items())),
        **_exact_movement(before, after, keys),
    }


def _exact_movement(before: Placement, after: Placement, keys: Sequence[str]) -> dict[str, Any]:
    """Return ``ringkit.diff``'s view: what share of the space moved, and the least possible.

    ``basis`` is ``points`` for two rings (exact over the whole keyspace), ``slots`` for maglev
    tables, ``keys`` when only the keys could be compared. Bounded load places the keys as load,
    which a diff of its lookups would not see, so it gets no figures here.
    """
    if isinstance(after, BoundedLoad):
        return {"basis": None, "moved_share": None, "optimum_share": None}
    try:
        movement = diff(before, after, keys=keys)
    except RingkitError:  # a pair diff cannot compare: the key counts above still stand
        return {"basis": None, "moved_share": None, "optimum_share": None}
    return {
        "basis": movement.basis,
        "moved_share": movement.moved_fraction,
        "optimum_share": movement.optimum_fraction,
    }


def lookup_report(query: LookupQuery) -> dict[str, Any]:
    """Return one key's hash, point, owner, preference list and, on a ring, the clockwise walk.

    :raises ParamError: when the strategy refuses the nodes
    """
    placement = build(query.placement)
    hasher = get_hasher(query.placement.hasher)
    data = query.key.encode()
    point = hasher.point(data)
    report: dict[str, Any] = {
        "key": query.key,
        "hasher": hasher.name,
        "hash": f"0x{hasher.function(data):0{hasher.bits // 4}x}",
        "point": f"0x{point:016x}",
        "position": point / SPACE_64,
        "owner": None,
        "preference_list": None,
        "walk": None,
    }
    try:
        report["owner"] = placement.node_for(query.key)
        report["preference_list"] = placement.nodes_for(query.key, query.replicas)
    except RingkitError as error:
        raise ParamError("strategy", str(error), query.placement.strategy) from None
    if isinstance(placement, HashRing):
        report["walk"] = _walk(placement, query.key, query.replicas)
    return report


def _walk(ring: HashRing, key: str, replicas: int) -> dict[str, Any]:
    """Return the tokens met walking clockwise from `key` until its preference list is complete.

    Each step names the token's node; on the node's first visit, its rank in the preference list
    (``nodes_for``'s answer) and whether zones held it back: a node met early whose zone already
    has a replica ranks later than its turn, or not at all.
    """
    base = ring_lookup_report(ring, key, replicas)
    preference: list[str] = base["preference_list"]
    names = [node.name for node in ring.nodes]
    tokens, owners = ring.tokens, ring.token_owners
    steps: list[dict[str, Any]] = []
    seen: list[str] = []
    start = base["token_index"]
    for step in range(min(len(tokens), _WALK_STEPS)):
        at = (start + step) % len(tokens)
        name = names[int(owners[at])]
        first = name not in seen
        if first:
            seen.append(name)
        rank = preference.index(name) + 1 if first and name in preference else None
        token = int(tokens[at])
        steps.append(
            {
                "token": f"0x{token:016x}",
                "position": token / SPACE_64,
                "node": name,
                "first": first,
                "rank": rank,
                "held_back": first and (rank is None or rank > len(seen)),
                # A token before the key's point is reached by wrapping past the top.
                "wrapped": token < base["point"],
            }
        )
        if set(seen).issuperset(preference):
            break
    complete = set(seen).issuperset(preference)
    return {"wrapped": base["wrapped"], "steps": steps, "complete": complete}
