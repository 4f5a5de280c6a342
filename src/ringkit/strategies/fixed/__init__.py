"""Fixed partitions: a token space cut once, assigned to nodes by a controller.

The keyspace is cut into Q equal partitions at creation (DeCandia et al. 2007, Dynamo's
strategy 3; Riak's ring; Redis Cluster's slots) and a controller keeps the partition → replica
list table as membership changes, moving the fewest replicas:

- :mod:`~ringkit.strategies.fixed.partitions`: :class:`FixedPartitions`, the placement;
- :mod:`~ringkit.strategies.fixed.controller`: quotas by weight and zone, and the plan a change
  produces (:class:`RebalancePlan`);
- :mod:`~ringkit.strategies.fixed.planner`: which replicas move where;
- :mod:`~ringkit.strategies.fixed.assignment`: the working table and augmenting paths a plan
  uses when the zone rule blocks a direct move;
- :mod:`~ringkit.strategies.fixed.roles`: primaries, and which holder streams each move.

>>> FixedPartitions(["a", "b"], partitions=8).add("c").plan.moved
2
"""

from __future__ import annotations

from ringkit.strategies.fixed.controller import PartitionMove, RebalancePlan
from ringkit.strategies.fixed.partitions import (
    DEFAULT_PARTITIONS,
    STRATEGY,
    FixedPartitions,
    partition_of_points,
)

__all__ = [
    "DEFAULT_PARTITIONS",
    "STRATEGY",
    "FixedPartitions",
    "PartitionMove",
    "RebalancePlan",
    "partition_of_points",
]
