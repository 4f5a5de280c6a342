"""Placements by name, so the CLI, the simulator and the web page build them one way.

Each strategy module declares its own entry, a module-level ``STRATEGY`` (a
:class:`~ringkit.strategies.options.Strategy`: name, factory, and the options it uses with their
defaults), and this module imports the modules named in ``_DECLARED`` and collects their entries
(a package, such as ``fixed``, re-exports its ``STRATEGY``). Adding a strategy is one new file
that declares its entry, plus its name in ``_DECLARED``. The list is explicit on purpose: a scan
of the package would import helper modules (``options``, ``wrapped``), hide the set of strategies
from readers and make the registry depend on what happens to be on disk; the conformance tests
(tests/test_placement_protocol.py) then check every entry. The hash ring lives outside
``strategies`` (strategies build on it), so its entry is declared here.

``build_placement(strategy, nodes, options)`` fills in the defaults of the options the strategy
uses and refuses a given option it does not use, naming the strategies that do: an ignored option
would be a silent wrong answer.

>>> build_placement("modulo", ["A", "B"]).node_for("k") in {"A", "B"}
True
>>> {"modulo", "ring"} <= set(STRATEGY_NAMES)
True
>>> try:
...     build_placement("modulo", ["A"], StrategyOptions(vnodes=8))
... except UnsupportedError as error:
...     print(error)
modulo does not use vnodes, got vnodes=8; use strategy 'bounded', 'ring' or 'scheduled' for ...
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType

from ringkit.errors import ConfigError, UnsupportedError
from ringkit.hashing import DEFAULT_HASH
from ringkit.nodes import NodesLike
from ringkit.placement import Placement
from ringkit.ring import DEFAULT_VNODES, HashRing
from ringkit.strategies.options import OPTION_NAMES, OPTION_PURPOSES, Strategy, StrategyOptions

__all__ = [
    "STRATEGIES",
    "STRATEGY_NAMES",
    "StrategyOptions",
    "accepted_options",
    "build_placement",
    "options_for",
    "resolve_options",
]

_RING = Strategy("ring", HashRing, {"vnodes": DEFAULT_VNODES, "hasher": DEFAULT_HASH})
# The strategy modules (and packages) under ringkit.strategies whose STRATEGY entries this
# registry collects: adding a strategy adds its name here.
_DECLARED = (
    "allocation",
    "bounded",
    "fixed",
    "jump",
    "maglev",
    "modulo",
    "multiprobe",
    "ranges",
    "rendezvous",
    "scheduled",
)


def _declared(name: str) -> Strategy:
    entry = importlib.import_module(f"ringkit.strategies.{name}").STRATEGY
    assert isinstance(entry, Strategy), f"ringkit.strategies.{name}.STRATEGY is not a Strategy"
    return entry


STRATEGIES: Mapping[str, Strategy] = MappingProxyType(
    {
        entry.name: entry
        for entry in sorted(
            (_RING, *(_declared(name) for name in _DECLARED)),
            key=lambda entry: entry.name,
        )
    }
)
STRATEGY_NAMES: tuple[str, ...] = tuple(STRATEGIES)


def _entry(strategy: str) -> Strategy:
    try:
        return STRATEGIES[strategy]
    except KeyError:
        raise ConfigError(
            f"unknown strategy {strategy!r}; known: {', '.join(STRATEGY_NAMES)}"
        ) from None


def accepted_options(strategy: str) -> tuple[str, ...]:
    """Return the ``StrategyOptions`` fields `strategy` accepts (``replicas`` always).

    >>> accepted_options("maglev")
    ('hasher', 'table_size', 'replicas')

    :raises ConfigError: for an unknown strategy name
    """
    entry = _entry(strategy)
    return tuple(name for name in OPTION_NAMES if entry.uses(name) or name == "replicas")


def options_for(strategy: str, options: StrategyOptions) -> StrategyOptions:
    """Return `options` without the ones `strategy` does not use.

    For callers that apply one set of options to several strategies on purpose (a comparison,
    a baseline): each strategy keeps what applies to it. ``build_placement`` itself refuses.

    >>> options_for("modulo", StrategyOptions(vnodes=8, hasher="md5")).given()
    {'hasher': 'md5'}

    :raises ConfigError: for an unknown strategy name
    """
    accepted = accepted_options(strategy)
    return replace(options, **{name: None for name in options.given() if name not in accepted})


def resolve_options(strategy: str, options: StrategyOptions | None = None) -> StrategyOptions:
    """Return `options` with the defaults of the options `strategy` uses filled in.

    What a caller that shows or reuses the options (a scenario, a report) reads: the values
    the placement is built with. Options the strategy does not use stay None.

    >>> resolve_options("maglev").table_size
    65537

    :raises ConfigError: for an unknown strategy name
    :raises UnsupportedError: for a given option the strategy does not use (the message names
        the strategies that do)
    """
    entry = _entry(strategy)
    given = (options or StrategyOptions()).given()
    for name, value in given.items():
        if not entry.uses(name) and name != "replicas":
            users = [other for other in STRATEGY_NAMES if STRATEGIES[other].uses(name)]
            raise UnsupportedError(
                f"{strategy} does not use {name}, got {name}={value!r}; use strategy "
                f"{_either(users)} for {OPTION_PURPOSES[name]}"
            )
    return replace(options or StrategyOptions(), **{**entry.defaults, **given})


def build_placement(
    strategy: str, nodes: NodesLike, options: StrategyOptions | None = None
) -> Placement:
    """Return the placement named `strategy` over `nodes`, with `options` and defaults.

    :raises ConfigError: for an unknown strategy name (the message lists the known ones), or
        an option value the strategy refuses
    :raises UnsupportedError: for a given option the strategy does not use (the message names
        the strategies that do)
    """
    resolved = resolve_options(strategy, options)
    entry = STRATEGIES[strategy]
    arguments = {name: getattr(resolved, name) for name in entry.defaults}
    placement: Placement = entry.build(nodes, **arguments)
    return placement


def _either(names: list[str]) -> str:
    quoted = [repr(name) for name in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
