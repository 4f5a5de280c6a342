"""Cassandra: Murmur3 tokens, replicas by SimpleStrategy and NetworkTopologyStrategy, ranges.

A Cassandra ring is the nodes' tokens (signed 64-bit, as ``nodetool ring`` prints them). A key's
token is :func:`ringkit.hashing.cassandra_token` of its serialized partition key; the token
range (previous token, token] belongs to the node owning the token, and a key's replicas are found
by walking the ring clockwise from the first token >= the key's token (wrapping):

- SimpleStrategy takes the first `replication_factor` distinct nodes.
- NetworkTopologyStrategy fills each datacenter's replication factor separately, taking a node
  from a rack not yet used while that rack is new, and accepting nodes from a rack already used
  only as far as ``rf - racks in the datacenter`` allows (``DatacenterEndpoints`` in
  ``NetworkTopologyStrategy.java``). Replicas are listed in the order the walk accepts them.

References: apache/cassandra ``Murmur3Partitioner.java``, ``SimpleStrategy.java``,
``NetworkTopologyStrategy.java`` (``calculateNaturalReplicas``), ``TokenMetadata.ringIterator``;
``describe_ring`` for :meth:`CassandraRing.ranges`.

>>> ring = cassandra_ring({"n1": [-6e18], "n2": [0], "n3": [6e18]}, replication_factor=2)
>>> ring.token_for(b"123"), ring.replicas(b"123")
(-7468325962851647638, ['n1', 'n2'])
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from ringkit.errors import ConfigError, EmptyRingError, UnsupportedError
from ringkit.hashing import (
    CASSANDRA_MAX_TOKEN,
    CASSANDRA_MIN_TOKEN,
    Hasher,
    cassandra_partition_key,
    cassandra_token,
    check_key_batch,
)
from ringkit.nodes import Node
from ringkit.placement import PlacementBase, check_n, check_not_empty

__all__ = ["CASSANDRA_HASHER", "CassandraRing", "TokenRange", "cassandra_ring"]

_SPACE = 1 << 64
# The Murmur3Partitioner token of a key's bytes, as an unsigned 64-bit value (two's complement).
CASSANDRA_HASHER = Hasher("cassandra_murmur3", lambda data: cassandra_token(data) % _SPACE, 64)

# An int is refused with the fix (serialize numbers first): Cassandra keys are serialized bytes.
CassandraKey = bytes | str | Sequence[bytes | str] | int


@dataclass(frozen=True, slots=True)
class TokenRange:
    """The token range (start, end] and its replicas, as ``describe_ring`` lists it.

    With a single token in the ring, start == end and the range is the whole ring.
    """

    start: int
    end: int
    endpoints: tuple[str, ...]

    def __str__(self) -> str:
        return (
            f"TokenRange(start_token:{self.start}, end_token:{self.end}, "
            f"endpoints:[{', '.join(self.endpoints)}])"
        )


def _serialize(key: CassandraKey) -> bytes:
    if isinstance(key, (bytes, bytearray)):
        return bytes(key)
    if isinstance(key, str):
        return key.encode()
    if isinstance(key, Sequence):
        parts: list[bytes] = []
        for part in key:
            if not isinstance(part, (str, bytes)):
                raise TypeError(
                    f"partition key components must be bytes or str, got {type(part).__name__}"
                )
            parts.append(part.encode() if isinstance(part, str) else part)
        return cassandra_partition_key(parts)
    raise TypeError(
        f"key must be bytes, str or a sequence of them (a composite partition key), "
        f"got {type(key).__name__}; serialize numbers first (bigint: 8 bytes big-endian)"
    )


def _check_token(node: str, token: object) -> int:
    if isinstance(token, str):
        try:
            token = int(token)
        except ValueError:
            raise ConfigError(f"token {token!r} of node {node!r} is not an integer") from None
    if isinstance(token, float) and token.is_integer():
        token = int(token)
    if isinstance(token, bool) or not isinstance(token, int):
        raise ConfigError(f"token of node {node!r} must be an int, got {token!r}")
    if not CASSANDRA_MIN_TOKEN <= token <= CASSANDRA_MAX_TOKEN:
        raise ConfigError(
            f"token {token} of node {node!r} is outside the Murmur3 range "
            f"[{CASSANDRA_MIN_TOKEN}, {CASSANDRA_MAX_TOKEN}]"
        )
    return token


class CassandraRing(PlacementBase):
    """Tokens of nodes, a replication strategy, and the topology (datacenter, rack) of each node.

    Nodes carry no weight: what a node owns follows from its tokens, so ``reweight`` and a
    weighted node are refused (give the node more tokens instead).

    Looking up: ``token_for``, ``replicas``, ``replicas_for_token``, ``node_for``, ``nodes_for``,
    ``node_for_many``. Changing membership: ``remove`` (decommission: its ranges pass to the
    next tokens), ``discard``; ``add`` needs tokens, so it is refused (build a new ring).
    Measuring: ``ranges``, ``ranges_for``, ``shares``, ``tokens``, ``nodes``, ``hasher``,
    ``len``, ``in``, ``iter``, ``==``.
    """

    __slots__ = ("_datacenter", "_hasher", "_names", "_nodes", "_owners", "_rack", "_rf", "_tokens")
    _container = "cassandra ring"

    def __init__(
        self,
        tokens: list[tuple[int, str]],
        rf: int | dict[str, int],
        datacenter: dict[str, str],
        rack: dict[str, str],
    ) -> None:
        tokens.sort()
        self._tokens = [token for token, _ in tokens]
        self._owners = [name for _, name in tokens]
        self._names = tuple(dict.fromkeys(datacenter))
        self._nodes = tuple(Node(name) for name in self._names)
        self._hasher = CASSANDRA_HASHER
        self._rf = rf
        self._datacenter = datacenter
        self._rack = rack

    def token_for(self, key: CassandraKey) -> int:
        """Return the key's token (a tuple or list of components is a composite key)."""
        return cassandra_token(_serialize(key))

    def _walk(self, token: int) -> Iterator[str]:
        # TokenMetadata.ringIterator: from the first token >= `token`, once around the ring.
        start = bisect_left(self._tokens, token)
        for step in range(len(self._tokens)):
            yield self._owners[(start + step) % len(self._tokens)]

    def replicas_for_token(self, token: int) -> list[str]:
        """Return the replicas of `token`, in the order Cassandra's strategy finds them.

        Runtime: O(T) in the worst case for T tokens.
        """
        token = _check_token("(lookup)", token)
        if isinstance(self._rf, int):
            found: list[str] = []
            for name in self._walk(token):
                if name not in found:
                    found.append(name)
                    if len(found) == self._rf:
                        break
            return found
        return self._network_topology(token, self._rf)

    def _network_topology(self, token: int, rf: dict[str, int]) -> list[str]:
        left: dict[str, int] = {}
        repeats: dict[str, int] = {}
        for dc, factor in rf.items():
            members = [name for name in self._names if self._datacenter[name] == dc]
            if factor > 0 and members:
                left[dc] = min(factor, len(members))
                repeats[dc] = factor - len({self._rack[name] for name in members})
        found: list[str] = []
        seen_racks: set[tuple[str, str]] = set()
        for name in self._walk(token):
            dc = self._datacenter[name]
            if not any(left.values()):
                break
            if left.get(dc, 0) == 0 or name in found:
                continue
            if (dc, self._rack[name]) not in seen_racks:
                seen_racks.add((dc, self._rack[name]))
            elif repeats[dc] > 0:
                repeats[dc] -= 1
            else:
                continue  # rfLeft distinct racks are still to come: no more rack repeats
            found.append(name)
            left[dc] -= 1
        return found

    def replicas(self, key: CassandraKey) -> list[str]:
        """Return the replicas of `key`: the nodes that hold its partition."""
        return self.replicas_for_token(self.token_for(key))

    def node_for(self, key: CassandraKey) -> str:
        """Return the first replica of `key` (the owner of its token's range).

        :raises EmptyRingError: when every node was removed
        """
        check_not_empty(len(self._tokens), "node_for")
        return self.replicas(key)[0]

    def nodes_for(self, key: CassandraKey, n: int) -> list[str]:
        """Return the first `n` replicas of `key` (all of them when n exceeds the factor).

        :raises EmptyRingError: when every node was removed
        """
        check_n(n)
        check_not_empty(len(self._tokens), "nodes_for")
        return self.replicas(key)[:n]

    def node_for_many(self, keys: Iterable[CassandraKey]) -> list[str]:
        """Return the first replica of each key, in order."""
        check_key_batch(keys, "node_for_many")
        return [self.node_for(key) for key in keys]

    def ranges(self) -> list[TokenRange]:
        """Return every token range with its replicas, ordered by end token (describering).

        Runtime: O(T²) in the worst case.
        """
        return [
            TokenRange(self._tokens[i - 1], token, tuple(self.replicas_for_token(token)))
            for i, token in enumerate(self._tokens)
        ]

    def ranges_for(self, name: str) -> list[TokenRange]:
        """Return the ranges `name` holds a replica of (primary or not)."""
        return [item for item in self.ranges() if name in item.endpoints]

    def shares(self) -> dict[str, float]:
        """Return each node's exact fraction of the token space as primary (range lengths).

        >>> cassandra_ring({"a": [0], "b": [2**62]}).shares()
        {'a': 0.75, 'b': 0.25}
        """
        owned = dict.fromkeys(self._names, 0)
        for i, token in enumerate(self._tokens):
            # (previous, token]; a lone token owns the whole ring
            owned[self._owners[i]] += (token - self._tokens[i - 1]) % _SPACE or _SPACE
        return {name: points / _SPACE for name, points in owned.items()}

    @property
    def tokens(self) -> list[tuple[int, str]]:
        """The ring as ``nodetool ring`` lists it: (token, node) by token."""
        return list(zip(self._tokens, self._owners, strict=True))

    # -- changing membership ---------------------------------------------------------------

    def add(self, node: str | Node) -> CassandraRing:
        """Refuse: a Cassandra node joins at tokens (``cassandra_ring`` with its tokens).

        :raises UnsupportedError: always, naming the node
        """
        name = node.name if isinstance(node, Node) else node
        raise UnsupportedError(
            f"a cassandra ring cannot place a node without tokens, got {name!r}; build "
            "cassandra_ring(...) with the node's tokens"
        )

    def _removed(self, name: str) -> CassandraRing:
        # Decommission: the node's ranges pass to the next tokens clockwise.
        names = [n for n in self._names if n != name]
        return CassandraRing(
            [
                (t, owner)
                for t, owner in zip(self._tokens, self._owners, strict=True)
                if owner != name
            ],
            self._rf,
            {n: self._datacenter[n] for n in names},
            {n: self._rack[n] for n in names},
        )

    def _weights_refused(self) -> tuple[str, str]:
        return "a cassandra ring", "use cassandra_ring(...) to give the node more tokens"

    def _identity(self) -> tuple[object, ...]:
        return (self._tokens, self._owners, self._rf, self._datacenter, self._rack)

    def _repr_options(self) -> str:
        return f", tokens={len(self._tokens)}, replication_factor={self._rf!r}"


def _topology(
    names: Sequence[str], table: Mapping[str, str] | None, what: str, default: str
) -> dict[str, str]:
    if table is None:
        return dict.fromkeys(names, default)
    unknown = [name for name in table if name not in names]
    missing = [name for name in names if name not in table]
    if unknown or missing:
        raise ConfigError(
            f"{what} must name every node exactly, got unknown {unknown!r} and missing {missing!r}"
        )
    return {name: table[name] for name in names}


def _replication(rf: object, datacenters: dict[str, str]) -> int | dict[str, int]:
    if isinstance(rf, Mapping):
        factors = dict(rf)
        for dc, factor in factors.items():
            if isinstance(factor, bool) or not isinstance(factor, int) or factor < 0:
                raise ConfigError(
                    f"replication factor of datacenter {dc!r} must be an int >= 0, got {factor!r}"
                )
        known = sorted(set(datacenters.values()))
        if not set(factors) & set(known):
            raise ConfigError(
                f"replication_factor names no datacenter of the ring, got "
                f"{sorted(factors)!r}; datacenters: {known!r}"
            )
        return factors
    if isinstance(rf, bool) or not isinstance(rf, int) or rf < 1:
        raise ConfigError(
            f"replication_factor must be an int >= 1 (SimpleStrategy) or a "
            f"{{datacenter: factor}} mapping (NetworkTopologyStrategy), got {rf!r}"
        )
    return rf


def cassandra_ring(
    tokens_by_node: Mapping[str, Iterable[int | str] | int | str],
    *,
    replication_factor: int | Mapping[str, int] = 1,
    racks: Mapping[str, str] | None = None,
    datacenters: Mapping[str, str] | None = None,
) -> CassandraRing:
    """Return a Cassandra ring from each node's tokens (ints or their decimal text).

    `replication_factor` is an int for SimpleStrategy, or ``{datacenter: factor}`` for
    NetworkTopologyStrategy; `datacenters` and `racks` map every node to its datacenter and rack
    (``"datacenter1"`` / ``"rack1"`` when omitted, Cassandra's defaults).

    :raises ConfigError: for no nodes, a token outside the Murmur3 range or owned twice, a bad
        replication factor, or a topology that does not name every node
    """
    names = list(tokens_by_node)
    if not names:
        raise EmptyRingError("cassandra_ring() needs at least one node with tokens")
    owned: dict[int, str] = {}
    for name in names:
        given = tokens_by_node[name]
        items = [given] if isinstance(given, (int, str, float)) else list(given)
        if not items:
            raise ConfigError(f"node {name!r} has no tokens")
        for item in items:
            token = _check_token(name, item)
            if token in owned:
                raise ConfigError(f"token {token} is owned by both {owned[token]!r} and {name!r}")
            owned[token] = name
    dcs = _topology(names, datacenters, "datacenters", "datacenter1")
    rack = _topology(names, racks, "racks", "rack1")
    rf = _replication(replication_factor, dcs)
    return CassandraRing([(token, name) for token, name in owned.items()], rf, dcs, rack)
