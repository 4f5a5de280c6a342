"""Nodes: the owners that keys are placed on.

A :class:`Node` is a name with a weight (its capacity relative to the others), an optional zone
(a failure domain: rack, availability zone) and an optional address. Placements accept nodes as
plain names, as ``Node`` values, or as a ``{name: weight}`` mapping; :func:`coerce_nodes` turns
any of these into a tuple of validated ``Node`` values once, at the boundary.

>>> Node("cache-a", weight=2.0, zone="eu-1a")
Node(name='cache-a', weight=2.0, zone='eu-1a', address=None)
>>> [node.name for node in coerce_nodes({"big": 2.0, "small": 1.0})]
['big', 'small']
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ringkit.errors import ConfigError, DuplicateNodeError

__all__ = ["Node", "NodesLike", "coerce_node", "coerce_nodes"]


@dataclass(frozen=True, slots=True)
class Node:
    """A node: a name, a weight > 0, an optional zone and address.

    Two nodes are the same node when their names are equal; the name is what every placement
    hashes, so it must be a non-empty string.
    """

    name: str
    weight: float = 1.0
    zone: str | None = None
    address: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise ConfigError(f"node name must be str, got {type(self.name).__name__}")
        if not self.name:
            raise ConfigError("node name must not be empty, got ''")
        _check_weight(self.name, self.weight)
        if self.zone is not None and not isinstance(self.zone, str):
            raise ConfigError(
                f"zone of node {self.name!r} must be str or None, got {type(self.zone).__name__}"
            )
        if self.address is not None and not isinstance(self.address, str):
            raise ConfigError(
                f"address of node {self.name!r} must be str or None, "
                f"got {type(self.address).__name__}"
            )

    def with_weight(self, weight: float) -> Node:
        """Return a copy of this node with another weight."""
        return Node(self.name, weight=weight, zone=self.zone, address=self.address)


def _check_weight(name: str, weight: object) -> None:
    # bool is an int subclass; a weight of True is almost certainly a mistake.
    if isinstance(weight, bool) or not isinstance(weight, (int, float)):
        raise ConfigError(f"weight of node {name!r} must be a number, got {type(weight).__name__}")
    if not math.isfinite(weight) or weight <= 0:
        raise ConfigError(f"weight of node {name!r} must be finite and > 0, got {weight!r}")


NodesLike = Iterable["str | Node"] | Mapping[str, float]


def coerce_node(node: str | Node) -> Node:
    """Return `node` as a :class:`Node`; a plain name gets weight 1.

    :raises TypeError: when `node` is neither a str nor a Node
    """
    if isinstance(node, Node):
        return node
    if isinstance(node, str):
        return Node(node)
    raise TypeError(f"node must be str or Node, got {type(node).__name__}")


def coerce_nodes(nodes: NodesLike) -> tuple[Node, ...]:
    """Return the nodes as a tuple of validated ``Node`` values, in the order given.

    Accepts names, ``Node`` values (mixed freely), or a ``{name: weight}`` mapping.

    :raises DuplicateNodeError: when a name appears twice
    :raises ConfigError: when a name or weight is invalid
    :raises TypeError: when `nodes` is a bare str, or an item is not a str or Node
    """
    if isinstance(nodes, (str, bytes)):
        raise TypeError(
            f"nodes must be an iterable of names or Nodes, or a {{name: weight}} mapping, "
            f"got a single {type(nodes).__name__} {nodes!r}; wrap it in a list"
        )
    if isinstance(nodes, Mapping):
        result = tuple(Node(name, weight=weight) for name, weight in nodes.items())
    else:
        result = tuple(coerce_node(node) for node in nodes)
    seen: set[str] = set()
    for node in result:
        if node.name in seen:
            raise DuplicateNodeError(
                f"node {node.name!r} is given twice; node names must be unique"
            )
        seen.add(node.name)
    return result
