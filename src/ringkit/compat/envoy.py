"""Envoy's ring hash load balancer (``RING_HASH``), point for point.

Envoy hashes ``"<address>_<i>"`` with xxHash64 (seed 0), or with ``MURMUR_HASH_2`` (libstdc++'s
64-bit ``std::hash``, seed ``0xc70f6907``), onto a 64-bit ring. Host weights are normalised to sum
to 1; ``scale = min(ceil(min_weight * minimum_ring_size) / min_weight, maximum_ring_size)``, and
walking the hosts in order with running sums ``target += scale * weight`` each host adds hashes
``i = 0, 1, ...`` while ``current < target``. So the least-weighted host gets a whole number of
hashes and the ring is as small as that allows. A request's 64-bit hash goes to the first ring
entry >= it, wrapping past the last (``Ring::chooseHost``, a port of libketama's search).

Reference: envoyproxy/envoy ``source/common/upstream/ring_hash_lb.cc`` (``RingHashLoadBalancer::
Ring::Ring``) and its tests ``test/common/upstream/ring_hash_lb_test.cc``.

>>> ring = envoy_ring([f"127.0.0.1:{port}" for port in range(90, 96)], min_ring_size=12)
>>> len(ring.points), ring.node_for_point(0), ring.node_for_point(3551244743356806948)
(12, '127.0.0.1:94', '127.0.0.1:93')
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Iterable, Mapping

import xxhash

from ringkit.compat._continuum import Continuum
from ringkit.errors import ConfigError
from ringkit.hashing import Hasher
from ringkit.nodes import Node

__all__ = [
    "ENVOY_HASHES",
    "ENVOY_KEY_HASHER",
    "MAX_RING_SIZE",
    "envoy_ring",
    "murmur_hash_2",
    "xx_hash",
]

MAX_RING_SIZE = 8_388_608  # the proto's upper bound for both ring sizes (8M)
_M64 = 0xFFFFFFFFFFFFFFFF
_STD_HASH_SEED = 0xC70F6907
_MUL = 0xC6A4A7935BD1E995


def xx_hash(data: bytes) -> int:
    """Return xxHash64 of `data` with seed 0 (Envoy's ``HashUtil::xxHash64``)."""
    return int(xxhash.xxh64_intdigest(data))


# Envoy's hash policies hash a header or cookie value with XXH64 (seed 0), not XXH3.
ENVOY_KEY_HASHER = Hasher("xxh64", xx_hash, 64)


def _shift_mix(v: int) -> int:
    return v ^ (v >> 47)


def murmur_hash_2(data: bytes, seed: int = _STD_HASH_SEED) -> int:
    """Return Envoy's ``MurmurHash::murmurHash2``: libstdc++'s 64-bit ``_Hash_bytes``.

    >>> murmur_hash_2(b"") == murmur_hash_2(b"", _STD_HASH_SEED)
    True
    """
    length = len(data)
    aligned = length & ~7
    h = (seed ^ (length * _MUL)) & _M64
    for (word,) in struct.iter_unpack("<Q", data[:aligned]):
        h ^= (_shift_mix((word * _MUL) & _M64) * _MUL) & _M64
        h = (h * _MUL) & _M64
    if length & 7:
        h ^= int.from_bytes(data[aligned:], "little")
        h = (h * _MUL) & _M64
    h = (_shift_mix(h) * _MUL) & _M64
    return _shift_mix(h)


ENVOY_HASHES: Mapping[str, Callable[[bytes], int]] = {
    "xx_hash": xx_hash,
    "murmur_hash_2": murmur_hash_2,
}


def _hosts(hosts: Iterable[str | Node] | Mapping[str, int]) -> tuple[Node, ...]:
    if isinstance(hosts, str):
        raise TypeError(f"hosts must be a list or a {{address: weight}} mapping, got {hosts!r}")
    items = (
        hosts.items()
        if isinstance(hosts, Mapping)
        else ((host.name, host.weight) if isinstance(host, Node) else (host, 1) for host in hosts)
    )
    nodes: list[Node] = []
    for address, weight in items:
        if (
            isinstance(weight, bool)
            or not isinstance(weight, (int, float))
            or weight < 1
            or weight != int(weight)
        ):
            raise ConfigError(
                f"weight of host {address!r} must be a whole number >= 1, got {weight!r}"
            )
        nodes.append(Node(address, weight=int(weight)))
    if len({node.name for node in nodes}) != len(nodes):
        raise ConfigError(f"a host is given twice in {[node.name for node in nodes]!r}")
    return tuple(nodes)


def _check_sizes(min_ring_size: int, max_ring_size: int) -> None:
    for name, value in (("min_ring_size", min_ring_size), ("max_ring_size", max_ring_size)):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_RING_SIZE:
            raise ConfigError(f"{name} must be an int in [1, {MAX_RING_SIZE}], got {value!r}")
    if min_ring_size > max_ring_size:
        # Envoy's own message: "ring hash: minimum_ring_size (20) > maximum_ring_size (10)".
        raise ConfigError(f"min_ring_size ({min_ring_size}) > max_ring_size ({max_ring_size})")


def _build(
    nodes: tuple[Node, ...], min_ring_size: int, max_ring_size: int, hash_name: str
) -> Continuum:
    function = ENVOY_HASHES[hash_name]
    total = sum(int(node.weight) for node in nodes)
    weights = [int(node.weight) * 1.0 / total for node in nodes]
    least = min(weights)
    scale = min(math.ceil(least * min_ring_size) / least, float(max_ring_size))
    points: list[int] = []
    owners: list[int] = []
    current = target = 0.0
    for index, (node, weight) in enumerate(zip(nodes, weights, strict=True)):
        target += scale * weight
        i = 0
        while current < target:
            points.append(function(f"{node.name}_{i}".encode()))
            owners.append(index)
            i += 1
            current += 1

    def rebuild(again: tuple[Node, ...]) -> Continuum:
        return envoy_ring(
            {node.name: int(node.weight) for node in again},
            min_ring_size=min_ring_size,
            max_ring_size=max_ring_size,
            hash=hash_name,
        )

    return Continuum.from_points(
        nodes, points, owners, hasher=ENVOY_KEY_HASHER, rebuild=rebuild, kind="envoy ring"
    )


def envoy_ring(
    hosts: Iterable[str | Node] | Mapping[str, int],
    *,
    min_ring_size: int = 1024,
    max_ring_size: int = MAX_RING_SIZE,
    hash: str = "xx_hash",
) -> Continuum:
    """Return Envoy's hash ring over `hosts` (addresses, or ``{address: weight}``).

    Each host is hashed by the string given: an address ``"127.0.0.1:90"`` as Envoy's
    ``address()->asString()``, or a host name when Envoy runs with ``use_hostname_for_hashing``.
    ``node_for_point(h)`` takes Envoy's 64-bit request hash; ``node_for(key)`` hashes the key
    with xxHash64 first, as Envoy's header and cookie hash policies do. `hash` is the ring's
    hash function, ``"xx_hash"`` or ``"murmur_hash_2"`` (Envoy's ``MURMUR_HASH_2``).

    Runtime: O(R log R) for a ring of R entries (R is about ``min_ring_size`` or more).

    :raises ConfigError: for no hosts, a weight that is not a whole number >= 1, a ring size
        outside [1, 8388608] or min > max, or an unknown hash function
    """
    if hash not in ENVOY_HASHES:
        raise ConfigError(f"unknown envoy hash {hash!r}; known: {', '.join(ENVOY_HASHES)}")
    _check_sizes(min_ring_size, max_ring_size)
    nodes = _hosts(hosts)
    if not nodes:
        raise ConfigError(f"envoy_ring needs at least one host, got {hosts!r}")
    return _build(nodes, min_ring_size, max_ring_size, hash)
