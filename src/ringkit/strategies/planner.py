"""The rebalancing planner of :class:`~ringkit.FixedPartitions`: which replicas move where.

Given the replica rows, the members and their quotas (:func:`~ringkit.strategies.controller.
compute_quotas`), ``plan_rebalance`` moves replicas from departed nodes and from nodes above
quota to nodes below it, never breaking the zone rule. Each move fills one missing replica, so a
plan has ``Σ max(0, quota − count)`` moves when the rules let every replica go straight to a
node that needs it. When they do not, it first re-routes its own earlier moves along augmenting
paths (Kuhn's algorithm; free), and only then detours through a node at quota (one extra move).

>>> rows, moves = plan_rebalance([["a"], ["a"], ["b"], ["b"]], [Node("a"), Node("b"), Node("c")],
...                              {"a": 1, "b": 2, "c": 1}, 1, "fewest_sources")
>>> moves
[(0, 'a', 'c')]
"""

from __future__ import annotations

import heapq
from collections import Counter, deque
from collections.abc import Mapping, Sequence

from ringkit.errors import ConfigError
from ringkit.hashing import xxh3_64
from ringkit.nodes import Node
from ringkit.strategies.controller import (
    PartitionMove,
    RebalancePlan,
    compute_quotas,
    zone_key,
    zone_limit,
)
from ringkit.strategies.roles import balance_primaries, choose_sources

__all__ = ["Move", "plan_rebalance", "reassign"]

Move = tuple[int, str | None, str]
"""(partition, donor, destination): donor is None for a new replica slot."""

_STEPS = 8  # how coarsely deficits are compared when placing orphans (see _receiver)


_MASK = (1 << 64) - 1


def _mix(seed: int, partition: int) -> int:
    """A well-spread 64-bit number from a node's seed and a partition (SplitMix64's mixer)."""
    x = (seed ^ (partition * 0x9E3779B97F4A7C15)) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


Rows = tuple[tuple[str, ...], ...]


def reassign(
    old: Rows, members: Sequence[Node], replicas: int, objective: str, *, epoch: int
) -> tuple[Rows, RebalancePlan]:
    """Return the table for `members` reached from `old` with the fewest moves, and its plan.

    Runtime: O(M · N log N) for M moved replicas, plus O(Q · R) to scan the table.
    """
    if not members:
        return ((),) * len(old), RebalancePlan(epoch, objective, (), 0)
    width = min(replicas, len(members))
    names = {node.name for node in members}
    rows: list[list[str | None]] = []
    for row in old:
        kept: list[str | None] = [name for name in row if name in names]
        departed = [name for name in row if name not in names]
        # Departed replicas become orphans to re-place, unless the row got narrower.
        kept += departed[: max(0, width - len(kept))]
        rows.append(kept + [None] * (width - len(kept)))
    current = Counter(name for row in old for name in row if name in names)
    quotas = compute_quotas(members, len(old), width, current)
    limit = zone_limit(list(Counter(zone_key(node) for node in members).values()), width)
    new_rows, raw = plan_rebalance(rows, members, quotas, limit, objective)
    ordered = balance_primaries(new_rows, members, [row[0] if row else None for row in old])
    holders = [tuple(name for name in row if name in names) for row in old]
    sources = choose_sources(holders, raw, objective)
    moves = tuple(
        PartitionMove(partition, donor, destination, source)
        for (partition, donor, destination), source in zip(raw, sources, strict=True)
    )
    minimum = sum(max(0, quotas[name] - current[name]) for name in names)
    return tuple(tuple(row) for row in ordered), RebalancePlan(epoch, objective, moves, minimum)


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
        self.scale = {name: max(1, quota) for name, quota in quotas.items()}
        self.seeds = {name: xxh3_64(name.encode()) for name in zones}
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
    _swap_evictions(rows, evicted, count, quotas, zones)
    return evicted


def _swap_evictions(
    rows: list[list[str | None]],
    evicted: dict[tuple[int, int], str],
    count: Counter[str],
    quotas: Mapping[str, int],
    zones: Mapping[str, str],
) -> None:
    """Where an evicted node ends below quota and a node kept in the same row ends above it,
    evict that one instead: each swap saves a move back."""
    changed = True
    while changed:
        changed = False
        for (partition, slot), name in list(evicted.items()):
            if count[name] >= quotas[name]:
                continue
            row = rows[partition]
            other = next(
                (
                    i
                    for i, kept in enumerate(row)
                    if kept is not None
                    and count[kept] > quotas[kept]
                    and zones[kept] == zones[name]
                ),
                None,
            )
            if other is None:
                continue
            kept = row[other] or ""
            row[slot], row[other] = name, None
            del evicted[(partition, slot)]
            evicted[(partition, other)] = kept
            count[name] += 1
            count[kept] -= 1
            changed = True


def _receiver(table: _Table, deficit: dict[str, int], partition: int, donor: str | None) -> str:
    """Return a node below quota that may take `partition`; else any node that may (a detour: it
    ends one above quota and is drained by the surplus pass).

    Nodes are ranked by how far below quota they are, in coarse steps, and within a step by a
    hash of (node, partition): strict round-robin would give every partition the same few
    replica sets, and one failure would then be re-replicated from just two machines.
    """

    def rank(name: str) -> tuple[bool, int, int]:
        need = deficit[name]
        step = -(need * _STEPS // table.scale[name])
        return (need <= 0, step, _mix(table.seeds[name], partition))

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
