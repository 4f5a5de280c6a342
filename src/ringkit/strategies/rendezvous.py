"""Rendezvous (highest random weight) hashing, weighted, and pymemcache's exact variant.

Every node scores every key with a hash of the pair; the key goes to the highest score, and its
replicas to the next highest. Scores of one node never depend on the others, so adding a node
moves only the keys it now wins, and removing one moves only its own keys: the minimum possible
movement, with no table and no virtual nodes, at O(N) per lookup.

Weights use the logarithmic method: with ``u`` the pair's hash mapped into (0, 1), a node of
weight ``w`` scores ``-w / ln(u)``, and wins a key with probability exactly ``w / Σw``.

References: David G. Thaler, Chinya V. Ravishankar, "Using Name-Based Mappings to Increase Hit
Rates", IEEE/ACM Transactions on Networking 6(1), 1998; Christian Schindelhauer, Gunnar
Schomaker, "Weighted Distributed Hash Tables", SPAA 2005 (the logarithmic method);
pymemcache ``pymemcache/client/rendezvous.py`` (the ``variant="pymemcache"`` rule).

>>> placement = Rendezvous(["0", "1", "2"], variant="pymemcache")
>>> [placement.node_for(key) for key in ("ok", "mykey", "wat", "lol")]
['0', '1', '2', '2']
>>> placement.add("3").node_for("lol")
'3'
"""

from __future__ import annotations

import math
import struct
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
    murmur3_32,
)
from ringkit.nodes import Node, NodesLike, coerce_nodes
from ringkit.placement import IndexArray, PlacementBase, check_n, check_not_empty
from ringkit.strategies.options import Strategy

__all__ = ["RENDEZVOUS_VARIANTS", "Rendezvous", "fmix64_many"]

RENDEZVOUS_VARIANTS = ("weighted", "pymemcache")
# Up to this many nodes, a scalar lookup scores in plain Python (benchmarks/bench_strategies.py).
_SCALAR_NODES = 24
# Equal weights, from _PACKED_NODES[0] to [1] nodes: all N scores in one packed integer (below).
_PACKED_NODES = (4, 64)
_LANE_BITS = 128  # a lane holds a 64-bit score and its 64 x 64-bit product before the mask
_MASK64 = 0xFFFFFFFFFFFFFFFF
_TWO_MINUS_53 = 1.0 / (1 << 53)
# Keys per vectorised block in node_for_many: bounds the (keys x nodes) score matrix to ~8 MB.
_BLOCK_CELLS = 1 << 20


def fmix64_many(z: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """Return MurmurHash3's 64-bit finalizer of every element (a bijection; wraps like C).

    >>> fmix64_many(np.array([0, 1], dtype=np.uint64)).tolist()
    [0, 12994781566227106604]
    """
    z = z ^ (z >> np.uint64(33))
    z = z * np.uint64(0xFF51AFD7ED558CCD)
    z ^= z >> np.uint64(33)
    z *= np.uint64(0xC4CEB9FE1A85EC53)
    z ^= z >> np.uint64(33)
    return z


def _pymemcache_bytes(text: str) -> bytes:
    # pymemcache's murmur3 reads characters, not UTF-8 bytes, and keeps the low byte of each
    # code point: the first byte of each UTF-32-LE unit is exactly that.
    if text.isascii():
        return text.encode()
    return text.encode("utf-32-le", "surrogatepass")[::4]


class Rendezvous(PlacementBase):
    """Rendezvous hashing over named nodes; an immutable value.

    ``variant="weighted"`` (default): the pair score is ``fmix64(hash(key) ^ hash(name))``,
    used directly when all weights are equal and through ``-w / ln(u)`` otherwise.
    ``variant="pymemcache"``: pymemcache's ``RendezvousHash`` exactly: score
    ``murmur3_32(f"{name}-{key}")`` over the text's characters, equal scores won by the larger
    name. It is unweighted and always hashes with murmur3_32 (its keys are formatted as
    pymemcache formats them, so a bytes key is hashed as its ``repr``: use str keys).

    Replica order: descending score, equal scores by descending name.

    Looking up: ``node_for``, ``nodes_for``, ``node_for_many``, ``owner_indices_for_hashes``
    (weighted variant), ``scores``.
    Changing membership: ``add``, ``remove``, ``discard``, ``reweight`` (weighted variant).
    Measuring: ``nodes``, ``hasher``, ``shares``, ``variant``, ``len``, ``in``, ``iter``, ``==``.
    """

    # NOTE: no __slots__: a small weighted placement shadows node_for with a closure in its
    # __dict__ (as HashRing does), one Python call per lookup.
    _hasher: Hasher

    def __init__(
        self,
        nodes: NodesLike = (),
        *,
        hasher: HasherLike | None = None,
        variant: str = "weighted",
    ) -> None:
        if variant not in RENDEZVOUS_VARIANTS:
            raise ConfigError(
                f"unknown rendezvous variant {variant!r}; known: {', '.join(RENDEZVOUS_VARIANTS)}"
            )
        self._variant = variant
        # The weighted variant scores a mix of the key's hash; pymemcache's formats the key.
        self.routes_by_hash = variant == "weighted"
        self._nodes = tuple(sorted(coerce_nodes(nodes), key=lambda node: node.name))
        self._names = tuple(node.name for node in self._nodes)
        if variant == "pymemcache":
            self._check_pymemcache(hasher)
            self._hasher = get_hasher("murmur3_32")
        else:
            self._hasher = get_hasher(DEFAULT_HASH if hasher is None else hasher)
        function = self._hasher.function
        self._seeds = np.array([function(name.encode()) for name in self._names], np.uint64)
        self._weights = np.array([node.weight for node in self._nodes], dtype=np.float64)
        self._uniform = len(set(self._weights.tolist())) <= 1
        self._scalar_nodes = tuple(zip(self._seeds.tolist(), self._weights.tolist(), strict=True))
        self._bind_lookup()

    def _bind_lookup(self) -> None:
        count = len(self._names)
        if self._variant == "weighted" and self._uniform and _PACKED_NODES[0] <= count:
            if count <= _PACKED_NODES[1]:
                vars(self)["node_for"] = _make_packed_lookup(
                    self._hasher.function, self._seeds.tolist(), self._names
                )
        elif self._variant == "weighted" and 0 < count <= _SCALAR_NODES:
            vars(self)["node_for"] = _make_lookup(
                self._hasher.function, self._seeds.tolist(), self._weights.tolist(), self._names
            )

    def __getstate__(self) -> dict[str, Any]:
        # The bound lookup closure does not pickle; it is rebuilt on load.
        return {k: v for k, v in vars(self).items() if k != "node_for"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        vars(self).update(state)
        self._bind_lookup()

    def _check_pymemcache(self, hasher: HasherLike | None) -> None:
        if hasher is not None:
            raise ConfigError(
                f"the pymemcache variant always hashes with murmur3_32, got hasher={hasher!r}; "
                "leave hasher unset"
            )
        for node in self._nodes:
            if node.weight != 1.0:
                raise ConfigError(
                    f"the pymemcache variant is unweighted, got weight {node.weight!r} for node "
                    f"{node.name!r}; use variant='weighted'"
                )

    # -- scoring -----------------------------------------------------------------------------

    def _key_hash(self, key: Key) -> int:
        return self._hasher.function(key.encode() if type(key) is str else encode_key(key))

    def scores(self, key: Key) -> dict[str, float]:
        """Return every node's score for `key` (the highest wins; ties to the larger name).

        Runtime: O(N).

        :raises TypeError: when `key` is not str, bytes or int
        """
        return dict(zip(self._names, self._score_row(key).tolist(), strict=True))

    def _score_row(self, key: Key) -> npt.NDArray[Any]:
        if self._variant == "pymemcache":
            text = _pymemcache_key(key)
            return np.array(
                [murmur3_32(_pymemcache_bytes(f"{name}-{text}")) for name in self._names],
                dtype=np.uint64,
            )
        row: npt.NDArray[Any] = self._score_block(np.array([self._key_hash(key)], np.uint64))[0]
        return row

    def _score_one(self, h: int) -> npt.NDArray[Any]:
        """Return the score row of one key hash `h` (weighted variant), updating in place.

        The same scores as ``_score_block``, with no (1 x N) temporaries: a scalar lookup over
        many nodes pays numpy's per-call cost a dozen times, not per temporary.
        """
        z = self._seeds ^ np.uint64(h)
        z ^= z >> np.uint64(33)
        z *= np.uint64(0xFF51AFD7ED558CCD)
        z ^= z >> np.uint64(33)
        z *= np.uint64(0xC4CEB9FE1A85EC53)
        z ^= z >> np.uint64(33)
        if self._uniform:
            return z
        u = ((z >> np.uint64(11)).astype(np.float64) + 0.5) * _TWO_MINUS_53
        result: npt.NDArray[np.float64] = -self._weights / np.log(u)
        return result

    def _score_block(self, hashes: npt.NDArray[np.uint64]) -> npt.NDArray[Any]:
        """Return the (keys x nodes) score matrix of the weighted variant."""
        mixed = fmix64_many(hashes[:, None] ^ self._seeds[None, :])
        if self._uniform:
            return mixed  # equal weights: -w/ln(u) is increasing in u, so compare hashes
        # u in (0, 1): the top 53 bits plus one half, so neither 0 nor 1 is reachable.
        u = ((mixed >> np.uint64(11)).astype(np.float64) + 0.5) * _TWO_MINUS_53
        result: npt.NDArray[np.float64] = -self._weights[None, :] / np.log(u)
        return result

    # -- looking up --------------------------------------------------------------------------

    def node_for(self, key: Key) -> str:
        """Return the node with the highest score for `key`.

        Runtime: O(N). The weighted variant answers through a closure bound in ``__init__``:
        equal weights from 4 to 64 nodes score all nodes in one packed integer
        (``_make_packed_lookup``); otherwise up to 24 nodes score in plain integers
        (``_make_lookup``). Beyond, numpy scores the row.

        :raises EmptyRingError: when there are no nodes
        :raises TypeError: when `key` is not str, bytes or int
        """
        check_not_empty(len(self._names), "node_for")
        if self._variant == "weighted" and len(self._names) <= _SCALAR_NODES:
            return self._names[self._best_scalar(self._key_hash(key))]
        if self._variant == "weighted":
            row = self._score_one(self._key_hash(key))
        else:
            row = self._score_row(key)
        # The last maximum in name order is the larger name: pymemcache's tie rule.
        return self._names[len(row) - 1 - int(np.argmax(row[::-1]))]

    def _best_scalar(self, h: int) -> int:
        """Return the index of the winner for key hash `h`, in plain integer arithmetic.

        The same scores as ``_score_block``; for a few nodes this beats numpy's call overhead.
        """
        best, best_score = 0, -1.0
        uniform, log = self._uniform, math.log
        for index, (seed, weight) in enumerate(self._scalar_nodes):
            z = h ^ seed
            z = ((z ^ (z >> 33)) * 0xFF51AFD7ED558CCD) & _MASK64
            z = ((z ^ (z >> 33)) * 0xC4CEB9FE1A85EC53) & _MASK64
            z ^= z >> 33
            score = z if uniform else -weight / log(((z >> 11) + 0.5) * _TWO_MINUS_53)
            if score >= best_score:  # >=: equal scores go to the later, larger name
                best, best_score = index, score
        return best

    def nodes_for(self, key: Key, n: int) -> list[str]:
        """Return the `n` nodes with the highest scores for `key`, best first.

        :raises ConfigError: when `n` < 1
        :raises EmptyRingError: when there are no nodes
        """
        check_n(n)
        check_not_empty(len(self._names), "nodes_for")
        order = np.argsort(self._score_row(key), kind="stable")[::-1][:n]
        return [self._names[i] for i in order.tolist()]

    def owner_indices_for_hashes(self, hashes: npt.NDArray[np.uint64]) -> IndexArray:
        """Return the winner of each native key hash (weighted variant), scored in blocks.

        :raises EmptyRingError: when there are no nodes
        :raises UnsupportedError: for the pymemcache variant, which scores formatted keys
        """
        if self._variant != "weighted":
            return super().owner_indices_for_hashes(hashes)
        check_not_empty(len(self._names), "owner_indices_for_hashes")
        block = max(1, _BLOCK_CELLS // len(self._names))
        result = np.empty(len(hashes), dtype=np.intp)
        for start in range(0, len(hashes), block):
            scores = self._score_block(hashes[start : start + block])
            # The last maximum in name order is the larger name: the tie rule.
            last_max = len(self._names) - 1 - np.argmax(scores[:, ::-1], axis=1)
            result[start : start + len(scores)] = last_max
        return result

    # -- changing membership -----------------------------------------------------------------

    def _rebuilt(self, nodes: tuple[Node, ...]) -> Rendezvous:
        hasher = None if self._variant == "pymemcache" else self._hasher
        return Rendezvous(nodes, hasher=hasher, variant=self._variant)

    def _weights_refused(self) -> tuple[str, str] | None:
        if self._variant == "pymemcache":
            return "the pymemcache variant", "use variant='weighted'"
        return None

    # -- measuring ---------------------------------------------------------------------------

    def shares(self) -> dict[str, float]:
        """Return ``w / Σw`` per node: the expected share (estimated; no table to count)."""
        total = math.fsum(self._weights.tolist())
        return {node.name: node.weight / total for node in self._nodes}

    @property
    def variant(self) -> str:
        """``"weighted"`` or ``"pymemcache"``."""
        return self._variant

    def _identity(self) -> tuple[object, ...]:
        return (self._nodes, self._variant, self._hasher)

    def _repr_options(self) -> str:
        return f", hasher={self._hasher.name!r}, variant={self._variant!r}"


def _make_lookup(
    function: Callable[[bytes], int],
    seeds: list[int],
    weights: list[float],
    names: tuple[str, ...],
) -> Callable[[Any], str]:
    """Return ``key -> owner name`` for the weighted variant, scoring in plain integers.

    The scores of ``Rendezvous._best_scalar`` with every constant a local; equal weights compare
    the mixed hashes themselves (``-w / ln(u)`` is increasing in ``u``), so the uniform loop
    does no float work at all.
    """
    if len(set(weights)) <= 1:
        pairs = tuple(zip(seeds, names, strict=True))

        def uniform(
            key: Any,
            function: Callable[[bytes], int] = function,
            pairs: tuple[tuple[int, str], ...] = pairs,
            encode_key: Callable[[Any], bytes] = encode_key,
        ) -> str:
            try:
                data = key.encode()
            except AttributeError:
                data = encode_key(key)  # bytes and int keys; anything else is a TypeError
            h = function(data)
            best_score, best = -1, names[0]
            for seed, name in pairs:
                z = h ^ seed  # MurmurHash3's fmix64, inlined
                z = ((z ^ (z >> 33)) * 0xFF51AFD7ED558CCD) & 0xFFFFFFFFFFFFFFFF
                z = ((z ^ (z >> 33)) * 0xC4CEB9FE1A85EC53) & 0xFFFFFFFFFFFFFFFF
                z ^= z >> 33
                if z >= best_score:  # >=: equal scores go to the later, larger name
                    best_score, best = z, name
            return best

        return uniform
    triples = tuple(zip(seeds, weights, names, strict=True))

    def weighted(
        key: Any,
        function: Callable[[bytes], int] = function,
        triples: tuple[tuple[int, float, str], ...] = triples,
        log: Callable[[float], float] = math.log,
        encode_key: Callable[[Any], bytes] = encode_key,
    ) -> str:
        try:
            data = key.encode()
        except AttributeError:
            data = encode_key(key)  # bytes and int keys; anything else is a TypeError
        h = function(data)
        best_score, best = -1.0, names[0]
        for seed, weight, name in triples:
            z = h ^ seed
            z = ((z ^ (z >> 33)) * 0xFF51AFD7ED558CCD) & 0xFFFFFFFFFFFFFFFF
            z = ((z ^ (z >> 33)) * 0xC4CEB9FE1A85EC53) & 0xFFFFFFFFFFFFFFFF
            z ^= z >> 33
            score = -weight / log(((z >> 11) + 0.5) * _TWO_MINUS_53)
            if score >= best_score:
                best_score, best = score, name
        return best

    return weighted


def _make_packed_lookup(
    function: Callable[[bytes], int], seeds: list[int], names: tuple[str, ...]
) -> Callable[[Any], str]:
    """Return ``key -> owner name`` for equal weights, all N scores in one packed integer.

    Lane ``i`` (``_LANE_BITS`` wide) of one Python int holds node ``i``'s 64-bit value, and
    each step of fmix64 runs on all lanes at once: xor, shift and multiply by a 64-bit constant
    act lane by lane as long as each lane is masked back to 64 bits before the next multiply (a
    shift brings the next lane's low bits into this lane's top half; a 64 x 64-bit product fills
    the whole lane). The scores are then read out by one ``struct`` call and the winner is the
    last maximum (equal scores go to the larger name). The same scores as ``_best_scalar``; a
    dozen operations on one N·128-bit int cost less than a dozen per node from 4 to 64 nodes
    (benchmarks/bench_strategies.py: 1.9x faster at N = 8, 2.5x at N = 32).
    """
    count = len(seeds)
    replicate = sum(1 << (_LANE_BITS * i) for i in range(count))
    mask = _MASK64 * replicate  # the low 64 bits of every lane
    packed_seeds = sum(seed << (_LANE_BITS * i) for i, seed in enumerate(seeds))
    scores_of = struct.Struct("<" + "Q8x" * count).unpack
    size = count * _LANE_BITS // 8

    def lookup(
        key: Any,
        function: Callable[[bytes], int] = function,
        replicate: int = replicate,
        mask: int = mask,
        packed_seeds: int = packed_seeds,
        scores_of: Callable[[bytes], tuple[int, ...]] = scores_of,
        size: int = size,
        last: int = count - 1,
        names: tuple[str, ...] = names,
        encode_key: Callable[[Any], bytes] = encode_key,
    ) -> str:
        try:
            data = key.encode()
        except AttributeError:
            data = encode_key(key)  # bytes and int keys; anything else is a TypeError
        z = (function(data) * replicate) ^ packed_seeds  # h ^ seed in every lane
        z = (((z ^ (z >> 33)) & mask) * 0xFF51AFD7ED558CCD) & mask
        z = (((z ^ (z >> 33)) & mask) * 0xC4CEB9FE1A85EC53) & mask
        scores = scores_of(((z ^ (z >> 33)) & mask).to_bytes(size, "little"))
        return names[last - scores[::-1].index(max(scores))]  # the last maximum wins

    return lookup


def _pymemcache_key(key: Key) -> str:
    """Return the text pymemcache's ``f"{node}-{key}"`` would put after the dash."""
    encode_key(key)  # validates the type (TypeError for float, None, ...)
    if isinstance(key, (bytearray, memoryview)):
        key = bytes(key)
    return f"{key!s}" if not isinstance(key, bytes) else repr(key)


def _build(nodes: NodesLike, hasher: HasherLike | None, rendezvous_variant: str) -> Rendezvous:
    return Rendezvous(nodes, hasher=hasher, variant=rendezvous_variant)


# The registry's entry (ringkit.strategies.registry): the options build_placement passes. No
# default hasher: the weighted variant then takes DEFAULT_HASH, pymemcache its murmur3_32.
STRATEGY = Strategy("rendezvous", _build, {"hasher": None, "rendezvous_variant": "weighted"})
