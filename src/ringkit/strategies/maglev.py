"""Maglev: a lookup table of prime size filled from per-node permutations (Eisenbud et al.).

Each node prefers the slots of a prime-sized table in its own order, ``permutation[j] =
(offset + j·skip) mod M``; the nodes take turns claiming their next preferred free slot until
the table is full. A key goes to ``table[hash(key) mod M]``: one array access per lookup, and
every node holds ``M/N`` slots give or take one (weights scale the turns). The price is
disruption: when membership changes, the turns change, so a few slots move between nodes that
stayed (``docs/strategies.md`` gives the measured figure).

ringkit populates the table exactly as Envoy does (``maglev_lb.cc``): nodes sorted by name,
``offset = xxHash64(name) mod M``, ``skip = xxHash64(name, seed=1) mod (M - 1) + 1``, and
weighted turns against the largest normalised weight. So ``Maglev`` and
:func:`ringkit.compat.envoy_maglev` (Envoy's layout, with its key hash and host weights) build
the same table, and Envoy's ``maglev_lb_test`` tables come out slot for slot.

Reference: Daniel E. Eisenbud et al., "Maglev: A Fast and Reliable Software Network Load
Balancer", NSDI 2016, section 3.4 and pseudocode listing 1 (the names ``offset``, ``skip``,
``permutation``, ``next`` are the paper's); Envoy ``source/common/upstream/maglev_lb.cc``.

>>> maglev = Maglev([f"127.0.0.1:{port}" for port in range(90, 96)], table_size=7)
>>> [name[-2:] for name in maglev.table]
['92', '94', '90', '91', '95', '90', '93']
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator
from itertools import islice
from typing import Any

import numpy as np
import numpy.typing as npt
import xxhash

from ringkit.errors import ConfigError
from ringkit.hashing import DEFAULT_HASH, Hasher, HasherLike, Key, encode_key, get_hasher
from ringkit.nodes import Node, NodesLike, coerce_nodes
from ringkit.placement import (
    MAX_TOKENS,
    IndexArray,
    PlacementBase,
    Segmentation,
    check_max_tokens,
    check_n,
    check_not_empty,
    check_token_count,
    int_text,
)
from ringkit.strategies.options import Strategy

__all__ = ["MAGLEV_TABLE_SIZE", "Maglev", "is_prime", "nearest_primes"]

MAGLEV_TABLE_SIZE = 65537  # the paper's recommended size (section 5.3), Envoy's default


def _xxh64(data: bytes) -> int:
    return xxhash.xxh64_intdigest(data)


def is_prime(n: int) -> bool:
    """Return whether `n` is prime (trial division by 6k ± 1).

    >>> [p for p in range(20) if is_prime(p)]
    [2, 3, 5, 7, 11, 13, 17, 19]
    """
    if n < 4:
        return n >= 2
    if n % 2 == 0 or n % 3 == 0:
        return False
    return all(n % f and n % (f + 2) for f in range(5, math.isqrt(n) + 1, 6))


def nearest_primes(n: int) -> tuple[int | None, int]:
    """Return the largest prime below `n` (None if there is none) and the smallest above it.

    >>> nearest_primes(1000)
    (997, 1009)
    """
    below = next((p for p in range(n - 1, 1, -1) if is_prime(p)), None)
    above = next(p for p in range(max(n + 1, 2), 2 * n + 3) if is_prime(p))
    return below, above


def _check_table_size(table_size: object, max_tokens: int = MAX_TOKENS) -> int:
    if isinstance(table_size, bool) or not isinstance(table_size, int):
        raise TypeError(f"maglev table_size must be int, got {type(table_size).__name__}")
    # Before the primality test, which a huge table size would also make slow.
    check_token_count(
        table_size, max_tokens, what=f"a maglev table of table_size={int_text(table_size)}"
    )
    if not is_prime(table_size):
        below, above = nearest_primes(max(table_size, 0))
        nearest = ", ".join(str(p) for p in (below, above) if p is not None)
        raise ConfigError(
            f"maglev table_size must be prime, got {table_size!r}; nearest primes: {nearest}"
        )
    return table_size


def _next_turn(t: int, weight: float, target: float) -> int:
    """Return the first iteration after `t` at which ``iteration * weight >= target``.

    Envoy visits every node on every iteration and skips it while ``iteration * weight <
    target``; jumping straight to the next turn gives the same order with far fewer steps.
    """
    turn = max(t + 1, math.ceil(target / weight))
    # The same double arithmetic as Envoy decides: nudge past rounding in the division.
    while turn > t + 1 and float(turn - 1) * weight >= target:
        turn -= 1
    while float(turn) * weight < target:
        turn += 1
    return turn


def _populate(names: tuple[str, ...], weights: list[float], m: int) -> npt.NDArray[np.int64]:
    """Return the table (node index per slot), filled as Envoy's MaglevTable (listing 1)."""
    offset = [_xxh64(name.encode()) % m for name in names]
    skip = [xxhash.xxh64_intdigest(name.encode(), seed=1) % (m - 1) + 1 for name in names]
    position = list(offset)  # permutation[next] of each node, advanced in place
    table = [-1] * m
    # Most probing happens while the last few slots fill (~M·ln M probes in all); a plain loop
    # serves the first 95% of slots, numpy scans ahead in blocks for the rest.
    switch = m - max(1, m // 20)
    turns = _turns(weights, m)
    for i in islice(turns, switch):
        c, step = position[i], skip[i]
        while table[c] >= 0:  # the paper's "next[i] += 1" until a free slot
            c += step
            if c >= m:
                c -= m
        table[c] = i
        c += step
        position[i] = c - m if c >= m else c
    array = np.array(table, dtype=np.int64)
    for free, i in enumerate(turns):
        position[i] = _claim_ahead(array, i, position[i], skip[i], m - switch - free)
    return array


def _claim_ahead(table: npt.NDArray[np.int64], i: int, c: int, step: int, free: int) -> int:
    """Give node `i` its first free slot from permutation position `c`; return the next one.

    `free` slots are left, so about ``m / free`` probes find one: scan 4 times that at once.
    """
    m = len(table)
    block = min(m, max(64, 4 * m // free))
    while True:
        slots = (c + step * np.arange(block, dtype=np.int64)) % m
        found = np.flatnonzero(table[slots] < 0)
        if len(found):
            slot = int(slots[found[0]])
            table[slot] = i
            return (slot + step) % m
        c = (c + step * block) % m


def _turns(weights: list[float], m: int) -> Iterator[int]:
    """Yield the node that claims each of the `m` slots, in Envoy's order of turns."""
    count = len(weights)
    if len(set(weights)) == 1 and (m // count + 2) ** 2 < 2**50:
        # Equal weights: every node passes Envoy's check on every iteration (its accumulated
        # target stays a whole step below iteration × weight while iteration² · 2**-52 ≪ 1).
        yield from (i % count for i in range(m))
        return
    max_weight = max(weights)
    target = [0.0] * count
    turns = [(1, i) for i in range(count)]  # (iteration, node): Envoy's visiting order
    for _ in range(m):
        t, i = heapq.heappop(turns)
        yield i
        target[i] += max_weight
        heapq.heappush(turns, (_next_turn(t, weights[i], target[i]), i))


class Maglev(PlacementBase):
    """A Maglev lookup table over named nodes; an immutable value.

    ``table`` has ``table_size`` slots (a prime), each naming a node; ``slot_for(key)`` is
    ``hash(key) mod table_size`` and ``node_for(key)`` is ``table[slot_for(key)]``. Weights
    give a node proportionally more turns while filling. With more nodes than slots, the nodes
    last in name order get no slot (as in Envoy).

    Replica order: the distinct nodes met walking the table forward from the key's slot.

    Looking up: ``node_for``, ``nodes_for``, ``node_for_many``, ``owner_indices_for_hashes``,
    ``slot_for``, ``table``.
    Changing membership: ``add``, ``remove``, ``discard``, ``reweight`` (each rebuilds the table).
    Measuring: ``nodes``, ``hasher``, ``shares`` (exact: slots / table_size), ``segmentation``
    (slots), ``len``, ``in``, ``iter``, ``==``.
    """

    __slots__ = ("_hasher", "_holders", "_max_tokens", "_names", "_nodes", "_table", "_table_size")
    routes_by_hash = True  # the owner is ``table[hash mod table_size]``
    _hasher: Hasher

    def __init__(
        self,
        nodes: NodesLike = (),
        *,
        table_size: int = MAGLEV_TABLE_SIZE,
        hasher: HasherLike = DEFAULT_HASH,
        max_tokens: int = MAX_TOKENS,
    ) -> None:
        self._max_tokens = check_max_tokens(max_tokens)
        self._table_size = _check_table_size(table_size, self._max_tokens)
        self._hasher = get_hasher(hasher)
        # Envoy sorts by the hashed name (byte order; UTF-8 keeps code-point order).
        self._nodes = tuple(sorted(coerce_nodes(nodes), key=lambda node: node.name))
        self._names = tuple(node.name for node in self._nodes)
        dtype = np.uint16 if len(self._names) <= 2**16 else np.uint32
        if self._names:
            total = math.fsum(node.weight for node in self._nodes)
            weights = [node.weight * 1.0 / total for node in self._nodes]
            table = np.array(_populate(self._names, weights, table_size), dtype=dtype)
        else:
            table = np.empty(0, dtype=dtype)
        table.flags.writeable = False
        self._table: npt.NDArray[Any] = table
        # nodes holding at least one slot (fewer than N only when N > table_size)
        self._holders = int(np.count_nonzero(np.bincount(table))) if len(table) else 0

    # -- looking up --------------------------------------------------------------------------

    def slot_for(self, key: Key) -> int:
        """Return the table slot of `key`: ``hash(key) mod table_size``.

        :raises TypeError: when `key` is not str, bytes or int
        """
        data = key.encode() if type(key) is str else encode_key(key)
        return int(self._hasher.function(data) % self._table_size)

    def node_for(self, key: Key) -> str:
        """Return ``table[slot_for(key)]``.

        Runtime: O(1): one hash and one array access.

        :raises EmptyRingError: when there are no nodes
        :raises TypeError: when `key` is not str, bytes or int
        """
        check_not_empty(len(self._names), "node_for")
        return self._names[int(self._table[self.slot_for(key)])]

    def nodes_for(self, key: Key, n: int) -> list[str]:
        """Return up to `n` distinct nodes: the owner, then new nodes walking the table forward.

        Runtime: O(n log n) slots expected, O(table_size) at worst.

        :raises ConfigError: when `n` < 1
        :raises EmptyRingError: when there are no nodes
        """
        check_n(n)
        check_not_empty(len(self._names), "nodes_for")
        start = self.slot_for(key)
        seen: dict[int, None] = {}
        want = min(n, self._holders)
        table = self._table
        for step in range(self._table_size):
            seen.setdefault(int(table[(start + step) % self._table_size]))
            if len(seen) == want:
                break
        return [self._names[i] for i in seen]

    def owner_indices_for_hashes(self, hashes: npt.NDArray[np.uint64]) -> IndexArray:
        """Return ``table[h mod table_size]`` for each native key hash `h`.

        :raises EmptyRingError: when there are no nodes
        """
        check_not_empty(len(self._names), "owner_indices_for_hashes")
        result: IndexArray = self._table[hashes % np.uint64(self._table_size)]
        return result

    def segmentation(self, replicas: int) -> Segmentation | None:
        """Return the table's slots as exact units for one replica (None for more).

        A replica list walks the table forward, so beyond the owner a slot does not fix it.
        """
        if replicas != 1:
            return None
        return Segmentation(
            "slots",
            self._table_size,
            self._hasher,
            rows=lambda: [(name,) for name in self.table],
            unit_for=self.slot_for,
        )

    @property
    def table(self) -> tuple[str, ...]:
        """The owner of every slot, as node names (built on each access: O(table_size))."""
        names = np.array(self._names, dtype=object)
        return tuple(names[self._table].tolist())

    @property
    def table_size(self) -> int:
        """The number of slots (a prime)."""
        return self._table_size

    def _rebuilt(self, nodes: tuple[Node, ...]) -> Maglev:
        # Rebuilding the table: O(M log M) for M slots; its slots and a few others move.
        return Maglev(
            nodes, table_size=self._table_size, hasher=self._hasher, max_tokens=self._max_tokens
        )

    # -- measuring ---------------------------------------------------------------------------

    def shares(self) -> dict[str, float]:
        """Return each node's exact share: its slots over ``table_size``."""
        counts = np.bincount(self._table, minlength=len(self._names)).tolist()
        return {
            name: count / self._table_size for name, count in zip(self._names, counts, strict=True)
        }

    def _identity(self) -> tuple[object, ...]:
        return (self._nodes, self._table_size, self._hasher)

    def _repr_options(self) -> str:
        return f", table_size={self._table_size}, hasher={self._hasher.name!r}"

    def _check(self) -> None:
        """Assert the table's invariants (for tests)."""
        assert len(self._table) == (self._table_size if self._names else 0)
        assert list(self._names) == sorted(self._names)
        if self._names:
            assert int(self._table.max()) < len(self._names)


# The registry's entry (ringkit.strategies.registry): the options build_placement passes.
STRATEGY = Strategy("maglev", Maglev, {"table_size": MAGLEV_TABLE_SIZE, "hasher": DEFAULT_HASH})
