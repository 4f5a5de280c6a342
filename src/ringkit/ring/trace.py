"""Traces: how a ring places one key, token by token, as a value the CLI and the web render.

A lookup hashes the key to a *point*, takes the first token >= the point (wrapping past the last
token to the first) and names that token's node the owner; the preference list continues
clockwise with the next distinct nodes, holding back a node whose zone already has a replica
(:mod:`ringkit.preference`, Cassandra's NetworkTopologyStrategy rule). A :class:`Trace` records
that walk: every token met until the preference list is complete, whether each was its node's
first visit, the node's rank in the preference list and whether zones held it back. It is what
``ringkit lookup`` prints and what the simulator page draws, so both show the library's walk.

With a transparent hash (the key's own number, as groupcache's tests use) the walk reads by hand:
tokens A=40, B=160, C=300 on a circle of 360 points.

>>> from ringkit.hashing import Hasher
>>> from ringkit.ring import HashRing
>>> decimal = Hasher("decimal", lambda data: int(data))
>>> ring = HashRing.from_tokens({"A": [40], "B": [160], "C": [300]}, space=360, hasher=decimal)
>>> trace = ring.trace(310, replicas=2)
>>> trace.point, trace.owner, trace.wrapped
(310, 'A', True)
>>> [(step.token, step.node, step.rank) for step in trace.steps]
[(40, 'A', 1), (160, 'B', 2)]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from ringkit.hashing import Hasher, Key, encode_key
from ringkit.nodes import Node

__all__ = ["Trace", "TraceStep", "trace_ring"]


class _Ring(Protocol):
    """What a trace reads of a ring: ``HashRing``, or a placement's ``ring``."""

    @property
    def nodes(self) -> Sequence[Node]: ...

    @property
    def hasher(self) -> Hasher: ...

    @property
    def space(self) -> int: ...

    @property
    def tokens(self) -> npt.NDArray[Any]: ...

    @property
    def token_owners(self) -> npt.NDArray[Any]: ...

    def point_for(self, key: Key) -> int: ...

    def nodes_for(self, key: Key, n: int) -> list[str]: ...


@dataclass(frozen=True, slots=True)
class TraceStep:
    """One token met walking clockwise from a key's point.

    `index` is the token's position in the ring's sorted tokens. `first` is true on the node's
    first visit; `rank` is then the node's place in the preference list (1 for the owner), or
    None when the list is complete without it. `held_back` marks a first visit that ranks later
    than its turn, or not at all, because its zone already holds a replica. `wrapped` marks a
    token reached by wrapping past the top of the circle (a token below the key's point).
    """

    token: int
    index: int
    node: str
    first: bool
    rank: int | None
    held_back: bool
    wrapped: bool


@dataclass(frozen=True, slots=True)
class Trace:
    """How a ring places `key`: its hash, point, the tokens walked, owner and preference list.

    `hash_value` is the hasher's native output (`hash_bits` wide); `point` is its position on
    the ring (widened to 64 bits, or reduced into a smaller space). `steps` are the tokens met
    from the owning token on, until every node of `preference_list` was met. `wrapped` is true
    when the point lies past the last token, so the owner is the first token's node.
    """

    key: Key
    hasher: str
    hash_value: int
    hash_bits: int
    point: int
    space: int
    steps: tuple[TraceStep, ...]
    owner: str
    preference_list: tuple[str, ...]
    wrapped: bool

    @property
    def token(self) -> int:
        """The owning token: the first token >= the point, wrapping."""
        return self.steps[0].token

    @property
    def token_index(self) -> int:
        """The owning token's position in the ring's sorted tokens."""
        return self.steps[0].index

    @property
    def hash_hex(self) -> str:
        """The native hash in hex, zero-padded to its width (``0x`` and 8 or 16 digits)."""
        return f"0x{self.hash_value:0{self.hash_bits // 4}x}"


def trace_ring(ring: _Ring, key: Key, replicas: int = 1) -> Trace:
    """Return the trace of `key` on `ring` with a preference list of `replicas` nodes.

    `ring` is a ``HashRing`` (``HashRing.trace`` calls this) or any ring a placement routes by
    (``placement.ring``).

    The walk starts at the first token >= the key's point (the first token when the point is
    past the last one) and stops once every node of ``ring.nodes_for(key, replicas)`` was met;
    `replicas` larger than the node count walks until every node was met.
    Runtime: O(log(N·V)) plus the tokens walked, usually a few per replica.

    >>> from ringkit.ring import HashRing
    >>> ring = HashRing.from_tokens({"A": [40], "B": [160], "C": [300]}, space=360)
    >>> trace = trace_ring(ring, "booking-0042", 3)
    >>> trace.owner == trace.steps[0].node == ring.node_for("booking-0042")
    True

    :raises EmptyRingError: when the ring has no nodes
    :raises ConfigError: when `replicas` < 1
    :raises TypeError: when `key` is not str, bytes or int
    """
    preference = tuple(ring.nodes_for(key, replicas))
    point = ring.point_for(key)
    tokens = ring.tokens
    start = int(np.searchsorted(tokens, np.uint64(point), side="left")) % len(tokens)
    return Trace(
        key=key,
        hasher=ring.hasher.name,
        hash_value=ring.hasher.function(encode_key(key)),
        hash_bits=ring.hasher.bits,
        point=point,
        space=ring.space,
        steps=_walk(ring, start, point, preference),
        owner=preference[0],
        preference_list=preference,
        wrapped=point > int(tokens[-1]),
    )


def _walk(
    ring: _Ring, start: int, point: int, preference: tuple[str, ...]
) -> tuple[TraceStep, ...]:
    """Return the tokens met clockwise from token `start` until `preference` is all met."""
    names = [node.name for node in ring.nodes]
    tokens, owners = ring.tokens, ring.token_owners
    rank = {name: place for place, name in enumerate(preference, start=1)}
    seen: set[str] = set()
    steps: list[TraceStep] = []
    for offset in range(len(tokens)):
        index = (start + offset) % len(tokens)
        node = names[int(owners[index])]
        first = node not in seen
        seen.add(node)
        place = rank.get(node) if first else None
        token = int(tokens[index])
        steps.append(
            TraceStep(
                token=token,
                index=index,
                node=node,
                first=first,
                rank=place,
                # Met as the k-th distinct node but ranked later (or not at all): zones held it.
                held_back=first and (place is None or place > len(seen)),
                wrapped=token < point,
            )
        )
        if len(rank) == len(seen.intersection(rank)):
            break
    return tuple(steps)
