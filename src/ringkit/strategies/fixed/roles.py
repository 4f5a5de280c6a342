"""Roles inside a replica list: which replica answers first, and which one streams a move.

Neither changes where data lives. The *primary* (first in a partition's replica list) is the node
``node_for`` answers, so primaries are balanced by weight on their own, keeping a partition's
primary through membership changes when they can (fewer routing changes). The *source* of a move
is a node that holds the partition before it and streams it to the destination; the controller
either uses as few sources as it can (a join talks to few machines) or shares the transfer out.

>>> choose_sources([("a", "b"), ("a", "c")], [(0, "b", "x"), (1, "c", "x")], "fewest_sources")
['a', 'a']
>>> choose_sources([("a", "b"), ("a", "c")], [(0, "b", "x"), (1, "c", "x")], "spread")
['a', 'c']
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from ringkit.nodes import Node
from ringkit.strategies.fixed.controller import compute_quotas

__all__ = ["balance_primaries", "choose_sources"]


def choose_sources(
    owners: Sequence[Sequence[str]],
    moves: Sequence[tuple[int, str | None, str]],
    objective: str,
) -> list[str]:
    """Return, for each move, the node that streams its partition (one of its holders before).

    ``"fewest_sources"``: greedy set cover, the holder covering the most uncovered moves first.
    ``"spread"``: each move to the holder with the fewest moves so far. A partition with no
    holder left (every replica departed) streams from its donor.
    """
    candidates = [
        tuple(owners[partition]) or (donor or destination,)
        for partition, donor, destination in moves
    ]
    if objective == "spread":
        load: Counter[str] = Counter()
        chosen = []
        for options in candidates:
            source = min(options, key=lambda name: (load[name], name))
            load[source] += 1
            chosen.append(source)
        return chosen
    result: list[str | None] = [None] * len(moves)
    while None in result:
        cover = Counter(
            name for i, options in enumerate(candidates) if result[i] is None for name in options
        )
        best = min(cover, key=lambda name: (-cover[name], name))
        for i, options in enumerate(candidates):
            if result[i] is None and best in options:
                result[i] = best
    return [source for source in result if source is not None]


def balance_primaries(
    rows: Sequence[Sequence[str]], nodes: Sequence[Node], previous: Sequence[str | None]
) -> list[list[str]]:
    """Return `rows` reordered so that primaries (first entries) are spread by weight.

    A partition keeps its previous primary while that node still holds it and is not above its
    primary quota; surplus primaries shift along rows (a breadth-first augmenting path) to nodes
    below theirs. Reordering a row moves no data, only which replica answers first.
    Runtime: O(Q · R) per shifted primary.
    """
    if not nodes:
        return [list(row) for row in rows]
    kept = [
        old if old is not None and old in row else None
        for old, row in zip(previous, rows, strict=True)
    ]
    count: Counter[str] = Counter(name for name in kept if name is not None)
    quota = compute_quotas(nodes, len(rows), 1, count)
    primary: list[str] = []
    for choice, row in zip(kept, rows, strict=True):
        if choice is None:
            choice = min(row, key=lambda name: (count[name] - quota[name], name))
            count[choice] += 1
        primary.append(choice)
    for name in sorted(quota):
        while count[name] > quota[name] and _shift_primary(rows, primary, count, quota, name):
            pass
    return [[p, *(name for name in row if name != p)] for p, row in zip(primary, rows, strict=True)]


def _shift_primary(
    rows: Sequence[Sequence[str]],
    primary: list[str],
    count: Counter[str],
    quota: Mapping[str, int],
    start: str,
) -> bool:
    """Move one primary away from `start` along a path ending at a node below quota."""
    by_primary: dict[str, list[int]] = {}
    for partition, name in enumerate(primary):
        by_primary.setdefault(name, []).append(partition)
    parent: dict[str, tuple[str, int] | None] = {start: None}
    frontier = [start]
    while frontier:
        following = []
        for name in frontier:
            for partition in by_primary.get(name, []):
                for other in rows[partition]:
                    if other in parent:
                        continue
                    parent[other] = (name, partition)
                    if count[other] < quota[other]:
                        _apply_path(parent, primary, count, other)
                        return True
                    following.append(other)
        frontier = following
    return False


def _apply_path(
    parent: Mapping[str, tuple[str, int] | None], primary: list[str], count: Counter[str], end: str
) -> None:
    step = parent[end]
    count[end] += 1
    node = end
    while step is not None:
        previous, partition = step
        primary[partition] = node
        node = previous
        step = parent[node]
    count[node] -= 1
