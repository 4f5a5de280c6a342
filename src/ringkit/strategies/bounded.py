"""BoundedLoad: consistent hashing with bounded loads, over a hash ring.

A ring balances *keys*, not *load*: a hot key or an unlucky arc can pile work on one node. With
bounded loads every node has a cap, ``ceil(balance_factor × average load)`` (scaled by its fair
share when weights differ), and an assignment that would go to a node at its cap walks on
clockwise to the next node below its cap. No node ever exceeds the cap, and since the caps add
up to more than the load, the walk always finds room. Keys move only when load forces them.

``acquire(key)`` assigns and counts one unit of load (a request, a connection, a session) and
``release(node)`` gives it back. ``node_for`` is a pure lookup: it answers where ``acquire``
would go now and changes nothing. The load table is the one mutable part, guarded by a lock and
shared by the placements ``add`` / ``remove`` derive, so load still held on a removed node is
counted until it is released. With absolute ``capacities`` every node can be full; then
``acquire`` raises :class:`CapacityError` saying how to fix it, never overloading or hanging.

Reference: Vahab Mirrokni, Mikkel Thorup, Morteza Zadimoghaddam, "Consistent Hashing with
Bounded Loads", SODA 2018 (arXiv:1608.01350); as HAProxy's ``hash-balance-factor`` and Envoy's
``hash_balance_factor`` (the ``(m + 1)`` in the cap is theirs: the load including this one).

>>> from ringkit.ring import DEFAULT_VNODES, HashRing
>>> bounded = BoundedLoad(HashRing(["A", "B", "C"]), balance_factor=1.25)
>>> nodes = [bounded.acquire("hot-key") for _ in range(6)]
>>> sorted(bounded.loads().values()), bounded.capacity(nodes[0])
([0, 3, 3], 3)
>>> len(set(nodes)), bounded.node_for("hot-key") == bounded.node_for("hot-key")
(2, True)
>>> bounded.release(nodes[0])
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Mapping
from fractions import Fraction

import numpy as np

from ringkit.errors import CapacityError, ConfigError, UnknownNodeError
from ringkit.hashing import DEFAULT_HASH, HasherLike, Key, check_key_batch
from ringkit.nodes import Node, NodesLike
from ringkit.placement import check_n, check_not_empty
from ringkit.ring import DEFAULT_VNODES, HashRing
from ringkit.strategies.options import Strategy
from ringkit.strategies.wrapped import RingBacked

__all__ = ["DEFAULT_BALANCE_FACTOR", "BoundedLoad"]

DEFAULT_BALANCE_FACTOR = 1.25


class _LoadTable:
    """Load held per node name, and its total; every write holds ``lock``.

    A node holding no load has no entry (``release`` deletes it at zero), which lets
    ``BoundedLoad.node_for`` answer for such a node without the lock.
    """

    __slots__ = ("loads", "lock", "total")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.loads: dict[str, int] = {}
        self.total = 0


def _check_balance_factor(balance_factor: object) -> float:
    if isinstance(balance_factor, bool) or not isinstance(balance_factor, (int, float)):
        raise TypeError(f"balance_factor must be a number, got {type(balance_factor).__name__}")
    if not math.isfinite(balance_factor) or balance_factor <= 1:
        raise ConfigError(f"balance_factor must be finite and > 1, got {balance_factor!r}")
    return float(balance_factor)


def _check_capacity(name: str, capacity: object) -> int:
    if isinstance(capacity, bool) or not isinstance(capacity, int):
        raise ConfigError(f"capacity of node {name!r} must be int, got {type(capacity).__name__}")
    if capacity < 1:
        raise ConfigError(f"capacity of node {name!r} must be >= 1, got {capacity!r}")
    return capacity


class BoundedLoad(RingBacked):
    """A hash ring whose assignments respect per-node caps; membership is immutable.

    The cap of node ``i`` for the next assignment is ``ceil(balance_factor × (m + 1) ×
    fair_i)``, with ``m`` the load currently held (on any node, removed ones included) and
    ``fair_i`` its weight over the total; with ``capacities``, also at most ``capacities[i]``.
    Caps are computed in exact rational arithmetic, so a cap never rounds up by accident.

    Looking up (pure): ``node_for``, ``nodes_for``, ``node_for_many``.
    Assigning load: ``acquire``, ``release``, ``assign_many``, ``loads``, ``capacity``.
    Changing membership (new placements sharing the load table): ``add``, ``remove``,
    ``discard``, ``reweight``.
    Measuring: ``ring``, ``nodes``, ``shares`` (the ring's exact home shares), ``len``, ``in``,
    ``iter``, ``==``.
    """

    __slots__ = ("_balance_factor", "_capacities", "_fair", "_loads")

    def __init__(
        self,
        ring: HashRing,
        *,
        balance_factor: float = DEFAULT_BALANCE_FACTOR,
        capacities: Mapping[str, int] | None = None,
    ) -> None:
        if not isinstance(ring, HashRing):
            raise TypeError(f"ring must be a HashRing, got {type(ring).__name__}")
        self._set_ring(ring)
        self._balance_factor = _check_balance_factor(balance_factor)
        self._capacities = self._check_capacities(capacities)
        # cap = ceil(factor · (m + 1) · w / W) = ceil((m + 1) · p / q): exact integers p, q per node
        factor = Fraction(self._balance_factor)
        total = sum(Fraction(node.weight) for node in ring.nodes)
        self._fair = {
            node.name: (share.numerator, share.denominator)
            for node in ring.nodes
            for share in (factor * Fraction(node.weight) / total,)
        }
        self._loads = _LoadTable()

    def _check_capacities(self, capacities: Mapping[str, int] | None) -> dict[str, int] | None:
        if capacities is None:
            return None
        checked = {name: _check_capacity(name, cap) for name, cap in capacities.items()}
        missing = [name for name in self._ring if name not in checked]
        if missing:
            raise ConfigError(f"capacities must name every node, got none for {missing[0]!r}")
        unknown = [name for name in checked if name not in self._ring]
        if unknown:
            raise ConfigError(f"capacities name a node not in the ring, got {unknown[0]!r}")
        return checked

    # -- caps and walks ------------------------------------------------------------------------

    def _cap(self, name: str, total: int) -> int:
        p, q = self._fair[name]
        cap = -(-(total + 1) * p // q)  # ceil((m + 1)·p / q) in exact integer arithmetic
        return cap if self._capacities is None else min(cap, self._capacities[name])

    def _walk(self, key: Key) -> tuple[list[str], list[str]]:
        """Return the nodes below and at their caps, in clockwise order (lock held)."""
        loads, total = self._loads.loads, self._loads.total
        below: list[str] = []
        full: list[str] = []
        for name in self._ring.iter_nodes(key):
            (below if loads.get(name, 0) < self._cap(name, total) else full).append(name)
        return below, full

    def _first_below(self, key: Key) -> str:
        """Return the first node clockwise below its cap (lock held)."""
        loads, total = self._loads.loads, self._loads.total
        # Fast path: the key's own node (the walk's first step, found by the ring's bound
        # lookup) usually has room, and then the walk is not started at all.
        owner = self._ring.node_for(key)
        if loads.get(owner, 0) < self._cap(owner, total):
            return owner
        for name in self._ring.iter_nodes(key):
            if loads.get(name, 0) < self._cap(name, total):
                return name
        raise self._capacity_error(key)

    def _capacity_error(self, key: Key) -> CapacityError:
        caps = {name: self._cap(name, self._loads.total) for name in self._ring}
        return CapacityError(
            f"cannot place key {key!r}: all {len(caps)} nodes at their cap "
            f"(caps {dict(sorted(caps.items())[:5])}, balance_factor={self._balance_factor}); "
            "raise the capacities, release load, or add nodes"
        )

    # -- looking up (pure) ----------------------------------------------------------------------

    def node_for(self, key: Key) -> str:
        """Return the node ``acquire(key)`` would choose now, without counting anything.

        Runtime: O(N·V) at worst (the walk), O(log(N·V)) when the owner has room.

        :raises EmptyRingError: when the ring has no nodes
        :raises CapacityError: when every node is at its cap (absolute capacities only)
        """
        if not self._names:
            check_not_empty(0, "node_for")
        owner = self._ring.node_for(key)
        # NOTE: read without the lock on purpose: a node holding no load is below every cap (a
        # cap is >= 1), so the answer is the owner whatever the other loads are, and one dict
        # read is atomic. Only an owner holding load needs the consistent snapshot. This keeps
        # a lookup at about one ring lookup (benchmarks/bench_strategies.py).
        if owner not in self._loads.loads:
            return owner
        with self._loads.lock:
            return self._first_below(key)

    def nodes_for(self, key: Key, n: int) -> list[str]:
        """Return up to `n` distinct nodes: those below their caps clockwise, then the full ones.

        :raises ConfigError: when `n` < 1
        :raises EmptyRingError: when the ring has no nodes
        """
        check_n(n)
        check_not_empty(len(self._ring), "nodes_for")
        with self._loads.lock:
            below, full = self._walk(key)
        return [*below, *full][:n]

    def node_for_many(self, keys: Iterable[Key]) -> list[str]:
        """Return ``node_for`` of each key against one snapshot of the loads (nothing counted).

        :raises EmptyRingError: when the ring has no nodes
        :raises CapacityError: when every node is at its cap (absolute capacities only)
        """
        check_key_batch(keys, "node_for_many")
        check_not_empty(len(self._ring), "node_for_many")
        items = keys if isinstance(keys, (list, tuple)) else list(keys)
        ring, table = self._ring, self._loads
        with table.lock:
            if not table.loads:  # no load anywhere: every owner has room
                return ring.node_for_many(items)
            # Vectorised: the owners in one batch lookup; only keys whose owner is at its cap
            # walk on (against the same snapshot of the loads).
            full = np.array(
                [table.loads.get(name, 0) >= self._cap(name, table.total) for name in ring],
                dtype=bool,
            )
            owners = ring.owner_indices(ring.points_for(items))
            result: list[str] = np.array(self._names, dtype=object)[owners].tolist()
            for i in np.flatnonzero(full[owners]).tolist():
                result[i] = self._first_below(items[i])
        return result

    # -- assigning load ------------------------------------------------------------------------

    def assign_many(self, keys: Iterable[Key]) -> list[str]:
        """Return where `keys` go when they arrive as load, in turn, on a fresh load table.

        Each key is acquired in order on a copy of this placement with no load, so the answer
        shows the caps at work (a hot key spills to the next nodes) and this placement's own
        load table is untouched.

        >>> bounded = BoundedLoad(HashRing(["A", "B", "C"]), balance_factor=1.25)
        >>> len(set(bounded.assign_many(["hot"] * 6))), bounded.loads()["A"]
        (2, 0)

        :raises EmptyRingError: when the ring has no nodes
        :raises CapacityError: when every node is at its cap (absolute capacities only)
        """
        check_key_batch(keys, "assign_many")
        fresh = BoundedLoad(
            self._ring, balance_factor=self._balance_factor, capacities=self._capacities
        )
        return [fresh.acquire(key) for key in keys]

    def acquire(self, key: Key) -> str:
        """Assign one unit of load for `key` to the first node clockwise below its cap.

        Atomic: the check and the count happen under one lock, so concurrent callers never
        push a node past its cap. Runtime: as ``node_for``.

        :raises EmptyRingError: when the ring has no nodes
        :raises CapacityError: when every node is at its cap; nothing is counted then
        """
        check_not_empty(len(self._ring), "acquire")
        table = self._loads
        with table.lock:
            name = self._first_below(key)
            table.loads[name] = table.loads.get(name, 0) + 1
            table.total += 1
        return name

    def release(self, name: str) -> None:
        """Give back one unit of load held by node `name` (also after it was removed).

        :raises UnknownNodeError: when `name` holds no load (each release matches an acquire)
        """
        table = self._loads
        with table.lock:
            held = table.loads.get(name, 0)
            if held == 0:
                raise UnknownNodeError(
                    f"node {name!r} holds no load to release; each release() must match an "
                    "acquire()"
                )
            if held == 1:
                del table.loads[name]
            else:
                table.loads[name] = held - 1
            table.total -= 1

    def loads(self) -> dict[str, int]:
        """Return the load each node holds: every ring node, plus removed nodes still holding."""
        with self._loads.lock:
            held = dict(self._loads.loads)
        return {**dict.fromkeys(self._ring, 0), **held}

    def capacity(self, name: str) -> int:
        """Return node `name`'s cap for the next assignment.

        :raises UnknownNodeError: when `name` is not in the ring
        """
        if name not in self._ring:
            raise UnknownNodeError(f"node {name!r} is not in the ring")
        with self._loads.lock:
            return self._cap(name, self._loads.total)

    # -- changing membership -------------------------------------------------------------------

    def _with(self, ring: HashRing, capacities: dict[str, int] | None) -> BoundedLoad:
        derived = BoundedLoad(ring, balance_factor=self._balance_factor, capacities=capacities)
        derived._loads = self._loads  # the load is on real servers: it carries over
        return derived

    def _with_ring(self, ring: HashRing) -> BoundedLoad:
        capacities = None
        if self._capacities is not None:
            capacities = {name: cap for name, cap in self._capacities.items() if name in ring}
        return self._with(ring, capacities)

    def add(self, node: str | Node, *, capacity: int | None = None) -> BoundedLoad:
        """Return a placement with `node` added to the ring, sharing this load table.

        :raises DuplicateNodeError: when a node of that name is already there
        :raises ConfigError: when absolute capacities are in use and `capacity` is missing, or
            `capacity` is given without them
        """
        new = self._check_new(node)
        if (self._capacities is None) != (capacity is None):
            raise ConfigError(
                f"capacity of node {new.name!r} must be given exactly when the placement has "
                f"capacities, got capacity={capacity!r}"
            )
        capacities = None
        if self._capacities is not None and capacity is not None:
            capacities = {**self._capacities, new.name: capacity}
        return self._with(self._ring.add(new), capacities)

    # -- measuring -----------------------------------------------------------------------------

    @property
    def balance_factor(self) -> float:
        """The factor over the average load that caps a node."""
        return self._balance_factor

    def _identity(self) -> tuple[object, ...]:
        return (self._ring, self._balance_factor, self._capacities)

    def __repr__(self) -> str:
        # As it is built: from a ring, not from nodes (the base's form).
        capacities = "" if self._capacities is None else f", capacities={self._capacities!r}"
        return f"BoundedLoad({self._ring!r}, balance_factor={self._balance_factor}{capacities})"


def _build(nodes: NodesLike, vnodes: int, hasher: HasherLike, balance_factor: float) -> BoundedLoad:
    return BoundedLoad(HashRing(nodes, vnodes=vnodes, hasher=hasher), balance_factor=balance_factor)


# The registry's entry (ringkit.strategies.registry): the options build_placement passes.
STRATEGY = Strategy(
    "bounded",
    _build,
    {"vnodes": DEFAULT_VNODES, "hasher": DEFAULT_HASH, "balance_factor": DEFAULT_BALANCE_FACTOR},
)
