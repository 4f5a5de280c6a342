"""Query parameters of the JSON API: parsed once, validated completely, within safe limits.

Every parameter is a named query parameter with a text value. Parsing is strict (ASCII digits
only, no silent defaults for bad values) and every failure is a :class:`ParamError` naming the
parameter, saying what was expected and carrying the value given, which the app turns into
HTTP 400 ``{"error": {"param": ..., "message": ..., "value": ...}}``. The limits
keep one request's work bounded: at most ``MAX_NODES`` nodes, ``MAX_VNODES`` vnodes per node,
``MAX_TOKENS`` tokens in all and ``MAX_KEYS`` keys.

A node is written ``NAME[:WEIGHT[:ZONE]]``; nodes are separated by commas, in the order the
page lists them (the order ``hash % N`` indexes them by). A placement option that is not given
(``vnodes``, ``hasher``, ``replicas``) is None in the query, never a silent default: the API
decides what a missing option means (:func:`ringkit.web.api.build`), and the library refuses an
option the strategy does not use.

>>> query = parse_ring_query({"nodes": "A,B:2,C:1:eu-1", "vnodes": "8", "add": "D"})
>>> [(node.name, node.weight, node.zone) for node in query.placement.nodes]
[('A', 1.0, None), ('B', 2.0, None), ('C', 1.0, 'eu-1')]
>>> query.change
Change(kind='add', node=Node(name='D', weight=1.0, zone=None, address=None))
>>> parse_ring_query({}).placement.vnodes is None
True
>>> parse_ring_query({"vnodes": "0"})
Traceback (most recent call last):
...
ringkit.errors.ParamError: vnodes must be in [1, 1024], got '0'
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from ringkit.errors import ParamError
from ringkit.hashing import HASHERS
from ringkit.nodes import Node
from ringkit.ring import vnode_count
from ringkit.sim.remedies import MAX_CLIENTS, MAX_REQUESTS_PER_S, MAX_TTL_S
from ringkit.strategies import registry

__all__ = [
    "DEFAULTS",
    "LIMITS",
    "Change",
    "FailZoneQuery",
    "KeysQuery",
    "LiveQuery",
    "LookupQuery",
    "ParamError",
    "PlacementQuery",
    "RemediesQuery",
    "RingQuery",
    "parse_fail_zone_query",
    "parse_live_query",
    "parse_lookup_query",
    "parse_remedies_query",
    "parse_ring_query",
]

MAX_NODES = 64
MAX_VNODES = 1024
MAX_TOKENS = 65_536
MAX_KEYS = 20_000
MAX_WEIGHT = 16.0
MAX_ZIPF = 4.0
MAX_KEY_LENGTH = 256
MAX_PREFIX_LENGTH = 32
MAX_VALUE_LENGTH = 8192
MAX_WAIT_S = 30.0
# Replicas of a fail-zone query: each is a step of every token's preference-list walk.
MAX_FAIL_REPLICAS = 7
LIVE_WAIT_S = 20.0

LIMITS: Mapping[str, float] = {
    "nodes": MAX_NODES,
    "vnodes": MAX_VNODES,
    "tokens": MAX_TOKENS,
    "keys": MAX_KEYS,
    "weight": MAX_WEIGHT,
    "zipf": MAX_ZIPF,
    "key_length": MAX_KEY_LENGTH,
    "prefix_length": MAX_PREFIX_LENGTH,
    "fail_replicas": MAX_FAIL_REPLICAS,
    "clients": MAX_CLIENTS,
    "ttl_s": MAX_TTL_S,
    "requests_per_s": MAX_REQUESTS_PER_S,
}

# The page's first state, Gatepass: three nodes, 300 booking keys, FNV-1a plus a mix, 1 vnode.
# vnodes and hasher apply to the strategies that use them (ringkit.web.api.build).
DEFAULTS: Mapping[str, str] = {
    "nodes": "A,B,C",
    "vnodes": "1",
    "hasher": "fnv1a_32_mix",
    "strategy": "ring",
    "keys": "300",
    "prefix": "booking-",
    "replicas": "1",
}

_COMMON = ("nodes", "vnodes", "hasher", "strategy")
_RING_PARAMS = frozenset((*_COMMON, "keys", "prefix", "zipf", "add", "remove", "reweight"))
_LOOKUP_PARAMS = frozenset((*_COMMON, "key", "replicas"))
_KEYS = ("keys", "prefix", "zipf")
_REMEDY_SETTINGS = (
    "top",
    "spread",
    "parts",
    "near_cache_max_items",
    "near_cache_ttl_s",
    "clients",
    "requests_per_s",
    "writes",
)
_REMEDIES_PARAMS = frozenset((*_COMMON, *_KEYS, *_REMEDY_SETTINGS))
_FAIL_ZONE_PARAMS = frozenset((*_COMMON, *_KEYS, "zone", "replicas"))
_LIVE_PARAMS = frozenset(("after_epoch", "wait_s"))
_EPOCH = re.compile(r"[0-9]{1,18}")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,31}")
_INT = re.compile(r"[0-9]{1,9}")
_DECIMAL = re.compile(r"[0-9]{1,6}(\.[0-9]{1,6})?")

ChangeKind = Literal["add", "remove", "reweight"]
Params = Mapping[str, str] | Iterable[tuple[str, str]]


@dataclass(frozen=True, slots=True)
class PlacementQuery:
    """Which placement to build: nodes in page order, vnodes, hasher and strategy names.

    `vnodes` and `hasher` are None when the query does not give them.
    """

    nodes: tuple[Node, ...]
    vnodes: int | None
    hasher: str | None
    strategy: str


@dataclass(frozen=True, slots=True)
class Change:
    """One membership change: add `node`, remove it, or give it ``node.weight``."""

    kind: ChangeKind
    node: Node


@dataclass(frozen=True, slots=True)
class RingQuery:
    """``GET /api/ring``: the placement, the key population and an optional change."""

    placement: PlacementQuery
    keys: int
    prefix: str
    zipf: float | None
    change: Change | None


@dataclass(frozen=True, slots=True)
class LookupQuery:
    """``GET /api/lookup``: the placement, one key and the preference-list length (or None)."""

    placement: PlacementQuery
    key: str
    replicas: int | None


@dataclass(frozen=True, slots=True)
class KeysQuery:
    """The key population of a query: count, name prefix and Zipf exponent (or None)."""

    keys: int
    prefix: str
    zipf: float | None


@dataclass(frozen=True, slots=True)
class RemediesQuery:
    """``GET /api/remedies``: the placement, Zipf keys and the remedies' settings.

    `settings` holds the remedy settings the query gives, as numbers
    (:class:`ringkit.sim.Remedies` field names); the API fills in the rest.
    """

    placement: PlacementQuery
    population: KeysQuery
    settings: Mapping[str, float]


@dataclass(frozen=True, slots=True)
class FailZoneQuery:
    """``GET /api/fail_zone``: the placement (every node in a zone), keys, a zone, replicas."""

    placement: PlacementQuery
    population: KeysQuery
    zone: str
    replicas: int


def parse_ring_query(params: Params) -> RingQuery:
    """Return the validated ``/api/ring`` query.

    :raises ParamError: for an unknown, repeated, malformed or out-of-range parameter
    """
    values = _collect(params, _RING_PARAMS)
    placement = _placement(values)
    keys = _keys(values)
    change = _change(values, placement)
    return RingQuery(placement, keys.keys, keys.prefix, keys.zipf, change)


def _keys(values: Mapping[str, str]) -> KeysQuery:
    keys = _int(values, "keys", 1, MAX_KEYS)
    prefix = values.get("prefix", DEFAULTS["prefix"])
    if len(prefix) > MAX_PREFIX_LENGTH or not prefix.isprintable():
        raise ParamError(
            "prefix",
            f"prefix must be at most {MAX_PREFIX_LENGTH} printable characters, got {prefix!r}",
            prefix,
        )
    zipf = None if "zipf" not in values else _decimal(values, "zipf", 0.0, MAX_ZIPF)
    return KeysQuery(keys, prefix, zipf)


def parse_remedies_query(params: Params) -> RemediesQuery:
    """Return the validated ``/api/remedies`` query (Zipf keys are required).

    >>> parse_remedies_query({"zipf": "1.1", "spread": "2"}).settings
    {'spread': 2}

    :raises ParamError: for an unknown, repeated, malformed or out-of-range parameter, a
        missing ``zipf``, or ``spread`` / ``parts`` above the number of nodes
    """
    values = _collect(params, _REMEDIES_PARAMS)
    placement = _placement(values)
    keys = _keys(values)
    if keys.zipf is None:
        raise ParamError(
            "zipf", "zipf is required: hot keys need Zipf popularity, got nothing", None
        )
    nodes = len(placement.nodes)
    bounds: dict[str, tuple[int, int]] = {
        "top": (1, MAX_KEYS),
        "spread": (1, nodes),
        "parts": (1, nodes),
        "near_cache_max_items": (1, MAX_KEYS),
        "clients": (1, MAX_CLIENTS),
    }
    settings: dict[str, float] = {
        name: _int(values, name, *bounds[name]) for name in bounds if name in values
    }
    for name, high in (("near_cache_ttl_s", MAX_TTL_S), ("requests_per_s", MAX_REQUESTS_PER_S)):
        if name in values:
            settings[name] = _decimal(values, name, 0.0, high)
            if settings[name] == 0:
                message = f"{name} must be a number in (0, {high:g}], got {values[name]!r}"
                raise ParamError(name, message, values[name])
    if "writes" in values:
        settings["writes"] = _decimal(values, "writes", 0.0, 1.0)
    return RemediesQuery(placement, keys, settings)


def parse_fail_zone_query(params: Params) -> FailZoneQuery:
    """Return the validated ``/api/fail_zone`` query: every node needs a zone.

    >>> parse_fail_zone_query({"nodes": "A:1:z0,B:1:z1", "zone": "z1", "replicas": "2"}).zone
    'z1'

    :raises ParamError: for an unknown, repeated, malformed or out-of-range parameter, a node
        without a zone, or a zone no node is in
    """
    values = _collect(params, _FAIL_ZONE_PARAMS)
    placement = _placement(values)
    keys = _keys(values)
    zoneless = [node.name for node in placement.nodes if node.zone is None]
    if zoneless:
        shown = ", ".join(repr(name) for name in zoneless[:5])
        raise ParamError(
            "nodes",
            f"fail zone needs every node in a zone (NAME:WEIGHT:ZONE), got none for {shown}",
            values.get("nodes", DEFAULTS["nodes"]),
        )
    zones = sorted({str(node.zone) for node in placement.nodes})
    if "zone" not in values:
        raise ParamError("zone", f"zone is required (one of {', '.join(zones)}), got nothing", None)
    zone = values["zone"]
    if zone not in zones:
        raise ParamError("zone", f"zone must be one of {', '.join(zones)}, got {zone!r}", zone)
    high = min(len(placement.nodes), MAX_FAIL_REPLICAS)
    replicas = _int(values, "replicas", 1, high) if "replicas" in values else min(3, high)
    return FailZoneQuery(placement, keys, zone, replicas)


def parse_lookup_query(params: Params) -> LookupQuery:
    """Return the validated ``/api/lookup`` query.

    :raises ParamError: for an unknown, repeated, malformed or out-of-range parameter, or no key
    """
    values = _collect(params, _LOOKUP_PARAMS)
    placement = _placement(values)
    if "key" not in values:
        raise ParamError("key", "key is required, got nothing", None)
    key = values["key"]
    if not 1 <= len(key) <= MAX_KEY_LENGTH:
        raise ParamError(
            "key", f"key must be 1 to {MAX_KEY_LENGTH} characters, got {len(key)}", key
        )
    replicas = _int(values, "replicas", 1, MAX_NODES) if "replicas" in values else None
    return LookupQuery(placement, key, replicas)


@dataclass(frozen=True, slots=True)
class LiveQuery:
    """``GET /api/live``: answer at once, or once the epoch is past `after_epoch` (long poll).

    `after_epoch` is None for "now"; `wait_s` bounds the wait (then the current snapshot).
    """

    after_epoch: int | None
    wait_s: float


def parse_live_query(params: Params) -> LiveQuery:
    """Return the validated ``/api/live`` query.

    >>> parse_live_query({"after_epoch": "12"})
    LiveQuery(after_epoch=12, wait_s=20.0)

    :raises ParamError: for an unknown or repeated parameter, an epoch that is not a
        non-negative integer, or a wait outside [0, 30] seconds
    """
    values = _collect(params, _LIVE_PARAMS)
    after = values.get("after_epoch")
    if after is not None and not _EPOCH.fullmatch(after):
        raise ParamError(
            "after_epoch", f"after_epoch must be an integer >= 0, got {after!r}", after
        )
    wait_s = _decimal(values, "wait_s", 0.0, MAX_WAIT_S) if "wait_s" in values else LIVE_WAIT_S
    return LiveQuery(None if after is None else int(after), wait_s)


def _collect(params: Params, known: frozenset[str]) -> dict[str, str]:
    items = params.items() if isinstance(params, Mapping) else params
    values: dict[str, str] = {}
    for name, value in items:
        if name not in known:
            raise ParamError(
                name, f"unknown parameter {name!r}; known: {', '.join(sorted(known))}", value
            )
        if name in values:
            raise ParamError(
                name, f"{name} is given twice, got {values[name]!r} and {value!r}", value
            )
        if len(value) > MAX_VALUE_LENGTH:
            raise ParamError(
                name,
                f"{name} must be at most {MAX_VALUE_LENGTH} characters, got {len(value)}",
                value[:64] + "…",
            )
        values[name] = value
    return values


def _placement(values: Mapping[str, str]) -> PlacementQuery:
    nodes = _nodes(values.get("nodes", DEFAULTS["nodes"]))
    vnodes = _int(values, "vnodes", 1, MAX_VNODES) if "vnodes" in values else None
    hasher = values.get("hasher")
    if hasher is not None and hasher not in HASHERS:
        known = ", ".join(sorted(HASHERS))
        raise ParamError("hasher", f"unknown hasher {hasher!r}; known: {known}", hasher)
    strategy = values.get("strategy", DEFAULTS["strategy"])
    if strategy not in registry.STRATEGY_NAMES:
        known = ", ".join(registry.STRATEGY_NAMES)
        raise ParamError("strategy", f"unknown strategy {strategy!r}; known: {known}", strategy)
    query = PlacementQuery(nodes, vnodes, hasher, strategy)
    _check_tokens(nodes, _token_vnodes(query), "vnodes", values.get("vnodes", DEFAULTS["vnodes"]))
    return query


def _token_vnodes(query: PlacementQuery) -> int:
    """Return the vnodes that bound the query's token count: given, or the page's default."""
    return int(DEFAULTS["vnodes"]) if query.vnodes is None else query.vnodes


def _nodes(text: str) -> tuple[Node, ...]:
    specs = text.split(",")
    if len(specs) > MAX_NODES:
        raise ParamError("nodes", f"nodes must list at most {MAX_NODES}, got {len(specs)}", text)
    nodes = tuple(_node(spec, "nodes") for spec in specs)
    names = [node.name for node in nodes]
    for name in names:
        if names.count(name) > 1:
            raise ParamError("nodes", f"node {name!r} is listed twice; names must be unique", text)
    return nodes


def _node(spec: str, param: str) -> Node:
    fields = spec.split(":")
    if len(fields) > 3:
        raise ParamError(param, f"a node is NAME[:WEIGHT[:ZONE]], got {spec!r}", spec)
    name = fields[0]
    if not _NAME.fullmatch(name):
        raise ParamError(
            param,
            f"node name must be 1-32 of A-Z a-z 0-9 _ . - (starting with a letter or digit), "
            f"got {name!r}",
            spec,
        )
    weight = _weight(fields[1], param, spec) if len(fields) > 1 else 1.0
    zone = fields[2] if len(fields) > 2 else None
    if zone is not None and not _NAME.fullmatch(zone):
        raise ParamError(
            param, f"zone of node {name!r} must be 1-32 of A-Z a-z 0-9 _ . -, got {zone!r}", spec
        )
    return Node(name, weight=weight, zone=zone)


def _weight(text: str, param: str, spec: str) -> float:
    value = float(text) if _DECIMAL.fullmatch(text) else math.nan
    if not 0 < value <= MAX_WEIGHT:
        raise ParamError(
            param, f"weight must be a number in (0, {MAX_WEIGHT:g}], got {text!r}", spec
        )
    return value


def _int(values: Mapping[str, str], param: str, low: int, high: int) -> int:
    text = values.get(param, DEFAULTS.get(param, ""))
    if not _INT.fullmatch(text) or not low <= int(text) <= high:
        raise ParamError(param, f"{param} must be in [{low}, {high}], got {text!r}", text)
    return int(text)


def _decimal(values: Mapping[str, str], param: str, low: float, high: float) -> float:
    text = values[param]
    value = float(text) if _DECIMAL.fullmatch(text) else math.nan
    if not low <= value <= high:
        raise ParamError(
            param, f"{param} must be a number in [{low:g}, {high:g}], got {text!r}", text
        )
    return value


def _check_tokens(nodes: Iterable[Node], vnodes: int, param: str, value: str) -> None:
    total = sum(vnode_count(vnodes, node.weight) for node in nodes)
    if total > MAX_TOKENS:
        raise ParamError(
            param,
            f"the ring would have {total} tokens, more than {MAX_TOKENS}; lower vnodes or weights",
            value,
        )


def _change(values: Mapping[str, str], placement: PlacementQuery) -> Change | None:
    given = [name for name in ("add", "remove", "reweight") if name in values]
    if len(given) > 1:
        message = f"give at most one change (add, remove or reweight), got {' and '.join(given)}"
        raise ParamError(given[1], message, values[given[1]])
    if not given:
        return None
    kind: ChangeKind = given[0]  # type: ignore[assignment]
    text = values[kind]
    names = [node.name for node in placement.nodes]
    if kind == "add":
        node = _node(text, "add")
        if node.name in names:
            raise ParamError("add", f"node {node.name!r} is already in the nodes", text)
        if len(names) >= MAX_NODES:
            raise ParamError(
                "add", f"nodes must list at most {MAX_NODES}, got {len(names) + 1}", text
            )
        _check_tokens((*placement.nodes, node), _token_vnodes(placement), "add", text)
        return Change("add", node)
    name, _, weight = text.partition(":") if kind == "reweight" else (text, "", "")
    if name not in names:
        shown = ", ".join(repr(known) for known in names[:5])
        raise ParamError(kind, f"node {name!r} is not in the nodes ({shown})", text)
    old = placement.nodes[names.index(name)]
    if kind == "remove":
        if len(names) == 1:
            raise ParamError("remove", f"cannot remove {name!r}, the last node", text)
        return Change("remove", old)
    node = old.with_weight(_weight(weight, "reweight", text))
    others = [other for other in placement.nodes if other.name != name]
    _check_tokens((*others, node), _token_vnodes(placement), "reweight", text)
    return Change("reweight", node)
