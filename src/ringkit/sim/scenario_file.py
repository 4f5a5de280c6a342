"""Scenario files: a TOML description of keys, nodes, a strategy and events for the simulator.

Every field is checked once, here; a mistake is one :class:`~ringkit.errors.ConfigError` whose
message names the file, the field and the accepted values, e.g.
``cascade.toml: events[2].type must be one of add, remove, reweight, fail, stale; got 'explode'``.
``strategy.vnodes`` may be a list: the scenario then runs once per vnode count, side by side.
The scenarios shipped with ringkit (``ringkit/sim/scenarios/*.toml``, copied to ``examples/``)
load by name: :func:`bundled_scenarios`, :func:`load_bundled_scenario`.

>>> text = '''
... nodes = ["A", "B", "C"]
... [keys]
... count = 1000
... [strategy]
... vnodes = [1, 128]
... [[events]]
... type = "add"
... node = "D"
... '''
>>> [s.name for s in parse_scenario(text, "demo.toml")]
['vnodes=1', 'vnodes=128']
"""

from __future__ import annotations

import dataclasses
import importlib.resources
import re
import reprlib
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ringkit.errors import ConfigError, UnsupportedError
from ringkit.hashing import get_hasher
from ringkit.nodes import Node
from ringkit.placement import check_token_count, count_text
from ringkit.sim.balancers import Balancers
from ringkit.sim.population import DISTRIBUTIONS, Population, Sizes
from ringkit.sim.remedies import Remedies
from ringkit.sim.scenario import EVENT_TYPES, Event, Scenario, with_vnodes
from ringkit.sim.zones import spread_zones, zone_names
from ringkit.stats import METRICS
from ringkit.strategies.options import OPTION_NAMES, StrategyOptions
from ringkit.strategies.registry import STRATEGY_NAMES, build_placement, resolve_options

__all__ = ["bundled_scenarios", "load_bundled_scenario", "load_scenario", "parse_scenario"]

_SENTENCE_END = re.compile(r"(?<! al)\.\s+(?=[A-Z])")
_TOP = (
    "name",
    "seed",
    "hot_keys",
    "baseline",
    "zones",
    "keys",
    "nodes",
    "strategy",
    "events",
    "remedies",
    "balancers",
)
_KEYS = ("count", "prefix", "start", "width", "zipf", "sizes")
_SIZES = tuple(f.name for f in dataclasses.fields(Sizes))
_EVENT = ("type", "node", "zone", "weight", "capacity", "load", "behind")
_REMEDIES = tuple(f.name for f in dataclasses.fields(Remedies))
# A bad value is shown cut short: a file may hold a huge or deeply nested one.
_SHOWN = reprlib.Repr()  # (keyword arguments only from Python 3.12)
_SHOWN.maxlevel, _SHOWN.maxlist, _SHOWN.maxdict, _SHOWN.maxstring = 3, 6, 6, 60
# The TOML type of each strategy option but vnodes (an integer or a list of them).
_OPTION_KINDS: dict[str, type] = {
    "hasher": str,
    "table_size": int,
    "probes": int,
    "balance_factor": float,
    "rendezvous_variant": str,
    "partitions": int,
    "replicas": int,
    "tokens": int,
}


class _Fields:
    """Typed access to a TOML table that reports `file: field …` on a bad value."""

    def __init__(self, source: str, path: str, table: object, allowed: tuple[str, ...]) -> None:
        self.source, self.path = source, path
        if not isinstance(table, Mapping):
            raise self.error("", "must be a table", table)
        self.table: Mapping[str, Any] = table
        for name in table:
            if name not in allowed:
                raise ConfigError(
                    f"{source}: unknown field {self.name(name)!r}; accepted: {', '.join(allowed)}"
                )

    def name(self, field: str) -> str:
        return f"{self.path}.{field}" if self.path and field else self.path or field

    def error(self, field: str, constraint: str, value: object) -> ConfigError:
        return ConfigError(
            f"{self.source}: {self.name(field)} {constraint}; got {_SHOWN.repr(value)}"
        )

    def get(self, field: str, kind: type | tuple[type, ...], default: Any) -> Any:
        value = self.table.get(field, default)
        if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
            raise self.error(field, f"must be {_kind_name(kind)}", value)
        if not isinstance(value, kind):
            raise self.error(field, f"must be {_kind_name(kind)}", value)
        return value

    def choice(self, field: str, choices: tuple[str, ...], default: str) -> str:
        value = self.table.get(field, default)
        if value not in choices:
            raise self.error(field, f"must be one of {', '.join(choices)}", value)
        return str(value)

    def number(self, field: str, default: float | None, *, minimum: float = 0.0) -> Any:
        value = self.get(field, (int, float, type(None)), default)
        if value is not None and not value > minimum:
            raise self.error(field, f"must be a number > {minimum:g}", value)
        return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "a table",
        type(None): "absent",
    }
    return " or ".join(names.get(k, k.__name__) for k in kinds if k is not type(None))


def _population(source: str, data: object, seed: int) -> Population:
    keys = _Fields(source, "keys", data, _KEYS)
    count = keys.get("count", int, 300)
    if count < 1:
        raise keys.error("count", "must be an integer >= 1", count)
    start = keys.get("start", int, 1)
    width = keys.get("width", int, len(str(start + count - 1)))
    sizes = _Fields(source, "keys.sizes", keys.table.get("sizes", {}), _SIZES)
    distribution = sizes.choice("distribution", DISTRIBUTIONS, "fixed")
    params = {f: sizes.number(f, getattr(Sizes(), f)) for f in _SIZES if f != "distribution"}
    zipf = keys.get("zipf", (int, float), 0.0)
    if not 0 <= zipf <= 10:
        raise keys.error("zipf", "must be a number in [0, 10]", zipf)
    try:
        size_model = Sizes(distribution, **params)
    except ConfigError as error:
        raise ConfigError(f"{source}: keys.{error}") from None
    try:
        return Population(
            count=count,
            prefix=keys.get("prefix", str, "key-"),
            start=start,
            width=width,
            sizes=size_model,
            zipf=float(zipf),
            seed=seed,
        )
    except ConfigError as error:
        raise ConfigError(f"{source}: {error}") from None


def _nodes(source: str, value: object) -> tuple[Node, ...]:
    try:
        if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
            # Every node has a token at least: count them before making the nodes.
            check_token_count(value, what=f"{count_text(value)} nodes", fix="use fewer nodes")
            width = len(str(value))
            return tuple(Node(f"node-{i:0{width}d}") for i in range(1, value + 1))
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return tuple(Node(name) for name in dict.fromkeys(value))
        if isinstance(value, Mapping) and value:
            return tuple(Node(name, weight=weight) for name, weight in value.items())
    except ConfigError as error:
        raise ConfigError(f"{source}: nodes: {error}") from None
    raise ConfigError(
        f"{source}: nodes must be a count >= 1, a list of names or a table of name = weight; "
        f"got {_SHOWN.repr(value)}"
    )


def _strategy(
    source: str, data: object, nodes: int
) -> tuple[str, StrategyOptions, list[int | None], bool]:
    fields = _Fields(source, "strategy", data, ("name", *OPTION_NAMES, "zone_aware"))
    name = fields.choice("name", STRATEGY_NAMES, "ring")
    vnodes = fields.table.get("vnodes")
    counts = vnodes if isinstance(vnodes, list) else [vnodes]
    if vnodes is not None and (
        not counts
        or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in counts)
    ):
        raise fields.error("vnodes", "must be an integer >= 1 or a list of them", vnodes)
    options: dict[str, Any] = {}
    for option in OPTION_NAMES:
        if option != "vnodes" and option in fields.table:
            options[option] = fields.get(option, _OPTION_KINDS[option], None)
    if "hasher" in options:
        try:
            get_hasher(options["hasher"])
        except ConfigError as error:
            raise ConfigError(f"{source}: strategy.hasher: {error}") from None
    replicas = options.get("replicas")
    if replicas is not None and not 1 <= replicas <= nodes:
        raise fields.error("replicas", f"must be an integer in [1, {nodes}] (the nodes)", replicas)
    zone_aware = fields.table.get("zone_aware", True)
    if not isinstance(zone_aware, bool):
        raise fields.error("zone_aware", "must be true or false", zone_aware)
    return name, StrategyOptions(vnodes=counts[0], **options), counts, zone_aware


class _Members:
    """The nodes present as events are read, and the zones they sit in (``zones = Z``)."""

    def __init__(self, nodes: tuple[Node, ...], zones: int | None) -> None:
        self.order = [node.name for node in nodes]
        self.present = set(self.order)
        self.zones = zones

    def zone_nodes(self, zone: str) -> set[str]:
        assert self.zones is not None
        zone_of = spread_zones(self.order, self.zones)
        return {name for name in self.present if zone_of[name] == zone}


def _fail_zone(fields: _Fields, members: _Members) -> Event:
    zone = fields.get("zone", str, "")
    if members.zones is None:
        raise fields.error("zone", "needs zones = Z at the top of the file", zone or None)
    known = zone_names(members.zones)
    if zone not in known:
        raise fields.error("zone", f"must be one of {', '.join(known)}", zone or None)
    for field in ("node", "capacity", "weight", "load", "behind"):
        if field in fields.table:
            raise fields.error(field, "does not apply to fail_zone", fields.table[field])
    members.present -= members.zone_nodes(zone)
    return Event(kind="fail_zone", zone=zone)


def _event(source: str, index: int, data: object, members: _Members) -> Event:
    fields = _Fields(source, f"events[{index}]", data, _EVENT)
    kind = fields.choice("type", EVENT_TYPES, "")
    if kind == "fail_zone":
        return _fail_zone(fields, members)
    if "zone" in fields.table:
        raise fields.error("zone", "applies to fail_zone events only", fields.table["zone"])
    names = members.present
    node = fields.get("node", str, "")
    if kind != "stale" and not node:
        raise fields.error("node", "must name a node", node or None)
    if kind == "add" and node in names:
        raise fields.error("node", "must be a node not yet added", node)
    if kind in ("remove", "fail", "reweight") and node not in names:
        raise fields.error("node", f"must be one of {', '.join(sorted(names))}", node)
    behind = fields.get("behind", int, 1)
    if behind < 1:
        raise fields.error("behind", "must be an integer >= 1", behind)
    event = Event(
        kind=kind,
        node=node,
        weight=float(fields.number("weight", 1.0)),
        capacity=fields.number("capacity", None, minimum=1.0),
        load=fields.choice("load", METRICS, "keys"),
        behind=behind,
    )
    if kind == "add":
        names.add(node)
        members.order.append(node)
    elif kind in ("remove", "fail"):
        names.discard(node)
    return event


def _hot_keys(top: _Fields) -> int:
    count: int = top.get("hot_keys", int, 5)
    if count < 0:
        raise top.error("hot_keys", "must be an integer >= 0", count)
    return count


def _remedies(source: str, data: object, nodes: int, replicas: int | None) -> Remedies | None:
    """The ``[remedies]`` table: the hot-key remedies to compare (ringkit.sim.remedies)."""
    if data is None:
        return None
    fields = _Fields(source, "remedies", data, _REMEDIES)
    if replicas not in (None, 1):
        raise ConfigError(
            f"{source}: remedies model one copy of each key (a cache), got "
            f"strategy.replicas = {replicas}; drop one of them"
        )
    try:
        remedies = Remedies(**dict(fields.table))
        remedies.check_nodes(nodes)
    except ConfigError as error:
        raise ConfigError(f"{source}: {error}") from None
    return remedies


def _balancers(source: str, data: object, nodes: tuple[Node, ...]) -> Balancers | None:
    """The ``[balancers]`` table: the backend that joins under each proxy's layout."""
    if data is None:
        return None
    fields = _Fields(source, "balancers", data, ("join",))
    join: str | None = fields.get("join", (str, type(None)), None)
    if join is not None and (not join or join in {node.name for node in nodes}):
        raise fields.error("join", "must be a new backend name", join)
    return Balancers(join=join)


def _zones(top: _Fields) -> int | None:
    zones: int | None = top.get("zones", (int, type(None)), None)
    if zones is not None and zones < 1:
        raise top.error("zones", "must be an integer >= 1", zones)
    return zones


def parse_scenario(text: str, source: str = "<scenario>") -> list[Scenario]:
    """Return the scenarios described by TOML `text` (one per vnode count).

    :raises ConfigError: for invalid TOML or any bad field; the message starts with `source`
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{source}: invalid TOML: {error}") from None
    except ValueError as error:  # e.g. an integer of more than 4,300 digits (int's own limit)
        raise ConfigError(f"{source}: invalid TOML: {error}") from None
    except RecursionError:
        # Before this, tomllib recurses once per nesting level
        raise ConfigError(f"{source}: invalid TOML: arrays or tables nested too deeply") from None
    top = _Fields(source, "", data, _TOP)
    seed = top.get("seed", int, 0)
    if seed < 0:
        raise top.error("seed", "must be an integer >= 0", seed)
    population = _population(source, data.get("keys", {}), seed)
    nodes = _nodes(source, data.get("nodes", ["A", "B", "C"]))
    zones = _zones(top)
    strategy, options, vnodes, zone_aware = _strategy(source, data.get("strategy", {}), len(nodes))
    baseline = top.choice("baseline", (*STRATEGY_NAMES, "none"), "modulo")
    members = _Members(nodes, zones)
    events = data.get("events", [])
    if not isinstance(events, list):
        raise top.error("events", "must be an array of tables ([[events]])", events)
    try:  # options a strategy refuses (e.g. a table size) are found now, not mid-run
        build_placement(strategy, nodes, options)
        options = resolve_options(strategy, options)  # the scenario states what it runs with
    except (ConfigError, UnsupportedError) as error:
        raise ConfigError(f"{source}: strategy: {error}") from None
    scenario = Scenario(
        population=population,
        nodes=nodes,
        strategy=strategy,
        options=options,
        baseline=None if baseline == "none" else baseline,
        events=tuple(_event(source, i, e, members) for i, e in enumerate(events)),
        hot_keys=_hot_keys(top),
        name=top.get("name", str, Path(source).stem),
        zones=zones,
        zone_aware=zone_aware,
        remedies=_remedies(source, data.get("remedies"), len(nodes), options.replicas),
        balancers=_balancers(source, data.get("balancers"), nodes),
    )
    if len(vnodes) == 1:
        return [scenario]
    return with_vnodes(scenario, [v for v in vnodes if v is not None])


def load_scenario(path: str | Path) -> list[Scenario]:
    """Read and parse the scenario file at `path`.

    :raises ConfigError: when the file cannot be read or is not a valid scenario
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"{path}: cannot read scenario file: {error.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: scenario file must be UTF-8 text") from None
    return parse_scenario(text, str(path))


def _bundled_files() -> dict[str, importlib.resources.abc.Traversable]:
    folder = importlib.resources.files("ringkit.sim").joinpath("scenarios")
    return {f.name.removesuffix(".toml"): f for f in folder.iterdir() if f.name.endswith(".toml")}


def bundled_scenarios() -> dict[str, str]:
    """Return the scenarios shipped with ringkit, by name, with the first sentence of each.

    >>> sorted(bundled_scenarios())
    ['cascade', 'gatepass', 'hot-key-remedies', 'hot-keys', 'load-balancers', 'zone-failure']
    """
    found = {}
    for name, file in sorted(_bundled_files().items()):
        lines = file.read_text(encoding="utf-8").splitlines()
        comment = []
        for line in lines:
            if not line.startswith("#"):
                break
            comment.append(line.removeprefix("#").strip())
        # The first sentence: up to a full stop before a capital, except "et al. 2007".
        found[name] = _SENTENCE_END.split(" ".join(comment), maxsplit=1)[0].removesuffix(".")
    return found


def load_bundled_scenario(name: str) -> list[Scenario]:
    """Parse the scenario shipped with ringkit under `name` (e.g. ``"gatepass"``).

    >>> len(load_bundled_scenario("gatepass")) >= 1
    True

    :raises ConfigError: when no bundled scenario has that name
    """
    files = _bundled_files()
    if name not in files:
        known = ", ".join(sorted(files))
        raise ConfigError(f"no scenario file or bundled scenario {name!r}; bundled: {known}")
    return parse_scenario(files[name].read_text(encoding="utf-8"), f"{name}.toml")
