"""Modulo: ``hash(key) % N``, the baseline every movement report compares against.

Perfectly balanced in expectation and needing no table, but the owner depends on N: going from
N to N+1 nodes moves about N/(N+1) of the keys, the problem consistent hashing was invented to
solve (Karger et al. 1997). Nodes are indexed in the order given, so removing a node from the
middle shifts every index after it. The arithmetic has no place for weights, so a weighted node
is refused rather than silently treated as weight 1.

>>> placement = Modulo(["A", "B", "C"], hasher="fnv1a_32")
>>> placement.node_for("booking-0001")
'C'
>>> placement.nodes_for("booking-0001", 2)
['C', 'A']
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ringkit.hashing import DEFAULT_HASH, Hasher, HasherLike, Key, encode_key, get_hasher
from ringkit.nodes import Node, NodesLike, coerce_nodes
from ringkit.placement import IndexArray, PlacementBase, check_n, check_not_empty
from ringkit.strategies.options import Strategy

__all__ = ["Modulo"]


class Modulo(PlacementBase):
    """Nodes in a list; a key's owner is ``nodes[hash(key) % N]`` (native hash width).

    Replica order: the next indices, ``(h + 1) % N``, ``(h + 2) % N``, …
    Every node gets 1/N; a node of weight other than 1 is refused (``UnsupportedError``).

    Looking up: ``node_for``, ``nodes_for``, ``node_for_many``, ``owner_indices_for_hashes``.
    Changing membership: ``add`` (appended), ``remove``, ``discard``.
    Measuring: ``nodes``, ``hasher``, ``shares``, ``len``, ``in``, ``iter``, ``==``.
    """

    __slots__ = ("_hasher", "_names", "_nodes")
    routes_by_hash = True  # the owner is ``hash % N``
    _hasher: Hasher

    def __init__(self, nodes: NodesLike = (), *, hasher: HasherLike = DEFAULT_HASH) -> None:
        self._hasher = get_hasher(hasher)
        self._nodes = coerce_nodes(nodes)
        self._names = tuple(node.name for node in self._nodes)
        self._check_weights(self._nodes)

    def _rebuilt(self, nodes: tuple[Node, ...]) -> Modulo:
        return Modulo(nodes, hasher=self._hasher)

    def _weights_refused(self) -> tuple[str, str]:
        return "modulo", "use Rendezvous or HashRing for weighted nodes"

    def node_for(self, key: Key) -> str:
        """Return ``nodes[hash(key) % N]``.

        :raises EmptyRingError: when there are no nodes
        """
        check_not_empty(len(self._names), "node_for")
        return self._names[self._hasher.function(encode_key(key)) % len(self._names)]

    def nodes_for(self, key: Key, n: int) -> list[str]:
        """Return the owner and the nodes at the following indices, `n` at most."""
        check_n(n)
        check_not_empty(len(self._names), "nodes_for")
        first = self._hasher.function(encode_key(key)) % len(self._names)
        count = min(n, len(self._names))
        return [self._names[(first + i) % len(self._names)] for i in range(count)]

    def owner_indices_for_hashes(self, hashes: npt.NDArray[np.uint64]) -> IndexArray:
        """Return ``hash % N`` for each native key hash.

        >>> Modulo(["a", "b", "c"]).owner_indices_for_hashes(np.array([7, 9], np.uint64)).tolist()
        [1, 0]

        :raises EmptyRingError: when there are no nodes
        """
        check_not_empty(len(self._names), "owner_indices_for_hashes")
        return (hashes % np.uint64(len(self._names))).astype(np.intp)

    def shares(self) -> dict[str, float]:
        """Return 1/N for every node (exact up to the hash's width modulo N)."""
        return {name: 1 / len(self._names) for name in self._names}

    def _identity(self) -> tuple[object, ...]:
        return (self._nodes, self._hasher)

    def _repr_options(self) -> str:
        return f", hasher={self._hasher.name!r}"


# The registry's entry (ringkit.strategies.registry): the options build_placement passes.
STRATEGY = Strategy("modulo", Modulo, {"hasher": DEFAULT_HASH})
