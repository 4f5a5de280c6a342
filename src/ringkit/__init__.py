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

from ringkit import compat, hashing, live
from ringkit.advice import advise, sweep
from ringkit.cluster.client import ShardedClient
from ringkit.errors import (
    BackendError,
    CapacityError,
    ConfigError,
    DuplicateNodeError,
    EmptyRingError,
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

__version__ = "0.1.0"

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
    "live",
    "load_scenario",
    "replicated_shares",
    "run_scenario",
    "sweep",
]
