"""HashRing: consistent hashing with virtual nodes, weights, zones and preference lists.

Keys and nodes are hashed onto one circle of 64-bit points (Karger et al. 1997). Each node has
*vnodes*, each at a *token*; a token owns the *arc* (previous token, token], so a key belongs to
the first token >= its point, and a point past the last token wraps to the first, as libketama,
libmemcached and Envoy do. (A ``bisect.bisect`` sketch takes the first token > point; the two
differ only for a point exactly on a token, and ringkit follows >=.)

Vnode *i* of node *name* sits at the hash of the label ``f"{name}#{i}"``. The label is injective
(``i`` is the digits after the last ``#``, so names may contain ``#``), unlike
``name + str(i)`` where "a1" + "1" meets "a" + "11" (buraksezer/consistent#17). A node of weight
``w`` gets ``max(1, floor(vnodes * w + 0.5))`` vnodes: absolute, never normalised by the total,
so reweighting one node moves keys only to or from that node (memcached/memcached#873).

Nodes are kept sorted by name and tokens that collide are ordered by name, so a ring does not
depend on the order its nodes were given or added. A ring is immutable: ``add`` / ``remove`` /
``reweight`` return new rings, so readers in other threads need no lock; publish a new ring by
swapping one reference.

>>> ring = HashRing.from_tokens({"A": [40], "B": [160], "C": [300]}, space=360)
>>> ring.node_for_point(75), ring.node_for_point(310), ring.node_for_point(160)
('B', 'A', 'B')
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ringkit.errors import ConfigError, EmptyRingError
from ringkit.hashing import (
    DEFAULT_HASH,
    Hasher,
    HasherLike,
    Key,
    check_key_batch,
    encode_key,
    get_hasher,
    registered_name,
)
from ringkit.nodes import Node, NodesLike, coerce_node, coerce_nodes
from ringkit.placement import (
    MAX_TOKENS,
    PlacementBase,
    Segmentation,
    check_max_tokens,
    check_n,
    check_token_count,
    int_text,
    unknown_node,
)
from ringkit.ring.format import RingDescription
from ringkit.ring.preference import walk_distinct
from ringkit.ring.shuffle import shuffle_shard
from ringkit.ring.tokens import (
    DEFAULT_VNODES,
    SPACE_64,
    IndexArray,
    TokenTable,
    UInt64Array,
    label_suffixes,
    vnode_count,
)
from ringkit.ring.trace import Trace, trace_ring

__all__ = ["Arc", "HashRing", "check_space", "check_vnodes"]


@dataclass(frozen=True, slots=True)
class Arc:
    """The arc (start, end] owned by `node`: `length` points; it wraps when start >= end."""

    start: int
    end: int
    node: str
    length: int


def check_vnodes(vnodes: object) -> int:
    """Validate a vnode count: an int >= 1.

    :raises ConfigError: otherwise, naming the value
    """
    if isinstance(vnodes, bool) or not isinstance(vnodes, int):
        raise ConfigError(f"vnodes must be an int, got {type(vnodes).__name__}")
    if vnodes < 1:
        raise ConfigError(f"vnodes must be >= 1, got {int_text(vnodes)}")
    return vnodes


def check_space(space: object) -> int:
    """Validate a point space size: an int in [1, 2**64].

    :raises ConfigError: otherwise, naming the value
    """
    if isinstance(space, bool) or not isinstance(space, int):
        raise ConfigError(f"space must be an int, got {type(space).__name__}")
    if not 1 <= space <= SPACE_64:
        raise ConfigError(f"space must be in [1, 2**64], got {space!r}")
    return space


_KIND_NAMES = {"U": "str keys", "S": "bytes keys", "O": "objects"}


class HashRing(PlacementBase):
    """A consistent-hash ring of nodes with virtual nodes; an immutable value.

    Invariants (``_check``): nodes sorted by name; tokens sorted, equal tokens ordered by name;
    every node has exactly its vnode count (or its explicit tokens).

    Looking up: ``node_for``, ``nodes_for``, ``iter_nodes``, ``node_for_many``,
    ``node_for_point``, ``owner_indices``, ``owner_indices_for_hashes``, ``point_for``,
    ``points_for``.
    Changing membership (each returns a new ring): ``add``, ``remove``, ``discard``, ``reweight``.
    Measuring: ``nodes``, ``tokens``, ``token_owners``, ``shares``, ``owned_points``, ``arcs``,
    ``len``, ``in``, ``iter``, ``==``. Serialising: ``to_dict``, ``from_dict``, ``from_tokens``.
    """

    _container = "ring"
    routes_by_hash = True  # a key's owner is a function of its hash (``owner_indices_for_hashes``)
    _hasher: Hasher

    def __init__(
        self,
        nodes: NodesLike = (),
        *,
        vnodes: int = DEFAULT_VNODES,
        hasher: HasherLike = DEFAULT_HASH,
        max_tokens: int = MAX_TOKENS,
    ) -> None:
        self._vnodes = check_vnodes(vnodes)
        self._hasher = get_hasher(hasher)
        self._space = SPACE_64
        self._max_tokens = check_max_tokens(max_tokens)
        self._explicit: Mapping[str, tuple[int, ...]] = {}
        self._install_nodes(coerce_nodes(nodes))

    @classmethod
    def from_tokens(
        cls,
        tokens_by_node: Mapping[str | Node, Iterable[int]],
        *,
        space: int = SPACE_64,
        hasher: HasherLike = DEFAULT_HASH,
        max_tokens: int = MAX_TOKENS,
    ) -> HashRing:
        """Return a ring whose nodes sit at the given tokens, in the space [0, `space`).

        Keys map into the space by ``hash(key) % space`` (the widened point when the space is
        2**64). Nodes may be names or ``Node`` values. Three nodes of three tokens each on a
        360-point circle:

        >>> ring = HashRing.from_tokens(
        ...     {"A": [10, 130, 250], "B": [40, 170, 90], "C": [300, 210, 350]}, space=360
        ... )
        >>> ring.owned_points()
        {'A': 100, 'B': 120, 'C': 140}

        :raises ConfigError: for a token outside [0, space), a node with no tokens, a token
            given twice for one node, or more than `max_tokens` tokens
        """
        nodes = coerce_nodes([coerce_node(node) for node in tokens_by_node])
        return cls._make(
            nodes,
            vnodes=DEFAULT_VNODES,
            hasher=get_hasher(hasher),
            space=check_space(space),
            max_tokens=check_max_tokens(max_tokens),
            explicit=dict(zip((n.name for n in nodes), tokens_by_node.values(), strict=True)),
        )

    @classmethod
    def _make(
        cls,
        nodes: Iterable[Node],
        *,
        vnodes: int,
        hasher: Hasher,
        space: int,
        max_tokens: int,
        explicit: Mapping[str, Iterable[int]],
        table: TokenTable | None = None,
        explicit_checked: bool = False,
    ) -> HashRing:
        """Return a ring with these options; build its table unless `table` is given.

        `explicit_checked` says the explicit tokens come from a ring (or ``add``) that checked
        them already: a live ring derives a new ring at every membership change in every
        watching process, and re-checking all T tokens there cost 85% of the derivation.
        """
        ring = cls.__new__(cls)
        ring._vnodes, ring._hasher, ring._space = vnodes, hasher, space
        ring._max_tokens = max_tokens
        ring._explicit = (
            {name: tuple(t) for name, t in explicit.items()}
            if explicit_checked
            else {name: ring._check_tokens(name, t) for name, t in explicit.items()}
        )
        if table is None:
            ring._install_nodes(tuple(nodes))
        else:
            ring._install(tuple(nodes), table)
        return ring

    def _with_table(
        self, nodes: Iterable[Node], explicit: Mapping[str, Iterable[int]], table: TokenTable
    ) -> HashRing:
        """Return a ring with this ring's options over `nodes`, whose `table` is built."""
        return self._make(
            nodes,
            vnodes=self._vnodes,
            hasher=self._hasher,
            space=self._space,
            max_tokens=self._max_tokens,
            explicit=explicit,
            table=table,
            explicit_checked=True,
        )

    def _check_tokens(self, name: str, tokens: Iterable[int]) -> tuple[int, ...]:
        values = tuple(tokens)
        if not values:
            raise ConfigError(f"node {name!r} must have at least one token, got none")
        for token in values:
            if isinstance(token, bool) or not isinstance(token, (int, np.integer)):
                raise ConfigError(f"tokens of node {name!r} must be ints, got {token!r}")
            if not 0 <= token < self._space:
                raise ConfigError(
                    f"token of node {name!r} must be in [0, {self._space}), got {token!r}"
                )
        if len(set(values)) != len(values):
            raise ConfigError(f"node {name!r} has a token twice, got {sorted(values)!r}")
        return tuple(int(token) for token in values)

    def _token_count(self, node: Node) -> int:
        explicit = self._explicit.get(node.name)
        return len(explicit) if explicit is not None else vnode_count(self._vnodes, node.weight)

    def _node_tokens(self, node: Node) -> UInt64Array:
        explicit = self._explicit.get(node.name)
        if explicit is not None:
            return np.array(explicit, dtype=np.uint64)
        count = vnode_count(self._vnodes, node.weight)
        # NOTE: map() over bytes concatenation keeps the loop in C: ~40% faster than a
        # comprehension over f-strings for the 2.56M labels of a 10,000-node ring.
        labels = map(node.name.encode().__add__, label_suffixes(count))
        return np.fromiter(map(self._point_function(), labels), dtype=np.uint64, count=count)

    def _install_nodes(self, nodes: tuple[Node, ...]) -> None:
        ordered = tuple(sorted(nodes, key=lambda node: node.name))
        self._check_size(sum(self._token_count(node) for node in ordered))
        table = TokenTable.build([self._node_tokens(node) for node in ordered], self._space)
        self._install(ordered, table)

    def _install(self, nodes: tuple[Node, ...], table: TokenTable) -> None:
        self._nodes = nodes
        self._names = tuple(node.name for node in nodes)
        self._names_array = np.array(self._names, dtype=object)
        self._table = table
        zone_index: dict[tuple[bool, str], int] = {}
        # A node without a zone is a failure domain of its own.
        self._zone_ids = tuple(
            zone_index.setdefault(
                (True, node.zone) if node.zone is not None else (False, node.name),
                len(zone_index),
            )
            for node in nodes
        )
        # NOTE: each ring shadows the documented node_for method with a closure whose arrays and
        # functions are bound as locals: one Python call per lookup instead of two, ~15% of a
        # lookup (benchmarks/bench_lookup.py). The class method documents the behaviour.
        if nodes:
            vars(self)["node_for"] = table.make_lookup(self._point_function(), self._names)

    # -- keys and points -------------------------------------------------------------------------

    def _point_function(self) -> Callable[[bytes], int]:
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
        return self._point_function()(encode_key(key))

    def points_for(self, keys: Iterable[Key]) -> UInt64Array:
        """Return the point of each key on this ring, as a uint64 array.

        :raises TypeError: when a key is not str, bytes or int
        """
        check_key_batch(keys, "points_for")
        point_of = self._point_function()
        items = keys if isinstance(keys, (list, tuple)) else list(keys)
        try:
            # All-str fast path: the loop stays in C (map), with no per-key type test.
            return np.fromiter(
                map(point_of, map(str.encode, items)), dtype=np.uint64, count=len(items)
            )
        except TypeError:
            if {*map(type, items)} == {bytes}:  # all bytes (a client's routed keys), tested in C
                return np.fromiter(map(point_of, items), dtype=np.uint64, count=len(items))
            return np.fromiter(
                (point_of(encode_key(key)) for key in items), dtype=np.uint64, count=len(items)
            )

    # -- looking up ------------------------------------------------------------------------------

    def _require_nodes(self, operation: str) -> None:
        if not self._names:
            raise EmptyRingError(f"{operation}() on an empty ring; add a node first")

    def node_for(self, key: Key) -> str:
        """Return the node that owns `key`: the first token >= its point, wrapping.

        Runtime: O(log(N·V)); the prefix table makes it a few bisect steps in practice.

        >>> HashRing(["a", "b", "c"]).node_for("booking:42") in {"a", "b", "c"}
        True

        :raises EmptyRingError: when the ring has no nodes
        :raises TypeError: when `key` is not str, bytes or int
        """
        encode_key(key)  # a non-empty ring answers through the closure bound in _install
        self._require_nodes("node_for")
        raise AssertionError("unreachable: non-empty rings bind node_for in _install")

    def node_for_point(self, point: int) -> str:
        """Return the node owning `point` (an int in [0, space)).

        :raises EmptyRingError: when the ring has no nodes
        :raises ConfigError: when `point` is outside [0, space)
        """
        self._require_nodes("node_for_point")
        if isinstance(point, bool) or not isinstance(point, (int, np.integer)):
            raise TypeError(f"point must be int, got {type(point).__name__}")
        if not 0 <= point < self._space:
            raise ConfigError(f"point must be in [0, {self._space}), got {point!r}")
        return self._names[int(self._table.owners[self._table.search(int(point))])]

    def owner_indices(self, points: npt.ArrayLike) -> IndexArray:
        """Return, for each point (uint64, in [0, space)), the index of its owner in ``nodes``.

        Vectorised: a prefix-table bucket, then a few branchless search steps per point.

        >>> ring = HashRing.from_tokens({"A": [40], "B": [160], "C": [300]}, space=360)
        >>> ring.owner_indices([75, 310, 0]).tolist()
        [1, 0, 0]

        :raises EmptyRingError: when the ring has no nodes
        :raises TypeError: when given keys (str or bytes) instead of points
        """
        self._require_nodes("owner_indices")
        array = np.asarray(points)
        if array.dtype.kind in "USO":
            # Before this, keys here failed with numpy's "invalid literal for int()"
            raise TypeError(
                "owner_indices() takes points (uint64 hashes), got"
                f" {_KIND_NAMES[array.dtype.kind]};"
                " for keys use node_for_many(keys) or owner_indices(ring.points_for(keys))"
            )
        array = array.astype(np.uint64, copy=False)
        return self._table.owners[self._table.search_many(array)]

    def owner_indices_for_hashes(self, hashes: UInt64Array) -> IndexArray:
        """Return the owner index of each native key hash: widened or reduced, then searched.

        >>> ring = HashRing.from_tokens({"A": [40], "B": [160], "C": [300]}, space=360)
        >>> ring.owner_indices_for_hashes(np.array([435, 310], dtype=np.uint64)).tolist()
        [1, 0]

        :raises EmptyRingError: when the ring has no nodes
        """
        if self._space == SPACE_64:
            points = hashes << np.uint64(64 - self._hasher.bits)
        else:
            points = hashes % np.uint64(self._space)
        return self.owner_indices(points)

    def node_for_many(self, keys: Iterable[Key]) -> list[str]:
        """Return the owner of each key, in order (hashing in a loop, one vectorised search).

        :raises EmptyRingError: when the ring has no nodes
        :raises TypeError: when a key is not str, bytes or int
        """
        check_key_batch(keys, "node_for_many")
        self._require_nodes("node_for_many")
        result: list[str] = self._names_array[self.owner_indices(self.points_for(keys))].tolist()
        return result

    def iter_nodes(self, key: Key) -> Iterator[str]:
        """Yield the distinct nodes for `key` lazily, in preference order (``nodes_for``'s).

        Walks clockwise from the key's owner. When nodes have zones, a node whose zone was
        already yielded is held back until every zone has been seen. Stop consuming when you
        have enough (for fallback: the first node that is up).

        :raises EmptyRingError: when the ring has no nodes
        """
        self._require_nodes("iter_nodes")
        start = self._table.search(self.point_for(key))
        names = self._names
        return (names[i] for i in walk_distinct(self._table.owners.data, start, self._zone_ids))

    def nodes_for(self, key: Key, n: int) -> list[str]:
        """Return the preference list of `key`: its first `n` distinct nodes clockwise.

        With zones, one node per zone in ring order comes before any zone repeats. `n` larger
        than the node count returns every node.

        >>> sorted(HashRing(["a", "b", "c"]).nodes_for("k", 5))
        ['a', 'b', 'c']

        :raises ConfigError: when `n` < 1
        :raises EmptyRingError: when the ring has no nodes
        """
        check_n(n)
        result: list[str] = []
        for name in self.iter_nodes(key):
            result.append(name)
            if len(result) == n:
                break
        return result

    # -- changing membership ---------------------------------------------------------------------

    def add(self, node: str | Node, *, tokens: Iterable[int] | None = None) -> HashRing:
        """Return a new ring with `node` added (at explicit `tokens`, if given).

        Only keys on the new node's arcs move, and they move to it.
        Runtime: O(N·V) array copies plus O(V) hashing (~0.1 s at 2.56M tokens).

        :raises DuplicateNodeError: when a node of that name is already in the ring
        :raises ConfigError: for explicit tokens outside the space, or given twice
        """
        new = self._check_new(node)
        if tokens is None:
            return self._added(new)
        explicit = {**self._explicit, new.name: self._check_tokens(new.name, tokens)}
        self._check_size(len(self._table) + len(explicit[new.name]))
        return self._inserted(new, explicit, np.array(explicit[new.name], dtype=np.uint64))

    def _added(self, node: Node) -> HashRing:
        self._check_size(len(self._table) + self._token_count(node))
        return self._inserted(node, self._explicit, self._node_tokens(node))

    def _check_size(self, count: int) -> None:
        # Counted before any token is hashed or any array allocated.
        what = f"a ring of vnodes={int_text(self._vnodes)}"
        check_token_count(count, self._max_tokens, what=what)

    def _inserted(
        self, node: Node, explicit: Mapping[str, Iterable[int]], added: UInt64Array
    ) -> HashRing:
        position = bisect_left(self._names, node.name)
        table = self._table.inserted(added, position, len(self._nodes) + 1)
        nodes = (*self._nodes[:position], node, *self._nodes[position:])
        return self._with_table(nodes, explicit, table)

    def _removed(self, name: str) -> HashRing:
        # Keys of the removed node go to their clockwise successors.
        position = bisect_left(self._names, name)
        table = self._table.without(position, len(self._nodes) - 1)
        explicit = {k: v for k, v in self._explicit.items() if k != name}
        return self._with_table(
            self._nodes[:position] + self._nodes[position + 1 :], explicit, table
        )

    def _reweighted(self, node: Node) -> HashRing:
        # Keys move only to or from that node: its vnodes #0 … #k are kept or extended.
        if node.name in self._explicit:
            raise ConfigError(
                f"node {node.name!r} has explicit tokens; remove it and add it with new tokens"
            )
        return self._removed(node.name)._added(node)

    def _position(self, name: str) -> int:
        if name not in self:
            raise unknown_node(name, self._names, "ring")
        return bisect_left(self._names, name)

    # -- measuring -------------------------------------------------------------------------------

    @property
    def vnodes(self) -> int:
        """The vnode count of a node of weight 1."""
        return self._vnodes

    @property
    def max_tokens(self) -> int:
        """The most tokens this ring and the rings made from it may hold (``MAX_TOKENS``)."""
        return self._max_tokens

    @property
    def hasher(self) -> Hasher:
        """The hash function keys and vnode labels are hashed with."""
        return self._hasher

    @property
    def ring(self) -> HashRing:
        """This ring (the protocol's ``ring``: the ring whose tokens a placement routes by)."""
        return self

    def segmentation(self, replicas: int) -> Segmentation:
        """Return the ring's exact units: the arcs between tokens (``basis="points"``)."""
        return Segmentation("points", self._space, self._hasher)

    @property
    def space(self) -> int:
        """The size of the point space: 2**64, or what ``from_tokens`` was given."""
        return self._space

    @property
    def tokens(self) -> UInt64Array:
        """The sorted tokens, a read-only uint64 array."""
        return self._table.tokens

    @property
    def token_owners(self) -> IndexArray:
        """For each token, the index of its node in ``nodes`` (read-only)."""
        return self._table.owners

    def explicit_tokens(self) -> Mapping[str, tuple[int, ...]]:
        """Return the nodes that were given explicit tokens, with those tokens."""
        return dict(self._explicit)

    def arc_lengths(self) -> UInt64Array:
        """Return the exact length of the arc each token owns (uint64, aligned with tokens)."""
        return self._table.arc_lengths()

    def owned_points(self) -> dict[str, int]:
        """Return the exact number of points each node owns (the sum of its arc lengths)."""
        return dict(zip(self._names, self._table.owned_points(len(self._names)), strict=True))

    def shares(self) -> dict[str, float]:
        """Return each node's exact fraction of the keyspace, from its arc lengths.

        >>> HashRing.from_tokens({"A": [10], "B": [40], "C": [300]}, space=360).owned_points()
        {'A': 70, 'B': 30, 'C': 260}
        """
        return {name: points / self._space for name, points in self.owned_points().items()}

    def fair_shares(self) -> dict[str, float]:
        """Return each node's fair share: its weight over the total weight."""
        total = math.fsum(node.weight for node in self._nodes)
        return {node.name: node.weight / total for node in self._nodes}

    def arcs(self, name: str) -> list[Arc]:
        """Return the arcs node `name` owns, ordered by their end token.

        >>> HashRing.from_tokens({"A": [10], "B": [40], "C": [300]}, space=360).arcs("A")
        [Arc(start=300, end=10, node='A', length=70)]

        :raises UnknownNodeError: when `name` is not in the ring
        """
        position = self._position(name)
        tokens, lengths = self._table.tokens, self._table.arc_lengths()
        whole = self._table.whole_circle()  # every token at one point: the first owns it all
        return [
            Arc(
                int(tokens[i - 1]),
                int(tokens[i]),
                name,
                self._space if whole and i == 0 else int(lengths[i]),
            )
            for i in np.flatnonzero(self._table.owners == position).tolist()
        ]

    def __contains__(self, name: object) -> bool:
        # NOTE: a bisect over the sorted names, where the base scans them: rings hold 10,000s.
        if not isinstance(name, str):
            return False
        position = bisect_left(self._names, name)
        return position < len(self._names) and self._names[position] == name

    def _identity(self) -> tuple[object, ...]:
        return (self._nodes, self._space, self._hasher, self.tokens, self.token_owners)

    def _repr_options(self) -> str:
        # Before this, a from_tokens ring showed vnodes=160, an option it never used
        explicit = len(self._explicit)
        if explicit and explicit == len(self._names):
            placed = "explicit tokens"
        elif explicit:
            placed = f"vnodes={self._vnodes} ({explicit} with explicit tokens)"
        else:
            placed = f"vnodes={self._vnodes}"
        return f", {placed}, hasher={self._hasher.name!r}, tokens={len(self.tokens)}"

    # -- serialising -----------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready description from which ``from_dict`` rebuilds an equal ring.

        :raises ConfigError: when the ring uses an unregistered hasher
        """
        return RingDescription(
            self._nodes,
            vnodes=self._vnodes,
            hasher=registered_name(self._hasher, "a ring"),
            space=self._space,
            explicit=self._explicit,
        ).to_dict()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, max_tokens: int = MAX_TOKENS) -> HashRing:
        """Return the ring described by `data` (the output of ``to_dict``).

        :raises ConfigError: when `data` is not a ring description ringkit understands, or
            describes more than `max_tokens` tokens
        """
        description = RingDescription.from_dict(data)
        return cls._make(
            description.nodes,
            vnodes=check_vnodes(description.vnodes),
            hasher=get_hasher(description.hasher),
            space=check_space(description.space),
            max_tokens=check_max_tokens(max_tokens),
            explicit=description.explicit or {},
        )

    def __getstate__(self) -> dict[str, Any]:
        # The bound lookup closure holds memoryviews, which do not pickle; rebuilt on load.
        return {k: v for k, v in vars(self).items() if k != "node_for"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        state.setdefault("_max_tokens", MAX_TOKENS)  # rings pickled before the limit existed
        vars(self).update(state)
        self._install(self._nodes, self._table)

    def _check(self) -> None:
        """Assert the ring's invariants (for tests)."""
        assert list(self._names) == sorted(set(self._names)), "nodes not sorted and unique"
        self._table.check(len(self._nodes))
        counts = np.bincount(self._table.owners, minlength=len(self._nodes))
        for node, count in zip(self._nodes, counts.tolist(), strict=True):
            explicit = self._explicit.get(node.name)
            expected = len(explicit) if explicit else vnode_count(self._vnodes, node.weight)
            assert count == expected, f"{node.name}: {count} vnodes, expected {expected}"

    def trace(self, key: Key, replicas: int = 1) -> Trace:
        """Return how this ring places `key`: point, tokens walked, owner, preference list.

        See :func:`ringkit.ring.trace.trace_ring`. Runtime: O(log(N·V)) plus the tokens walked.

        >>> ring = HashRing.from_tokens({"A": [40], "B": [160], "C": [300]}, space=360)
        >>> ring.trace("k", replicas=2).preference_list == tuple(ring.nodes_for("k", 2))
        True

        :raises EmptyRingError: when the ring has no nodes
        :raises ConfigError: when `replicas` < 1
        """
        return trace_ring(self, key, replicas)

    def shuffle_shard(self, identifier: str, size: int) -> HashRing:
        """Return the stable sub-ring of `size` nodes assigned to tenant `identifier`.

        Nodes are spread over the zones; the shard changes minimally when nodes come and go, and
        two tenants rarely share a whole shard (:mod:`ringkit.ring.shuffle` gives the math and
        the rules; Grafana dskit's ``ShuffleShard``). `size` >= the node count returns this ring.
        Runtime: O(size · N·V).

        >>> ring = HashRing([f"n{i}" for i in range(8)])
        >>> shard = ring.shuffle_shard("tenant-7", 3)
        >>> len(shard), shard == ring.shuffle_shard("tenant-7", 3)
        (3, True)

        :raises ConfigError: when `size` < 1
        """
        return shuffle_shard(self, identifier, size)
