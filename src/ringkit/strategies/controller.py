"""The controller behind :class:`~ringkit.FixedPartitions`: quotas and minimal rebalancing plans.

With a token space fixed at creation (Dynamo's strategy 3: Q equal partitions; Riak's ring;
Redis Cluster's 16384 slots), membership change is an assignment problem, not a hashing one
(seed 000, "Virtual nodes as the unit of assignment"). The controller

1. gives each node a *quota* of partition replicas by weight: ``Q · R' · w / W`` rounded to its
   floor or ceiling, capped so that the *zone rule* can hold (no two replicas of a partition in
   one zone when there are at least R' zones; in general at most ``limit`` per zone, the smallest
   limit the zones allow), and rounded toward the current counts so that fewer replicas move;
2. moves replicas from nodes above quota (and from departed nodes) to nodes below it: exactly
   ``Σ max(0, quota − count)`` moves, the minimum, unless the zone rule forces a detour (then the
   plan says so: ``moved > minimum``);
3. picks, for each move, the node that streams the data (any current holder of the partition):
   ``"fewest_sources"`` covers all moves with as few machines as it can (greedy set cover: a join
   talks to few machines), ``"spread"`` shares the transfer among the holders (least loaded first).

>>> quotas = compute_quotas([Node("a"), Node("b"), Node("c", weight=2.0)], 8, 1, {})
>>> quotas
{'a': 2, 'b': 2, 'c': 4}
"""

from __future__ import annotations

import heapq
import math
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ringkit.errors import ConfigError
from ringkit.hashing import xxh3_64
from ringkit.nodes import Node

__all__ = [
    "OBJECTIVES",
    "PartitionMove",
    "RebalancePlan",
    "check_objective",
    "compute_quotas",
    "plan_rebalance",
    "zone_key",
    "zone_limit",
]

OBJECTIVES = ("fewest_sources", "spread")
_STEPS = 8  # how coarsely deficits are compared when placing orphans (see _receiver)


def _mix(name: str, partition: int) -> int:
    return xxh3_64(f"{partition}:{name}".encode())


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


class _Table:
    """The working copy of an assignment table while a plan is built (mutable, private)."""

    def __init__(
        self,
        owners: Sequence[Sequence[str | None]],
        zones: Mapping[str, str],
        limit: int,
        quotas: Mapping[str, int],
    ) -> None:
        self.quotas = quotas
        self.owners = [list(row) for row in owners]
        self.zones = zones
        self.limit = limit
        self.held: dict[str, set[int]] = {name: set() for name in zones}
        for partition, row in enumerate(self.owners):
            for name in row:
                if name is not None:
                    self.held[name].add(partition)

    def accepts(self, name: str, partition: int, leaving: str | None) -> bool:
        """Whether `name` may take a replica of `partition` from `leaving` under the zone rule."""
        row = self.owners[partition]
        if name in row:
            return False
        zone = self.zones[name]
        same = sum(
            1
            for other in row
            if other is not None and other != leaving and self.zones[other] == zone
        )
        return same < self.limit

    def row_fits(self, partition: int, leaving: str, joining: str) -> bool:
        """Whether the row of `partition` keeps the zone rule if `leaving` makes way for
        `joining` (a node not in it)."""
        zones = [
            self.zones[name]
            for name in self.owners[partition]
            if name is not None and name != leaving
        ]
        zones.append(self.zones[joining])
        return max(Counter(zones).values()) <= self.limit

    def move(self, partition: int, donor: str | None, destination: str) -> None:
        row = self.owners[partition]
        slot = row.index(donor)
        row[slot] = destination
        if donor is not None and donor in self.held:
            self.held[donor].discard(partition)
        self.held[destination].add(partition)


def plan_rebalance(
    owners: Sequence[Sequence[str | None]],
    nodes: Sequence[Node],
    quotas: Mapping[str, int],
    limit: int,
    objective: str,
) -> tuple[list[list[str]], list[tuple[int, str | None, str]]]:
    """Return the new owner rows and the moves ``(partition, donor, destination)``.

    `owners` holds each partition's replica row; ``None`` or a name not among `nodes` marks a
    replica that must move (a new slot, a departed node). Moves go from nodes above quota and
    from departed nodes to nodes below quota, never breaking the zone rule.
    Runtime: O(M · N log N) for M moves in the common case.
    """
    zones = {node.name: zone_key(node) for node in nodes}
    rows = [[name if name in zones else None for name in row] for row in owners]
    evicted = _evict_crowded(rows, zones, limit, quotas)
    orphans = [
        (partition, evicted.get((partition, slot), owners[partition][slot]))
        for partition, row in enumerate(rows)
        for slot, name in enumerate(row)
        if name is None
    ]
    table = _Table(rows, zones, limit, quotas)
    deficit = {name: quotas[name] - len(table.held[name]) for name in zones}
    moves: list[tuple[int, str | None, str]] = []
    for partition, departed in orphans:
        moves.append((partition, departed, _place_orphan(table, deficit, partition, moves)))
    _move_surplus(table, deficit, moves, objective)
    final = [[name for name in row if name is not None] for row in table.owners]
    return final, moves


def _evict_crowded(
    rows: list[list[str | None]], zones: Mapping[str, str], limit: int, quotas: Mapping[str, int]
) -> dict[tuple[int, int], str]:
    """Free the slots of replicas above the zone limit (the limit drops when a zone joins),
    taking them from the nodes furthest above quota; return the evicted node of each slot."""
    count = Counter(name for row in rows for name in row if name is not None)
    evicted: dict[tuple[int, int], str] = {}
    for partition, row in enumerate(rows):
        crowd = Counter(zones[name] for name in row if name is not None)
        for zone, number in crowd.items():
            members = [slot for slot, name in enumerate(row) if name and zones[name] == zone]
            members.sort(
                key=lambda slot: (quotas[row[slot] or ""] - count[row[slot] or ""], row[slot] or "")
            )
            for slot in members[: max(0, number - limit)]:
                name = row[slot] or ""
                evicted[(partition, slot)] = name
                count[name] -= 1
                row[slot] = None
    return evicted


def _receiver(table: _Table, deficit: dict[str, int], partition: int, donor: str | None) -> str:
    """Return a node below quota that may take `partition`; else any node that may (a detour: it
    ends one above quota and is drained by the surplus pass).

    Nodes are ranked by how far below quota they are, in coarse steps, and within a step by a
    hash of (node, partition): strict round-robin would give every partition the same few
    replica sets, and one failure would then be re-replicated from just two machines.
    """

    def rank(name: str) -> tuple[bool, int, int]:
        need = deficit[name]
        return (need <= 0, -(need * _STEPS // max(1, table.quotas[name])), _mix(name, partition))

    ranked = sorted(deficit, key=rank)
    for name in ranked:
        if table.accepts(name, partition, donor):
            return name
    raise ConfigError(f"no node may take a replica of partition {partition} under the zone rule")


def _move_surplus(
    table: _Table,
    deficit: dict[str, int],
    moves: list[tuple[int, str | None, str]],
    objective: str,
) -> None:
    """Move replicas from nodes above quota to nodes below it, one per missing replica."""
    given: Counter[tuple[str, str]] = Counter()
    heap = [(-need, name) for name, need in deficit.items() if need > 0]
    heapq.heapify(heap)
    while heap:
        _, receiver = heapq.heappop(heap)
        donors = [name for name in deficit if deficit[name] < 0]
        if objective == "fewest_sources":
            donors.sort(key=lambda d: (-given[(d, receiver)], deficit[d], d))
        else:
            donors.sort(key=lambda d: (given[(d, receiver)], deficit[d], d))
        partition: int | None = None
        for donor in donors:
            partition = next(
                (p for p in sorted(table.held[donor]) if table.accepts(receiver, p, donor)), None
            )
            if partition is not None:
                break
        else:
            donor = _augment(table, receiver, deficit, moves) or _chain(table, receiver, moves)
        if partition is not None:
            table.move(partition, donor, receiver)
            moves.append((partition, donor, receiver))
        deficit[donor] += 1
        deficit[receiver] -= 1
        given[(donor, receiver)] += 1
        if deficit[receiver] > 0:
            heapq.heappush(heap, (-deficit[receiver], receiver))


def _augment(
    table: _Table,
    receiver: str,
    deficit: Mapping[str, int],
    moves: list[tuple[int, str | None, str]],
) -> str | None:
    """Give `receiver` one more replica when no donor can hand one over directly.

    Breadth-first over this plan's moves to `receiver`: a donor X above quota that cannot give
    directly takes over a move (q, Y -> receiver) for a partition q it also holds (Y keeps q),
    and Y, now one above, gives directly or continues the path. The number of moves stays the
    minimum. Appends the final direct move (already applied) and returns the donor whose count
    dropped. Runtime: O(M · Q/N) for M moves so far.

    Returns None when there is no such path.
    """
    taken = {
        move[0]: i for i, move in enumerate(moves) if move[2] == receiver and move[1] in table.zones
    }
    start = sorted(name for name in deficit if deficit[name] < 0)
    parent: dict[str, tuple[str, int] | None] = dict.fromkeys(start)
    queue = deque(start)
    while queue:
        node = queue.popleft()
        direct = next(
            (p for p in sorted(table.held[node]) if table.accepts(receiver, p, node)), None
        )
        if direct is not None:
            table.move(direct, node, receiver)
            moves.append((direct, node, receiver))
            step = parent[node]
            while step is not None:
                previous, index = step
                partition = moves[index][0]
                table.move(partition, previous, node)  # `node` gets its replica back
                moves[index] = (partition, previous, receiver)
                node = previous
                step = parent[node]
            return node
        for partition in sorted(table.held[node] & taken.keys()):
            index = taken[partition]
            other = moves[index][1]
            if other is not None and other not in parent and table.row_fits(partition, node, other):
                parent[other] = (node, index)
                queue.append(other)
    return None


def _chain(table: _Table, receiver: str, moves: list[tuple[int, str | None, str]]) -> str:
    """Give `receiver` one replica through nodes at quota: a donor hands a partition to x, x
    hands another to the receiver (more moves than the minimum: a detour the zone rule forces).
    Applies and records the moves; returns the donor whose count dropped.

    :raises ConfigError: when no chain exists (the zone rule leaves no room)
    """
    donors = sorted(name for name in table.zones if len(table.held[name]) > table.quotas[name])
    parent: dict[str, tuple[str, int] | None] = dict.fromkeys(donors)
    queue = deque(donors)
    while queue:
        node = queue.popleft()
        for partition in sorted(table.held[node]):
            for other in [receiver, *sorted(table.zones)]:
                if other in parent or not table.accepts(other, partition, node):
                    continue
                parent[other] = (node, partition)
                if other == receiver:
                    path = []
                    step = parent[other]
                    while step is not None:
                        path.append((step[1], step[0], other))
                        other = step[0]
                        step = parent[other]
                    for move in path:
                        table.move(*move)
                        moves.append(move)
                    return other
                queue.append(other)
    raise ConfigError(f"no replica can move to node {receiver!r} under the zone rule")


def _place_orphan(
    table: _Table, deficit: dict[str, int], partition: int, moves: list[tuple[int, str | None, str]]
) -> str:
    """Place a replica slot of `partition` that must move; return its destination.

    To a node below quota if one may take it; else along an augmenting path (Kuhn's algorithm)
    through the orphans placed so far: some node y may take it if y's earlier orphan moves on to
    a node below quota, and so on. Only when no path exists does it go to a node at quota (a
    detour the surplus pass drains, and the plan shows as ``moved > minimum``).
    """
    found = _receiver(table, deficit, partition, None)
    if deficit[found] <= 0:
        via = _orphan_path(table, deficit, partition, moves)
        if via is not None:
            table.move(partition, None, via)
            return via
    table.move(partition, None, found)
    deficit[found] -= 1
    return found


def _orphan_path(
    table: _Table, deficit: dict[str, int], partition: int, moves: list[tuple[int, str | None, str]]
) -> str | None:
    """Shift earlier orphan placements so that `partition` gets a node; return it or None."""
    placed: dict[str, list[int]] = {}
    for index, (_, donor, destination) in enumerate(moves):
        if donor is None or donor not in table.zones:
            placed.setdefault(destination, []).append(index)
    parent: dict[int, tuple[int, str]] = {}
    seen = {partition}
    queue: deque[tuple[int, int, str | None]] = deque([(-1, partition, None)])
    while queue:
        index, current, holder = queue.popleft()
        for name in sorted(table.zones):
            if not table.accepts(name, current, holder):
                continue
            if deficit[name] > 0:
                deficit[name] -= 1
                return _shift_orphans(table, moves, parent, index, name)
            for other in placed.get(name, []):
                if other not in parent and moves[other][0] not in seen:
                    parent[other] = (index, name)
                    seen.add(moves[other][0])
                    queue.append((other, moves[other][0], name))
    return None


def _shift_orphans(
    table: _Table,
    moves: list[tuple[int, str | None, str]],
    parent: Mapping[int, tuple[int, str]],
    index: int,
    receiver: str,
) -> str:
    """Apply an augmenting path found by ``_orphan_path``; return the new orphan's node."""
    while index != -1:
        partition, donor, holder = moves[index]
        table.move(partition, holder, receiver)
        moves[index] = (partition, donor, receiver)
        index, receiver = parent[index]
    return receiver
