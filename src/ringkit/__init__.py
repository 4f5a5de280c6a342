"""ringkit: consistent hashing for Python.

Put keys on nodes with a hash ring and virtual nodes, compare it with every other placement,
see exactly what a membership change moves, and run a sharded cache client on top.

>>> import ringkit
>>> ring = ringkit.HashRing(["cache-a", "cache-b", "cache-c"])
>>> ring.node_for("booking:42")
'cache-c'
>>> ring.nodes_for("booking:42", 3)
['cache-c', 'cache-b', 'cache-a']
>>> bigger = ring.add("cache-d")
>>> len(ring), len(bigger)
(3, 4)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ringkit import compat, hashing, lb, live
    from ringkit.advice import advise, sweep
    from ringkit.cluster.client import ShardedClient
    from ringkit.errors import (
        BackendError,
        CapacityError,
        ConfigError,
        DuplicateNodeError,
        EmptyRingError,
        EpochLostError,
        ParamError,
        QuorumError,
        RingkitError,
        StaleViewError,
        UnknownNodeError,
        UnsupportedError,
        ViewConflictError,
    )
    from ringkit.movement import MigrationPlan, MovedArc, Movement, Transfer, diff
    from ringkit.nodes import Node
    from ringkit.placement import Placement
    from ringkit.ring import DEFAULT_VNODES, Arc, HashRing
    from ringkit.ring.trace import Trace, TraceStep
    from ringkit.sim import Event, Population, Scenario, Sizes, load_scenario, run_scenario
    from ringkit.stats import Balance, balance
    from ringkit.strategies.allocation import AllocatedRing, allocate_tokens
    from ringkit.strategies.allocation.replicated import replicated_shares
    from ringkit.strategies.bounded import BoundedLoad
    from ringkit.strategies.fixed import FixedPartitions
    from ringkit.strategies.fixed.controller import PartitionMove, RebalancePlan
    from ringkit.strategies.jump import JumpHash, jump_hash
    from ringkit.strategies.maglev import Maglev
    from ringkit.strategies.modulo import Modulo
    from ringkit.strategies.multiprobe import MultiProbe
    from ringkit.strategies.ranges import RangePartitions
    from ringkit.strategies.rendezvous import Rendezvous
    from ringkit.strategies.scheduled import RemapReport, ScheduledRemap

__version__ = "0.2.0"

# `import ringkit` imports nothing but this module: every public name is imported on first
# access, from the module below (a value of None means the name is that submodule itself). It
# took ~300 ms when it loaded the cache client, the live ring, the compatibility layouts, the
# simulator and every strategy, and numpy alone is most of a ``ringkit --help``, which needs
# only ``__version__``. ``ringkit.HashRing`` costs the ring core's imports when first used.
_ERRORS = (
    "BackendError",
    "CapacityError",
    "ConfigError",
    "DuplicateNodeError",
    "EmptyRingError",
    "EpochLostError",
    "ParamError",
    "QuorumError",
    "RingkitError",
    "StaleViewError",
    "UnknownNodeError",
    "UnsupportedError",
    "ViewConflictError",
)
_LAZY: dict[str, tuple[str, str | None]] = {
    **{name: ("ringkit.errors", name) for name in _ERRORS},
    "Arc": ("ringkit.ring", "Arc"),
    "DEFAULT_VNODES": ("ringkit.ring", "DEFAULT_VNODES"),
    "HashRing": ("ringkit.ring", "HashRing"),
    "Node": ("ringkit.nodes", "Node"),
    "Placement": ("ringkit.placement", "Placement"),
    "AllocatedRing": ("ringkit.strategies.allocation", "AllocatedRing"),
    "Balance": ("ringkit.stats", "Balance"),
    "BoundedLoad": ("ringkit.strategies.bounded", "BoundedLoad"),
    "Event": ("ringkit.sim", "Event"),
    "FixedPartitions": ("ringkit.strategies.fixed", "FixedPartitions"),
    "JumpHash": ("ringkit.strategies.jump", "JumpHash"),
    "Maglev": ("ringkit.strategies.maglev", "Maglev"),
    "MigrationPlan": ("ringkit.movement", "MigrationPlan"),
    "Modulo": ("ringkit.strategies.modulo", "Modulo"),
    "MovedArc": ("ringkit.movement", "MovedArc"),
    "Movement": ("ringkit.movement", "Movement"),
    "MultiProbe": ("ringkit.strategies.multiprobe", "MultiProbe"),
    "PartitionMove": ("ringkit.strategies.fixed.controller", "PartitionMove"),
    "Population": ("ringkit.sim", "Population"),
    "RangePartitions": ("ringkit.strategies.ranges", "RangePartitions"),
    "RebalancePlan": ("ringkit.strategies.fixed.controller", "RebalancePlan"),
    "RemapReport": ("ringkit.strategies.scheduled", "RemapReport"),
    "Rendezvous": ("ringkit.strategies.rendezvous", "Rendezvous"),
    "Scenario": ("ringkit.sim", "Scenario"),
    "ScheduledRemap": ("ringkit.strategies.scheduled", "ScheduledRemap"),
    "ShardedClient": ("ringkit.cluster.client", "ShardedClient"),
    "Sizes": ("ringkit.sim", "Sizes"),
    "Trace": ("ringkit.ring.trace", "Trace"),
    "TraceStep": ("ringkit.ring.trace", "TraceStep"),
    "Transfer": ("ringkit.movement", "Transfer"),
    "advise": ("ringkit.advice", "advise"),
    "allocate_tokens": ("ringkit.strategies.allocation", "allocate_tokens"),
    "balance": ("ringkit.stats", "balance"),
    "compat": ("ringkit.compat", None),
    "diff": ("ringkit.movement", "diff"),
    "jump_hash": ("ringkit.strategies.jump", "jump_hash"),
    "lb": ("ringkit.lb", None),
    "live": ("ringkit.live", None),
    "load_scenario": ("ringkit.sim", "load_scenario"),
    "replicated_shares": ("ringkit.strategies.allocation.replicated", "replicated_shares"),
    "run_scenario": ("ringkit.sim", "run_scenario"),
    "sweep": ("ringkit.advice", "sweep"),
}

__all__ = [
    "DEFAULT_VNODES",
    "AllocatedRing",
    "Arc",
    "BackendError",
    "Balance",
    "BoundedLoad",
    "CapacityError",
    "ConfigError",
    "DuplicateNodeError",
    "EmptyRingError",
    "EpochLostError",
    "Event",
    "FixedPartitions",
    "HashRing",
    "JumpHash",
    "Maglev",
    "MigrationPlan",
    "Modulo",
    "MovedArc",
    "Movement",
    "MultiProbe",
    "Node",
    "ParamError",
    "PartitionMove",
    "Placement",
    "Population",
    "QuorumError",
    "RangePartitions",
    "RebalancePlan",
    "RemapReport",
    "Rendezvous",
    "RingkitError",
    "Scenario",
    "ScheduledRemap",
    "ShardedClient",
    "Sizes",
    "StaleViewError",
    "Trace",
    "TraceStep",
    "Transfer",
    "UnknownNodeError",
    "UnsupportedError",
    "ViewConflictError",
    "__version__",
    "advise",
    "allocate_tokens",
    "balance",
    "compat",
    "diff",
    "hashing",
    "jump_hash",
    "lb",
    "live",
    "load_scenario",
    "replicated_shares",
    "run_scenario",
    "sweep",
]


def __getattr__(name: str) -> Any:
    """Import a lazy public name, or a submodule, on first access and keep it in the module.

    Submodules resolve too, so that ``import ringkit; ringkit.sim.gatepass`` keeps working now
    that ``import ringkit`` no longer imports ``ringkit.sim`` as a side effect.
    """
    module_name, attribute = _LAZY.get(name, (f"{__name__}.{name}", None))
    missing = AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name.startswith("_"):
        raise missing
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name != module_name:
            raise  # a submodule that exists but fails to import: show its own error
        raise missing from None
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
