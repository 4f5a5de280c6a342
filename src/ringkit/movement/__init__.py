"""ringkit.movement: what a change of placement moves, and how to move it.

``diff(old, new)`` compares two placements over one key space and answers exactly which arcs (or
partitions, maglev slots, keys) change owner, from whom to whom, beside what ``hash % N`` would
have moved; ``Movement.plan()`` turns the moved ranges into a :class:`MigrationPlan` of range
transfers scheduled in waves. Karger et al. (1997) showed that a consistent hash moves only the
new node's share when a node joins; this package measures that, exactly, for every placement.

The package's parts, each one concept:

- :mod:`~ringkit.movement.segments`: the array engine (merged token boundaries, preference rows,
  changes, coalescing), vectorised numpy;
- :mod:`~ringkit.movement.units`: how each kind of placement becomes segments (ring tokens,
  partition or maglev tables, a key sample) and the ``hash % N`` baseline;
- :mod:`~ringkit.movement.diffing`: ``diff`` and its result types ``Movement`` and ``MovedArc``;
- :mod:`~ringkit.movement.plan`: ``MigrationPlan`` and ``Transfer``, scheduled in waves;
- :mod:`~ringkit.movement.report`: a JSON-ready report of a movement and its plan.

>>> from ringkit import HashRing
>>> ring = HashRing.from_tokens({"A": [10], "B": [35], "C": [60], "D": [85]}, space=100)
>>> diff(ring, ring.add("E", tokens=[50])).moved_fraction
0.15
"""

from __future__ import annotations

from ringkit.movement.diffing import MovedArc, Movement, diff
from ringkit.movement.plan import MigrationPlan, Transfer, build_plan
from ringkit.movement.report import movement_report

__all__ = [
    "MigrationPlan",
    "MovedArc",
    "Movement",
    "Transfer",
    "build_plan",
    "diff",
    "movement_report",
]
