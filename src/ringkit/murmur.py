"""MurmurHash3 (Austin Appleby, public domain; smhasher ``MurmurHash3.cpp``), in pure Python.

``murmur3_32`` is x86_32 (as pymemcache and ``mmh3.hash`` compute it, unsigned);
``murmur3_x64_128`` returns both 64-bit halves, with the option of Java ports (Cassandra) that
read the tail bytes as signed. The tests cross-check both against the ``mmh3`` C extension.
Re-exported from ``ringkit.hashing``, where the named hashers live.

>>> hex(murmur3_32(b"hello"))
'0x248bfa47'
"""

from __future__ import annotations

import struct

__all__ = ["fmix32", "murmur3_32", "murmur3_64", "murmur3_x64_128"]

_MASK32 = 0xFFFFFFFF
_MASK64 = 0xFFFFFFFFFFFFFFFF


def fmix32(h: int) -> int:
    """Return MurmurHash3's 32-bit finalizer of `h` (a bijection on 32-bit ints)."""
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK32
    h ^= h >> 16
    return h


def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK32


def _rotl64(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _MASK64


def murmur3_32(data: bytes, seed: int = 0) -> int:
    """Return MurmurHash3 x86_32 of `data`, unsigned (as pymemcache and ``mmh3.hash`` compute it).

    >>> hex(murmur3_32(b"hello"))
    '0x248bfa47'
    """
    c1, c2 = 0xCC9E2D51, 0x1B873593
    length = len(data)
    h = seed & _MASK32
    nblocks = length // 4
    for (k,) in struct.iter_unpack("<I", data[: nblocks * 4]):
        k = (k * c1) & _MASK32
        k = _rotl32(k, 15)
        k = (k * c2) & _MASK32
        h ^= k
        h = _rotl32(h, 13)
        h = (h * 5 + 0xE6546B64) & _MASK32
    tail = data[nblocks * 4 :]
    k = 0
    for i in reversed(range(len(tail))):
        k = (k << 8) | tail[i]
    if tail:
        k = (k * c1) & _MASK32
        k = _rotl32(k, 15)
        k = (k * c2) & _MASK32
        h ^= k
    h ^= length
    return fmix32(h)


def _fmix64(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _MASK64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _MASK64
    k ^= k >> 33
    return k


def murmur3_x64_128(data: bytes, seed: int = 0, *, signed_tail: bool = False) -> tuple[int, int]:
    """Return MurmurHash3 x64_128 of `data` as two unsigned 64-bit halves ``(h1, h2)``.

    `signed_tail` reproduces Java ports (Cassandra) that read the tail bytes as signed ``byte``.
    """
    c1, c2 = 0x87C37B91114253D5, 0x4CF5AD432745937F
    length = len(data)
    h1 = h2 = seed & _MASK64
    nblocks = length // 16
    for k1, k2 in struct.iter_unpack("<QQ", data[: nblocks * 16]):
        k1 = _rotl64((k1 * c1) & _MASK64, 31)
        h1 ^= (k1 * c2) & _MASK64
        h1 = (_rotl64(h1, 27) + h2) & _MASK64
        h1 = (h1 * 5 + 0x52DCE729) & _MASK64
        k2 = _rotl64((k2 * c2) & _MASK64, 33)
        h2 ^= (k2 * c1) & _MASK64
        h2 = (_rotl64(h2, 31) + h1) & _MASK64
        h2 = (h2 * 5 + 0x38495AB5) & _MASK64
    tail = data[nblocks * 16 :]
    k1 = k2 = 0
    for i in reversed(range(len(tail))):
        byte = tail[i]
        if signed_tail and byte >= 0x80:
            byte -= 0x100
        if i >= 8:
            k2 ^= (byte << ((i - 8) * 8)) & _MASK64
        else:
            k1 ^= (byte << (i * 8)) & _MASK64
    if len(tail) > 8:
        k2 = _rotl64((k2 * c2) & _MASK64, 33)
        h2 ^= (k2 * c1) & _MASK64
    if tail:
        k1 = _rotl64((k1 * c1) & _MASK64, 31)
        h1 ^= (k1 * c2) & _MASK64
    h1 ^= length
    h2 ^= length
    h1 = (h1 + h2) & _MASK64
    h2 = (h2 + h1) & _MASK64
    h1 = _fmix64(h1)
    h2 = _fmix64(h2)
    h1 = (h1 + h2) & _MASK64
    h2 = (h2 + h1) & _MASK64
    return h1, h2


def murmur3_64(data: bytes) -> int:
    """Return the first 64 bits of MurmurHash3 x64_128 (seed 0), unsigned, as ``mmh3.hash64``."""
    return murmur3_x64_128(data)[0]
