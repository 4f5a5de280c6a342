"""The rebalancing planner of :class:`~ringkit.FixedPartitions`: which replicas move where.

Given the replica rows, the members and their quotas (:func:`~ringkit.strategies.fixed.controller.
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
from collections import Counter
from collections.abc import Mapping, Sequence

from ringkit.nodes import Node
from ringkit.strategies.fixed.assignment import WorkingTable, augment, chain, place_orphan
from ringkit.strategies.fixed.controller import (
    PartitionMove,
    RebalancePlan,
    compute_quotas,
    zone_key,
    zone_limit,
)
from ringkit.strategies.fixed.roles import balance_primaries, choose_sources

__all__ = ["Move", "plan_rebalance", "reassign"]

Move = tuple[int, str | None, str]
"""(partition, donor, destination): donor is None for a new replica slot."""

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
    new_rows, detoured = plan_rebalance(rows, members, quotas, limit, objective)
    raw = net_moves(detoured)
    ordered = balance_primaries(new_rows, members, [row[0] if row else None for row in old])
    holders = [tuple(name for name in row if name in names) for row in old]
    sources = choose_sources(holders, raw, objective)
    moves = tuple(
        PartitionMove(partition, donor, destination, source)
        for (partition, donor, destination), source in zip(raw, sources, strict=True)
    )
    minimum = sum(max(0, quotas[name] - current[name]) for name in names)
    return tuple(tuple(row) for row in ordered), RebalancePlan(epoch, objective, moves, minimum)


def net_moves(
    moves: Sequence[tuple[int, str | None, str]],
) -> list[tuple[int, str | None, str]]:
    """Collapse each partition's detours: X → Y then Z → X is one move, Z → Y.

    The planner may take a replica off a node and give that node the partition back within one
    plan (the zone rule forces such detours); the table ends the same either way, and a move
    list that kept both would copy twice and count one replica moved twice.
    Runtime: O(M²) per partition for its M moves (M is at most a few).
    """
    by_partition: dict[int, list[tuple[str | None, str]]] = {}
    for partition, donor, destination in moves:
        by_partition.setdefault(partition, []).append((donor, destination))
    netted: list[tuple[int, str | None, str]] = []
    for partition, pairs in by_partition.items():
        merged = True
        while merged:
            merged = False
            for a, (donor_a, destination_a) in enumerate(pairs):
                for b, (donor_b, destination_b) in enumerate(pairs):
                    if a != b and donor_b == destination_a:  # X → Y, then Y → Z: X → Z
                        pairs[a] = (donor_a, destination_b)
                        del pairs[b]
                        merged = True
                        break
                if merged:
                    break
        netted.extend(
            (partition, donor, destination)
            for donor, destination in pairs
            if donor != destination  # a replica that left and came back did not move
        )
    return netted


def plan_rebalance(
    owners: Sequence[Sequence[str | None]],
    nodes: Sequence[Node],
    quotas: Mapping[str, int],
    limit: int,
    objective: str,
) -> tuple[list[list[str]], list[Move]]:
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
    table = WorkingTable(rows, zones, limit, quotas)
    deficit = {name: quotas[name] - len(table.held[name]) for name in zones}
    moves: list[Move] = []
    for partition, departed in orphans:
        moves.append((partition, departed, place_orphan(table, deficit, partition, moves)))
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


def _move_surplus(
    table: WorkingTable,
    deficit: dict[str, int],
    moves: list[Move],
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
            donor = augment(table, receiver, deficit, moves) or chain(table, receiver, moves)
        if partition is not None:
            table.move(partition, donor, receiver)
            moves.append((partition, donor, receiver))
        deficit[donor] += 1
        deficit[receiver] -= 1
        given[(donor, receiver)] += 1
        if deficit[receiver] > 0:
            heapq.heappush(heap, (-deficit[receiver], receiver))
