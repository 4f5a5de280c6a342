"""Replicated ownership: the share of keys each node holds a replica of, and how to balance it.

With R replicas a key is stored on the first R distinct nodes clockwise from it, so a node's
load is its *replicated* ownership, not its primary arcs. Cassandra's allocator
(``ReplicationAwareTokenAllocator``, CASSANDRA-7032) balances that quantity; ringkit's
replication-aware mode of :func:`~ringkit.allocate_tokens` does the same with its own greedy:
candidate cuts in arcs whose last replica is one of the most loaded nodes (a cut puts the new node
first there and pushes that replica out), each judged exactly, the newcomer aiming at
(tokens placed / tokens) of its share as Cassandra's ``newUnitMult`` does.

>>> ring = HashRing.from_tokens({"a": [0], "b": [2**62], "c": [2**63]})
>>> replicated_shares(ring, 2)
{'a': 0.75, 'b': 0.75, 'c': 0.5}
"""

from __future__ import annotations

import numpy as np

from ringkit.errors import ConfigError
from ringkit.ring import SPACE_64, HashRing
from ringkit.strategies.allocation.measure import Measure

__all__ = ["replicated_cut", "replicated_shares"]

# Candidate arcs per replicated token: those whose last replica is one of the _DONORS most
# loaded nodes, the _ARCS largest of them, each judged exactly (O(N·V·R) per judgement).
_DONORS = 4
_ARCS = 8


def _replica_lists(
    owners: np.ndarray[tuple[int], np.dtype[np.int64]], width: int
) -> np.ndarray[tuple[int, int], np.dtype[np.int64]]:
    """Return, for each token's arc, the first `width` distinct owners walking clockwise."""
    count = len(owners)
    chosen = np.full((count, width), -1, dtype=np.int64)
    filled = np.zeros(count, dtype=np.int64)
    index = np.arange(count)
    for step in range(count):
        if int(filled.min()) >= width:
            break
        candidate = owners[(index + step) % count]
        fresh = np.flatnonzero((filled < width) & ~(chosen == candidate[:, None]).any(axis=1))
        chosen[fresh, filled[fresh]] = candidate[fresh]
        filled[fresh] += 1
    return chosen


def _replicated_own(
    per: np.ndarray[tuple[int], np.dtype[np.float64]],
    chosen: np.ndarray[tuple[int, int], np.dtype[np.int64]],
    units: int,
) -> np.ndarray[tuple[int], np.dtype[np.float64]]:
    """Return each unit's replicated ownership: the arcs whose preference list holds it."""
    valid = chosen >= 0
    amounts = np.broadcast_to(per[:, None], chosen.shape)[valid]
    return np.asarray(np.bincount(chosen[valid], weights=amounts, minlength=units), np.float64)


def replicated_cut(
    measure: Measure,
    positions: np.ndarray[tuple[int], np.dtype[np.uint64]],
    owners: np.ndarray[tuple[int], np.dtype[np.int64]],
    weights: np.ndarray[tuple[int], np.dtype[np.float64]],
    width: int,
    progress: float,
) -> int | None:
    """Return the candidate cut that leaves replicated ownership closest to fair."""
    per = measure.per_token(positions)
    chosen = _replica_lists(owners, width)
    own = _replicated_own(per, chosen, len(weights))
    fair = weights / weights.sum() * per.sum() * width
    target = fair.copy()
    target[-1] *= progress  # like Cassandra's newUnitMult: the newcomer fills up token by token
    loaded = np.argsort(-(own - fair)[:-1], kind="stable")[:_DONORS]
    # A cut in arc (a, b] puts the new node first there and pushes out the arc's last replica.
    pool = np.flatnonzero(np.isin(chosen[:, -1], loaded) & ~(chosen == len(weights) - 1).any(1))
    candidates = pool[np.argsort(-per[pool], kind="stable")][:_ARCS].tolist()
    best: tuple[float, int] | None = None
    for index in candidates:
        for part in (float(per[index]) / 4, float(per[index]) / 2, float(per[index]) * 3 / 4):
            point = measure.cut(int(positions[index - 1]), int(positions[index]), part)
            if point is None:
                continue
            at = int(np.searchsorted(positions, np.uint64(point)))
            trial = np.insert(owners, at, len(weights) - 1)
            spot = np.insert(positions, at, np.uint64(point))
            after = _replicated_own(
                measure.per_token(spot), _replica_lists(trial, width), len(weights)
            )
            score = float(np.sum(((after - target) / fair) ** 2))
            if best is None or score < best[0]:
                best = (score, point)
    return best[1] if best is not None else None


def replicated_shares(ring: HashRing, replicas: int) -> dict[str, float]:
    """Return, from the arc lengths, the fraction of keys each node holds a replica of.

    A key's replicas are the first `replicas` distinct nodes clockwise (zones are not
    considered, unlike ``nodes_for`` on a zoned ring). The values sum to ``min(replicas, N)``.
    Runtime: O(N·V · R) in numpy.

    >>> replicated_shares(HashRing.from_tokens({"a": [0], "b": [2**62], "c": [2**63]}), 2)
    {'a': 0.75, 'b': 0.75, 'c': 0.5}

    :raises ConfigError: when `replicas` < 1
    """
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
        raise ConfigError(f"replicas must be an int >= 1, got {replicas!r}")
    if len(ring) == 0:
        return {}
    per = Measure(None).per_token(ring.tokens)
    width = min(replicas, len(ring))
    owned = _replicated_own(
        per, _replica_lists(ring.token_owners.astype(np.int64), width), len(ring)
    )
    return {name: float(value) / SPACE_64 for name, value in zip(ring, owned.tolist(), strict=True)}
