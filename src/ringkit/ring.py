"""HashRing: consistent hashing with virtual nodes, weights, zones and preference lists.

Keys and nodes are hashed onto one circle of 64-bit points. Each node has *vnodes*, each at a
*token*; a token owns the *arc* (previous token, token], so a key belongs to the first token >= its
point, and a point past the last token wraps to the first (Karger et al. 1997; seed 003's rule, as
libketama, libmemcached and Envoy do). Seed 000's sketch uses ``bisect.bisect`` (first token
> point); the two differ only for a point exactly on a token, and ringkit follows >=.

Vnode *i* of node *name* sits at the hash of the label ``f"{name}#{i}"``. The label is injective
(``i`` is the digits after the last ``#``, so names may contain ``#``), unlike concatenations such
as ``name + str(i)`` where "a1"+"1" meets "a"+"11" (buraksezer/consistent#17). A node of weight
``w`` gets ``max(1, floor(vnodes * w + 0.5))`` vnodes: absolute, never normalised by the total, so
reweighting one node moves keys only to or from that node.

The ring is two parallel numpy arrays, sorted tokens (uint64) and owner indices (uint16, uint32
beyond 65,535 nodes) into ``nodes``, which are kept sorted by name. Tokens that collide are
ordered by node name, so the ring does not depend on the order nodes were given or added. A ring
is immutable: ``add`` / ``remove`` / ``reweight`` return new rings, so readers in other threads
never need a lock; publish a new ring by swapping one reference.

>>> ring = HashRing.from_tokens({"A": [40], "B": [160], "C": [300]}, space=360)
>>> ring.node_for_point(75), ring.node_for_point(310), ring.node_for_point(160)
('B', 'A', 'B')
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ringkit.errors import ConfigError, DuplicateNodeError, EmptyRingError
from ringkit.hashing import (
    DEFAULT_HASH,
    HASHERS,
    Hasher,
    HasherLike,
    Key,
    encode_key,
    get_hasher,
)
from ringkit.nodes import Node, NodesLike, coerce_node, coerce_nodes
from ringkit.placement import check_n, unknown_node

__all__ = ["DEFAULT_VNODES", "SPACE_64", "Arc", "HashRing", "vnode_count", "vnode_label"]

DEFAULT_VNODES = 160
SPACE_64 = 1 << 64
_FORMAT_VERSION = 1
# The prefix table has about one entry per 4-8 tokens: a scalar lookup then bisects a handful of
# tokens instead of all of them, for at most 1 byte per vnode (benchmarks/bench_lookup.py).
_PREFIX_TOKENS_PER_BUCKET_LOG2 = 2

UInt64Array = npt.NDArray[np.uint64]
IndexArray = npt.NDArray[np.unsignedinteger[Any]]


@dataclass(frozen=True, slots=True)
class Arc:
    """The arc (start, end] of the circle owned by `node`; `length` points (wraps if start > end)."""

    start: int
    end: int
    node: str
    length: int


def vnode_label(name: str, i: int) -> bytes:
    """Return the label hashed for vnode `i` of node `name`: ``f"{name}#{i}"`` in UTF-8.

    >>> vnode_label("cache-a", 7)
    b'cache-a#7'
    """
    return f"{name}#{i}".encode()


def vnode_count(vnodes: int, weight: float) -> int:
    """Return the number of vnodes a node of `weight` gets: ``max(1, floor(vnodes*weight + 0.5))``.

    >>> vnode_count(160, 1.0), vnode_count(160, 0.5), vnode_count(1, 0.1)
    (160, 80, 1)
    """
    return max(1, math.floor(vnodes * weight + 0.5))


def _check_vnodes(vnodes: object) -> int:
    if isinstance(vnodes, bool) or not isinstance(vnodes, int):
        raise ConfigError(f"vnodes must be an int, got {type(vnodes).__name__}")
    if vnodes < 1:
        raise ConfigError(f"vnodes must be >= 1, got {vnodes!r}")
    return vnodes


def _check_space(space: object) -> int:
    if isinstance(space, bool) or not isinstance(space, int):
        raise ConfigError(f"space must be an int, got {type(space).__name__}")
    if not 1 <= space <= SPACE_64:
        raise ConfigError(f"space must be in [1, 2**64], got {space!r}")
    return space


class HashRing:
    """A consistent-hash ring of nodes with virtual nodes; an immutable value.

    Invariants (``_check``): tokens sorted ascending, equal tokens ordered by node name; every
    owner index < ``len(nodes)``; each node has exactly its vnode count (or explicit tokens).

    Looking up: ``node_for``, ``nodes_for``, ``iter_nodes``, ``node_for_many``,
    ``node_for_point``, ``owner_indices``, ``point_for``.
    Changing membership (new rings): ``add``, ``remove``, ``discard``, ``reweight``.
    Measuring: ``nodes``, ``tokens``, ``token_owners``, ``shares``, ``arcs``, ``len``, ``in``,
    ``iter``, ``==``. Serialising: ``to_dict``, ``from_dict``, ``from_tokens``.
    """

    __slots__ = (
        "_explicit",
        "_hasher",
        "_names",
        "_names_array",
        "_nodes",
        "_owners",
        "_owners_view",
        "_prefix",
        "_prefix_shift",
        "_prefix_view",
        "_space",
        "_tokens",
        "_tokens_view",
        "_vnodes",
        "_zone_ids",
    )

    def __init__(
        self,
        nodes: NodesLike = (),
        *,
        vnodes: int = DEFAULT_VNODES,
        hasher: HasherLike = DEFAULT_HASH,
    ) -> None:
        self._vnodes = _check_vnodes(vnodes)
        self._hasher = get_hasher(hasher)
        self._space = SPACE_64
        self._explicit: Mapping[str, tuple[int, ...]] = {}
        ordered = tuple(sorted(coerce_nodes(nodes), key=lambda node: node.name))
        tokens, owners = self._derive_all(ordered)
        self._install(ordered, tokens, owners)

    # -- construction ------------------------------------------------------------------------

    @classmethod
    def from_tokens(
        cls,
        tokens_by_node: Mapping[str | Node, Iterable[int]],
        *,
        space: int = SPACE_64,
        hasher: HasherLike = DEFAULT_HASH,
    ) -> HashRing:
        """Return a ring whose nodes sit at the given tokens, in the space [0, `space`).

        Keys map into the space by ``hash(key) % space`` (or the widened point when the space is
        2**64). Nodes may be names or ``Node`` values.

        >>> ring = HashRing.from_tokens(
        ...     {"A": [10, 130, 250], "B": [40, 170, 90], "C": [300, 210, 350]}, space=360
        ... )
        >>> ring.owned_points()
        {'A': 100, 'B': 120, 'C': 140}

        :raises ConfigError: for a token outside [0, space), a node with no tokens, or a token
            given twice for one node
        """
        ring = cls.__new__(cls)
        ring._vnodes = DEFAULT_VNODES
        ring._hasher = get_hasher(hasher)
        ring._space = _check_space(space)
        nodes = coerce_nodes([coerce_node(node) for node in tokens_by_node])
        explicit = {
            node.name: ring._check_tokens(node.name, tokens)
            for node, tokens in zip(nodes, tokens_by_node.values(), strict=True)
        }
        ring._explicit = explicit
        ordered = tuple(sorted(nodes, key=lambda node: node.name))
        tokens, owners = ring._derive_all(ordered)
        ring._install(ordered, tokens, owners)
        return ring

    def _check_tokens(self, name: str, tokens: Iterable[int]) -> tuple[int, ...]:
        values = tuple(tokens)
        if not values:
            raise ConfigError(f"node {name!r} must have at least one token, got none")
        for token in values:
            if isinstance(token, bool) or not isinstance(token, (int, np.integer)):
                raise ConfigError(
                    f"tokens of node {name!r} must be ints, got {type(token).__name__}"
                )
            if not 0 <= token < self._space:
                raise ConfigError(
                    f"token of node {name!r} must be in [0, {self._space}), got {token!r}"
                )
        if len(set(values)) != len(values):
            raise ConfigError(f"node {name!r} has a token twice, got {sorted(values)!r}")
        return tuple(int(token) for token in values)

    def _node_tokens(self, node: Node) -> UInt64Array:
        explicit = self._explicit.get(node.name)
        if explicit is not None:
            return np.array(explicit, dtype=np.uint64)
        count = vnode_count(self._vnodes, node.weight)
        point = self._point_function()
        name = node.name
        return np.fromiter(
            (point(f"{name}#{i}".encode()) for i in range(count)), dtype=np.uint64, count=count
        )

    def _derive_all(self, ordered: tuple[Node, ...]) -> tuple[UInt64Array, IndexArray]:
        per_node = [self._node_tokens(node) for node in ordered]
        dtype = _owner_dtype(len(ordered))
        if not per_node:
            return np.empty(0, dtype=np.uint64), np.empty(0, dtype=dtype)
        tokens = np.concatenate(per_node)
        owners = np.repeat(np.arange(len(ordered), dtype=dtype), [len(part) for part in per_node])
        # Stable sort over name-ordered input: equal tokens stay ordered by node name.
        order = np.argsort(tokens, kind="stable")
        return tokens[order], owners[order]

    def _install(self, nodes: tuple[Node, ...], tokens: UInt64Array, owners: IndexArray) -> None:
        tokens.flags.writeable = False
        owners.flags.writeable = False
        self._nodes = nodes
        self._names = tuple(node.name for node in nodes)
        self._names_array = np.array(self._names, dtype=object)
        self._tokens = tokens
        self._owners = owners
        self._tokens_view = memoryview(tokens)
        self._owners_view = memoryview(owners)
        zone_index: dict[tuple[bool, str], int] = {}
        self._zone_ids = tuple(
            zone_index.setdefault(
                (True, node.zone) if node.zone is not None else (False, node.name),
                len(zone_index),
            )
            for node in nodes
        )
        self._build_prefix()

    def _build_prefix(self) -> None:
        count = len(self._tokens)
        bits = max(0, count.bit_length() - 1 - _PREFIX_TOKENS_PER_BUCKET_LOG2)
        if self._space != SPACE_64:
            bits = 0  # the shift trick needs a power-of-two space; such rings are small
        self._prefix_shift = 64 - bits
        starts = np.arange(1 << bits, dtype=np.uint64) << np.uint64(self._prefix_shift % 64)
        prefix = np.empty((1 << bits) + 1, dtype=np.uint32 if count < 2**32 else np.uint64)
        prefix[:-1] = np.searchsorted(self._tokens, starts, side="left")
        prefix[-1] = count
        prefix.flags.writeable = False
        self._prefix = prefix
        self._prefix_view = memoryview(prefix)

    def _derived(self, nodes: Iterable[Node]) -> HashRing:
        """Return a ring with this ring's options and the given nodes (a full rebuild)."""
        ring = HashRing.__new__(HashRing)
        ring._vnodes, ring._hasher, ring._space = self._vnodes, self._hasher, self._space
        ring._explicit = self._explicit
        ordered = tuple(sorted(nodes, key=lambda node: node.name))
        tokens, owners = ring._derive_all(ordered)
        ring._install(ordered, tokens, owners)
        return ring

    # -- keys and points ---------------------------------------------------------------------

    def _point_function(self) -> Any:
        function, bits, space = self._hasher.function, self._hasher.bits, self._space
        if space == SPACE_64:
            if bits == 64:
                return function
            shift = 64 - bits
            return lambda data: function(data) << shift
        return lambda data: function(data) % space

    def point_for(self, key: Key) -> int:
        """Return the point of `key` on this ring: its hash, widened or reduced into the space.

        :raises TypeError: when `key` is not str, bytes or int
        """
        return int(self._point_function()(encode_key(key)))

    def _index_for_point(self, point: int) -> int:
        # The prefix table narrows the bisect to the tokens sharing the point's top bits.
        shift = self._prefix_shift
        if shift == 64:
            index = bisect_left(self._tokens_view, point)
        else:
            bucket = point >> shift
            prefix = self._prefix_view
            index = bisect_left(self._tokens_view, point, prefix[bucket], prefix[bucket + 1])
        # Past the last token: wrap around to the first.
        return index if index < len(self._tokens_view) else 0

    # -- looking up --------------------------------------------------------------------------

    def node_for(self, key: Key) -> str:
        """Return the node that owns `key`: the first token >= its point, wrapping.

        Runtime: O(log(N·V)), with a prefix table that makes it a few steps in practice.

        >>> HashRing(["a", "b", "c"]).node_for("booking:42") in {"a", "b", "c"}
        True

        :raises EmptyRingError: when the ring has no nodes
        :raises TypeError: when `key` is not str, bytes or int
        """
        if not self._names:
            raise EmptyRingError("node_for() on an empty ring; add a node first")
        data = key.encode() if type(key) is str else encode_key(key)
        point = (
            self._point_function()(data)
            if self._space != SPACE_64 or (self._hasher.bits != 64)
            else self._hasher.function(data)
        )
        return self._names[self._owners_view[self._index_for_point(point)]]

    def node_for_point(self, point: int) -> str:
        """Return the node owning `point` (an int in [0, space)).

        :raises EmptyRingError: when the ring has no nodes
        :raises ConfigError: when `point` is outside [0, space)
        """
        if not self._names:
            raise EmptyRingError("node_for_point() on an empty ring; add a node first")
        if isinstance(point, bool) or not isinstance(point, (int, np.integer)):
            raise TypeError(f"point must be int, got {type(point).__name__}")
        if not 0 <= point < self._space:
            raise ConfigError(f"point must be in [0, {self._space}), got {point!r}")
        return self._names[self._owners_view[self._index_for_point(int(point))]]

    def owner_indices(self, points: npt.ArrayLike) -> IndexArray:
        """Return, for each point (uint64, in [0, space)), the index of its owner in ``nodes``.

        Vectorised: one ``searchsorted`` over the tokens.

        >>> ring = HashRing.from_tokens({"A": [40], "B": [160], "C": [300]}, space=360)
        >>> ring.owner_indices([75, 310, 0]).tolist()
        [1, 0, 0]

        :raises EmptyRingError: when the ring has no nodes
        """
        if not self._names:
            raise EmptyRingError("owner_indices() on an empty ring; add a node first")
        array = np.asarray(points, dtype=np.uint64)
        index = np.searchsorted(self._tokens, array, side="left")
        index[index == len(self._tokens)] = 0
        return self._owners[index]

    def node_for_many(self, keys: Iterable[Key]) -> list[str]:
        """Return the owner of each key, in order (hashing in a loop, one vectorised search).

        :raises EmptyRingError: when the ring has no nodes
        :raises TypeError: when a key is not str, bytes or int
        """
        if not self._names:
            raise EmptyRingError("node_for_many() on an empty ring; add a node first")
        point = self._point_function()
        points = np.fromiter(
            (point(key.encode() if type(key) is str else encode_key(key)) for key in keys),
            dtype=np.uint64,
        )
        result: list[str] = self._names_array[self.owner_indices(points)].tolist()
        return result

    def iter_nodes(self, key: Key) -> Iterator[str]:
        """Yield the distinct nodes for `key` lazily, in preference order (``nodes_for``'s).

        Walks clockwise from the key's owner. When nodes have zones, a node whose zone was
        already yielded is held back until every zone has been seen. Stop consuming when you
        have enough (e.g. the first node that is up).

        :raises EmptyRingError: when the ring has no nodes
        """
        if not self._names:
            raise EmptyRingError("iter_nodes() on an empty ring; add a node first")
        start = self._index_for_point(self.point_for(key))
        return self._walk(start)

    def _walk(self, start: int) -> Iterator[str]:
        owners, names, zone_ids = self._owners_view, self._names, self._zone_ids
        zones_total = len(set(zone_ids))
        seen_nodes: set[int] = set()
        seen_zones: set[int] = set()
        held_back: list[int] = []
        count = len(owners)
        for step in range(count):
            owner = owners[(start + step) % count]
            if owner in seen_nodes:
                continue
            seen_nodes.add(owner)
            if len(seen_zones) < zones_total and zone_ids[owner] in seen_zones:
                held_back.append(owner)
                continue
            if len(seen_zones) < zones_total:
                seen_zones.add(zone_ids[owner])
                yield names[owner]
                if len(seen_zones) == zones_total:
                    yield from (names[index] for index in held_back)
                    held_back.clear()
            else:
                yield names[owner]
            if len(seen_nodes) == len(names) and not held_back:
                return

    def nodes_for(self, key: Key, n: int) -> list[str]:
        """Return the preference list of `key`: its first `n` distinct nodes clockwise.

        With zones, one node per zone in ring order comes before any zone repeats. `n` larger
        than the node count returns every node.

        >>> ring = HashRing(["a", "b", "c"])
        >>> sorted(ring.nodes_for("k", 5))
        ['a', 'b', 'c']

        :raises ConfigError: when `n` < 1
        :raises EmptyRingError: when the ring has no nodes
        """
        check_n(n)
        if not self._names:
            raise EmptyRingError("nodes_for() on an empty ring; add a node first")
        result: list[str] = []
        for name in self.iter_nodes(key):
            result.append(name)
            if len(result) == n:
                break
        return result

    # -- changing membership -----------------------------------------------------------------

    def add(self, node: str | Node, *, tokens: Iterable[int] | None = None) -> HashRing:
        """Return a new ring with `node` added (at explicit `tokens`, if given).

        Only keys on the new node's arcs move, and they move to it.
        Runtime: O(N·V) memory copies, O(V log V) hashing.

        :raises DuplicateNodeError: when a node of that name is already in the ring
        """
        new = coerce_node(node)
        if new.name in self._names_set():
            raise DuplicateNodeError(f"node {new.name!r} is already in the ring")
        ring = HashRing.__new__(HashRing)
        ring._vnodes, ring._hasher, ring._space = self._vnodes, self._hasher, self._space
        ring._explicit = self._explicit
        if tokens is not None:
            ring._explicit = {**self._explicit, new.name: self._check_tokens(new.name, tokens)}
        position = bisect_left(self._names, new.name)
        nodes = (*self._nodes[:position], new, *self._nodes[position:])
        ring._install(nodes, *ring._inserted(self, new, position))
        return ring

    def _inserted(self, old: HashRing, new: Node, position: int) -> tuple[UInt64Array, IndexArray]:
        added = np.sort(self._node_tokens(new))
        dtype = _owner_dtype(len(old._nodes) + 1)
        owners = old._owners.astype(dtype)
        owners += owners >= position  # names after the new one shift up by one index
        at = np.searchsorted(old._tokens, added, side="left")
        # Ties: the new vnode goes after equal tokens whose node name sorts before it.
        for k in np.flatnonzero(at < len(old._tokens)):
            i = int(at[k])
            while i < len(old._tokens) and old._tokens[i] == added[k] and owners[i] < position:
                i += 1
            at[k] = i
        tokens = np.insert(old._tokens, at, added)
        owners = np.insert(owners, at, np.full(len(added), position, dtype=dtype))
        return tokens, owners

    def remove(self, name: str) -> HashRing:
        """Return a new ring without node `name`; its keys go to their clockwise successors.

        :raises UnknownNodeError: when `name` is not in the ring
        """
        position = self._position(name)
        keep = self._owners != position
        dtype = _owner_dtype(len(self._nodes) - 1)
        owners = self._owners[keep].astype(dtype)
        owners -= owners > position
        ring = HashRing.__new__(HashRing)
        ring._vnodes, ring._hasher, ring._space = self._vnodes, self._hasher, self._space
        ring._explicit = {k: v for k, v in self._explicit.items() if k != name}
        nodes = self._nodes[:position] + self._nodes[position + 1 :]
        ring._install(nodes, self._tokens[keep], owners)
        return ring

    def discard(self, name: str) -> HashRing:
        """Return a new ring without node `name`, or this ring if it is not there."""
        return self.remove(name) if name in self else self

    def reweight(self, name: str, weight: float) -> HashRing:
        """Return a new ring in which node `name` has `weight` (and vnodes to match).

        Keys move only to or from that node: its vnodes ``#0 … #k`` are kept or extended.

        :raises UnknownNodeError: when `name` is not in the ring
        :raises ConfigError: when `weight` is not finite and > 0, or the node has explicit tokens
        """
        position = self._position(name)
        if name in self._explicit:
            raise ConfigError(
                f"node {name!r} has explicit tokens; remove it and add it with new tokens"
            )
        node = self._nodes[position].with_weight(weight)
        return self.remove(name).add(node)

    def _position(self, name: str) -> int:
        position = bisect_left(self._names, name) if isinstance(name, str) else len(self._names)
        if position == len(self._names) or self._names[position] != name:
            raise unknown_node(name, self._names, "ring")
        return position

    def _names_set(self) -> frozenset[str]:
        return frozenset(self._names)

    # -- measuring ---------------------------------------------------------------------------

    @property
    def nodes(self) -> tuple[Node, ...]:
        """The nodes, sorted by name."""
        return self._nodes

    @property
    def vnodes(self) -> int:
        """The vnode count of a node of weight 1."""
        return self._vnodes

    @property
    def hasher(self) -> Hasher:
        """The hash function keys and vnode labels are hashed with."""
        return self._hasher

    @property
    def space(self) -> int:
        """The size of the point space: 2**64, or what ``from_tokens`` was given."""
        return self._space

    @property
    def tokens(self) -> UInt64Array:
        """The sorted tokens, a read-only uint64 array."""
        return self._tokens

    @property
    def token_owners(self) -> IndexArray:
        """For each token, the index of its node in ``nodes`` (read-only)."""
        return self._owners

    def arc_lengths(self) -> UInt64Array:
        """Return the length of the arc each token owns, exactly (uint64; aligned with tokens).

        A ring with a single token owns the whole space; its length is reported as ``space``
        modulo 2**64 (0 for the 64-bit space), so use :meth:`shares` for fractions.
        """
        tokens = self._tokens
        if len(tokens) == 0:
            return np.empty(0, dtype=np.uint64)
        lengths = np.empty_like(tokens)
        lengths[1:] = tokens[1:] - tokens[:-1]
        # uint64 arithmetic wraps modulo 2**64: exact for the 64-bit space, fixed up otherwise.
        lengths[0] = (int(tokens[0]) - int(tokens[-1])) % self._space if len(tokens) > 1 else 0
        if len(tokens) == 1:
            lengths[0] = self._space % SPACE_64
        return lengths

    def owned_points(self) -> dict[str, int]:
        """Return the exact number of points each node owns (the sum of its arc lengths)."""
        if len(self._names) == 1:
            return {self._names[0]: self._space}
        lengths = self.arc_lengths()
        order = np.argsort(self._owners, kind="stable")
        owners_sorted = self._owners[order]
        starts = np.flatnonzero(np.r_[True, owners_sorted[1:] != owners_sorted[:-1]])
        sums = np.add.reduceat(lengths[order], starts) if len(starts) else []
        result = dict.fromkeys(self._names, 0)
        for owner, total in zip(
            owners_sorted[starts].tolist(), np.asarray(sums).tolist(), strict=True
        ):
            result[self._names[owner]] = int(total)
        return result

    def shares(self) -> dict[str, float]:
        """Return each node's exact fraction of the keyspace, from its arc lengths.

        >>> HashRing.from_tokens({"A": [10], "B": [40], "C": [300]}, space=360).shares()
        {'A': 0.19444444444444445, 'B': 0.08333333333333333, 'C': 0.7222222222222222}
        """
        return {name: points / self._space for name, points in self.owned_points().items()}

    def fair_shares(self) -> dict[str, float]:
        """Return each node's fair share: its weight over the total weight."""
        total = math.fsum(node.weight for node in self._nodes)
        return {node.name: node.weight / total for node in self._nodes}

    def arcs(self, name: str) -> list[Arc]:
        """Return the arcs node `name` owns, ordered by their end token.

        >>> ring = HashRing.from_tokens({"A": [10], "B": [40], "C": [300]}, space=360)
        >>> ring.arcs("A")
        [Arc(start=300, end=10, node='A', length=70)]

        :raises UnknownNodeError: when `name` is not in the ring
        """
        position = self._position(name)
        lengths = self.arc_lengths()
        result = []
        for index in np.flatnonzero(self._owners == position).tolist():
            end = int(self._tokens[index])
            start = int(self._tokens[index - 1])  # index 0 wraps to the last token
            length = self._space if len(self._tokens) == 1 else int(lengths[index])
            result.append(Arc(start, end, name, length))
        return result

    def __len__(self) -> int:
        return len(self._names)

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        position = bisect_left(self._names, name)
        return position < len(self._names) and self._names[position] == name

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, HashRing):
            return NotImplemented
        return (
            self._nodes == other._nodes
            and self._space == other._space
            and self._hasher == other._hasher
            and np.array_equal(self._tokens, other._tokens)
            and np.array_equal(self._owners, other._owners)
        )

    def __hash__(self) -> int:
        return hash((self._nodes, self._space, self._hasher.name, len(self._tokens)))

    def __repr__(self) -> str:
        names = ", ".join(repr(name) for name in self._names[:5])
        if len(self._names) > 5:
            names += f", … and {len(self._names) - 5} more"
        return (
            f"HashRing([{names}], vnodes={self._vnodes}, hasher={self._hasher.name!r}, "
            f"tokens={len(self._tokens)})"
        )

    # -- serialising -------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready description from which ``from_dict`` rebuilds an equal ring.

        :raises ConfigError: when the ring uses an unregistered hasher
        """
        if HASHERS.get(self._hasher.name) != self._hasher:
            raise ConfigError(
                f"cannot serialise a ring with the unregistered hasher {self._hasher.name!r}; "
                f"known: {', '.join(sorted(HASHERS))}"
            )
        nodes = []
        for node in self._nodes:
            entry: dict[str, Any] = {"name": node.name, "weight": node.weight}
            if node.zone is not None:
                entry["zone"] = node.zone
            if node.address is not None:
                entry["address"] = node.address
            if node.name in self._explicit:
                entry["tokens"] = list(self._explicit[node.name])
            nodes.append(entry)
        return {
            "kind": "HashRing",
            "version": _FORMAT_VERSION,
            "hasher": self._hasher.name,
            "vnodes": self._vnodes,
            "space": self._space,
            "nodes": nodes,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HashRing:
        """Return the ring described by `data` (the output of ``to_dict``).

        :raises ConfigError: when `data` is not a ring description ringkit understands
        """
        if data.get("kind") != "HashRing" or data.get("version") != _FORMAT_VERSION:
            raise ConfigError(
                f"expected a HashRing description of version {_FORMAT_VERSION}, "
                f"got kind={data.get('kind')!r} version={data.get('version')!r}"
            )
        try:
            entries: Sequence[Mapping[str, Any]] = data["nodes"]
            nodes = [
                Node(
                    e["name"],
                    weight=e.get("weight", 1.0),
                    zone=e.get("zone"),
                    address=e.get("address"),
                )
                for e in entries
            ]
        except (KeyError, TypeError) as error:
            raise ConfigError(f"malformed ring description: {error!r}") from None
        ring = cls.__new__(cls)
        ring._vnodes = _check_vnodes(data.get("vnodes", DEFAULT_VNODES))
        ring._hasher = get_hasher(data.get("hasher", DEFAULT_HASH))
        ring._space = _check_space(data.get("space", SPACE_64))
        ring._explicit = {
            e["name"]: ring._check_tokens(e["name"], e["tokens"]) for e in entries if "tokens" in e
        }
        coerce_nodes(nodes)  # refuses duplicates
        ordered = tuple(sorted(nodes, key=lambda node: node.name))
        ring._install(ordered, *ring._derive_all(ordered))
        return ring

    # -- invariants --------------------------------------------------------------------------

    def _check(self) -> None:
        """Assert the ring's invariants (for tests)."""
        tokens, owners = self._tokens, self._owners
        assert len(tokens) == len(owners)
        assert list(self._names) == sorted(self._names)
        assert len(set(self._names)) == len(self._names)
        if len(tokens):
            assert bool(np.all(tokens[1:] >= tokens[:-1])), "tokens not sorted"
            ties = np.flatnonzero(tokens[1:] == tokens[:-1])
            assert bool(np.all(owners[ties] < owners[ties + 1])), "ties not ordered by name"
            assert int(owners.max()) < len(self._nodes)
            assert int(tokens.max()) < self._space
        counts = np.bincount(owners, minlength=len(self._nodes)) if len(owners) else []
        for node, count in zip(self._nodes, list(counts), strict=True):
            explicit = self._explicit.get(node.name)
            expected = len(explicit) if explicit else vnode_count(self._vnodes, node.weight)
            assert count == expected, f"{node.name}: {count} vnodes, expected {expected}"
        expected_prefix = np.searchsorted(
            tokens,
            np.arange(len(self._prefix) - 1, dtype=np.uint64) << np.uint64(self._prefix_shift % 64),
        )
        assert np.array_equal(self._prefix[:-1], expected_prefix)


def _owner_dtype(count: int) -> type[np.unsignedinteger[Any]]:
    return np.uint16 if count <= 2**16 else np.uint32
