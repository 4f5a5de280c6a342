"""The protocol every placement follows, the base class that implements it, and shared checks.

A *placement* decides which node owns a key. ``HashRing``, every strategy (modulo, jump,
rendezvous, maglev, multi-probe, bounded load, fixed partitions, ...) and every compatibility
layout (ketama and Envoy continua, Cassandra, Redis Cluster) answer the same questions, so
that movement analysis, statistics, the simulator, the CLI, the web page and the
cluster client work with any of them without asking what type it is:

- looking up: ``node_for(key)``, ``nodes_for(key, n)`` (distinct nodes, in the placement's
  replica order), ``node_for_many(keys)``, ``assign_many(keys)`` (the owners when the keys arrive
  as load, which differs from ``node_for_many`` only for a stateful placement such as
  ``BoundedLoad``);
- changing membership, each returning a *new* placement (placements are immutable values):
  ``add(node)``, ``remove(name)``, ``discard(name)``, ``reweight(name, weight)``;
- measuring: ``nodes``, ``shares()``, ``len``, ``in``, ``iter``, ``==``, ``hash``, ``repr``;
- what it is built on: ``hasher`` (the hash keys go through, or None), ``ring`` (the
  :class:`~ringkit.HashRing` whose tokens it routes by, or None; typed here as
  :class:`TokenRing`, the ring's surface, because the ring sits a layer above this module),
  ``routes_by_hash`` with
  ``owner_indices_for_hashes(hashes)`` (owners straight from a vector of native key hashes, for
  callers that cache hashes), and ``segmentation(replicas)`` (the exact units it routes by, for
  exact movement analysis).

:class:`PlacementBase` implements membership once (``discard``, ``len``, ``in``, ``iter``,
``==``, ``hash``, ``repr``, the duplicate / unknown / weight checks of ``add``, ``remove`` and
``reweight``); a placement supplies how it is rebuilt (``_rebuilt``) and what makes two of its
kind equal (``_identity``).

>>> from ringkit.strategies.modulo import Modulo
>>> placement = Modulo(["a", "b"])
>>> placement.discard("zz") is placement, len(placement.add("c")), "a" in placement
(True, 3, True)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, Self, runtime_checkable

import numpy as np
import numpy.typing as npt

from ringkit.errors import (
    ConfigError,
    DuplicateNodeError,
    EmptyRingError,
    UnknownNodeError,
    UnsupportedError,
    format_names,
)
from ringkit.hashing import Hasher, Key, check_key_batch, hash_many
from ringkit.nodes import Node, coerce_node

__all__ = [
    "MAX_TOKENS",
    "TOKEN_BYTES",
    "IndexArray",
    "Key",
    "Placement",
    "PlacementBase",
    "Segmentation",
    "TokenRing",
    "check_max_tokens",
    "check_n",
    "check_not_empty",
    "check_token_count",
    "count_text",
    "int_text",
    "unknown_node",
]

IndexArray = npt.NDArray[np.integer[Any]]

# The most tokens (vnodes, continuum points, table slots) a layout builds unless its caller
# raises ``max_tokens``: 2**24 tokens are about 200 MB at ``TOKEN_BYTES`` each, far past what
# balance needs (160 vnodes x 100,000 nodes) and short of what takes a machine down.
# Before this, HashRing({"a": 1e12}) and `lookup --vnodes 50000000` ran out of memory
MAX_TOKENS = 1 << 24
# Bytes a ring spends per token: a uint64 token, a uint16/uint32 owner, 2 bytes of prefix table.
TOKEN_BYTES = 12


@dataclass(frozen=True, slots=True)
class Segmentation:
    """The exact units a placement routes by, so two placements can be diffed unit by unit.

    ``basis`` is ``"points"`` (the arcs of ``placement.ring``: ``size`` is the ring's space),
    ``"partitions"`` or ``"slots"`` (``size`` fixed units; ``unit_for(key)`` is a key's unit and
    ``rows()`` each unit's preference list). Two segmentations are comparable when ``basis``,
    ``size`` and ``hasher`` agree (``==``).

    >>> Segmentation("slots", 7, None) == Segmentation("slots", 7, None, rows=lambda: ())
    True
    """

    basis: str
    size: int
    hasher: Hasher | None
    rows: Callable[[], Sequence[Sequence[str]]] | None = field(default=None, compare=False)
    unit_for: Callable[[Key], int] | None = field(default=None, compare=False)


@runtime_checkable
class Placement(Protocol):
    """What every placement answers. Implementations are immutable and thread-safe to read."""

    @property
    def nodes(self) -> tuple[Node, ...]:
        """The nodes, as validated ``Node`` values."""
        ...

    @property
    def hasher(self) -> Hasher | None:
        """The hash function keys go through, or None for a placement that hashes nothing."""
        ...

    @property
    def ring(self) -> TokenRing | None:
        """The hash ring whose tokens this placement routes by, or None."""
        ...

    @property
    def routes_by_hash(self) -> bool:
        """Whether ``owner_indices_for_hashes`` answers (owners are a function of the hash)."""
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

    def assign_many(self, keys: Iterable[Key]) -> list[str]:
        """Return the owner of each key when the keys arrive as load, in order."""
        ...

    def owner_indices_for_hashes(self, hashes: npt.NDArray[np.uint64]) -> IndexArray:
        """Return the owner of each native key hash as an index into ``nodes``."""
        ...

    def segmentation(self, replicas: int) -> Segmentation | None:
        """Return the exact units this placement routes `replicas` copies by, or None."""
        ...

    def add(self, node: str | Node) -> Self:
        """Return a new placement with `node` added."""
        ...

    def remove(self, name: str) -> Self:
        """Return a new placement without node `name`; raise if it is not there."""
        ...

    def discard(self, name: str) -> Self:
        """Return a new placement without node `name`, or this one if it is not there."""
        ...

    def reweight(self, name: str, weight: float) -> Self:
        """Return a new placement in which node `name` has `weight`."""
        ...

    def shares(self) -> dict[str, float]:
        """Return each node's fraction of the keyspace (exact or estimated, as documented)."""
        ...

    def __len__(self) -> int: ...

    def __contains__(self, name: object) -> bool: ...

    def __iter__(self) -> Iterator[str]: ...


@runtime_checkable
class TokenRing(Placement, Protocol):
    """A hash ring as a placement exposes it (``placement.ring``); :class:`~ringkit.HashRing`.

    Sorted tokens and the index of each token's node in ``nodes``, over a space of points.
    """

    @property
    def hasher(self) -> Hasher:
        """The hash function keys and vnode labels are hashed with."""
        ...

    @property
    def space(self) -> int:
        """The size of the point space (2**64 unless built from explicit tokens)."""
        ...

    @property
    def vnodes(self) -> int:
        """The vnode count of a node of weight 1."""
        ...

    @property
    def tokens(self) -> npt.NDArray[np.uint64]:
        """The sorted tokens."""
        ...

    @property
    def token_owners(self) -> IndexArray:
        """For each token, the index of its node in ``nodes``."""
        ...

    def iter_nodes(self, key: Key) -> Iterator[str]:
        """Yield the distinct nodes for `key` in preference order."""
        ...

    def point_for(self, key: Key) -> int:
        """Return the point of `key` on this ring."""
        ...

    def node_for_point(self, point: int) -> str:
        """Return the node owning `point`."""
        ...

    def owner_indices(self, points: npt.ArrayLike) -> IndexArray:
        """Return the owner index of each point."""
        ...

    def owned_points(self) -> dict[str, int]:
        """Return the exact number of points each node owns."""
        ...


class PlacementBase:
    """The membership surface and protocol defaults every placement inherits.

    A subclass keeps its nodes in ``_nodes`` (``Node`` values) and their names in ``_names``
    (same order), and provides ``_rebuilt(nodes)`` (the same placement, options kept, over other
    nodes) and ``_identity()`` (what makes two placements of its kind equal). It may override
    ``_added`` / ``_removed`` / ``_reweighted`` where it changes membership incrementally, and
    ``_weights_refused`` when it cannot honour weights.

    Changing membership: ``add``, ``remove``, ``discard``, ``reweight``.
    Looking up: ``assign_many``, ``owner_indices_for_hashes``.
    Measuring: ``nodes``, ``hasher``, ``ring``, ``routes_by_hash``, ``segmentation``, ``len``,
    ``in``, ``iter``, ``==``, ``hash``, ``repr``.
    """

    __slots__ = ()
    _nodes: tuple[Node, ...]
    _names: tuple[str, ...]
    _hasher: Hasher | None = None
    _container = "placement"  # what messages call it: "node 'x' is not in the placement"
    # Whether each key's owner is a pure function of its native hash under ``hasher``, so that
    # ``owner_indices_for_hashes`` answers; a placement that routes so sets it True.
    routes_by_hash: bool = False

    # -- membership ------------------------------------------------------------------------------

    @property
    def nodes(self) -> tuple[Node, ...]:
        """The nodes, in the placement's own order."""
        return self._nodes

    def add(self, node: str | Node) -> Self:
        """Return a new placement with `node` added.

        :raises DuplicateNodeError: when a node of that name is already there
        :raises UnsupportedError: when the node has a weight this placement cannot honour
        """
        return self._added(self._check_new(node))

    def remove(self, name: str) -> Self:
        """Return a new placement without node `name`.

        :raises UnknownNodeError: when `name` is not there
        """
        if name not in self:
            raise unknown_node(name, self._names, self._container)
        return self._removed(name)

    def discard(self, name: str) -> Self:
        """Return a new placement without node `name`, or this one if it is not there."""
        return self.remove(name) if name in self else self

    def reweight(self, name: str, weight: float) -> Self:
        """Return a new placement in which node `name` has `weight`.

        :raises UnsupportedError: when this placement cannot weight nodes (the message names
            a placement that can)
        :raises UnknownNodeError: when `name` is not there
        :raises ConfigError: when `weight` is not finite and > 0
        """
        error = self._cannot_weight(name, weight)
        if error is not None:
            raise error
        if name not in self:
            raise unknown_node(name, self._names, self._container)
        node = self._nodes[self._names.index(name)].with_weight(weight)
        return self._reweighted(node)

    def _check_new(self, node: str | Node) -> Node:
        """Return `node` as a ``Node`` after checking this placement can take it.

        :raises DuplicateNodeError: when a node of that name is already there
        :raises UnsupportedError: when the node has a weight this placement cannot honour
        """
        new = coerce_node(node)
        if new.name in self:
            raise DuplicateNodeError(f"node {new.name!r} is already in the {self._container}")
        self._check_weights((new,))
        return new

    def _check_weights(self, nodes: Iterable[Node]) -> None:
        """Refuse a weight other than 1 when this placement cannot honour weights.

        :raises UnsupportedError: naming the node, its weight and what to use instead
        """
        for node in nodes:
            error = self._cannot_weight(node.name, node.weight) if node.weight != 1.0 else None
            if error is not None:
                raise error

    def _cannot_weight(self, name: str, weight: float) -> UnsupportedError | None:
        """Return the error for giving node `name` `weight`, if this placement ignores weights."""
        refused = self._weights_refused()
        if refused is None:
            return None
        subject, fix = refused
        return UnsupportedError(
            f"{subject} cannot weight nodes, got weight {weight!r} for node {name!r}; {fix}"
        )

    def _weights_refused(self) -> tuple[str, str] | None:
        """Return (subject, what to use instead) when weights are ignored; None if honoured."""
        return None

    def _rebuilt(self, nodes: tuple[Node, ...]) -> Self:
        """Return a placement of this kind, with these options, over `nodes`."""
        raise NotImplementedError(f"{type(self).__name__} does not rebuild from nodes")

    def _added(self, node: Node) -> Self:
        return self._rebuilt((*self._nodes, node))

    def _removed(self, name: str) -> Self:
        return self._rebuilt(tuple(node for node in self._nodes if node.name != name))

    def _reweighted(self, node: Node) -> Self:
        return self._rebuilt(tuple(node if n.name == node.name else n for n in self._nodes))

    def __len__(self) -> int:
        return len(self._names)

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    # -- protocol defaults -----------------------------------------------------------------------

    @property
    def hasher(self) -> Hasher | None:
        """The hash function keys go through (``diff`` compares ``hash % N`` with it)."""
        return self._hasher

    @property
    def ring(self) -> TokenRing | None:
        """The hash ring whose tokens this placement routes by (None: it routes otherwise)."""
        return None

    def node_for_many(self, keys: Iterable[Key]) -> list[str]:
        """Return the owner of each key, in order.

        A placement that routes by the key hash alone hashes the keys in one pass and answers
        through ``owner_indices_for_hashes`` (vectorised); any other calls ``node_for`` per key.

        :raises EmptyRingError: when there are no nodes
        :raises TypeError: when a key is not str, bytes or int
        """
        check_key_batch(keys, "node_for_many")
        hasher = self.hasher
        if not self.routes_by_hash or hasher is None:
            node_for = self.node_for
            return [node_for(key) for key in keys]
        check_not_empty(len(self._names), "node_for_many")
        indices = self.owner_indices_for_hashes(hash_many(keys, hasher))
        result: list[str] = np.array(self._names, dtype=object)[indices].tolist()
        return result

    def node_for(self, key: Key) -> str:
        """Return the name of the node that owns `key` (each placement implements it)."""
        raise NotImplementedError

    def assign_many(self, keys: Iterable[Key]) -> list[str]:
        """Return the owners when `keys` arrive as load, in order.

        A stateless placement answers ``node_for_many(keys)``; a stateful one (``BoundedLoad``)
        assigns the keys in turn on a fresh load table.
        """
        check_key_batch(keys, "assign_many")
        return self.node_for_many(keys)

    def owner_indices_for_hashes(self, hashes: npt.NDArray[np.uint64]) -> IndexArray:
        """Return, for each native key hash under ``hasher``, its owner's index in ``nodes``.

        Callers that keep hashes (the simulator's hash cache) skip hashing again. Available
        when ``routes_by_hash`` is True.

        :raises UnsupportedError: when owners are not a function of the key hash alone
        """
        raise UnsupportedError(
            f"{type(self).__name__} does not route by the key hash alone, got "
            f"{len(hashes)} hashes; use node_for_many(keys)"
        )

    def segmentation(self, replicas: int) -> Segmentation | None:
        """Return the exact units `replicas` copies are routed by, or None (diff samples keys)."""
        return None

    # -- identity ---------------------------------------------------------------------------------

    def _identity(self) -> tuple[object, ...]:
        """Return the values that make two placements of this kind equal (arrays allowed)."""
        raise NotImplementedError

    def _repr_options(self) -> str:
        """Return the options ``repr`` shows after the node names, e.g. ``", hasher='md5'"``."""
        return ""

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, PlacementBase)  # for mypy: the type test is above
        return all(
            _same(mine, theirs)
            for mine, theirs in zip(self._identity(), other._identity(), strict=True)
        )

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._nodes))

    def __repr__(self) -> str:
        return f"{type(self).__name__}([{format_names(self._names)}]{self._repr_options()})"


def _same(mine: object, theirs: object) -> bool:
    if isinstance(mine, np.ndarray):
        return isinstance(theirs, np.ndarray) and np.array_equal(mine, theirs)
    return mine == theirs


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


def check_max_tokens(max_tokens: object) -> int:
    """Validate a token limit: an int >= 1.

    :raises ConfigError: otherwise, naming the value
    """
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ConfigError(f"max_tokens must be an int >= 1, got {max_tokens!r}")
    return max_tokens


def count_text(count: int) -> str:
    """Return `count` for an error message: with thousands separators, or as a power of ten.

    >>> count_text(16_777_216), count_text(16 * 10**301), count_text(10**5000)
    ('16,777,216', '~1.6e+302', '~1.0e+5000')
    """
    if count < 10**15:
        return f"{count:,}"
    # No str(count): past 4,300 digits Python refuses to convert an int to text.
    exponent = int(math.log10(count))
    lead = count // 10 ** (exponent - 1)  # the two leading digits (one off near powers of 10)
    if lead >= 100:
        exponent, lead = exponent + 1, lead // 10
    elif lead < 10:
        exponent, lead = exponent - 1, count // 10 ** (exponent - 2)
    return f"~{lead // 10}.{lead % 10}e+{exponent:02d}"


def int_text(value: int) -> str:
    """Return `value` as written, or as a power of ten past 15 digits, for an error message.

    >>> int_text(50_000_000), int_text(-(10**5000))
    ('50000000', '-~1.0e+5000')
    """
    if abs(value) < 10**15:
        return str(value)
    return ("-" if value < 0 else "") + count_text(abs(value))


def _approximate_bytes(count: int) -> str:
    """Return `count` bytes in decimal units, for an error message.

    >>> _approximate_bytes(600_000_000), _approximate_bytes(1_920_000_000_000_000)
    ('600 MB', '1.9 PB')
    >>> _approximate_bytes(36), _approximate_bytes(10**30)
    ('36 B', '~1.0e+30 B')
    """
    if count >= 10**18:
        return f"{count_text(count)} B"
    size = float(count)
    for unit in ("B", "kB", "MB", "GB", "TB", "PB"):
        if size < 999.5 or unit == "PB":
            break
        size /= 1000
    return f"{size:.2g} {unit}" if size < 10 else f"{size:,.0f} {unit}"


def check_token_count(
    count: int,
    max_tokens: int = MAX_TOKENS,
    *,
    what: str = "a ring",
    fix: str = "pass max_tokens= to raise it",
) -> int:
    """Refuse a layout of `count` tokens above `max_tokens`, before anything is allocated.

    Callers count what they would build (vnodes times weight, a table size) and call this
    first, so a huge weight or vnode count is a ``ConfigError`` instead of a ``MemoryError``
    or a machine that swaps. Rings cost ``TOKEN_BYTES`` per token.

    >>> check_token_count(480)
    480
    >>> check_token_count(50_000_000)
    Traceback (most recent call last):
    ...
    ringkit.errors.ConfigError: a ring would need 50,000,000 tokens (≈ 600 MB); the limit is \
16,777,216 tokens (≈ 201 MB); pass max_tokens= to raise it

    :raises ConfigError: when `count` > `max_tokens`
    """
    if count > max_tokens:
        raise ConfigError(
            f"{what} would need {count_text(count)} tokens"
            f" (≈ {_approximate_bytes(count * TOKEN_BYTES)});"
            f" the limit is {max_tokens:,} tokens"
            f" (≈ {_approximate_bytes(max_tokens * TOKEN_BYTES)}); {fix}"
        )
    return count


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
