"""Placements by name, so the CLI, the simulator and the web page build them one way.

Each entry maps a strategy name to a factory ``(nodes, options) -> Placement``. ``options`` is a
:class:`StrategyOptions` value; a factory uses the fields that apply to it and ignores the rest
(a ring uses ``vnodes``; modulo does not). Add a strategy by adding one entry to ``_FACTORIES``.

>>> build_placement("modulo", ["A", "B"]).node_for("k") in {"A", "B"}
True
>>> {"modulo", "ring"} <= set(STRATEGY_NAMES)
True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ringkit.errors import ConfigError
from ringkit.hashing import DEFAULT_HASH, HasherLike
from ringkit.nodes import NodesLike
from ringkit.placement import Placement
from ringkit.ring import DEFAULT_VNODES, HashRing
from ringkit.strategies.allocation import DEFAULT_TOKENS, AllocatedRing
from ringkit.strategies.bounded import DEFAULT_BALANCE_FACTOR, BoundedLoad
from ringkit.strategies.fixed import DEFAULT_PARTITIONS, FixedPartitions
from ringkit.strategies.jump import JumpHash
from ringkit.strategies.maglev import MAGLEV_TABLE_SIZE, Maglev
from ringkit.strategies.modulo import Modulo
from ringkit.strategies.multiprobe import DEFAULT_PROBES, MultiProbe
from ringkit.strategies.ranges import RangePartitions
from ringkit.strategies.rendezvous import Rendezvous
from ringkit.strategies.scheduled import ScheduledRemap

__all__ = ["STRATEGY_NAMES", "StrategyOptions", "build_placement"]


@dataclass(frozen=True, slots=True)
class StrategyOptions:
    """Options shared by the strategy factories; each factory reads the ones that apply."""

    vnodes: int = DEFAULT_VNODES
    hasher: HasherLike = DEFAULT_HASH
    # maglev, multiprobe, bounded, rendezvous ("weighted" or "pymemcache", which fixes its hasher)
    table_size: int = MAGLEV_TABLE_SIZE
    probes: int = DEFAULT_PROBES
    balance_factor: float = DEFAULT_BALANCE_FACTOR
    rendezvous_variant: str = "weighted"
    partitions: int = DEFAULT_PARTITIONS
    replicas: int = 1
    tokens: int = DEFAULT_TOKENS


Factory = Callable[[NodesLike, StrategyOptions], Placement]


def _rendezvous(nodes: NodesLike, options: StrategyOptions) -> Placement:
    if options.rendezvous_variant == "pymemcache":
        return Rendezvous(nodes, variant="pymemcache")  # pymemcache always uses murmur3_32
    return Rendezvous(nodes, hasher=options.hasher, variant=options.rendezvous_variant)


_FACTORIES: Mapping[str, Factory] = MappingProxyType(
    {
        "ring": lambda nodes, o: HashRing(nodes, vnodes=o.vnodes, hasher=o.hasher),
        "modulo": lambda nodes, o: Modulo(nodes, hasher=o.hasher),
        "jump": lambda nodes, o: JumpHash(nodes, hasher=o.hasher),
        "rendezvous": _rendezvous,
        "maglev": lambda nodes, o: Maglev(nodes, table_size=o.table_size, hasher=o.hasher),
        "multiprobe": lambda nodes, o: MultiProbe(nodes, probes=o.probes, hasher=o.hasher),
        "bounded": lambda nodes, o: BoundedLoad(
            HashRing(nodes, vnodes=o.vnodes, hasher=o.hasher), balance_factor=o.balance_factor
        ),
        "fixed": lambda nodes, o: FixedPartitions(
            nodes, partitions=o.partitions, replicas=o.replicas, hasher=o.hasher
        ),
        "allocated": lambda nodes, o: AllocatedRing(
            nodes, tokens=o.tokens, replicas=o.replicas, hasher=o.hasher
        ),
        "ranges": lambda nodes, o: RangePartitions(nodes),
        "scheduled": lambda nodes, o: ScheduledRemap(nodes, vnodes=o.vnodes, hasher=o.hasher),
    }
)

STRATEGY_NAMES: tuple[str, ...] = tuple(sorted(_FACTORIES))


def build_placement(
    strategy: str, nodes: NodesLike, options: StrategyOptions | None = None
) -> Placement:
    """Return the placement named `strategy` over `nodes`.

    :raises ConfigError: for an unknown strategy name (the message lists the known ones)
    """
    try:
        factory = _FACTORIES[strategy]
    except KeyError:
        raise ConfigError(
            f"unknown strategy {strategy!r}; known: {', '.join(STRATEGY_NAMES)}"
        ) from None
    return factory(nodes, options or StrategyOptions())
