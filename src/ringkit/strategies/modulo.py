"""Modulo: ``hash(key) % N``, the baseline every movement report compares against.

Perfectly balanced in expectation and needing no table, but the owner depends on N: going from
N to N+1 nodes moves about N/(N+1) of the keys (seed 003, seed 004's Gatepass story). Nodes are
indexed in the order given, so removing a node from the middle shifts every index after it.

>>> placement = Modulo(["A", "B", "C"], hasher="fnv1a_32")
>>> placement.node_for("booking-0001")
'C'
>>> placement.nodes_for("booking-0001", 2)
['C', 'A']
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ringkit.errors import DuplicateNodeError
from ringkit.hashing import DEFAULT_HASH, HasherLike, Key, encode_key, get_hasher, hash_many
from ringkit.nodes import Node, NodesLike, coerce_node, coerce_nodes
from ringkit.placement import HashedMixin, NodeTupleMixin, check_n, check_not_empty, unknown_node

__all__ = ["Modulo"]


class Modulo(HashedMixin, NodeTupleMixin):
    """Nodes in a list; a key's owner is ``nodes[hash(key) % N]`` (native hash width).

    Replica order: the next indices, ``(h + 1) % N``, ``(h + 2) % N``, …
    Weights are ignored by the arithmetic (every node gets 1/N); ``shares()`` says so exactly.
    """

    __slots__ = ("_hasher", "_names", "_nodes")

    def __init__(self, nodes: NodesLike = (), *, hasher: HasherLike = DEFAULT_HASH) -> None:
        self._hasher = get_hasher(hasher)
        self._nodes = coerce_nodes(nodes)
        self._names = tuple(node.name for node in self._nodes)

    def _with(self, nodes: tuple[Node, ...]) -> Modulo:
        return Modulo(nodes, hasher=self._hasher)

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

    def node_for_many(self, keys: Iterable[Key]) -> list[str]:
        """Return the owner of each key, in order."""
        check_not_empty(len(self._names), "node_for_many")
        indices = hash_many(keys, self._hasher) % np.uint64(len(self._names))
        result: list[str] = np.array(self._names, dtype=object)[indices].tolist()
        return result

    def add(self, node: str | Node) -> Modulo:
        """Return a new placement with `node` appended (index N)."""
        new = coerce_node(node)
        if new.name in self._names:
            raise DuplicateNodeError(f"node {new.name!r} is already in the placement")
        return self._with((*self._nodes, new))

    def remove(self, name: str) -> Modulo:
        """Return a new placement without `name`; later nodes shift down one index.

        :raises UnknownNodeError: when `name` is not there
        """
        if name not in self._names:
            raise unknown_node(name, self._names, "placement")
        return self._with(tuple(node for node in self._nodes if node.name != name))

    def shares(self) -> dict[str, float]:
        """Return 1/N for every node (exact up to the hash's width modulo N)."""
        return {name: 1 / len(self._names) for name in self._names}

    def _identity(self) -> tuple[object, ...]:
        return (self._nodes, self._hasher)

    def __repr__(self) -> str:
        return f"Modulo({list(self._names)!r}, hasher={self._hasher.name!r})"
