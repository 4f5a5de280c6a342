"""The controller behind :class:`~ringkit.FixedPartitions`: quotas and minimal rebalancing plans.

With a token space fixed at creation (Dynamo's strategy 3: Q equal partitions; Riak's ring;
Redis Cluster's 16384 slots), membership change is an assignment problem, not a hashing one:
the partitions are the unit of assignment, as virtual nodes are in Dynamo. The controller

1. gives each node a *quota* of partition replicas by weight: ``Q · R' · w / W`` rounded to its
   floor or ceiling, capped so that the *zone rule* can hold (no two replicas of a partition in
   one zone when there are at least R' zones; in general at most ``limit`` per zone, the smallest
   limit the zones allow), and rounded toward the current counts so that fewer replicas move;
2. moves replicas from nodes above quota (and from departed nodes) to nodes below it: exactly
   ``Σ max(0, quota − count)`` moves, the minimum, unless the zone rule forces a detour (then the
   plan says so: ``moved > minimum``) (:mod:`ringkit.strategies.fixed.planner` and
   :mod:`ringkit.strategies.fixed.assignment`);
3. picks (:mod:`ringkit.strategies.fixed.roles`), for each move, the node that streams the data (any
   current holder of the partition):
   ``"fewest_sources"`` covers all moves with as few machines as it can (greedy set cover: a join
   talks to few machines), ``"spread"`` shares the transfer among the holders (least loaded first).

>>> quotas = compute_quotas([Node("a"), Node("b"), Node("c", weight=2.0)], 8, 1, {})
>>> quotas
{'a': 2, 'b': 2, 'c': 4}
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ringkit.errors import ConfigError
from ringkit.nodes import Node

__all__ = [
    "OBJECTIVES",
    "PartitionMove",
    "RebalancePlan",
    "check_objective",
    "compute_quotas",
    "zone_key",
    "zone_limit",
]

OBJECTIVES = ("fewest_sources", "spread")


@dataclass(frozen=True, slots=True)
class PartitionMove:
    """One replica of `partition` leaves `donor` for `destination`; `source` streams the data.

    `donor` is the node giving the replica up (a departed node's name for its orphaned replicas,
    or ``None`` for a replica slot that did not exist before); `source` is a node that holds the
    partition before the move and sends it.
    """

    partition: int
    donor: str | None
    destination: str
    source: str


@dataclass(frozen=True, slots=True)
class RebalancePlan:
    """How one assignment table became the next: its moves and the figures that judge them.

    ``moved`` (replicas moved) is ``minimum`` (``Σ max(0, quota − count)``) unless the zone rule
    forced a detour. ``sources`` is how many machines stream data; ``transfers`` how many distinct
    source → destination streams; ``max_per_source`` the most partitions one source sends.
    """

    epoch: int
    objective: str
    moves: tuple[PartitionMove, ...]
    minimum: int

    @property
    def moved(self) -> int:
        """The number of partition replicas that change node."""
        return len(self.moves)

    @property
    def sources(self) -> int:
        """The number of distinct machines that stream data."""
        return len({move.source for move in self.moves})

    @property
    def transfers(self) -> int:
        """The number of distinct source → destination streams."""
        return len({(move.source, move.destination) for move in self.moves})

    @property
    def max_per_source(self) -> int:
        """The largest number of partitions one source streams (0 for an empty plan)."""
        counts = Counter(move.source for move in self.moves)
        return max(counts.values(), default=0)


def check_objective(objective: object) -> str:
    """Return `objective` if it is a known objective.

    :raises ConfigError: otherwise, naming the known ones
    """
    if objective not in OBJECTIVES:
        raise ConfigError(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    return str(objective)


def zone_key(node: Node) -> str:
    """Return the failure domain of `node`: its zone, or its own name when it has none.

    >>> zone_key(Node("a", zone="eu-1")), zone_key(Node("b"))
    ('zone:eu-1', 'node:b')
    """
    return f"zone:{node.zone}" if node.zone is not None else f"node:{node.name}"


def zone_limit(zone_sizes: Sequence[int], replicas: int) -> int:
    """Return the fewest replicas of one partition a zone must be allowed to hold.

    The smallest L with ``Σ min(L, size) >= replicas``: 1 when there are at least as many zones
    as replicas, more when zones are few or small. Runtime: O(Z · R).

    >>> zone_limit([2, 2, 2], 3), zone_limit([5, 5], 3), zone_limit([1, 3], 4)
    (1, 2, 3)
    """
    limit = 1
    while sum(min(limit, size) for size in zone_sizes) < replicas:
        limit += 1
    return limit


def _waterfill(
    weights: Mapping[str, float], caps: Mapping[str, int], total: int
) -> dict[str, float]:
    """Split `total` in proportion to `weights`, no key above its cap (caps sum >= total)."""
    result: dict[str, float] = {}
    free = dict(weights)
    remaining = float(total)
    while free:
        scale = remaining / math.fsum(free.values())
        capped = [key for key, weight in free.items() if weight * scale > caps[key]]
        if not capped:
            result.update({key: weight * scale for key, weight in free.items()})
            break
        for key in capped:
            result[key] = float(caps[key])
            remaining -= caps[key]
            del free[key]
    return result


def _round(
    targets: Mapping[str, float], caps: Mapping[str, int], total: int, current: Mapping[str, int]
) -> dict[str, int]:
    """Round `targets` to floors or ceilings summing to `total`, the ceilings going first to keys
    that already hold more than their floor (fewer moves), then by largest remainder."""
    floors = {key: min(caps[key], math.floor(value + 1e-9)) for key, value in targets.items()}
    missing = total - sum(floors.values())

    def order(key: str) -> tuple[bool, bool, float, str]:
        fraction = targets[key] - floors[key]
        return (fraction <= 1e-9, current.get(key, 0) <= floors[key], -fraction, key)

    for key in sorted((key for key in floors if floors[key] < caps[key]), key=order)[:missing]:
        floors[key] += 1
    return floors


def compute_quotas(
    nodes: Sequence[Node], partitions: int, replicas: int, current: Mapping[str, int]
) -> dict[str, int]:
    """Return each node's number of partition replicas: by weight, within the zone rule's caps.

    ``replicas`` is the effective replica count (at most the node count). Each quota is the floor
    or ceiling of the node's capped fair share; `current` (replica counts now) breaks rounding
    ties toward fewer moves. Runtime: O(N log N).

    :raises ConfigError: when there are fewer nodes than `replicas`
    """
    if len(nodes) < replicas:
        raise ConfigError(f"replicas must be <= the node count {len(nodes)}, got {replicas}")
    zones: dict[str, list[Node]] = {}
    for node in nodes:
        zones.setdefault(zone_key(node), []).append(node)
    limit = zone_limit([len(members) for members in zones.values()], replicas)
    zone_caps = {zone: partitions * min(limit, len(members)) for zone, members in zones.items()}
    zone_weights = {zone: math.fsum(n.weight for n in members) for zone, members in zones.items()}
    zone_current = {
        zone: sum(current.get(n.name, 0) for n in members) for zone, members in zones.items()
    }
    total = partitions * replicas
    zone_totals = _round(_waterfill(zone_weights, zone_caps, total), zone_caps, total, zone_current)
    quotas: dict[str, int] = {}
    for zone, members in zones.items():
        caps = {n.name: partitions for n in members}
        targets = _waterfill({n.name: n.weight for n in members}, caps, zone_totals[zone])
        quotas.update(_round(targets, caps, zone_totals[zone], current))
    return {node.name: quotas[node.name] for node in nodes}
