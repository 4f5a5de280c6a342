"""Strategy options, and the entry by which a strategy module declares itself to the registry.

:class:`StrategyOptions` is what a caller (the CLI, the simulator, the web page) gives when it
builds a placement by name; every field defaults to ``None``, meaning "not given". A
:class:`Strategy` is what a strategy module declares: its name, how to build it, and the options
it uses with their defaults. :mod:`ringkit.strategies.registry` collects the entries; this
module stays below every strategy so that each can import it.

>>> entry = Strategy("demo", lambda nodes, hasher: list(nodes), {"hasher": "xxh3_64"})
>>> entry.uses("hasher"), entry.uses("vnodes")
(True, False)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from ringkit.hashing import HasherLike

__all__ = ["OPTION_NAMES", "OPTION_PURPOSES", "Strategy", "StrategyOptions"]


@dataclass(frozen=True, slots=True)
class StrategyOptions:
    """Options for building a placement by name; ``None`` means "not given".

    ``build_placement`` fills in the defaults of the options a strategy uses and refuses a
    given option it does not use. ``replicas`` is the preference-list length callers will ask
    for (``nodes_for(key, replicas)``): every strategy accepts it, and those that build replica
    tables up front (``fixed``, ``allocated``) are built with it.
    """

    vnodes: int | None = None
    hasher: HasherLike | None = None
    table_size: int | None = None
    probes: int | None = None
    balance_factor: float | None = None
    rendezvous_variant: str | None = None
    partitions: int | None = None
    replicas: int | None = None
    tokens: int | None = None

    def given(self) -> dict[str, Any]:
        """Return the options that were given (not None), by field name.

        >>> StrategyOptions(vnodes=8).given()
        {'vnodes': 8}
        """
        return {
            f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None
        }


OPTION_NAMES: tuple[str, ...] = tuple(f.name for f in fields(StrategyOptions))
# What each option is for, in the message that refuses it ("use strategy 'ring' for ...").
OPTION_PURPOSES: Mapping[str, str] = {
    "vnodes": "virtual nodes",
    "hasher": "a key hash",
    "table_size": "a lookup table size",
    "probes": "probes per key",
    "balance_factor": "bounded loads",
    "rendezvous_variant": "a rendezvous variant",
    "partitions": "a fixed partition count",
    "replicas": "replica lists",
    "tokens": "allocated tokens",
}


@dataclass(frozen=True, slots=True)
class Strategy:
    """One strategy as the registry knows it.

    `build` is called as ``build(nodes, **options)`` with every option in `defaults`: the given
    value, or the default. Options not in `defaults` are refused when given, except
    ``replicas``, which every strategy accepts (``nodes_for`` takes any n).
    """

    name: str
    build: Callable[..., Any]
    defaults: Mapping[str, object]

    def uses(self, option: str) -> bool:
        """Return whether `option` reaches this strategy's ``build``."""
        return option in self.defaults
