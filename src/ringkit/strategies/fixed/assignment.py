"""The working assignment table of a rebalancing plan, and how single replicas find a node.

:mod:`ringkit.strategies.fixed.planner` builds a plan move by move on a :class:`WorkingTable`
(mutable, private to one plan). A replica that must move goes to a node below quota when the zone
rule lets it (``receiver``); when it does not, the moves made so far are re-routed along
augmenting paths (Kuhn's algorithm: ``place_orphan``, ``augment``), which costs no extra move,
and only then through a node at quota (``chain``: one extra move, a detour the plan reports).

>>> table = WorkingTable([["a", None]], {"a": "z1", "b": "z1", "c": "z2"}, 1, {"b": 1, "c": 1})
>>> table.accepts("b", 0, None), table.accepts("c", 0, None)
(False, True)
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Mapping, Sequence

from ringkit.errors import ConfigError
from ringkit.hashing import xxh3_64

__all__ = ["WorkingTable", "augment", "chain", "place_orphan", "receiver"]

Move = tuple[int, str | None, str]

_STEPS = 8  # how coarsely deficits are compared when placing orphans (see _receiver)


_MASK = (1 << 64) - 1


def _mix(seed: int, partition: int) -> int:
    """A well-spread 64-bit number from a node's seed and a partition (SplitMix64's mixer)."""
    x = (seed ^ (partition * 0x9E3779B97F4A7C15)) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


class WorkingTable:
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


def receiver(
    table: WorkingTable, deficit: dict[str, int], partition: int, donor: str | None
) -> str:
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


def augment(
    table: WorkingTable,
    receiver: str,
    deficit: Mapping[str, int],
    moves: list[Move],
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


def chain(table: WorkingTable, receiver: str, moves: list[Move]) -> str:
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


def place_orphan(
    table: WorkingTable,
    deficit: dict[str, int],
    partition: int,
    moves: list[Move],
) -> str:
    """Place a replica slot of `partition` that must move; return its destination.

    To a node below quota if one may take it; else along an augmenting path (Kuhn's algorithm)
    through the orphans placed so far: some node y may take it if y's earlier orphan moves on to
    a node below quota, and so on. Only when no path exists does it go to a node at quota (a
    detour the surplus pass drains, and the plan shows as ``moved > minimum``).
    """
    found = receiver(table, deficit, partition, None)
    if deficit[found] <= 0:
        via = _orphan_path(table, deficit, partition, moves)
        if via is not None:
            table.move(partition, None, via)
            return via
    table.move(partition, None, found)
    deficit[found] -= 1
    return found


def _orphan_path(
    table: WorkingTable,
    deficit: dict[str, int],
    partition: int,
    moves: list[Move],
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
    table: WorkingTable,
    moves: list[Move],
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
