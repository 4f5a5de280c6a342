"""MultiProbe: one token per node, k probes per key, the closest token wins.

A ring with one token per node balances badly (a node's arc can be many times the mean), and
virtual nodes fix that by multiplying memory. Multi-probe consistent hashing keeps one token per
node and instead hashes the *key* ``k`` times: each probe finds its successor token, and the key
goes to the node whose token lies closest after any probe. Long arcs stop winning in proportion
to their length, so the peak-to-mean load falls to about 1.05 at ``k = 21``, with O(N) memory
and O(k log N) per lookup. Adding a node moves keys only to it; removing one moves only its keys.

Probe ``i`` of a key is ``splitmix64(h1 + i·φ)`` with ``h1`` the key's point and ``φ`` the
64-bit golden ratio: k well-mixed, practically independent points. (Plain double hashing,
``h1 + i·h2``, puts the probes on an arithmetic progression; measured on 4 million keys at
N = 100, k = 21 it gave a peak-to-mean of about 1.07 where independent probes give 1.03-1.04.)

Reference: Ben Appleton, Michael O'Reilly, "Multi-Probe Consistent Hashing", arXiv:1505.00062
(2015); ``k`` is the paper's number of probes.

>>> placement = MultiProbe(["A", "B", "C"], probes=21)
>>> placement.node_for("booking:42") in placement
True
>>> round(sum(placement.shares().values()), 12)
1.0
"""

from __future__ import annotations

import operator
import struct
from bisect import bisect_left
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from ringkit.errors import ConfigError
from ringkit.hashing import (
    DEFAULT_HASH,
    Hasher,
    HasherLike,
    Key,
    encode_key,
    get_hasher,
    hash_many,
)
from ringkit.nodes import Node, NodesLike, coerce_nodes
from ringkit.placement import (
    IndexArray,
    PlacementBase,
    check_n,
    check_not_empty,
    check_token_count,
    int_text,
)
from ringkit.strategies.options import Strategy

__all__ = ["DEFAULT_PROBES", "MultiProbe"]

DEFAULT_PROBES = 21  # the paper's recommendation: peak-to-mean about 1.05
_MASK64 = 0xFFFFFFFFFFFFFFFF
_GOLDEN = 0x9E3779B97F4A7C15  # 2**64 / golden ratio: splitmix64's counter increment
_SPACE = float(1 << 64)
# Keys per vectorised block in node_for_many: bounds the (keys x probes) arrays to ~16 MB.
_BLOCK_CELLS = 1 << 21
# The scalar lookup's successor table is indexed by a probe's top 16 bits (a list of 65,536
# references, 512 KiB), read from the packed probes by a struct: see _make_lookup.
_PROBE_BUCKET_BITS = 16
_LANE_BITS = 128  # one probe per lane of the packed integer: a 64 x 64-bit product fits


def _check_probes(probes: object) -> int:
    if isinstance(probes, bool) or not isinstance(probes, int):
        raise TypeError(f"probes must be int, got {type(probes).__name__}")
    if probes < 1:
        raise ConfigError(f"probes must be >= 1, got {probes!r}")
    # A key's probes are an array like a ring's tokens: the same limit bounds them.
    check_token_count(
        probes, what=f"multiprobe with probes={int_text(probes)}", fix="use fewer probes"
    )
    return probes


class MultiProbe(PlacementBase):
    """Multi-probe consistent hashing over named nodes; an immutable value.

    Invariants: one token per node, the hash of its name; tokens sorted, equal tokens ordered by
    name. Weights are not part of the algorithm: every node aims at 1/N (``shares`` says what
    each really gets), and a node of weight other than 1 is refused (``UnsupportedError``).

    Replica order: ascending distance from the nearest probe to each node's token.

    Looking up: ``node_for``, ``nodes_for``, ``node_for_many``, ``owner_indices_for_hashes``.
    Changing membership: ``add``, ``remove``, ``discard``.
    Measuring: ``nodes``, ``hasher``, ``shares`` (model-exact), ``probes``, ``len``, ``in``,
    ``iter``, ``==``.
    """

    # NOTE: no __slots__: each placement shadows node_for with a closure in its __dict__ (as
    # HashRing does), one Python call per lookup.
    routes_by_hash = True  # the probes, and so the owner, are a function of the key's hash
    _hasher: Hasher

    def __init__(
        self,
        nodes: NodesLike = (),
        *,
        probes: int = DEFAULT_PROBES,
        hasher: HasherLike = DEFAULT_HASH,
    ) -> None:
        self._probes = _check_probes(probes)
        self._hasher = get_hasher(hasher)
        self._nodes = tuple(sorted(coerce_nodes(nodes), key=lambda node: node.name))
        self._names = tuple(node.name for node in self._nodes)
        self._check_weights(self._nodes)
        points = self._points(hash_many(self._names, self._hasher))
        # Stable sort over name-ordered nodes: equal tokens stay ordered by name.
        order = np.argsort(points, kind="stable")
        self._tokens: npt.NDArray[np.uint64] = points[order]
        self._order: npt.NDArray[np.intp] = order  # token position -> node index
        self._token_list = self._tokens.tolist()
        self._bind_lookup()

    def _bind_lookup(self) -> None:
        if self._names:
            vars(self)["node_for"] = _make_lookup(
                self._hasher,
                self._tokens,
                [self._names[i] for i in self._order.tolist()],
                self._probes,
            )

    def __getstate__(self) -> dict[str, Any]:
        # The bound lookup closure does not pickle; it is rebuilt on load.
        return {k: v for k, v in vars(self).items() if k != "node_for"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        vars(self).update(state)
        self._bind_lookup()

    def _rebuilt(self, nodes: tuple[Node, ...]) -> MultiProbe:
        return MultiProbe(nodes, probes=self._probes, hasher=self._hasher)

    def _weights_refused(self) -> tuple[str, str]:
        return "multi-probe", "use Rendezvous or HashRing for weighted nodes"

    def _points(self, hashes: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
        """Return the 64-bit points of native hashes (widened as ``Hasher.point`` does)."""
        return hashes << np.uint64(64 - self._hasher.bits)

    def _h1(self, key: Key) -> int:
        return self._hasher.point(key.encode() if type(key) is str else encode_key(key))

    # -- looking up --------------------------------------------------------------------------

    def node_for(self, key: Key) -> str:
        """Return the node whose token follows one of the key's probes most closely.

        Runtime: O(k log N). A non-empty placement answers through the closure bound in
        ``__init__`` (``_make_lookup``: the same probes, successors read from a bucket table).

        :raises EmptyRingError: when there are no nodes
        :raises TypeError: when `key` is not str, bytes or int
        """
        check_not_empty(len(self._names), "node_for")
        tokens, count = self._token_list, len(self._token_list)
        h1 = self._h1(key)
        best_distance, best = _MASK64 + 1, 0
        for i in range(self._probes):
            # splitmix64 inlined: this loop is the whole cost of a lookup
            z = (h1 + i * _GOLDEN) & _MASK64
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
            probe = z ^ (z >> 31)
            index = bisect_left(tokens, probe)
            if index == count:  # past the last token: wrap to the first
                index = 0
            distance = (tokens[index] - probe) & _MASK64
            if distance < best_distance:
                best_distance, best = distance, index
        return self._names[int(self._order[best])]

    def nodes_for(self, key: Key, n: int) -> list[str]:
        """Return up to `n` distinct nodes, nearest token (after any probe) first.

        Runtime: O(N·k).

        :raises ConfigError: when `n` < 1
        :raises EmptyRingError: when there are no nodes
        """
        check_n(n)
        check_not_empty(len(self._names), "nodes_for")
        probes = self._probe_block(np.array([self._h1(key)], dtype=np.uint64))[0]
        # distance[m] = min over probes of (token_m - probe) mod 2**64, per node (name order)
        tokens_by_node = np.empty_like(self._tokens)
        tokens_by_node[self._order] = self._tokens
        distance = (tokens_by_node[:, None] - probes[None, :]).min(axis=1)
        ranked = np.argsort(distance, kind="stable")[:n]
        return [self._names[i] for i in ranked.tolist()]

    def _probe_block(self, h1: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
        """Return the (keys x k) probe points of a block of key points."""
        steps = np.arange(self._probes, dtype=np.uint64) * np.uint64(_GOLDEN)
        return _splitmix_many(h1[:, None] + steps[None, :])

    def owner_indices_for_hashes(self, hashes: npt.NDArray[np.uint64]) -> IndexArray:
        """Return the owner index of each native key hash (vectorised over keys and probes).

        :raises EmptyRingError: when there are no nodes
        """
        check_not_empty(len(self._names), "owner_indices_for_hashes")
        points = self._points(hashes)
        block = max(1, _BLOCK_CELLS // self._probes)
        result = np.empty(len(points), dtype=np.intp)
        for start in range(0, len(points), block):
            probes = self._probe_block(points[start : start + block])
            index = np.searchsorted(self._tokens, probes, side="left")
            index[index == len(self._tokens)] = 0
            distance = self._tokens[index] - probes
            best = index[np.arange(len(probes)), np.argmin(distance, axis=1)]
            result[start : start + len(probes)] = self._order[best]
        return result

    # -- measuring ---------------------------------------------------------------------------

    def shares(self) -> dict[str, float]:
        """Return each node's share if the k probes were independent uniform points.

        Exact under that model (the real probes are double hashes, so measured shares differ by
        sampling noise only). With arc lengths ``a`` and ``G(d) = Σ max(0, a_m - d)``, a node
        with arc ``a_j`` wins ``k ∫_0^{a_j} G(d)^(k-1) dd``; ``G`` is piecewise linear, so the
        integral is a sum over the sorted arc lengths. Runtime: O(N log N).
        """
        count = len(self._tokens)
        if count <= 1:
            return dict.fromkeys(self._names, 1.0)
        arcs = np.empty(count, dtype=np.float64)
        arcs[1:] = (self._tokens[1:] - self._tokens[:-1]).astype(np.float64) / _SPACE
        arcs[0] = float((int(self._tokens[0]) - int(self._tokens[-1])) % (1 << 64)) / _SPACE
        rank = np.argsort(arcs, kind="stable")
        ordered = arcs[rank]
        k = self._probes
        # G at each breakpoint 0, s_1, ..., s_N; on (s_r, s_r+1] exactly N - r arcs exceed d.
        suffix = np.concatenate([np.cumsum(ordered[::-1])[::-1], [0.0]])
        breaks = np.concatenate([[0.0], ordered])
        g = suffix - (count - np.arange(count + 1)) * breaks
        g[0] = suffix[0]
        pieces = (g[:-1] ** k - g[1:] ** k) / (count - np.arange(count))
        cumulative = np.cumsum(pieces)  # k·∫_0^{s_r} G^(k-1), r = 1..N
        shares = np.empty(count)
        shares[rank] = cumulative
        result = dict.fromkeys(self._names, 0.0)
        for position, share in enumerate(shares.tolist()):
            result[self._names[self._order[position]]] += share
        return result

    @property
    def probes(self) -> int:
        """The number of probes per key, ``k``."""
        return self._probes

    def _identity(self) -> tuple[object, ...]:
        return (self._nodes, self._probes, self._hasher)

    def _repr_options(self) -> str:
        return f", probes={self._probes}, hasher={self._hasher.name!r}"


def _successor_table(tokens: npt.NDArray[np.uint64]) -> list[int]:
    """Return, for each 16-bit bucket, the first token >= its start (+ 2**64 past the last).

    A probe in a bucket holding no token has that token as its successor; so does a probe in a
    bucket holding tokens when it lies at or before the bucket's first token. Any other probe
    finds ``successor - probe < 0`` and bisects (~N/2**17 of probes: 2% of keys at N = 128).
    """
    starts = np.arange(1 << _PROBE_BUCKET_BITS, dtype=np.uint64) << np.uint64(
        64 - _PROBE_BUCKET_BITS
    )
    first = np.searchsorted(tokens, starts, side="left")
    token_list = tokens.tolist()
    # Past the last token: the first, + 2**64 (the extra last entry); numpy indexes the 65,536
    # buckets in about a millisecond where a Python loop took tens.
    successors: list[int] = np.array([*token_list, token_list[0] + (1 << 64)], dtype=object)[
        first
    ].tolist()
    return successors


def _lanes(values: list[int]) -> int:
    """Return `values` packed into one integer, value ``i`` in bits ``[128·i, 128·i + 64)``."""
    return sum(value << (_LANE_BITS * i) for i, value in enumerate(values))


def _make_lookup(
    hasher: Hasher, tokens: npt.NDArray[np.uint64], token_names: list[str], probes: int
) -> Callable[[Any], str]:
    """Return ``key -> owner name``: ``MultiProbe.node_for`` with the k probes computed at once.

    NOTE: the k splitmix64 probes are the lookup's whole cost, so they are computed in one
    integer holding a 128-bit lane per probe: add, xor, shift and multiply act lane by lane as
    long as each lane is masked back to 64 bits before a shift or a multiply (the shift brings
    the next lane's low bits in at the top; a product needs the lane's 128 bits). One struct
    reads the k probes, another their top 16 bits, which index ``_successor_table``; the
    distances are ``map``-ped in C. ~1.8x the per-probe loop (benchmarks/bench_strategies.py).
    The winner is the first probe at the least distance (``list.index``), and its token's node
    the first of that token's owners in token order (``bisect_left``'s choice), as in the
    plain loop.
    """
    successor_of = _successor_table(tokens).__getitem__
    token_list = tokens.tolist()
    count = len(token_list)
    owner_of: dict[int, str] = {}
    for token, name in zip(token_list, token_names, strict=True):
        owner_of.setdefault(token, name)
    owner_of[token_list[0] + (1 << 64)] = token_names[0]
    function, widen = hasher.function, 64 - hasher.bits
    copies, low = _lanes([1] * probes), _lanes([_MASK64] * probes)
    offsets = _lanes([(i * _GOLDEN) & _MASK64 for i in range(probes)])
    words = struct.Struct("<" + "Q8x" * probes).unpack  # lane i's low 64 bits: probe i
    tops = struct.Struct("<" + "6xH8x" * probes).unpack  # its top 16 bits: probe i >> 48

    def lookup(
        key: Any,
        function: Callable[[bytes], int] = function,
        widen: int = widen,
        copies: int = copies,
        offsets: int = offsets,
        low: int = low,
        size: int = probes * _LANE_BITS // 8,
        words: Callable[[bytes], tuple[int, ...]] = words,
        tops: Callable[[bytes], tuple[int, ...]] = tops,
        successor_of: Callable[[int], int] = successor_of,
        owner_of: dict[int, str] = owner_of,
        token_list: list[int] = token_list,
        count: int = count,
        bisect: Callable[..., int] = bisect_left,
        sub: Callable[[int, int], int] = operator.sub,
        encode_key: Callable[[Any], bytes] = encode_key,
    ) -> str:
        try:
            data = key.encode()
        except AttributeError:
            data = encode_key(key)  # bytes and int keys; anything else is a TypeError
        # probe i = splitmix64(h1 + i·φ), lane i of z
        z = ((function(data) << widen) * copies + offsets) & low
        z = ((z ^ (z >> 30)) & low) * 0xBF58476D1CE4E5B9 & low
        z = ((z ^ (z >> 27)) & low) * 0x94D049BB133111EB & low
        packed = (z ^ (z >> 31)).to_bytes(size, "little")
        probe = words(packed)
        distance = list(map(sub, map(successor_of, tops(packed)), probe))
        least = min(distance)
        if least < 0:  # some probe lies past its bucket's first token: bisect those
            for i, point in enumerate(probe):
                if distance[i] < 0:
                    index = bisect(token_list, point)
                    successor = token_list[index] if index < count else token_list[0] + (1 << 64)
                    distance[i] = successor - point
            least = min(distance)
        return owner_of[probe[distance.index(least)] + least]  # the winner's successor token

    return lookup


def _splitmix_many(z: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    result: npt.NDArray[np.uint64] = z ^ (z >> np.uint64(31))
    return result


# The registry's entry (ringkit.strategies.registry): the options build_placement passes.
STRATEGY = Strategy("multiprobe", MultiProbe, {"probes": DEFAULT_PROBES, "hasher": DEFAULT_HASH})
