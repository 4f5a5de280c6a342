"""The vnode trade-off as numbers: balance against vnodes, and the vnode count to choose.

:func:`sweep` measures, over many seeded ring draws, how the busiest node and the spread of
shares shrink as vnodes grow, beside the theory (CV ≈ 1/sqrt(V); the expected worst share;
H_N/N for one token). :func:`advise` turns it into a decision: the fewest vnodes for which the
busiest node stays within a target multiple of its fair share with the wanted confidence, what
that costs (routing-table bytes per client, entries to gossip, transfers per join), and what a
fixed set of partitions or tokens allocated by a controller would give instead (Dynamo's
strategy 3, DeCandia et al. 2007; Cassandra's token allocator). When the node count never
changes, ``hash % N`` or N fixed partitions balance perfectly with no table, and a ring is
overhead. With replicas and zones, :func:`zone_risk` adds what one zone's failure costs at that
vnode count, with and without zone-aware preference lists (``ringkit.sim.zones``).

>>> row = sweep(10, [1, 256], draws=200, seed=0)[1]
>>> row.vnodes, round(row.cv_theory, 4), round(row.worst_theory, 3)
(256, 0.0625, 1.134)
>>> advice = advise(10, target=1.25, draws=200, seed=0)
>>> advice.vnodes, advice.formula_vnodes
(142, 74)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ringkit.errors import ConfigError
from ringkit.ring import HashRing
from ringkit.ring.tokens import SPACE_64, TokenTable
from ringkit.sim.population import Population
from ringkit.sim.zones import fail_each_zone, spread_zones, zone_names, zoned_nodes
from ringkit.stats import (
    cv_exact,
    cv_theory,
    draw_shares,
    expected_largest_share,
    imbalance,
    worst_share,
)

__all__ = [
    "Advice",
    "SweepRow",
    "ZoneRisk",
    "advise",
    "allocated_imbalance",
    "formula_vnodes",
    "ring_table_bytes",
    "sweep",
    "zone_risk",
]

# The ~40 bytes commonly quoted for one routing entry (token, address, bookkeeping).
SEED_ENTRY_BYTES = 40
Progress = Callable[[int, int], None]
_POWERS = tuple(2**i for i in range(13))
# zone_risk's sample: keys per ring and rings (node layouts) per placement.
ZONE_SAMPLE_KEYS = 20_000
ZONE_SAMPLE_RINGS = 4


@dataclass(frozen=True, slots=True)
class SweepRow:
    """Balance at one vnode count, measured over `draws` rings, beside the theory.

    ``busiest_*`` are max/mean (the busiest node × fair share) over the draws; ``cv`` is the
    measured coefficient of variation of node shares (pooled); ``largest_theory`` is H_N/N × N,
    the expected busiest × fair with one token (only meaningful for V = 1).
    """

    vnodes: int
    busiest_mean: float
    busiest_p99: float
    busiest_max: float
    cv: float
    cv_theory: float
    cv_exact: float
    worst_theory: float
    largest_theory: float


def _check(n: int, draws: int, replicas: int) -> None:
    if n < 1:
        raise ConfigError(f"nodes must be >= 1, got {n!r}")
    if draws < 1:
        raise ConfigError(f"draws must be >= 1, got {draws!r}")
    if not 1 <= replicas <= n:
        raise ConfigError(f"replicas must be in [1, {n}] for {n} nodes, got {replicas!r}")


def sweep(
    n: int,
    vnodes: Sequence[int],
    *,
    draws: int = 100,
    seed: int = 0,
    replicas: int = 1,
    progress: Progress | None = None,
) -> list[SweepRow]:
    """Return one :class:`SweepRow` per vnode count for `n` nodes, from `draws` seeded rings.

    Runtime: O(draws · n·V · log(n·V)) per vnode count, vectorised.

    :raises ConfigError: when n, draws or a vnode count < 1, or replicas outside [1, n]
    """
    _check(n, draws, replicas)
    rows = []
    for i, v in enumerate(vnodes):
        shares = draw_shares(n, v, draws, seed=seed + i, replicas=replicas)
        busiest = imbalance(shares)
        rows.append(
            SweepRow(
                vnodes=v,
                busiest_mean=float(busiest.mean()),
                busiest_p99=float(np.quantile(busiest, 0.99)),
                busiest_max=float(busiest.max()),
                cv=float(shares.std() / shares.mean()),
                cv_theory=cv_theory(v),
                cv_exact=cv_exact(n, v),
                worst_theory=worst_share(n, v) * n,
                largest_theory=expected_largest_share(n) * n,
            )
        )
        if progress is not None:
            progress(i + 1, len(vnodes))
    return rows


def formula_vnodes(n: int, target: float) -> int:
    """Return the vnodes at which the estimate ``worst_share(n, v)`` reaches `target` × fair.

    Solves ``1 + sqrt(2·ln n / v) <= target``: ``v = ceil(2·ln n / (target - 1)**2)``.

    >>> formula_vnodes(10, 1.10)
    461

    :raises ConfigError: when `target` <= 1 or not finite
    """
    if not target > 1:
        raise ConfigError(f"target must be > 1 (a multiple of the fair share), got {target!r}")
    if target == math.inf:
        # Before this, `advise --target inf` ended in an OverflowError traceback
        raise ConfigError(f"target must be finite, got {target!r}")
    return max(1, math.ceil(2 * math.log(n) / (target - 1) ** 2)) if n > 1 else 1


def ring_table_bytes(n: int, v: int, *, seed: int = 0) -> int:
    """Return the bytes of ringkit's token table for n nodes × v vnodes (tokens, owners, prefix).

    Built from random tokens, exactly as a ring of that size lays them out.
    """
    rng = np.random.default_rng(seed)
    table = TokenTable.build(
        [rng.integers(0, SPACE_64, v, dtype=np.uint64, endpoint=False) for _ in range(n)],
        SPACE_64,
    )
    return int(table.tokens.nbytes + table.owners.nbytes + table.prefix.nbytes)


def allocated_imbalance(n: int, v: int) -> float:
    """Return busiest × fair when a controller places tokens as nodes join one at a time.

    Each joiner's v tokens each cut one arc, so it can take load from at most v nodes; the
    controller takes its fair share 1/k from the v busiest nodes, levelling them down
    (water-filling). With v >= n - 1 this keeps every node exactly fair.

    >>> allocated_imbalance(10, 16), round(allocated_imbalance(10, 1), 2)
    (1.0, 1.43)

    Runtime: O(n² log n).
    """
    loads = np.array([1.0])
    for k in range(2, n + 1):
        take = 1.0 / k
        order = np.argsort(loads)[::-1][: min(v, len(loads))]
        top = loads[order]
        # Level L with sum(max(0, top - L)) == take: try each prefix of the sorted loads.
        for count in range(1, len(top) + 1):
            level = (top[:count].sum() - take) / count
            if count == len(top) or level >= top[count]:
                break
        loads[order] = np.minimum(top, max(level, 0.0))
        loads = np.append(loads, take)
    return float(loads.max() * n / loads.sum())


@dataclass(frozen=True, slots=True)
class ZoneRisk:
    """The share of keys one zone's failure costs, zone-aware and zone-blind (exact counts).

    Counted key by key over `keys` sampled keys on each of `rings` rings of `vnodes` vnodes
    (differently named nodes, so different token layouts), for the failure of each of the
    `zones` zones in turn: ``*_lost`` is the mean share of keys that lose every replica over
    those ring × zone cases, ``*_lost_worst`` the largest, ``*_below_quorum`` the mean share
    with fewer than ``replicas // 2 + 1`` replicas alive (lost keys included). The sample is
    counted exactly; the means stand for other layouts only as a sample does.
    """

    zones: int
    replicas: int
    vnodes: int
    keys: int
    rings: int
    aware_lost: float
    aware_lost_worst: float
    aware_below_quorum: float
    blind_lost: float
    blind_lost_worst: float
    blind_below_quorum: float


def _check_zones(n: int, zones: int) -> None:
    zone_names(zones)  # an int >= 1
    if zones > n:
        raise ConfigError(f"zones must be in [1, {n}] for {n} nodes, got {zones!r}")


def zone_risk(
    n: int,
    vnodes: int,
    *,
    replicas: int,
    zones: int,
    keys: int = ZONE_SAMPLE_KEYS,
    rings: int = ZONE_SAMPLE_RINGS,
    seed: int = 0,
) -> ZoneRisk:
    """Return what one zone's failure costs `n` nodes in `zones` zones with R = `replicas`.

    Nodes go round-robin into zones ``z0`` … (``spread_zones``); ring ``r`` of seed ``s`` names
    them ``r{s * rings + r}-node-1`` … Runtime: O(rings × (n·vnodes·R + keys × R × zones)).

    >>> risk = zone_risk(12, 4, replicas=3, zones=3, keys=2000, rings=2)
    >>> risk.aware_lost, risk.blind_lost > 0
    (0.0, True)

    :raises ConfigError: when zones or replicas are outside [1, n], or keys or rings < 1
    """
    _check(n, 1, replicas)
    _check_zones(n, zones)
    if keys < 1 or rings < 1:
        raise ConfigError(f"keys and rings must be >= 1, got keys={keys!r} rings={rings!r}")
    population = Population(count=keys, prefix="key-")
    cases: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    for ring_index in range(seed * rings, seed * rings + rings):
        names = [f"r{ring_index}-node-{i}" for i in range(1, n + 1)]
        zone_of = spread_zones(names, zones)
        for aware, found in cases.items():
            ring = HashRing(zoned_nodes(names, zone_of, zone_aware=aware), vnodes=vnodes)
            reports = fail_each_zone(ring, zone_of, population, replicas=replicas)
            found += [(r.lost["keys"], r.keys_below_quorum / keys) for r in reports.values()]
    lost = {aware: [c[0] for c in found] for aware, found in cases.items()}
    below = {aware: [c[1] for c in found] for aware, found in cases.items()}
    return ZoneRisk(
        zones=zones,
        replicas=replicas,
        vnodes=vnodes,
        keys=keys,
        rings=rings,
        aware_lost=float(np.mean(lost[True])),
        aware_lost_worst=max(lost[True]),
        aware_below_quorum=float(np.mean(below[True])),
        blind_lost=float(np.mean(lost[False])),
        blind_lost_worst=max(lost[False]),
        blind_below_quorum=float(np.mean(below[False])),
    )


@dataclass(frozen=True, slots=True)
class Advice:
    """The advised vnode count for a cluster, what it costs, and the alternatives."""

    nodes: int
    replicas: int
    target: float
    confidence: float
    draws: int
    vnodes: int | None
    achieved: float | None
    formula_vnodes: int
    formula_confidence: float | None
    table_bytes: int | None
    seed_table_bytes: int | None
    gossip_entries: int | None
    join_transfers: int | None
    join_sources: float | None
    partitions: int
    partitions_imbalance: float
    partition_join_moves: int
    allocated_vnodes: int | None
    allocated_table_bytes: int | None
    static: bool
    zone_risk: ZoneRisk | None = None

    @property
    def recommendation(self) -> str:
        """Return the placement advised: ``"modulo"`` for a static cluster, else ``"ring"``.

        A cluster that never changes membership moves no keys, so ``hash % N`` balances
        exactly with no table; any other cluster gets a ring with ``vnodes`` per node.
        """
        return "modulo" if self.static else "ring"


def _meets(n: int, v: int, spec: tuple[float, float, int, int, int]) -> float:
    """The fraction of seeded rings whose busiest node is within the target."""
    target, _confidence, draws, seed, replicas = spec
    busiest = imbalance(draw_shares(n, v, draws, seed=seed, replicas=replicas))
    return float(np.mean(busiest <= target))


def _search(
    n: int, spec: tuple[float, float, int, int, int], max_vnodes: int, progress: Progress | None
) -> tuple[int | None, float | None]:
    """Smallest v (powers of two, then bisection) meeting the target at the confidence."""
    confidence = spec[1]
    low, v, step = 0, 1, 0
    while v <= max_vnodes:
        step += 1
        if progress is not None:
            progress(step, max_vnodes.bit_length() + 12)
        if _meets(n, v, spec) >= confidence:
            break
        low, v = v, v * 2
    else:
        return None, None
    high = v
    while high - low > max(1, high // 64):  # within ~1.5% of the smallest passing count
        mid = (low + high) // 2
        step += 1
        if progress is not None:
            progress(step, max_vnodes.bit_length() + 12)
        if _meets(n, mid, spec) >= confidence:
            high = mid
        else:
            low = mid
    return high, _meets(n, high, spec)


def advise(
    n: int,
    *,
    target: float = 1.10,
    confidence: float = 0.99,
    replicas: int = 1,
    draws: int = 200,
    seed: int = 0,
    max_vnodes: int = 4096,
    max_nodes: int | None = None,
    static: bool = False,
    zones: int | None = None,
    progress: Progress | None = None,
) -> Advice:
    """Return the fewest vnodes keeping the busiest of `n` nodes within `target` × fair share
    in at least `confidence` of `draws` seeded rings, with its costs and the alternatives.

    `max_nodes` (default 2·n) sizes the fixed partitions for growth. `static` says the node
    count never changes: then modulo or n fixed partitions are enough. `zones`: also count
    what one zone's failure costs at the advised vnodes (the formula's, capped at
    `max_vnodes`, when no count passes), with and without zone awareness (``zone_risk``).

    :raises ConfigError: when n or draws < 1, target <= 1, confidence outside (0, 1], or
        replicas or zones outside [1, n]
    """
    _check(n, draws, replicas)
    if zones is not None:
        _check_zones(n, zones)
    formula = formula_vnodes(n, target)
    if not 0 < confidence <= 1:
        raise ConfigError(f"confidence must be in (0, 1], got {confidence!r}")
    spec = (target, confidence, draws, seed, replicas)
    v, achieved = _search(n, spec, max_vnodes, progress) if n > 1 else (1, 1.0)
    growth = max(n, max_nodes or 2 * n)
    allocated = next((a for a in _POWERS if allocated_imbalance(n, a) <= target), None)
    partitions = max(growth, math.ceil(growth / (target - 1)))
    return Advice(
        nodes=n,
        replicas=replicas,
        target=target,
        confidence=confidence,
        draws=draws,
        vnodes=v,
        achieved=achieved,
        formula_vnodes=formula,
        # Above max_vnodes the formula's count is not drawn (it could be millions of tokens).
        formula_confidence=(
            1.0 if n == 1 else _meets(n, formula, spec) if formula <= max_vnodes else None
        ),
        table_bytes=ring_table_bytes(n, v, seed=seed) if v else None,
        seed_table_bytes=n * v * SEED_ENTRY_BYTES if v else None,
        gossip_entries=n * v if v else None,
        join_transfers=v,
        # Each of the joiner's v tokens lands in an arc of a uniformly chosen node.
        join_sources=n * (1 - (1 - 1 / n) ** v) if v else None,
        partitions=partitions,
        partitions_imbalance=math.ceil(partitions / n) * n / partitions,
        partition_join_moves=math.ceil(partitions / (n + 1)),
        allocated_vnodes=allocated,
        allocated_table_bytes=ring_table_bytes(n, allocated, seed=seed) if allocated else None,
        static=static,
        zone_risk=(
            zone_risk(n, v or min(formula, max_vnodes), replicas=replicas, zones=zones, seed=seed)
            if zones is not None
            else None
        ),
    )
