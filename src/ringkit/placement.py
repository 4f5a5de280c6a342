"""The protocol every placement follows, and the checks they share.

A *placement* decides which node owns a key. ``HashRing`` and every strategy (modulo, jump,
rendezvous, maglev, multi-probe, bounded load, fixed partitions, ...) answer the same questions
(DESIGN.md decision 4), so that movement analysis, statistics, the simulator, the CLI and the
cluster client work with any of them unchanged:

- looking up: ``node_for(key)``, ``nodes_for(key, n)`` (distinct nodes, in the placement's
  replica order), ``node_for_many(keys)``;
- changing membership, each returning a *new* placement (placements are immutable values):
  ``add(node)``, ``remove(name)``, ``discard(name)``;
- measuring: ``nodes``, ``shares()``, ``len``, ``in``, ``iter``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Protocol, Self, TypeVar, runtime_checkable

from ringkit.errors import ConfigError, EmptyRingError, UnknownNodeError, format_names
from ringkit.hashing import Hasher, Key
from ringkit.nodes import Node

__all__ = [
    "HashedMixin",
    "Key",
    "NodeTupleMixin",
    "Placement",
    "check_n",
    "check_not_empty",
    "unknown_node",
]

P = TypeVar("P", bound="Placement")


@runtime_checkable
class Placement(Protocol):
    """What every placement answers. Implementations are immutable and thread-safe to read."""

    @property
    def nodes(self) -> tuple[Node, ...]:
        """The nodes, as validated ``Node`` values."""
        ...

    def node_for(self, key: Key) -> str:
        """Return the name of the node that owns `key`."""
        ...

    def nodes_for(self, key: Key, n: int) -> list[str]:
        """Return up to `n` distinct node names for `key`, in replica order."""
        ...

    def node_for_many(self, keys: Iterable[Key]) -> list[str]:
        """Return the owner of each key, in order."""
        ...

    def add(self: P, node: str | Node) -> P:
        """Return a new placement with `node` added."""
        ...

    def remove(self: P, name: str) -> P:
        """Return a new placement without node `name`; raise if it is not there."""
        ...

    def discard(self: P, name: str) -> P:
        """Return a new placement without node `name`, or this one if it is not there."""
        ...

    def shares(self) -> dict[str, float]:
        """Return each node's fraction of the keyspace (exact or estimated, as documented)."""
        ...

    def __len__(self) -> int: ...

    def __contains__(self, name: object) -> bool: ...

    def __iter__(self) -> Iterator[str]: ...


class NodeTupleMixin:
    """The membership surface of a placement that keeps its nodes in a tuple.

    A subclass sets ``_nodes`` (``Node`` values) and ``_names`` (their names, same order),
    implements ``remove``, and returns from ``_identity()`` the values that make two placements
    of its kind equal (nodes and options). It gets ``nodes``, ``discard``, ``len``, ``in``,
    ``iter``, ``==`` and ``hash``.
    """

    __slots__ = ()
    _nodes: tuple[Node, ...]
    _names: tuple[str, ...]

    @property
    def nodes(self) -> tuple[Node, ...]:
        """The nodes, in the placement's own order."""
        return self._nodes

    def remove(self, name: str) -> Self:
        """Return a new placement without node `name` (each placement implements it)."""
        raise NotImplementedError

    def discard(self, name: str) -> Self:
        """Return a new placement without node `name`, or this one if it is not there."""
        return self.remove(name) if name in self else self

    def _identity(self) -> tuple[object, ...]:
        """Return the values that make two placements of this kind equal."""
        raise NotImplementedError

    def __len__(self) -> int:
        return len(self._names)

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, NodeTupleMixin)
        return self._identity() == other._identity()

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._identity()))


class HashedMixin:
    """The ``hasher`` property of a placement that hashes keys with ``self._hasher``."""

    __slots__ = ()
    _hasher: Hasher

    @property
    def hasher(self) -> Hasher:
        """The hash function keys are hashed with (``diff`` compares ``hash % N`` with it)."""
        return self._hasher


def check_n(n: int) -> int:
    """Validate a replica count: an int >= 1.

    :raises ConfigError: when `n` < 1
    :raises TypeError: when `n` is not an int
    """
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"n must be int, got {type(n).__name__}")
    if n < 1:
        raise ConfigError(f"n must be >= 1, got {n!r}")
    return n


def check_not_empty(count: int, operation: str) -> None:
    """Raise :class:`EmptyRingError` when a placement with `count` nodes is asked `operation`."""
    if count == 0:
        raise EmptyRingError(f"{operation}() on an empty placement; add a node first")


def unknown_node(name: object, names: Sequence[str], kind: str = "placement") -> UnknownNodeError:
    """Return the error for a node `name` that is not among `names`.

    >>> str(unknown_node("x", ["a", "b"], "ring"))
    "node 'x' is not in the ring (2 nodes: 'a', 'b')"
    """
    return UnknownNodeError(
        f"node {name!r} is not in the {kind} ({len(names)} nodes: {format_names(names)})"
    )
