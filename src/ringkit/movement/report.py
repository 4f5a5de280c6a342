"""A JSON-ready report of a movement and its plan, for the CLI (``ringkit plan``) and the web page.

The report puts the moved fraction beside the least any placement must move (the change of fair
shares, 1/(N+1) for one node added to N equal ones) and beside ``hash % N`` on the same nodes,
then the totals per (source, destination) pair and the largest transfers of the plan.

>>> from ringkit.movement.diffing import diff
>>> from ringkit.ring import HashRing
>>> old = HashRing.from_tokens({"A": [10], "B": [35], "C": [60], "D": [85]}, space=100)
>>> movement = diff(old, old.add("E", tokens=[50]))
>>> data = movement_report(movement, movement.plan())
>>> data["movement"]["moved_fraction"], data["pairs"][0]["fraction"], data["pairs"][0]["arcs"]
(0.15, 0.15, 1)
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from ringkit.movement.diffing import Movement
from ringkit.movement.plan import MigrationPlan, Transfer

__all__ = ["movement_report"]


def _transfer(transfer: Transfer, capacity: int) -> dict[str, Any]:
    return {
        "source": transfer.source,
        "destination": transfer.destination,
        "start": transfer.start,
        "end": transfer.end,
        "fraction": transfer.length / capacity,
        "keys": transfer.keys,
        "bytes": transfer.size_bytes,
        "duration_s": transfer.duration_s,
        "wave": transfer.wave,
    }


def _pairs(movement: Movement, plan: MigrationPlan, capacity: int) -> list[dict[str, Any]]:
    arcs: Counter[tuple[str, str]] = Counter()
    keys: defaultdict[tuple[str, str], int | None] = defaultdict(int)
    sizes: defaultdict[tuple[str, str], int | None] = defaultdict(int)
    totals: Counter[tuple[str, str]] = Counter()
    for t in plan.transfers:
        pair = (t.source, t.destination)
        arcs[pair] += 1 if t.start is not None else 0
        totals[pair] += t.length
        before_keys, before_bytes = keys[pair], sizes[pair]
        keys[pair] = None if t.keys is None or before_keys is None else before_keys + t.keys
        sizes[pair] = (
            None if t.size_bytes is None or before_bytes is None else (before_bytes + t.size_bytes)
        )
    return [
        {
            "source": pair[0],
            "destination": pair[1],
            "arcs": arcs[pair],
            "fraction": totals[pair] / capacity,
            "keys": keys[pair],
            "bytes": sizes[pair],
        }
        for pair in sorted(totals, key=lambda pair: (-totals[pair], pair))
    ]


def movement_report(
    movement: Movement, plan: MigrationPlan, *, top: int | None = None
) -> dict[str, Any]:
    """Return the report of `movement` and its `plan` as plain data (JSON-ready).

    `top` keeps only the largest transfers (all by default). Fractions are of all copies after
    the change (R per key with replicas); for a diff over keys, of the key sample's copies.
    """
    capacity = min(movement.replicas, len(movement.nodes_after)) * movement.space
    largest = sorted(plan.transfers, key=lambda t: (-t.length, -(t.size_bytes or 0)))
    return {
        "basis": movement.basis,
        "replicas": movement.replicas,
        "nodes_before": list(movement.nodes_before),
        "nodes_after": list(movement.nodes_after),
        "movement": {
            "moved_fraction": movement.moved_fraction,
            "optimum_fraction": movement.optimum_fraction,
            "modulo_fraction": movement.modulo_fraction,
            "arcs": len(movement.arcs),
            "keys_total": movement.keys_total,
            "keys_moved": movement.keys_moved,
            "modulo_keys_moved": movement.modulo_keys_moved,
        },
        "pairs": _pairs(movement, plan, capacity),
        "plan": {
            "transfers": len(plan.transfers),
            "waves": len(plan.wave_durations_s),
            "sources": plan.sources,
            "destinations": plan.destinations,
            "duration_s": plan.duration_s,
            "max_streams_per_source": plan.max_streams_per_source,
            "setup_s": plan.setup_s,
            "bandwidth_bytes_per_s": plan.bandwidth_bytes_per_s,
            "total_keys": plan.total_keys,
            "total_bytes": plan.total_bytes,
        },
        "largest_transfers": [_transfer(t, capacity) for t in largest[:top]],
    }
