"""Zones and replica sets: what a zone failure or a stale view costs when keys have R replicas.

A key stored with R replicas lives on its preference list, the first R distinct nodes clockwise
(DeCandia et al. 2007, Dynamo). Nodes sit in zones (failure domains: racks, availability zones);
a zone-aware list takes one node per zone before any zone repeats (Cassandra's
NetworkTopologyStrategy; ``ringkit.ring.preference``), a zone-blind one takes the next R nodes
whatever their zone. With one token per node the R replicas are R adjacent machines, and "a
correlated failure that takes out a rack takes out replicas together": this module counts, key
by key, what such a failure leaves.

- :func:`spread_zones` puts nodes in zones ``z0`` … ``z{Z-1}`` round-robin, in the order given;
- :func:`zoned_nodes` gives nodes those zones, or none (a zone-blind placement);
- :func:`fail_zone` / :func:`fail_nodes` (:func:`fail_each_zone`: every zone in one pass) fail
  nodes at once and return a :class:`FailureReport`:
  keys that lost every replica, keys below a quorum (``R // 2 + 1`` replicas alive; lost keys
  included), and the keys, bytes and requests each survivor serves after failover (a key goes to
  the first surviving node of its preference list);
- :func:`stale_replicas` compares the replica sets a stale view computes with the current ones.

Every figure is an exact count over the population's keys, streamed in chunks, not an estimate.

>>> from ringkit.ring import HashRing
>>> from ringkit.sim.population import Population
>>> zone_of = spread_zones([f"n{i}" for i in range(6)], 3)
>>> zone_of["n0"], zone_of["n4"]
('z0', 'z1')
>>> ring = HashRing(zoned_nodes([f"n{i}" for i in range(6)], zone_of), vnodes=1)
>>> report = fail_zone(ring, zone_of, "z0", Population(count=1000), replicas=3)
>>> report.failed, report.keys_lost
(('n0', 'n3'), 0)
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ringkit.errors import ConfigError
from ringkit.nodes import Node, coerce_node
from ringkit.placement import Placement, unknown_node
from ringkit.ring import HashRing
from ringkit.ring.preference import walk_distinct
from ringkit.ring.tokens import SPACE_64
from ringkit.sim.measure import owner_indices
from ringkit.sim.population import CHUNK_KEYS, Chunk, HashCache, Population
from ringkit.stats import METRICS

__all__ = [
    "FailureReport",
    "fail_each_zone",
    "fail_nodes",
    "fail_zone",
    "quorum",
    "replica_owners",
    "spread_zones",
    "stale_replicas",
    "zone_names",
    "zoned_nodes",
]

IndexArray = npt.NDArray[np.int64]


def zone_names(zones: int) -> tuple[str, ...]:
    """Return the names of `zones` zones: ``z0`` … ``z{zones-1}``.

    >>> zone_names(3)
    ('z0', 'z1', 'z2')

    :raises ConfigError: when `zones` is not an int >= 1
    """
    if isinstance(zones, bool) or not isinstance(zones, int) or zones < 1:
        raise ConfigError(f"zones must be an integer >= 1, got {zones!r}")
    return tuple(f"z{i}" for i in range(zones))


def spread_zones(names: Iterable[str], zones: int) -> dict[str, str]:
    """Return each node's zone: the i-th distinct name goes to zone ``z{i mod zones}``.

    Round-robin in the order given, so 12 nodes in 3 zones are 4 per zone, and a node added
    later joins the zone its position gives (pass the names in the order they joined).

    >>> spread_zones(["a", "b", "c", "d"], 3)
    {'a': 'z0', 'b': 'z1', 'c': 'z2', 'd': 'z0'}

    :raises ConfigError: when `zones` is not an int >= 1
    """
    labels = zone_names(zones)
    return {name: labels[i % zones] for i, name in enumerate(dict.fromkeys(names))}


def zoned_nodes(
    nodes: Iterable[str | Node], zone_of: Mapping[str, str], *, zone_aware: bool = True
) -> tuple[Node, ...]:
    """Return `nodes` in their zones (`zone_aware`), or with no zone at all.

    A placement built from zone-blind nodes walks the ring ignoring zones (R distinct nodes
    clockwise); the zones still say which nodes fail together (``fail_zone``'s `zone_of`).

    >>> [n.zone for n in zoned_nodes(["a", "b"], {"a": "z0", "b": "z1"})]
    ['z0', 'z1']

    :raises ConfigError: when a node has no zone in `zone_of`
    """
    result = []
    for node in map(coerce_node, nodes):
        if node.name not in zone_of:
            raise ConfigError(f"node {node.name!r} has no zone in the zone map")
        zone = zone_of[node.name] if zone_aware else None
        result.append(Node(node.name, weight=node.weight, zone=zone, address=node.address))
    return tuple(result)


def quorum(replicas: int) -> int:
    """Return the majority of `replicas`: ``replicas // 2 + 1`` (2 of 3, 3 of 5)."""
    return replicas // 2 + 1


# -- replica sets --------------------------------------------------------------------------------


def _check_replicas(replicas: object) -> int:
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
        raise ConfigError(f"replicas must be an integer >= 1, got {replicas!r}")
    return replicas


class _TokenLists:
    """Each token's preference list (`width` nodes, as universe indices), one row per token.

    A key's list depends only on the token it lands on, so a batch of keys is one search and one
    fancy-index. A row is walked the first time a key lands on its token: a ring of 64 nodes x
    1,024 vnodes has 65,536 tokens, more than a sample of 20,000 keys touches.
    """

    def __init__(self, ring: HashRing, width: int, universe: Mapping[str, int]) -> None:
        nodes = ring.nodes
        self._lut = [universe[node.name] for node in nodes]
        domains: dict[str, int] = {}
        self._zone_ids = [
            domains.setdefault(f"zone:{n.zone}" if n.zone is not None else f"node:{n.name}", i)
            for i, n in enumerate(nodes)
        ]
        self._owners = ring.token_owners.tolist()
        self._width = width
        self._table = np.full((len(self._owners), width), -1, dtype=np.int64)

    def rows(self, index: IndexArray) -> IndexArray:
        """Return the preference lists of the tokens at `index`, walking the ones not yet known."""
        table = self._table
        for start in np.unique(index[table[index, 0] < 0]).tolist():
            walk = walk_distinct(self._owners, start, self._zone_ids)
            table[start] = [self._lut[next(walk)] for _ in range(self._width)]
        return table[index]


def _ring_rows(ring: HashRing, chunk: Chunk, lists: _TokenLists) -> IndexArray:
    hashes = chunk.hashes(ring.hasher)
    if ring.space == SPACE_64:
        points = hashes << np.uint64(64 - ring.hasher.bits)
    else:
        points = hashes % np.uint64(ring.space)
    # The first token >= the point, wrapping past the last (the ring's own rule).
    index = np.searchsorted(ring.tokens, points, side="left") % len(ring.tokens)
    return lists.rows(index)


def replica_owners(
    placement: Placement, chunk: Chunk, universe: Mapping[str, int], replicas: int
) -> IndexArray:
    """Return each key's preference list in `chunk`: one row of universe indices per key.

    The row has ``min(replicas, len(placement))`` columns, in ``nodes_for`` order. A
    :class:`~ringkit.ring.HashRing` answers from one preference list per token; any other
    placement is asked key by key.

    :raises ConfigError: when `replicas` is not an int >= 1
    """
    _check_replicas(replicas)
    return _rows(placement, chunk, universe, replicas, _table_for(placement, universe, replicas))


def _rows(
    placement: Placement,
    chunk: Chunk,
    universe: Mapping[str, int],
    replicas: int,
    table: _TokenLists | None,
) -> IndexArray:
    """``replica_owners`` with the ring's per-token lists built once per pass (`table`)."""
    width = min(replicas, len(placement))
    if width == 1:
        return owner_indices(placement, chunk, dict(universe))[:, None]
    if table is not None and isinstance(placement, HashRing):
        return _ring_rows(placement, chunk, table)
    rows = [[universe[n] for n in placement.nodes_for(key, width)] for key in chunk.key_bytes]
    return np.array(rows, dtype=np.int64).reshape(len(chunk), width)


def _table_for(
    placement: Placement, universe: Mapping[str, int], replicas: int
) -> _TokenLists | None:
    """Return the per-token preference lists when `placement` has them (a ring), else None."""
    width = min(replicas, len(placement))
    if width > 1 and type(placement) is HashRing:
        return _TokenLists(placement, width, universe)
    return None


# -- failures ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FailureReport:
    """What failing `failed` at once costs keys of R = `replicas` copies (exact counts).

    ``keys_lost``: keys whose every replica failed. ``keys_below_quorum``: keys with fewer than
    ``quorum(replicas)`` replicas alive, *including* the lost ones. ``lost``: the fraction of
    keys, bytes and requests lost. ``loads``: per surviving node, the keys, bytes and requests
    it serves after failover (each surviving key goes to the first live node of its preference
    list; lost keys go nowhere).
    """

    failed: tuple[str, ...]
    replicas: int
    keys: int
    keys_lost: int
    keys_below_quorum: int
    lost: dict[str, float]
    loads: dict[str, dict[str, float]]

    def to_dict(self) -> dict[str, object]:
        """Return the report as plain JSON-ready values."""
        return {
            "failed": list(self.failed),
            "replicas": self.replicas,
            "keys": self.keys,
            "keys_lost": self.keys_lost,
            "keys_below_quorum": self.keys_below_quorum,
            "lost": dict(self.lost),
            "loads": {metric: dict(loads) for metric, loads in self.loads.items()},
        }


class _Tally:
    """Sums, chunk by chunk, what keys lose when the nodes not `alive` fail (``fail_nodes``)."""

    def __init__(self, names: tuple[str, ...], alive: npt.NDArray[np.bool_], replicas: int):
        self.names, self.alive, self.replicas = names, alive, replicas
        self.keys_lost = self.below = 0
        self.lost = dict.fromkeys(METRICS, 0.0)
        self.loads = {metric: np.zeros(len(names)) for metric in METRICS}

    def add(self, rows: IndexArray, chunk: Chunk) -> None:
        live = self.alive[rows]
        count = live.sum(axis=1)
        gone = count == 0
        self.keys_lost += int(np.count_nonzero(gone))
        self.below += int(np.count_nonzero(count < quorum(self.replicas)))
        weights = {"keys": np.ones(len(chunk)), "bytes": chunk.sizes, "requests": chunk.requests}
        # Failover: the first live column of each row (argmax finds the first True).
        server = rows[np.arange(len(chunk)), live.argmax(axis=1)][~gone]
        for metric in METRICS:
            self.lost[metric] += float(weights[metric][gone].sum())
            self.loads[metric] += np.bincount(
                server, weights=weights[metric][~gone], minlength=len(self.names)
            )

    def report(self, keys: int, total_bytes: float) -> FailureReport:
        lost = dict(self.lost)
        lost["keys"] /= keys
        lost["bytes"] = lost["bytes"] / total_bytes if total_bytes else 0.0
        alive = self.alive.tolist()
        return FailureReport(
            failed=tuple(name for name, up in zip(self.names, alive, strict=True) if not up),
            replicas=self.replicas,
            keys=keys,
            keys_lost=self.keys_lost,
            keys_below_quorum=self.below,
            lost=lost,
            loads={
                metric: {
                    name: float(load)
                    for name, load, up in zip(self.names, loads.tolist(), alive, strict=True)
                    if up
                }
                for metric, loads in self.loads.items()
            },
        )


def _fail_sets(
    placement: Placement,
    failures: Mapping[str, Collection[str]],
    population: Population,
    replicas: int,
    cache: HashCache | None,
) -> dict[str, FailureReport]:
    """Tally each named set of failed nodes over one pass of the population."""
    _check_replicas(replicas)
    names = tuple(placement)
    universe = {name: i for i, name in enumerate(names)}
    tallies = {}
    for label, failed in failures.items():
        alive = np.ones(len(names), dtype=bool)
        for name in failed:
            if name not in universe:
                raise unknown_node(name, names, "placement")
            alive[universe[name]] = False
        tallies[label] = _Tally(names, alive, replicas)
    table = _table_for(placement, universe, replicas)
    total_bytes = 0.0
    for chunk in population.chunks(CHUNK_KEYS, cache=cache):
        rows = _rows(placement, chunk, universe, replicas, table)
        for tally in tallies.values():
            tally.add(rows, chunk)
        total_bytes += float(chunk.sizes.sum())
    return {label: t.report(population.count, total_bytes) for label, t in tallies.items()}


def fail_nodes(
    placement: Placement,
    failed: Collection[str],
    population: Population,
    *,
    replicas: int,
    cache: HashCache | None = None,
) -> FailureReport:
    """Fail the nodes `failed` of `placement` at once; count what keys of R replicas lose.

    Replica sets are `placement`'s (the view before the failure). With fewer nodes than
    `replicas`, every key has all the nodes as replicas. Runtime: O(keys × R), streamed.

    :raises ConfigError: when `replicas` is not an int >= 1
    :raises UnknownNodeError: when a failed node is not in `placement`
    """
    return _fail_sets(placement, {"": failed}, population, replicas, cache)[""]


def fail_each_zone(
    placement: Placement,
    zone_of: Mapping[str, str],
    population: Population,
    *,
    replicas: int,
    cache: HashCache | None = None,
) -> dict[str, FailureReport]:
    """Return ``fail_zone``'s report for every zone of `zone_of`, from one pass over the keys.

    :raises ConfigError: when `replicas` is not an int >= 1
    """
    zones = sorted(set(zone_of.values()))
    failures = {zone: [n for n in placement if zone_of.get(n) == zone] for zone in zones}
    return _fail_sets(placement, failures, population, replicas, cache)


def fail_zone(
    placement: Placement,
    zone_of: Mapping[str, str],
    zone: str,
    population: Population,
    *,
    replicas: int,
    cache: HashCache | None = None,
) -> FailureReport:
    """Fail every node of `zone` at once (``fail_nodes`` over the zone's nodes).

    `zone_of` maps node names to zones (``spread_zones``); `placement` may be zone-aware or
    zone-blind (``zoned_nodes``), which is what decides the replica sets.

    :raises ConfigError: when `zone` is not a zone of `zone_of`, or `replicas` < 1
    """
    zones = sorted(set(zone_of.values()))
    if zone not in zones:
        raise ConfigError(f"zone must be one of {', '.join(zones)}, got {zone!r}")
    failed = [name for name in placement if zone_of.get(name) == zone]
    return fail_nodes(placement, failed, population, replicas=replicas, cache=cache)


def stale_replicas(
    current: Placement,
    view: Placement,
    population: Population,
    *,
    replicas: int,
    cache: HashCache | None = None,
) -> dict[str, float]:
    """Compare a stale `view`'s replica sets with `current`'s, as fractions of keys.

    ``replica_set_differs``: the sets are not the same. ``all_replicas_wrong``: the whole set
    differs (no node in common), so the stale client finds nothing and the key looks lost until
    the views converge (Dynamo's hinted handoff exists for this). ``some_replica_right``: at
    least one node in common (a read of every replica still finds the key).

    :raises ConfigError: when `replicas` is not an int >= 1
    """
    _check_replicas(replicas)
    names = dict.fromkeys([*current, *view])
    universe = {name: i for i, name in enumerate(names)}
    now_table = _table_for(current, universe, replicas)
    old_table = _table_for(view, universe, replicas)
    differs = wrong = 0
    for chunk in population.chunks(CHUNK_KEYS, cache=cache):
        now = _rows(current, chunk, universe, replicas, now_table)
        old = _rows(view, chunk, universe, replicas, old_table)
        common = (old[:, :, None] == now[:, None, :]).any(axis=2)
        wrong += int(np.count_nonzero(~common.any(axis=1)))
        if now.shape == old.shape:
            differs += int(np.count_nonzero((np.sort(now) != np.sort(old)).any(axis=1)))
        else:
            differs += len(chunk)
    count = population.count
    return {
        "replica_set_differs": differs / count,
        "all_replicas_wrong": wrong / count,
        "some_replica_right": (count - wrong) / count,
    }
