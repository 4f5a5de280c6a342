"""Allocated tokens: a planner that chooses a new node's tokens instead of hashing them.

Random tokens balance only on average (a node's share has CV ~ 1/sqrt(V)), so a ring
needs hundreds of vnodes per node. Cassandra's ``ReplicationAwareTokenAllocator`` (CASSANDRA-7032,
``allocate_tokens_for_keyspace``) instead places each new token inside an existing range, where it
most improves the spread of ownership. ringkit's planner follows that idea with its own, simpler
greedy: each of the new node's T tokens takes ``need / T`` of the load, carved from the largest
arc of the node furthest above its fair share (weight / total weight). The cut is placed exactly,
not at a midpoint, so the new node gets its fair share and the most loaded nodes shed load.

The quantity balanced is keyspace by default; give ``load`` (observed points with their bytes or
requests) and the planner balances that instead: what an operator pays for is bytes, requests
and cost, not keyspace. Removing a node does not re-plan: its arcs pass to their successors.

With ``replicas=R`` the planner balances *replicated* ownership instead (each key counts for the
R distinct nodes of its preference list), Cassandra's goal; primary ownership then balances less
well (figures in ``benchmarks/bench_controller.py`` and docs/strategies.md).

>>> ring = AllocatedRing(["a", "b", "c", "d"], tokens=4)
>>> sorted(round(share, 4) for share in ring.shares().values())
[0.2083, 0.25, 0.2708, 0.2708]
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ringkit.errors import ConfigError, DuplicateNodeError
from ringkit.hashing import DEFAULT_HASH, HasherLike
from ringkit.nodes import Node, NodesLike, coerce_node, coerce_nodes
from ringkit.placement import IndexArray, Segmentation, check_token_count, int_text
from ringkit.ring import SPACE_64, HashRing, vnode_count
from ringkit.strategies.allocation.measure import LoadSample, Measure
from ringkit.strategies.allocation.replicated import replicated_cut
from ringkit.strategies.options import Strategy
from ringkit.strategies.wrapped import RingBacked

__all__ = ["DEFAULT_TOKENS", "AllocatedRing", "allocate_tokens"]

DEFAULT_TOKENS = 16


def _check_tokens(tokens: object) -> int:
    if isinstance(tokens, bool) or not isinstance(tokens, int):
        raise ConfigError(f"tokens must be an int, got {type(tokens).__name__}")
    if tokens < 1:
        raise ConfigError(f"tokens must be >= 1, got {tokens!r}")
    return tokens


def allocate_tokens(
    ring: HashRing,
    node: str | Node,
    *,
    tokens: int = DEFAULT_TOKENS,
    replicas: int = 1,
    load: Sequence[LoadSample] | None = None,
) -> tuple[int, ...]:
    """Return ``round(tokens · weight)`` tokens for `node` that balance ownership when it joins.

    With ``replicas`` R > 1 the balanced quantity is *replicated* ownership (each key counts for
    the R distinct nodes of its preference list, zones aside), as in Cassandra's allocator: each
    token is the best of a few candidate cuts, judged by the exact squared relative deviations
    from fair after the insertion, the new node aiming at (tokens placed / tokens) of its share.

    Each token takes ``need / tokens_left`` of the load from the largest arc of the node
    furthest above its fair share, where need is what the new node still lacks of its own fair
    share. With `load` (observed ``(point, amount)`` pairs) that measure is balanced instead of
    keyspace. An empty ring gets evenly spaced tokens. Runtime: O(T · N·V).

    >>> ring = HashRing.from_tokens({"a": [0]})
    >>> allocate_tokens(ring, "b", tokens=1)
    (9223372036854775808,)

    :raises ConfigError: when `tokens` or `replicas` < 1, the ring's space is not 2**64, or
        `load` is empty
    :raises DuplicateNodeError: when `node` is already in the ring
    """
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
        raise ConfigError(f"replicas must be an int >= 1, got {replicas!r}")
    new = coerce_node(node)
    # Like vnodes: a node of weight w gets round(tokens · w), since one token takes one arc.
    count = vnode_count(_check_tokens(tokens), new.weight)
    check_token_count(
        len(ring.tokens) + count,
        ring.max_tokens,
        what=f"a ring of tokens={int_text(tokens)} per node",
    )
    if new.name in ring:
        raise DuplicateNodeError(f"node {new.name!r} is already in the ring")
    if ring.space != SPACE_64:
        raise ConfigError(f"token allocation needs the 64-bit space, got space={ring.space}")
    if len(ring) == 0:
        return tuple(i * (SPACE_64 // count) for i in range(count))
    measure = Measure(load)
    positions = ring.tokens.copy()
    owners = ring.token_owners.astype(np.int64)
    weights = np.array([n.weight for n in ring.nodes] + [new.weight], dtype=np.float64)
    # With no more nodes than replicas every node holds every key: balance primaries instead.
    width = replicas if len(weights) > replicas else 1
    chosen: list[int] = []
    for step in range(count):
        per = measure.per_token(positions)
        if width == 1:
            own = np.bincount(owners, weights=per, minlength=len(weights))
            fair = weights / weights.sum() * per.sum()
            amount = (fair[-1] - own[-1]) / (count - step)
            point = _best_cut(measure, positions, owners, per, own - fair, amount)
        else:
            point = replicated_cut(measure, positions, owners, weights, width, (step + 1) / count)
        if point is None:
            break  # every arc is a single point: nothing left to split
        at = int(np.searchsorted(positions, np.uint64(point)))
        positions = np.insert(positions, at, np.uint64(point))
        owners = np.insert(owners, at, len(weights) - 1)
        chosen.append(point)
    return tuple(sorted(chosen))


def _best_cut(
    measure: Measure,
    positions: np.ndarray[tuple[int], np.dtype[np.uint64]],
    owners: np.ndarray[tuple[int], np.dtype[np.int64]],
    per: np.ndarray[tuple[int], np.dtype[np.float64]],
    excess: np.ndarray[tuple[int], np.dtype[np.float64]],
    amount: float,
) -> int | None:
    """Cut `amount` from the largest arc of the most overloaded node that has room."""
    excess = excess.copy()
    excess[-1] = -math.inf  # never take from the node being added
    for donor in np.argsort(-excess, kind="stable").tolist():
        arcs = np.flatnonzero(owners == donor)
        for index in arcs[np.argsort(-per[arcs], kind="stable")].tolist():
            point = measure.cut(int(positions[index - 1]), int(positions[index]), amount)
            if point is not None:
                return point
    return None


class AllocatedRing(RingBacked):
    """A :class:`HashRing` whose tokens are allocated by the planner, node by node.

    Nodes are added in name order at construction, so the ring does not depend on the order
    given. ``add`` allocates the newcomer's tokens against the current ring; ``remove`` hands
    the node's arcs to their successors (as a hashed ring does) without re-planning;
    ``reweight`` removes the node and allocates it again at its new weight.

    Looking up (the ring's): ``node_for``, ``nodes_for``, ``node_for_many``,
    ``owner_indices_for_hashes``.
    Changing membership: ``add``, ``remove``, ``discard``, ``reweight``. Measuring: ``ring``,
    ``nodes``, ``shares`` (exact, from arcs), ``segmentation`` (the ring's arcs), ``len``,
    ``in``, ``iter``, ``==``.
    """

    __slots__ = ("_load", "_replicas", "_tokens")
    routes_by_hash = True  # keys go to the ring's tokens (``HashRing.owner_indices_for_hashes``)

    def __init__(
        self,
        nodes: NodesLike = (),
        *,
        tokens: int = DEFAULT_TOKENS,
        replicas: int = 1,
        hasher: HasherLike = DEFAULT_HASH,
        load: Sequence[LoadSample] | None = None,
    ) -> None:
        self._tokens = _check_tokens(tokens)
        self._replicas = replicas
        self._load = tuple(load) if load is not None else None
        ring = HashRing.from_tokens({}, hasher=hasher)
        for node in sorted(coerce_nodes(nodes), key=lambda n: n.name):
            chosen = allocate_tokens(ring, node, tokens=tokens, replicas=replicas, load=load)
            ring = ring.add(node, tokens=chosen)
        self._set_ring(ring)

    def _with_ring(self, ring: HashRing) -> AllocatedRing:
        result = AllocatedRing.__new__(AllocatedRing)
        result._tokens, result._load = self._tokens, self._load
        result._replicas = self._replicas
        result._set_ring(ring)
        return result

    @property
    def replicas(self) -> int:
        """The replica count whose (replicated) ownership the allocation balances."""
        return self._replicas

    @property
    def tokens(self) -> int:
        """How many tokens each node gets."""
        return self._tokens

    def owner_indices_for_hashes(self, hashes: npt.NDArray[np.uint64]) -> IndexArray:
        """Return the owner index of each native key hash on the ring.

        :raises EmptyRingError: when there are no nodes
        """
        return self._ring.owner_indices_for_hashes(hashes)

    def segmentation(self, replicas: int) -> Segmentation:
        """Return the ring's exact units: the arcs between its allocated tokens."""
        return self._ring.segmentation(replicas)

    def _allocated(self, ring: HashRing, node: Node) -> AllocatedRing:
        chosen = allocate_tokens(
            ring, node, tokens=self._tokens, replicas=self._replicas, load=self._load
        )
        return self._with_ring(ring.add(node, tokens=chosen))

    def _added(self, node: Node) -> AllocatedRing:
        return self._allocated(self._ring, node)

    def _reweighted(self, node: Node) -> AllocatedRing:
        return self._allocated(self._ring.remove(node.name), node)

    def _identity(self) -> tuple[object, ...]:
        return (self._ring,)

    def _repr_options(self) -> str:
        return f", tokens={self._tokens}, replicas={self._replicas}"


# The registry's entry (ringkit.strategies.registry): the options build_placement passes.
STRATEGY = Strategy(
    "allocated", AllocatedRing, {"tokens": DEFAULT_TOKENS, "replicas": 1, "hasher": DEFAULT_HASH}
)
