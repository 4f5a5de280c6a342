"""uhashring's default ring, bit for bit, so that a uhashring user keeps every key's node.

``uhashring.HashRing(nodes)`` without ``hash_fn`` is not ketama: a node of weight ``w`` gets
``vnodes * w`` points (160 by default), point ``i`` being the MD5 digest of ``"<node>-<i>"`` read
as one 128-bit big-endian integer (``int(md5(...).hexdigest(), 16)``); a key hashes the same way
(``str(key)``), and its node owns the first point *strictly greater* than that hash (``bisect``,
which is ``bisect_right``), wrapping past the last point to the first. A key whose hash equals a
point (the key ``"cache-1-0"`` against node ``"cache-1"``) therefore goes to the *next* point.
Points that collide keep the node written last (uhashring's ``_ring`` dict), in node order.

Its ``hash_fn="ketama"`` mode is a different ring, libketama's:
``ringkit.compat.ketama(..., variant="libketama")`` reproduces that one.

Reference: ultrabug/uhashring ``uhashring/ring.py`` (``_configure_nodes``, ``_get_pos``,
``range``) and ``uhashring/ring_meta.py`` (``MetaRing.hashi``, ``_create_ring``,
``_remove_node``), release 2.x.

>>> ring = uhashring({"cache-1": 1, "cache-2": 2})
>>> ring.node_for("coconut")
'cache-2'
>>> ring.add("cache-3").remove("cache-3") == ring
True
"""

from __future__ import annotations

import math
from bisect import bisect_right
from hashlib import md5

from ringkit.errors import ConfigError
from ringkit.hashing import Key
from ringkit.nodes import Node, NodesLike, coerce_nodes
from ringkit.placement import (
    MAX_TOKENS,
    PlacementBase,
    check_max_tokens,
    check_n,
    check_not_empty,
    check_token_count,
    int_text,
)

__all__ = ["UHASHRING_DEFAULT_VNODES", "UhashringRing", "uhashring", "uhashring_point"]

UHASHRING_DEFAULT_VNODES = 160  # uhashring ring.py: vnodes = 160 unless hash_fn="ketama"
_SPACE = 1 << 128


def uhashring_point(key: Key) -> int:
    """Return uhashring's hash of `key`: MD5 of ``str(key)`` as a 128-bit integer.

    ``str(key)`` is uhashring's own conversion, so the bytes key ``b"k"`` hashes as the text
    ``"b'k'"``, exactly as uhashring hashes it.

    >>> hex(uhashring_point("coconut"))
    '0x763b8741d9f1a6fb4e0b72865d993f33'

    Runtime: O(len(key)).

    :raises TypeError: when `key` is not str, bytes or int
    """
    if isinstance(key, bool) or not isinstance(key, (str, bytes, int)):
        raise TypeError(f"key must be str, bytes or int, got {type(key).__name__}")
    return int(md5(str(key).encode("utf-8")).hexdigest(), 16)


def _whole_weight(node: Node) -> int:
    weight = node.weight
    if not math.isfinite(weight) or weight != int(weight) or weight < 1:
        raise ConfigError(
            f"weight of node {node.name!r} must be a whole number >= 1, got {weight!r}; "
            f"uhashring gives a node vnodes * weight points"
        )
    return int(weight)


class UhashringRing(PlacementBase):
    """uhashring's default (md5, 128-bit) ring: sorted points, each owned by one node.

    Invariants: ``points`` is sorted and holds each point once; ``owners[i]`` indexes
    ``nodes``; node ``n`` of weight ``w`` labelled ``vnodes * w`` points. Immutable.

    Looking up: ``node_for``, ``nodes_for``, ``node_for_many``, ``point_for``. Changing
    membership (new objects, as uhashring's ``add_node`` / ``remove_node`` leave the ring):
    ``add``, ``remove``, ``discard``, ``reweight``. Measuring: ``shares``, ``points``,
    ``owners``, ``vnodes``, ``len``, ``in``, ``iter``, ``==``.
    """

    __slots__ = ("_max_tokens", "_names", "_nodes", "_owners", "_points", "_vnodes")
    _container = "uhashring ring"

    def __init__(
        self, nodes: tuple[Node, ...], *, vnodes: int, max_tokens: int = MAX_TOKENS
    ) -> None:
        self._nodes = nodes
        self._names = tuple(node.name for node in nodes)
        self._vnodes, self._max_tokens = vnodes, check_max_tokens(max_tokens)
        count = sum(vnodes * _whole_weight(node) for node in nodes)
        check_token_count(
            count, self._max_tokens, what=f"a uhashring ring of vnodes={int_text(vnodes)}"
        )
        ring: dict[int, int] = {}
        for index, node in enumerate(nodes):
            name = node.name
            for i in range(vnodes * _whole_weight(node)):
                # A colliding point keeps the node written last, as uhashring's _ring dict does.
                ring[uhashring_point(f"{name}-{i}")] = index
        self._points = sorted(ring)
        self._owners = tuple(ring[point] for point in self._points)

    def _check(self) -> None:
        """Assert the invariants (tests call it after every construction)."""
        assert all(a < b for a, b in zip(self._points, self._points[1:], strict=False))
        assert all(0 <= owner < len(self._nodes) for owner in self._owners)
        expected = sum(self._vnodes * _whole_weight(node) for node in self._nodes)
        assert len(self._points) == expected  # 128-bit md5 labels do not collide in practice

    # -- looking up ------------------------------------------------------------------------

    def point_for(self, key: Key) -> int:
        """Return uhashring's hash of `key` (see :func:`uhashring_point`)."""
        return uhashring_point(key)

    def _index(self, key: Key) -> int:
        index = bisect_right(self._points, uhashring_point(key))
        # Past the last point: wrap to the first (uhashring _get_pos returns 0).
        return 0 if index == len(self._points) else index

    def node_for(self, key: Key) -> str:
        """Return the node that owns `key`: the first point > its hash, wrapping.

        Runtime: O(len(key) + log P).

        :raises EmptyRingError: when there are no nodes
        :raises TypeError: when `key` is not str, bytes or int
        """
        check_not_empty(len(self._points), "node_for")
        return self._names[self._owners[self._index(key)]]

    def nodes_for(self, key: Key, n: int) -> list[str]:
        """Return up to `n` distinct nodes clockwise from `key`, as uhashring's ``range``.

        Runtime: O(log P + P) in the worst case, usually a few steps.

        :raises EmptyRingError: when there are no nodes
        :raises ConfigError: when `n` < 1
        """
        check_n(n)
        check_not_empty(len(self._points), "nodes_for")
        start, count = self._index(key), len(self._points)
        wanted = min(n, len(self._names))
        found: list[str] = []
        for step in range(count):
            name = self._names[self._owners[(start + step) % count]]
            if name not in found:
                found.append(name)
                if len(found) == wanted:
                    break
        return found

    # -- changing membership ---------------------------------------------------------------

    def _rebuilt(self, nodes: tuple[Node, ...]) -> UhashringRing:
        # A node's points depend on its name, weight and vnodes only, so rebuilding equals
        # uhashring's in-place add_node / remove_node (the new node is written last).
        return UhashringRing(nodes, vnodes=self._vnodes, max_tokens=self._max_tokens)

    # -- measuring -------------------------------------------------------------------------

    def shares(self) -> dict[str, float]:
        """Return each node's exact fraction of the 128-bit hash space.

        A point owns the hashes from the previous point (inclusive) up to itself (exclusive).
        Runtime: O(P).
        """
        owned = [0] * len(self._names)
        for index, point in enumerate(self._points):
            before = self._points[index - 1] if index else self._points[-1] - _SPACE
            owned[self._owners[index]] += point - before
        return {name: owned[i] / _SPACE for i, name in enumerate(self._names)}

    @property
    def points(self) -> tuple[int, ...]:
        """The sorted 128-bit points."""
        return tuple(self._points)

    @property
    def owners(self) -> tuple[int, ...]:
        """For each point, the index of its node in ``nodes``."""
        return self._owners

    @property
    def vnodes(self) -> int:
        """The points of a node of weight 1 (uhashring's ``vnodes``)."""
        return self._vnodes

    def _identity(self) -> tuple[object, ...]:
        return (self._nodes, self._vnodes)

    def _repr_options(self) -> str:
        return f", vnodes={self._vnodes}"


def uhashring(
    nodes: NodesLike, *, vnodes: int = UHASHRING_DEFAULT_VNODES, max_tokens: int = MAX_TOKENS
) -> UhashringRing:
    """Return the ring ``uhashring.HashRing(nodes, vnodes=vnodes)`` builds (default hash).

    `nodes` is what uhashring takes: a list of names, or a ``{name: weight}`` mapping (its
    ``{name: {"weight": w}}`` form is ``{name: w}`` here); ``Node`` values work too. Weights must
    be whole numbers, as uhashring multiplies them by `vnodes`. ``ring.add(name)`` is
    ``add_node(name)``, ``ring.add(Node(name, weight=w))`` is ``add_node(name, {"weight": w})``.

    Runtime: O(N·V·w log(N·V·w)).

    >>> uhashring(["a", "b"], vnodes=4).points[:2]
    (21921559011265581296072243268523710417, 70378327271496654866702171660880316731)

    :raises ConfigError: for vnodes < 1, a weight that is not a whole number >= 1, no nodes,
        or more than `max_tokens` points in all
    :raises DuplicateNodeError: when a name appears twice
    """
    if isinstance(vnodes, bool) or not isinstance(vnodes, int) or vnodes < 1:
        raise ConfigError(f"vnodes must be an integer >= 1, got {vnodes!r}")
    parsed = coerce_nodes(nodes)
    if not parsed:
        raise ConfigError(f"uhashring needs at least one node, got {nodes!r}")
    return UhashringRing(parsed, vnodes=vnodes, max_tokens=max_tokens)
