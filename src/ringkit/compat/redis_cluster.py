"""Redis Cluster: a key's hash slot (CRC16 mod 16384, hash tags) and the slot table.

Redis Cluster does not hash onto a ring: a key belongs to one of 16384 *slots*,
``CRC16(key) mod 16384`` with CRC-16/XMODEM (polynomial 0x1021, initial 0), and each node serves
ranges of slots. If the key contains ``{`` followed later by ``}`` with at least one byte
between, only the bytes between the first ``{`` and the first ``}`` after it are hashed, so that
``user:{42}:cart`` and ``user:{42}:orders`` share a slot.

Reference: Redis Cluster specification, "Keys distribution model" and "Hash tags"
(https://redis.io/docs/reference/cluster-spec/); redis ``src/cluster.c`` ``keyHashSlot`` and
``src/crc16.c`` (whose comment gives the check value: "123456789" -> 0x31C3).

>>> redis_slot("key"), redis_slot("id:{key}"), redis_slot("{}key")
(12539, 12539, 14961)
>>> cluster = redis_cluster({"a": ["0-8191"], "b": [(8192, 16383)]})
>>> cluster.node_for("key"), cluster.node_for_slot(0)
('b', 'a')
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ringkit.errors import ConfigError, EmptyRingError, UnsupportedError
from ringkit.hashing import Key, encode_key
from ringkit.nodes import Node
from ringkit.placement import PlacementBase, Segmentation, check_n

__all__ = ["REDIS_SLOTS", "RedisCluster", "crc16_xmodem", "redis_cluster", "redis_slot"]

REDIS_SLOTS = 16384


def _table() -> tuple[int, ...]:
    table = []
    for index in range(256):
        crc = index << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021 if crc & 0x8000 else crc << 1) & 0xFFFF
        table.append(crc)
    return tuple(table)


CRC16_XMODEM_TABLE = _table()  # also twemproxy's crc16 table (hashkit)


def crc16_xmodem(data: bytes) -> int:
    """Return CRC-16/XMODEM of `data`, as Redis' ``crc16``.

    >>> hex(crc16_xmodem(b"123456789"))
    '0x31c3'
    """
    crc = 0
    for byte in data:
        crc = ((crc << 8) & 0xFFFF) ^ CRC16_XMODEM_TABLE[((crc >> 8) ^ byte) & 0xFF]
    return crc


def hash_tag(data: bytes) -> bytes:
    """Return the part of a key Redis hashes: the first ``{...}`` when not empty, else all.

    >>> hash_tag(b"a{b}{c}"), hash_tag(b"{}x"), hash_tag(b"{{x}}")
    (b'b', b'{}x', b'{x')
    """
    start = data.find(b"{")
    if start != -1:
        end = data.find(b"}", start + 1)
        if end > start + 1:
            return data[start + 1 : end]
    return data


def redis_slot(key: Key) -> int:
    """Return the Redis Cluster hash slot of `key` (str as UTF-8, bytes as is, int as text).

    Runtime: O(len(key)).

    :raises TypeError: when `key` is not str, bytes or int
    """
    return crc16_xmodem(hash_tag(encode_key(key))) & (REDIS_SLOTS - 1)


SlotRange = tuple[int, int] | int | str


def _parse_range(node: str, item: SlotRange) -> range:
    """Parse ``(first, last)``, ``"first-last"`` or a single slot; both ends inclusive."""
    first: object
    last: object
    if isinstance(item, str):
        first_text, _, last_text = item.partition("-")
        try:
            first, last = int(first_text), int(last_text or first_text)
        except ValueError:
            raise ConfigError(
                f"unparsable slot range {item!r} of node {node!r}; expected "
                f"'first-last', (first, last) or a slot number"
            ) from None
    elif isinstance(item, tuple) and len(item) == 2:
        first, last = item
    else:
        first = last = item
    if not all(isinstance(end, int) and not isinstance(end, bool) for end in (first, last)):
        raise ConfigError(f"slot range {item!r} of node {node!r} must hold ints")
    assert isinstance(first, int) and isinstance(last, int)
    if not 0 <= first <= last < REDIS_SLOTS:
        raise ConfigError(
            f"slot range {item!r} of node {node!r} must satisfy "
            f"0 <= first <= last <= {REDIS_SLOTS - 1}"
        )
    return range(first, last + 1)


class RedisCluster(PlacementBase):
    """A slot table: each of the 16384 slots is served by exactly one node.

    Slots move between nodes only by resharding, so ``add``, ``remove`` (of a node that is
    there) and ``reweight`` are refused with the way to do it: build the new table with
    :func:`redis_cluster`. ``hasher`` is None: slots come from CRC16 of the hash tag.

    Looking up: ``node_for``, ``nodes_for``, ``node_for_many``, ``node_for_slot``,
    ``slot_for``. Measuring: ``slot_ranges``, ``shares``, ``segmentation`` (the slots),
    ``nodes``, ``len``, ``in``, ``iter``, ``==``.
    """

    __slots__ = ("_names", "_nodes", "_owner")
    _container = "redis cluster"

    def __init__(self, names: tuple[str, ...], owner: tuple[int, ...]) -> None:
        self._names = names
        self._nodes = tuple(Node(name) for name in names)
        self._owner = owner

    def slot_for(self, key: Key) -> int:
        """Return the key's hash slot (:func:`redis_slot`)."""
        return redis_slot(key)

    def node_for_slot(self, slot: int) -> str:
        """Return the node serving `slot`.

        :raises ConfigError: when `slot` is not in [0, 16383]
        """
        if isinstance(slot, bool) or not isinstance(slot, int) or not 0 <= slot < REDIS_SLOTS:
            raise ConfigError(f"slot must be an int in [0, {REDIS_SLOTS - 1}], got {slot!r}")
        return self._names[self._owner[slot]]

    def node_for(self, key: Key) -> str:
        """Return the node serving `key`'s slot. Runtime: O(len(key))."""
        return self._names[self._owner[redis_slot(key)]]

    def nodes_for(self, key: Key, n: int) -> list[str]:
        """Return the node serving `key`'s slot: a slot has one node (replicas are its own).

        :raises ConfigError: when `n` < 1
        """
        check_n(n)
        return [self.node_for(key)]

    def node_for_many(self, keys: Iterable[Key]) -> list[str]:
        """Return the node of each key, in order."""
        return [self._names[self._owner[redis_slot(key)]] for key in keys]

    def segmentation(self, replicas: int) -> Segmentation:
        """Return the 16384 slots as exact units, each with the node serving it."""
        return Segmentation(
            "slots",
            REDIS_SLOTS,
            None,
            rows=lambda: [(self._names[index],) for index in self._owner],
            unit_for=redis_slot,
        )

    def slot_ranges(self) -> dict[str, list[tuple[int, int]]]:
        """Return each node's slots as sorted inclusive ranges ``(first, last)``."""
        ranges: dict[str, list[tuple[int, int]]] = {name: [] for name in self._names}
        start = 0
        for slot in range(1, REDIS_SLOTS + 1):
            if slot == REDIS_SLOTS or self._owner[slot] != self._owner[start]:
                ranges[self._names[self._owner[start]]].append((start, slot - 1))
                start = slot
        return ranges

    def shares(self) -> dict[str, float]:
        """Return each node's fraction of the slots."""
        counts = [0] * len(self._names)
        for index in self._owner:
            counts[index] += 1
        return {name: counts[i] / REDIS_SLOTS for i, name in enumerate(self._names)}

    # -- changing membership ---------------------------------------------------------------

    def _resharding(self, name: str) -> UnsupportedError:
        return UnsupportedError(
            f"a redis cluster moves slots only by resharding, got a change of node {name!r}; "
            "build redis_cluster(...) with the new slot ranges"
        )

    def add(self, node: str | Node) -> RedisCluster:
        """Refuse: a new node serves no slot until slots are resharded to it.

        :raises UnsupportedError: always, naming the node and the way to reshard
        """
        raise self._resharding(node.name if isinstance(node, Node) else node)

    def _removed(self, name: str) -> RedisCluster:
        raise self._resharding(name)

    def _weights_refused(self) -> tuple[str, str]:
        return "a redis cluster", "use redis_cluster(...) to move slots between nodes"

    def _identity(self) -> tuple[object, ...]:
        return (self._names, self._owner)

    def __repr__(self) -> str:
        return f"redis_cluster({self.slot_ranges()!r})"


def redis_cluster(slot_ranges_by_node: Mapping[str, Iterable[SlotRange]]) -> RedisCluster:
    """Return the slot table serving each node's slot ranges (``CLUSTER SLOTS`` as a mapping).

    Ranges are ``(first, last)``, ``"first-last"`` or single slots, inclusive. Every slot must be
    served by exactly one node, as in a cluster whose state is ``ok``.

    :raises ConfigError: for a malformed range, a slot served twice, or a slot not served
    :raises EmptyRingError: when no node is given
    """
    if not slot_ranges_by_node:
        raise EmptyRingError("redis_cluster() needs at least one node with slots")
    names = tuple(slot_ranges_by_node)
    owner: list[int | None] = [None] * REDIS_SLOTS
    for index, name in enumerate(names):
        given = slot_ranges_by_node[name]
        # A lone "0-5460" or (0, 5460) is one range, not a sequence of slots.
        ranges: Iterable[SlotRange] = [given] if isinstance(given, (str, tuple)) else given
        for item in ranges:
            for slot in _parse_range(name, item):
                previous = owner[slot]
                if previous is not None:
                    raise ConfigError(
                        f"slot {slot} is served by both {names[previous]!r} and {name!r}"
                    )
                owner[slot] = index
    missing = [slot for slot, index in enumerate(owner) if index is None]
    if missing:
        raise ConfigError(
            f"slots are not served by any node: {len(missing)} slots, first "
            f"{missing[0]}; every slot 0-{REDIS_SLOTS - 1} needs a node"
        )
    return RedisCluster(names, tuple(index for index in owner if index is not None))
