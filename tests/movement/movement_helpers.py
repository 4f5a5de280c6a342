"""Brute-force references and small placements for the movement tests.

Rings here live in small spaces with an identity hasher (the key ``p`` sits at point ``p``), so
that every point can be checked one by one against ``nodes_for``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from hypothesis import strategies as st

from ringkit.hashing import Hasher, encode_key
from ringkit.nodes import Node
from ringkit.placement import Segmentation
from ringkit.ring import HashRing


def _identity(data: bytes) -> int:
    return int(data)


IDENTITY = Hasher("identity", _identity, 64)
NAMES = "ABCDEF"


def point_ring(
    tokens: dict[str, Iterable[int]], space: int, zones: dict[str, str] | None = None
) -> HashRing:
    """Return a ring at explicit tokens where key ``p`` (an int) is at point ``p % space``."""
    zones = zones or {}
    spec = {Node(name, zone=zones.get(name)): list(values) for name, values in tokens.items()}
    return HashRing.from_tokens(spec, space=space, hasher=IDENTITY)


def replica_sets(ring: HashRing, replicas: int) -> list[list[str]]:
    """Return the preference list of every point of the ring's space, by brute force."""
    return [ring.nodes_for(point, replicas) for point in range(ring.space)]


def brute_streams(old: list[list[str]], new: list[list[str]]) -> set[tuple[int, str]]:
    """Return every (point, node) where the node gains a copy."""
    return {
        (point, node)
        for point, (before, after) in enumerate(zip(old, new, strict=True))
        for node in after
        if node not in before
    }


def points_of(arc_start: int, arc_end: int, space: int) -> list[int]:
    """Return the points of the arc (start, end] in a space, wrapping; start == end is all."""
    length = (arc_end - arc_start) % space or space
    return [(arc_start + 1 + i) % space for i in range(length)]


@st.composite
def token_maps(draw: st.DrawFn, space: int, min_nodes: int = 1) -> dict[str, list[int]]:
    """Draw node -> distinct tokens in [0, space)."""
    names = draw(st.lists(st.sampled_from(NAMES), min_size=min_nodes, max_size=5, unique=True))
    token = st.integers(0, space - 1)
    return {name: draw(st.lists(token, min_size=1, max_size=4, unique=True)) for name in names}


class StandInPartitions:
    """A partition table following the FixedPartitions contract: its units are its partitions."""

    ring = None
    hasher = None

    def __init__(self, owners: Sequence[Sequence[str]], nodes: Sequence[str]) -> None:
        self._owners = tuple(tuple(row) for row in owners)
        self.nodes = tuple(Node(name) for name in nodes)
        self.partition_count = len(self._owners)

    def partition_for(self, key: int | str | bytes) -> int:
        return int(encode_key(key)) % self.partition_count

    def partition_owners(self) -> tuple[tuple[str, ...], ...]:
        return self._owners

    def segmentation(self, replicas: int) -> Segmentation:
        return Segmentation(
            "partitions",
            self.partition_count,
            None,
            rows=self.partition_owners,
            unit_for=self.partition_for,
        )

    def nodes_for(self, key: int | str | bytes, n: int) -> list[str]:
        return list(self._owners[self.partition_for(key)][:n])

    def node_for_many(self, keys: Iterable[int | str | bytes]) -> list[str]:
        return [self._owners[self.partition_for(key)][0] for key in keys]

    def __len__(self) -> int:
        return len(self.nodes)


class StandInMaglev:
    """A lookup table following the Maglev contract: its units are the slots of ``table``."""

    ring = None
    hasher = None

    def __init__(self, table: Sequence[str]) -> None:
        self.table = tuple(table)
        self.nodes = tuple(Node(name) for name in sorted(set(table)))

    def slot_for(self, key: int | str | bytes) -> int:
        return int(encode_key(key)) % len(self.table)

    def segmentation(self, replicas: int) -> Segmentation | None:
        if replicas != 1:
            return None
        rows = [(name,) for name in self.table]
        return Segmentation(
            "slots", len(self.table), None, rows=lambda: rows, unit_for=self.slot_for
        )

    def node_for_many(self, keys: Iterable[int | str | bytes]) -> list[str]:
        return [self.table[self.slot_for(key)] for key in keys]

    def nodes_for(self, key: int | str | bytes, n: int) -> list[str]:
        return [self.table[self.slot_for(key)]]

    def __len__(self) -> int:
        return len(self.nodes)
