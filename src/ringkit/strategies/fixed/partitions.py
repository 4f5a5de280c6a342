"""FixedPartitions: a token space fixed at creation, assigned to nodes by a controller.

The keyspace is cut once into Q equal partitions (Dynamo's strategy 3, DeCandia et al. 2007,
section 6.2; Riak's ring of 2^n partitions; Redis Cluster's 16384 slots). A key's partition never
changes: ``partition = floor(point · Q / 2^64)`` of its 64-bit point. What changes is the
*assignment table*, partition → replica list (primary first), which a controller computes (in
:mod:`ringkit.strategies.fixed.controller`: by weight, zone-aware, moving the fewest partitions on
a membership change, and which every client must learn, so it carries an *epoch* and serialises
(``to_dict`` / ``from_dict``): membership change becomes an assignment problem rather than a
hashing problem.

>>> table = FixedPartitions(["a", "b", "c"], partitions=12)
>>> table.partition_owners()[:4]
(('c',), ('a',), ('b',), ('c',))
>>> bigger = table.add("d")
>>> bigger.epoch, bigger.plan.moved, bigger.plan.minimum
(1, 3, 3)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from ringkit.errors import ConfigError
from ringkit.hashing import (
    DEFAULT_HASH,
    Hasher,
    HasherLike,
    Key,
    encode_key,
    get_hasher,
    registered_name,
)
from ringkit.nodes import Node, NodesLike, coerce_nodes
from ringkit.placement import (
    MAX_TOKENS,
    IndexArray,
    PlacementBase,
    Segmentation,
    check_n,
    check_not_empty,
)
from ringkit.strategies.fixed.controller import RebalancePlan, check_objective, zone_key, zone_limit
from ringkit.strategies.fixed.planner import reassign
from ringkit.strategies.options import Strategy

__all__ = ["DEFAULT_PARTITIONS", "FixedPartitions"]

DEFAULT_PARTITIONS = 1024
_MAX_PARTITIONS = MAX_TOKENS  # a table of more partitions is refused like a ring
_FORMAT_VERSION = 1
_SPACE = 1 << 64


def _check_int(name: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be an int, got {type(value).__name__}")
    if not low <= value <= high:
        raise ConfigError(f"{name} must be in [{low}, {high}], got {value!r}")
    return value


def partition_of_points(points: np.ndarray[Any, Any], partitions: int) -> np.ndarray[Any, Any]:
    """Return ``floor(point · Q / 2^64)`` for uint64 points, exactly, without 128-bit numbers.

    >>> partition_of_points(np.array([0, 2**63, 2**64 - 1], dtype=np.uint64), 3).tolist()
    [0, 1, 2]
    """
    q = np.uint64(partitions)
    high = points >> np.uint64(32)
    low = points & np.uint64(0xFFFFFFFF)
    # floor((hi·2^32 + lo)·Q / 2^64) = floor((hi·Q + floor(lo·Q / 2^32)) / 2^32); no overflow
    # while Q <= 2^24.
    return (high * q + ((low * q) >> np.uint64(32))) >> np.uint64(32)


class FixedPartitions(PlacementBase):
    """Q fixed partitions, each with a replica list of distinct nodes; an immutable value.

    Invariants (``_check``): every row has ``min(replicas, N)`` distinct member nodes, no zone
    holds more than the zone rule's limit of one row, each node holds exactly its quota.

    Looking up: ``node_for``, ``nodes_for``, ``node_for_many``, ``owner_indices_for_hashes``,
    ``partition_for``.
    The table: ``partition_count``, ``replicas``, ``partition_owners``, ``quotas``, ``epoch``,
    ``plan`` (how this table was reached from the previous one).
    Changing membership (new tables, epoch + 1): ``add``, ``remove``, ``discard``, ``reweight``.
    Measuring: ``nodes``, ``hasher``, ``shares``, ``segmentation`` (the partitions), ``len``,
    ``in``, ``iter``, ``==``. Serialising: ``to_dict``, ``from_dict``.
    """

    __slots__ = (
        "_epoch",
        "_hasher",
        "_names",
        "_nodes",
        "_objective",
        "_owners",
        "_partitions",
        "_plan",
        "_primary",
        "_replicas",
    )
    routes_by_hash = True  # a key's partition, and so its primary, is a function of its hash
    _hasher: Hasher

    def __init__(
        self,
        nodes: NodesLike = (),
        *,
        partitions: int = DEFAULT_PARTITIONS,
        replicas: int = 1,
        hasher: HasherLike = DEFAULT_HASH,
        objective: str = "fewest_sources",
    ) -> None:
        self._partitions = _check_int("partitions", partitions, 1, _MAX_PARTITIONS)
        self._replicas = _check_int("replicas", replicas, 1, 64)
        self._hasher = get_hasher(hasher)
        self._objective = check_objective(objective)
        members = coerce_nodes(nodes)
        empty = ((),) * self._partitions
        owners, _ = reassign(empty, members, self._replicas, self._objective, epoch=0)
        self._install(members, owners, epoch=0, plan=None)

    def _install(
        self,
        nodes: tuple[Node, ...],
        owners: tuple[tuple[str, ...], ...],
        *,
        epoch: int,
        plan: RebalancePlan | None,
    ) -> None:
        self._nodes = tuple(sorted(nodes, key=lambda node: node.name))
        self._names = tuple(node.name for node in self._nodes)
        self._owners = owners
        self._epoch = epoch
        self._plan = plan
        index = {name: i for i, name in enumerate(self._names)}
        primary = np.array([index[row[0]] if row else 0 for row in owners], dtype=np.uint32)
        primary.flags.writeable = False
        self._primary = primary

    def _changed(self, members: tuple[Node, ...]) -> FixedPartitions:
        owners, plan = reassign(
            self._owners, members, self._replicas, self._objective, epoch=self._epoch + 1
        )
        result = FixedPartitions.__new__(FixedPartitions)
        result._partitions, result._replicas = self._partitions, self._replicas
        result._hasher, result._objective = self._hasher, self._objective
        result._install(members, owners, epoch=self._epoch + 1, plan=plan)
        return result

    # -- looking up --------------------------------------------------------------------------

    @property
    def partition_count(self) -> int:
        """Q, the number of partitions, fixed at creation."""
        return self._partitions

    @property
    def replicas(self) -> int:
        """R, the replica count asked for (rows hold ``min(R, N)`` nodes)."""
        return self._replicas

    def partition_for(self, key: Key) -> int:
        """Return the partition of `key`: ``floor(point · Q / 2^64)``. Runtime: O(1).

        >>> FixedPartitions(["a"], partitions=16).partition_for("k") in range(16)
        True

        :raises TypeError: when `key` is not str, bytes or int
        """
        point = self._hasher.point(encode_key(key))
        return (point * self._partitions) >> 64

    def partition_owners(self) -> tuple[tuple[str, ...], ...]:
        """Return, for each partition, its replica list (primary first)."""
        return self._owners

    def node_for(self, key: Key) -> str:
        """Return the primary of the key's partition. Runtime: O(1).

        :raises EmptyRingError: when there are no nodes
        """
        check_not_empty(len(self._names), "node_for")
        return self._owners[self.partition_for(key)][0]

    def nodes_for(self, key: Key, n: int) -> list[str]:
        """Return the key's replica list, then (for `n` > R) the owners of the following
        partitions in order, distinct, up to `n` nodes. Runtime: O(R) for n <= R.

        :raises ConfigError: when `n` < 1
        :raises EmptyRingError: when there are no nodes
        """
        check_n(n)
        check_not_empty(len(self._names), "nodes_for")
        start = self.partition_for(key)
        result: list[str] = []
        for step in range(self._partitions):
            for name in self._owners[(start + step) % self._partitions]:
                if name not in result:
                    result.append(name)
            if len(result) >= min(n, len(self._names)):
                break
        return result[:n]

    def owner_indices_for_hashes(self, hashes: np.ndarray[Any, Any]) -> IndexArray:
        """Return the primary of each native key hash's partition, as an index into ``nodes``.

        :raises EmptyRingError: when there are no nodes
        """
        check_not_empty(len(self._names), "owner_indices_for_hashes")
        points = hashes << np.uint64(64 - self._hasher.bits)
        result: IndexArray = self._primary[partition_of_points(points, self._partitions)]
        return result

    def segmentation(self, replicas: int) -> Segmentation:
        """Return the partitions as exact units, each with its replica list."""
        return Segmentation(
            "partitions",
            self._partitions,
            self._hasher,
            rows=self.partition_owners,
            unit_for=self.partition_for,
        )

    # -- changing membership -----------------------------------------------------------------

    def _rebuilt(self, nodes: tuple[Node, ...]) -> FixedPartitions:
        """Return the next table over `nodes`: the controller moves the fewest replicas.

        A newcomer takes exactly its quota from the nodes above theirs; a departed node's
        replicas go to nodes below quota. Runtime: O(M · N log N) for M moved replicas.
        """
        return self._changed(nodes)

    # -- measuring ---------------------------------------------------------------------------

    @property
    def epoch(self) -> int:
        """The table's version: 0 at creation, + 1 for every membership change."""
        return self._epoch

    @property
    def plan(self) -> RebalancePlan | None:
        """How this table was reached from the previous epoch (``None`` at epoch 0)."""
        return self._plan

    @property
    def objective(self) -> str:
        """How sources are chosen for moves: ``"fewest_sources"`` or ``"spread"``."""
        return self._objective

    def quotas(self) -> dict[str, int]:
        """Return each node's number of partition replicas (what the controller aimed for)."""
        counts = _counts(self._owners)
        return {name: counts.get(name, 0) for name in self._names}

    def shares(self) -> dict[str, float]:
        """Return each node's exact fraction of the keyspace as primary.

        Partition p covers the points ``[ceil(p·2^64/Q), ceil((p+1)·2^64/Q))``, so the sizes
        differ by at most one point; the shares are summed from the exact sizes.
        """
        owned = dict.fromkeys(self._names, 0)
        q = self._partitions
        for p, row in enumerate(self._owners):
            owned[row[0]] += -((-(p + 1) * _SPACE) // q) + ((-p * _SPACE) // q)
        return {name: points / _SPACE for name, points in owned.items()}

    def _identity(self) -> tuple[object, ...]:
        return (self._nodes, self._owners, self._epoch, self._hasher, self._replicas)

    def _repr_options(self) -> str:
        return f", partitions={self._partitions}, replicas={self._replicas}, epoch={self._epoch}"

    # -- serialising -------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready table from which ``from_dict`` rebuilds an equal placement.

        :raises ConfigError: when the placement uses an unregistered hasher
        """
        hasher = registered_name(self._hasher, "a FixedPartitions table")
        index = {name: i for i, name in enumerate(self._names)}
        return {
            "kind": "FixedPartitions",
            "version": _FORMAT_VERSION,
            "epoch": self._epoch,
            "hasher": hasher,
            "partitions": self._partitions,
            "replicas": self._replicas,
            "objective": self._objective,
            "nodes": [{"name": n.name, "weight": n.weight, "zone": n.zone} for n in self._nodes],
            "owners": [[index[name] for name in row] for row in self._owners],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FixedPartitions:
        """Return the placement described by `data` (the output of ``to_dict``).

        :raises ConfigError: when `data` is not a table ringkit understands, or breaks the
            table's invariants
        """
        if data.get("kind") != "FixedPartitions" or data.get("version") != _FORMAT_VERSION:
            raise ConfigError(
                f"expected a FixedPartitions table of version {_FORMAT_VERSION}, "
                f"got kind={data.get('kind')!r} version={data.get('version')!r}"
            )
        result = cls.__new__(cls)
        try:
            result._partitions = _check_int("partitions", data["partitions"], 1, _MAX_PARTITIONS)
            result._replicas = _check_int("replicas", data["replicas"], 1, 64)
            result._hasher = get_hasher(data["hasher"])
            result._objective = check_objective(data["objective"])
            members = coerce_nodes(
                Node(e["name"], weight=e["weight"], zone=e.get("zone")) for e in data["nodes"]
            )
            names = [node.name for node in members]
            owners = tuple(tuple(names[i] for i in row) for row in data["owners"])
            epoch = _check_int("epoch", data["epoch"], 0, 2**63)
        except (KeyError, TypeError, IndexError) as error:
            raise ConfigError(f"malformed FixedPartitions table: {error!r}") from None
        result._install(members, owners, epoch=epoch, plan=None)
        try:
            result._check()
        except AssertionError as error:
            raise ConfigError(f"inconsistent FixedPartitions table: {error}") from None
        return result

    # -- invariants --------------------------------------------------------------------------

    def _check(self) -> None:
        """Assert the table's invariants (for tests, and for tables read from outside)."""
        assert len(self._owners) == self._partitions, "wrong number of partitions"
        width = min(self._replicas, len(self._names))
        zones = {node.name: zone_key(node) for node in self._nodes}
        limit = zone_limit(list(_zone_sizes(self._nodes).values()), width) if width else 0
        for p, row in enumerate(self._owners):
            assert len(row) == width, f"partition {p} has {len(row)} replicas, expected {width}"
            assert len(set(row)) == len(row), f"partition {p} repeats a node: {row}"
            assert all(name in zones for name in row), f"partition {p} names a non-member"
            per_zone = _counts([tuple(zones[name] for name in row)])
            assert max(per_zone.values(), default=0) <= limit, f"partition {p} breaks zones"


def _counts(rows: Iterable[Iterable[str]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in rows:
        for name in row:
            counts[name] = counts.get(name, 0) + 1
    return counts


def _zone_sizes(nodes: Iterable[Node]) -> dict[str, int]:
    return _counts([[zone_key(node) for node in nodes]])


# The registry's entry (ringkit.strategies.registry): the options build_placement passes.
STRATEGY = Strategy(
    "fixed",
    FixedPartitions,
    {"partitions": DEFAULT_PARTITIONS, "replicas": 1, "hasher": DEFAULT_HASH},
)
