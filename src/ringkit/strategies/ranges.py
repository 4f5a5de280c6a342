"""RangePartitions: keys placed by their own order between split points, not by a hash.

HBase regions and Cassandra's ByteOrderedPartitioner keep keys sorted: split points
``s1 < s2 < … < sk`` cut the key order into ranges ``[-inf, s1), [s1, s2), …, [sk, +inf)``, each
owned by one node. A range scan then touches one or two nodes where every hash placement touches
all of them (hash partitioning destroys the range query; Bigtable and HBase keep it); the price
is that skewed keys make hot ranges, which ``split`` / ``split_hot`` must fix by hand or by
measurement. Ranges are not weighted: a node of weight other than 1 is refused, and load moves
by splitting ranges instead.

Keys compare as their encoded bytes (:func:`ringkit.hashing.encode_key`), like HBase row keys:
str by UTF-8 (code point order), int by its decimal text (so ``10 < 9``; zero-pad numbers).

>>> table = RangePartitions(["a", "b", "c"], splits=["h", "p"])
>>> table.node_for("apple"), table.node_for("kiwi"), table.node_for("zebra")
('a', 'b', 'c')
>>> table.nodes_for_range("g", "j")
['a', 'b']
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import pairwise

from ringkit.errors import ConfigError
from ringkit.hashing import Key, check_key_batch, encode_key
from ringkit.nodes import Node, NodesLike, coerce_nodes
from ringkit.placement import PlacementBase, check_n, check_not_empty, unknown_node
from ringkit.strategies.options import Strategy

__all__ = ["RangePartitions"]


def _bound(value: Key) -> bytes:
    return encode_key(value)


class RangePartitions(PlacementBase):
    """Sorted split points and an owner per range; an immutable value.

    Invariants (``_check``): splits strictly increasing; ``len(owners) == len(splits) + 1``;
    every owner is a node; every node owns at least one range when there are enough ranges.

    Looking up: ``node_for``, ``nodes_for``, ``node_for_many``, ``range_for``,
    ``nodes_for_range``. Changing: ``add``, ``remove``, ``discard``, ``split``, ``split_hot``.
    Measuring: ``splits``, ``owners``, ``nodes``, ``shares`` (estimated), ``load``, ``len``,
    ``in``, ``iter``, ``==``.
    """

    __slots__ = ("_names", "_nodes", "_owners", "_splits")

    def __init__(self, nodes: NodesLike = (), *, splits: Iterable[Key] | None = None) -> None:
        members = coerce_nodes(nodes)
        self._check_weights(members)
        names = tuple(node.name for node in members)
        if splits is None:
            # One range per node, cut evenly on the first byte.
            points = tuple(bytes([256 * i // len(names)]) for i in range(1, len(names)))
        else:
            points = tuple(_bound(split) for split in splits)
        if any(a >= b for a, b in pairwise(points)):
            raise ConfigError(f"splits must be strictly increasing, got {list(points)!r}")
        if names and len(points) + 1 < len(names):
            raise ConfigError(
                f"splits must make at least one range per node ({len(names)}), "
                f"got {len(points)} splits"
            )
        ranges = len(points) + 1
        owners = tuple(names[i * len(names) // ranges] for i in range(ranges)) if names else ()
        self._install(members, points, owners)

    def _install(
        self, nodes: Sequence[Node], splits: tuple[bytes, ...], owners: tuple[str, ...]
    ) -> None:
        self._nodes = tuple(nodes)
        self._names = tuple(node.name for node in self._nodes)
        self._splits = splits
        self._owners = owners

    def _weights_refused(self) -> tuple[str, str]:
        fix = "use split_hot to move load, or Rendezvous or HashRing for weighted nodes"
        return "range partitions", fix

    def _with(
        self, nodes: Sequence[Node], splits: tuple[bytes, ...], owners: tuple[str, ...]
    ) -> RangePartitions:
        result = RangePartitions.__new__(RangePartitions)
        result._install(nodes, splits, owners)
        return result

    # -- looking up --------------------------------------------------------------------------

    def range_for(self, key: Key) -> int:
        """Return the index of the range holding `key`. Runtime: O(log k).

        :raises TypeError: when `key` is not str, bytes or int
        """
        return bisect_right(self._splits, encode_key(key))

    def node_for(self, key: Key) -> str:
        """Return the owner of the range holding `key`. Runtime: O(log k).

        :raises EmptyRingError: when there are no nodes
        """
        check_not_empty(len(self._names), "node_for")
        return self._owners[self.range_for(key)]

    def nodes_for(self, key: Key, n: int) -> list[str]:
        """Return the key's owner, then the owners of the following ranges (wrapping), distinct.

        :raises ConfigError: when `n` < 1
        :raises EmptyRingError: when there are no nodes
        """
        check_n(n)
        check_not_empty(len(self._names), "nodes_for")
        start, result = self.range_for(key), []
        for step in range(len(self._owners)):
            name = self._owners[(start + step) % len(self._owners)]
            if name not in result:
                result.append(name)
                if len(result) == n:
                    break
        return result

    def node_for_many(self, keys: Iterable[Key]) -> list[str]:
        """Return the owner of each key, in order.

        :raises EmptyRingError: when there are no nodes
        """
        check_key_batch(keys, "node_for_many")
        check_not_empty(len(self._names), "node_for_many")
        splits, owners = self._splits, self._owners
        return [owners[bisect_right(splits, encode_key(key))] for key in keys]

    def nodes_for_range(self, start: Key | None, end: Key | None) -> list[str]:
        """Return the distinct owners of keys k with ``start <= k < end``, in key order.

        ``None`` leaves that side open. An empty interval (end <= start) touches no node.
        Runtime: O(log k + ranges touched).

        :raises EmptyRingError: when there are no nodes
        """
        check_not_empty(len(self._names), "nodes_for_range")
        low = 0 if start is None else bisect_right(self._splits, encode_key(start))
        if end is None:
            high = len(self._owners) - 1
        else:
            stop = encode_key(end)
            if stop == b"" or (start is not None and stop <= encode_key(start)):
                return []
            # The last range that holds a key < end: the one whose start is < end.
            high = bisect_left(self._splits, stop)
        return list(dict.fromkeys(self._owners[low : high + 1]))

    # -- changing ----------------------------------------------------------------------------

    def split(self, at: Key, *, node: str | None = None) -> RangePartitions:
        """Return a table with a new split point `at`; the upper half goes to `node` (default:
        the node owning the fewest ranges, ties by name).

        :raises ConfigError: when `at` is already a split point
        :raises UnknownNodeError: when `node` is not there
        """
        point = encode_key(at)
        index = bisect_left(self._splits, point)
        if index < len(self._splits) and self._splits[index] == point:
            raise ConfigError(f"split point {at!r} is already a split point")
        if node is not None and node not in self._names:
            raise unknown_node(node, self._names, "placement")
        counts = Counter(self._owners)
        target = node or min(self._names, key=lambda name: (counts[name], name))
        owners = (*self._owners[: index + 1], target, *self._owners[index + 1 :])
        splits = (*self._splits[:index], point, *self._splits[index:])
        return self._with(self._nodes, splits, owners)

    def split_hot(self, keys: Iterable[Key], *, max_fraction: float) -> RangePartitions:
        """Split every range holding more than `max_fraction` of `keys` at its median key, until
        none does or a hot range is a single key; new upper halves go to the least loaded node.

        :raises ConfigError: when `max_fraction` is not in (0, 1]
        """
        if not 0 < max_fraction <= 1:
            raise ConfigError(f"max_fraction must be in (0, 1], got {max_fraction!r}")
        encoded = sorted(encode_key(key) for key in keys)
        table = self
        while encoded:
            loads = table.load(encoded)
            hot = max(range(len(loads)), key=lambda i: loads[i])
            if loads[hot] <= max_fraction * len(encoded):
                break
            low = bisect_left(encoded, table._splits[hot - 1]) if hot else 0
            inside = encoded[low : low + loads[hot]]
            median = inside[len(inside) // 2]
            if median == inside[0]:
                break  # one key is hot on its own; splitting cannot help (cache or split the key)
            per_node = Counter[str]()
            for owner, amount in zip(table._owners, loads, strict=True):
                per_node[owner] += amount
            coolest = min(table._names, key=lambda name: (per_node[name], name))
            table = table.split(median, node=coolest)
        return table

    def _added(self, new: Node) -> RangePartitions:
        """Return a table where `new` takes over one range from the node owning the most
        (splitting that node's first range in two when it owns only one)."""
        if not self._names:
            return RangePartitions([new])
        counts = Counter(self._owners)
        donor = max(self._names, key=lambda name: (counts[name], name))
        index = self._owners.index(donor)
        if counts[donor] > 1:
            owners = (*self._owners[:index], new.name, *self._owners[index + 1 :])
            return self._with((*self._nodes, new), self._splits, owners)
        low = self._splits[index - 1] if index else b""
        high = self._splits[index] if index < len(self._splits) else b"\xff" * (len(low) + 1)
        widened = self._with((*self._nodes, new), self._splits, self._owners)
        return widened.split(_midpoint(low, high), node=new.name)

    def _removed(self, name: str) -> RangePartitions:
        """Return a table without `name`; each of its ranges goes to a neighbouring range's
        owner (the previous one, or the next for the first range)."""
        nodes = tuple(node for node in self._nodes if node.name != name)
        if not nodes:
            return self._with((), (), ())
        owners = list(self._owners)
        for i, owner in enumerate(owners):
            if owner == name:
                owners[i] = next((o for o in reversed(owners[:i]) if o != name), "")
        first = next(o for o in owners if o and o != name)
        return self._with(nodes, self._splits, tuple(o or first for o in owners))

    # -- measuring ---------------------------------------------------------------------------

    @property
    def splits(self) -> tuple[bytes, ...]:
        """The split points, encoded, strictly increasing."""
        return self._splits

    @property
    def owners(self) -> tuple[str, ...]:
        """The owner of each range, in key order."""
        return self._owners

    def load(self, keys: Iterable[Key]) -> list[int]:
        """Return how many of `keys` fall in each range (the measure ``split_hot`` uses)."""
        counts = [0] * len(self._owners)
        for key in keys:
            counts[
                bisect_right(self._splits, key if isinstance(key, bytes) else encode_key(key))
            ] += 1
        return counts

    def shares(self) -> dict[str, float]:
        """Return each node's share of the byte-string space, estimated on 8-byte prefixes.

        Real keys are rarely uniform over bytes, so this says little about load: measure with
        ``load(keys)`` instead.
        """
        result = dict.fromkeys(self._names, 0.0)
        edges = [0.0, *(_fraction(split) for split in self._splits), 1.0]
        for i, owner in enumerate(self._owners):
            result[owner] += edges[i + 1] - edges[i]
        return result

    def _identity(self) -> tuple[object, ...]:
        return (self._nodes, self._splits, self._owners)

    def _repr_options(self) -> str:
        return f", ranges={len(self._owners)}"

    def _check(self) -> None:
        """Assert the table's invariants (for tests)."""
        assert all(a < b for a, b in pairwise(self._splits))
        if self._names:
            assert len(self._owners) == len(self._splits) + 1
            assert set(self._owners) <= set(self._names)


def _fraction(point: bytes) -> float:
    return int.from_bytes(point[:8].ljust(8, b"\0"), "big") / 2**64


def _midpoint(low: bytes, high: bytes) -> bytes:
    """Return a byte string strictly between `low` and `high` (low < high)."""
    width = max(len(low), len(high)) + 1
    a = int.from_bytes(low.ljust(width, b"\0"), "big")
    b = int.from_bytes(high.ljust(width, b"\0"), "big")
    middle = ((a + b) // 2).to_bytes(width, "big").rstrip(b"\0") or b"\0"
    return middle if low < middle < high else low + b"\0"


# The registry's entry (ringkit.strategies.registry): ranges take no option (keys are not hashed).
STRATEGY = Strategy("ranges", RangePartitions, {})
