"""Continuum: the sorted circle of points that ketama and Envoy's ring hash both build.

libketama, libmemcached, twemproxy and Envoy's ``ring_hash`` share one lookup: a key's hash goes
to the first point >= it on a sorted array of points, and a hash past the last point wraps to the
first (libketama ``ketama_get_server``, Envoy ``RingHashLoadBalancer::Ring::chooseHost``). They
differ only in how the points are made, so each layout module builds its points and hands them
here. Unlike :class:`ringkit.HashRing`, the points keep their system's own width (32 bits for
ketama, 64 for Envoy; DESIGN.md decision 1) and points that collide keep the system's tie order
(server index), because exactness rules here.

>>> circle = Continuum.from_points(
...     (Node("a"),), [10, 20, 30], [0, 0, 0], hasher=Hasher("len", lambda d: len(d) * 10, 32),
...     rebuild=lambda servers: None, kind="demo")
>>> circle.node_for_point(25), circle.node_for("abcd")
('a', 'a')
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable

import numpy as np
import numpy.typing as npt

from ringkit.errors import ConfigError
from ringkit.hashing import Hasher, Key, encode_key
from ringkit.nodes import Node
from ringkit.placement import IndexArray, PlacementBase, check_n, check_not_empty

__all__ = ["Continuum"]

UInt64Array = npt.NDArray[np.uint64]
_LIST_LIMIT = 1 << 16
Rebuild = Callable[[tuple[Node, ...]], "Continuum"]


class Continuum(PlacementBase):
    """Sorted points (uint64 holding `bits`-wide values), each owned by one node.

    Invariants: ``points`` is sorted; ``owners[i]`` indexes ``nodes``; points that are equal are
    ordered as the source system orders them (by server index). Immutable. `hasher` is the
    system's key hash, `bits` wide; an unweighted layout (``weighted=False``) refuses weights.

    Looking up: ``node_for``, ``node_for_point``, ``nodes_for``, ``node_for_many``,
    ``owner_indices_for_hashes``, ``point_for``. Changing membership (new objects, rebuilt by
    the system's own rule): ``add``, ``remove``, ``discard``, ``reweight``. Measuring:
    ``shares``, ``points``, ``owners``, ``nodes``, ``hasher``, ``len``, ``in``, ``iter``, ``==``.
    """

    __slots__ = (
        "_bits",
        "_container",
        "_hasher",
        "_key_hash",
        "_names",
        "_nodes",
        "_owners",
        "_point_list",
        "_point_names",
        "_points",
        "_rebuild",
        "_weighted",
    )
    routes_by_hash = True  # a key goes to the first point >= its hash
    _hasher: Hasher

    def __init__(
        self,
        nodes: tuple[Node, ...],
        points: UInt64Array,
        owners: npt.NDArray[np.intp],
        *,
        hasher: Hasher,
        rebuild: Rebuild,
        kind: str,
        weighted: bool = True,
    ) -> None:
        self._nodes = nodes
        self._names = tuple(node.name for node in nodes)
        self._points = points
        self._owners = owners
        self._hasher = hasher
        self._bits = hasher.bits
        self._key_hash = hasher.function
        self._rebuild = rebuild
        self._container = kind
        self._weighted = weighted
        self._points.flags.writeable = False
        self._owners.flags.writeable = False
        # Scalar lookups bisect a Python list: numpy's searchsorted costs microseconds per call
        # (benchmarks/bench_compat.py). Past _LIST_LIMIT points (Envoy's 8M maximum) the lists
        # would cost more memory than they save time, and numpy answers instead.
        small = len(points) <= _LIST_LIMIT
        self._point_list: list[int] | None = points.tolist() if small else None
        self._point_names: tuple[str, ...] | None = (
            tuple(self._names[i] for i in owners.tolist()) if small else None
        )

    @classmethod
    def from_points(
        cls,
        nodes: tuple[Node, ...],
        points: Iterable[int],
        owners: Iterable[int],
        *,
        hasher: Hasher,
        rebuild: Rebuild,
        kind: str,
        weighted: bool = True,
    ) -> Continuum:
        """Return a continuum from unsorted points and their owners' indices into `nodes`.

        Points are sorted by (point, owner index), libmemcached's ``continuum_item_cmp`` order;
        a stable sort gives the same order for libketama, twemproxy and Envoy, whose comparators
        look at the point alone (glibc's ``qsort`` merges, so it is stable in practice).

        Runtime: O(P log P) for P points.
        """
        point_array = np.fromiter(points, dtype=np.uint64)
        owner_array = np.fromiter(owners, dtype=np.intp, count=len(point_array))
        order = np.lexsort((owner_array, point_array))
        return cls(
            nodes,
            point_array[order],
            owner_array[order],
            hasher=hasher,
            rebuild=rebuild,
            kind=kind,
            weighted=weighted,
        )

    # -- looking up ------------------------------------------------------------------------

    def point_for(self, key: Key) -> int:
        """Return the key's hash as the system computes it (its width, unsigned)."""
        return self._key_hash(encode_key(key))

    def _index_for_point(self, point: int) -> int:
        if isinstance(point, bool) or not isinstance(point, int):
            raise TypeError(f"point must be int, got {type(point).__name__}")
        if not 0 <= point < 1 << self._bits:
            raise ConfigError(f"point must be in [0, 2**{self._bits}), got {point!r}")
        if self._point_list is not None:
            index = bisect_left(self._point_list, point)
        else:
            index = int(np.searchsorted(self._points, np.uint64(point), side="left"))
        # Past the last point: wrap to the first (ketama_get_server returns mcsarr[0]).
        return 0 if index == len(self._points) else index

    def index_for_point(self, point: int) -> int:
        """Return the index into ``points`` of the point that owns `point` (first >=, wrap).

        Runtime: O(log P).

        :raises EmptyRingError: when there are no points
        :raises ConfigError: when `point` is outside [0, 2**bits)
        """
        check_not_empty(len(self._points), "index_for_point")
        return self._index_for_point(point)

    def node_for_point(self, point: int) -> str:
        """Return the node owning `point`: the first point >= it, wrapping past the last.

        Runtime: O(log P).

        :raises EmptyRingError: when there are no nodes
        :raises ConfigError: when `point` is outside [0, 2**bits)
        """
        check_not_empty(len(self._points), "node_for_point")
        return self._names[int(self._owners[self._index_for_point(point)])]

    def node_for(self, key: Key) -> str:
        """Return the node that owns `key`. Runtime: O(len(key) + log P).

        :raises EmptyRingError: when there are no nodes
        :raises TypeError: when `key` is not str, bytes or int
        """
        check_not_empty(len(self._points), "node_for")
        point = self._key_hash(key.encode() if type(key) is str else encode_key(key))
        if self._point_names is not None and self._point_list is not None:
            index = bisect_left(self._point_list, point)
            # Past the last point: wrap to the first (ketama_get_server returns mcsarr[0]).
            return self._point_names[index if index < len(self._point_list) else 0]
        return self.node_for_point(point)

    def nodes_for(self, key: Key, n: int) -> list[str]:
        """Return up to `n` distinct nodes, walking clockwise from the key's point.

        Runtime: O(log P + P) in the worst case, usually a few steps.

        :raises EmptyRingError: when there are no nodes
        :raises ConfigError: when `n` < 1
        """
        check_n(n)
        check_not_empty(len(self._points), "nodes_for")
        start = self._index_for_point(self.point_for(key))
        wanted = min(n, len(self._names))
        found: list[str] = []
        for step in range(len(self._points)):
            name = self._names[int(self._owners[(start + step) % len(self._points)])]
            if name not in found:
                found.append(name)
                if len(found) == wanted:
                    break
        return found

    def owner_indices_for_hashes(self, hashes: npt.NDArray[np.uint64]) -> IndexArray:
        """Return the owner index of each key hash: the first point >= it, wrapping.

        :raises EmptyRingError: when there are no nodes
        """
        check_not_empty(len(self._points), "owner_indices_for_hashes")
        indices = np.searchsorted(self._points, hashes, side="left")
        indices[indices == len(self._points)] = 0
        result: IndexArray = self._owners[indices]
        return result

    # -- changing membership ---------------------------------------------------------------

    def _rebuilt(self, nodes: tuple[Node, ...]) -> Continuum:
        # Every point is recomputed as the system does (weights are relative to the total);
        # removing a server is what twemproxy's auto-eject does.
        return self._rebuild(nodes)

    def _weights_refused(self) -> tuple[str, str] | None:
        if self._weighted:
            return None
        return f"the unweighted {self._container}", "use weighted=True for weighted nodes"

    # -- measuring -------------------------------------------------------------------------

    def shares(self) -> dict[str, float]:
        """Return each node's exact fraction of the hash space (arc lengths / 2**bits).

        Runtime: O(P).
        """
        space = 1 << self._bits
        if len(self._points) == 0:
            return {}
        lengths = np.diff(self._points.astype(np.float64), prepend=0.0)
        # The first point also owns the wrapped arc past the last point.
        lengths[0] = float(int(self._points[0]) + space - int(self._points[-1]))
        if len(self._points) == 1:
            lengths[0] = float(space)
        owned = np.bincount(self._owners, weights=lengths, minlength=len(self._names))
        return {name: float(owned[i]) / space for i, name in enumerate(self._names)}

    @property
    def points(self) -> UInt64Array:
        """The sorted points (read-only)."""
        return self._points

    @property
    def owners(self) -> npt.NDArray[np.intp]:
        """For each point, the index of its node in ``nodes`` (read-only)."""
        return self._owners

    @property
    def bits(self) -> int:
        """The width of points and key hashes: 32 (ketama) or 64 (Envoy)."""
        return self._bits

    def _identity(self) -> tuple[object, ...]:
        return (self._container, self._nodes, self._points, self._owners)

    def _repr_options(self) -> str:
        return f", kind={self._container!r}, points={len(self._points)}"
