"""Hash a population's generated keys with numpy, bit for bit as the scalar hashers do.

The simulator's keys are ``prefix + zero-padded decimal index``. Keys with the same number of
digits have the same length, so a run of them is a byte matrix built with integer arithmetic,
and a hash becomes a few array operations instead of a Python call per key. Supported exactly:
XXH3-64 for keys of 9 to 16 bytes (``XXH3_len_9to16_64b`` of the reference xxhash.h, seed 0,
default secret) and FNV-1a (32, 32 with ringkit's fmix32 mix, 64) for any length. Anything else
returns None and the caller hashes key by key. Tests compare every path with the scalar hashers.

>>> import xxhash
>>> got = hash_generated(b"key-", 0, 1_000_000, 1_000_003, "xxh3_64")
>>> got.tolist() == [xxhash.xxh3_64_intdigest(b"key-%d" % i) for i in range(1_000_000, 1_000_003)]
True
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ringkit.hashing import HASHERS

__all__ = ["VECTORISED_HASHERS", "hash_generated"]

UInt64Array = npt.NDArray[np.uint64]
VECTORISED_HASHERS: tuple[str, ...] = ("fnv1a_32", "fnv1a_32_mix", "fnv1a_64", "xxh3_64")

# XXH3's default secret, bytes 24..55: the only part the 9-16 byte path reads (xxhash.h kSecret).
_SECRET_24_56 = bytes.fromhex("7240a4a4b7b3671fcb79e64eccc0e578825ad07dccff7221b8084674f743248e")
_BITFLIP1 = np.uint64(
    int.from_bytes(_SECRET_24_56[0:8], "little") ^ int.from_bytes(_SECRET_24_56[8:16], "little")
)
_BITFLIP2 = np.uint64(
    int.from_bytes(_SECRET_24_56[16:24], "little") ^ int.from_bytes(_SECRET_24_56[24:32], "little")
)
_PRIME_MX1 = np.uint64(0x165667919E3779F9)
_M32 = np.uint64(0xFFFFFFFF)
_U32, _U37, _U16, _U13 = np.uint64(32), np.uint64(37), np.uint64(16), np.uint64(13)
# Key numbers are uint64 here: every index < 2**64 is exact; larger ones go key by key.
_INDEX_END = 1 << 64


def _key_matrix(
    prefix: bytes, digits: int, indices: npt.NDArray[np.uint64]
) -> npt.NDArray[np.uint8]:
    """The keys ``prefix + f"{i:0{digits}d}"`` as rows of a uint8 matrix."""
    matrix = np.empty((len(indices), len(prefix) + digits), dtype=np.uint8)
    matrix[:, : len(prefix)] = np.frombuffer(prefix, dtype=np.uint8)
    rest = indices.copy()
    for column in range(len(prefix) + digits - 1, len(prefix) - 1, -1):
        matrix[:, column] = 48 + rest % 10
        rest //= 10
    return matrix


def _le64(matrix: npt.NDArray[np.uint8], start: int) -> UInt64Array:
    return np.ascontiguousarray(matrix[:, start : start + 8]).view("<u8").ravel().astype(np.uint64)


def _mul128_fold64(a: UInt64Array, b: UInt64Array) -> UInt64Array:
    """The 128-bit product of a and b, low half XOR high half (xxhash's portable version)."""
    lo_lo = (a & _M32) * (b & _M32)
    hi_lo = (a >> _U32) * (b & _M32)
    lo_hi = (a & _M32) * (b >> _U32)
    hi_hi = (a >> _U32) * (b >> _U32)
    cross = (lo_lo >> _U32) + (hi_lo & _M32) + lo_hi
    upper = (hi_lo >> _U32) + (cross >> _U32) + hi_hi
    lower = (cross << _U32) | (lo_lo & _M32)
    result: UInt64Array = lower ^ upper
    return result


def _xxh3_9to16(matrix: npt.NDArray[np.uint8]) -> UInt64Array:
    length = matrix.shape[1]
    input_lo = _le64(matrix, 0) ^ _BITFLIP1
    input_hi = _le64(matrix, length - 8) ^ _BITFLIP2
    acc = np.uint64(length) + input_lo.byteswap() + input_hi + _mul128_fold64(input_lo, input_hi)
    acc ^= acc >> _U37  # XXH3_avalanche
    acc *= _PRIME_MX1
    acc ^= acc >> _U32
    return acc


def _fnv1a(matrix: npt.NDArray[np.uint8], bits: int) -> UInt64Array:
    if bits == 32:
        h32 = np.full(len(matrix), 0x811C9DC5, dtype=np.uint32)
        for column in matrix.T:
            h32 = (h32 ^ column) * np.uint32(0x01000193)
        return h32.astype(np.uint64)
    h = np.full(len(matrix), 0xCBF29CE484222325, dtype=np.uint64)
    for column in matrix.T:
        h = (h ^ column) * np.uint64(0x100000001B3)
    return h


def _fmix32(h: UInt64Array) -> UInt64Array:
    h = h.astype(np.uint32)
    h ^= h >> np.uint32(16)
    h *= np.uint32(0x85EBCA6B)
    h ^= h >> np.uint32(13)
    h *= np.uint32(0xC2B2AE35)
    h ^= h >> np.uint32(16)
    return h.astype(np.uint64)


def _hash_matrix(matrix: npt.NDArray[np.uint8], hasher: str) -> UInt64Array | None:
    if hasher == "xxh3_64":
        return _xxh3_9to16(matrix) if 9 <= matrix.shape[1] <= 16 else None
    if hasher == "fnv1a_64":
        return _fnv1a(matrix, 64)
    hashed = _fnv1a(matrix, 32)
    return _fmix32(hashed) if hasher == "fnv1a_32_mix" else hashed


def hash_generated(
    prefix: bytes, width: int, begin: int, end: int, hasher: str
) -> UInt64Array | None:
    """Return the hashes of keys ``prefix + f"{i:0{width}d}"`` for ``begin <= i < end``.

    None for another hasher, a negative index or an index past 2**64 - 1 (indices are uint64
    arithmetic here): the caller then hashes key by key. XXH3 keys outside 9-16 bytes are hashed
    one by one here.

    Runtime: O(n · key length) array operations.
    """
    # Before this, int64 indices wrapped past 2**63 - 1 and hashed other keys
    if hasher not in VECTORISED_HASHERS or begin < 0 or end <= begin or end > _INDEX_END:
        return None
    result = np.empty(end - begin, dtype=np.uint64)
    low = begin
    while low < end:
        digits = max(width, len(str(low)))
        high = min(end, 10**digits)  # every index below 10**digits has this many digits
        indices = np.arange(low, high, dtype=np.uint64)
        hashed = _hash_matrix(_key_matrix(prefix, digits, indices), hasher)
        if hashed is None:  # e.g. XXH3 keys shorter than 9 bytes: few, so hash them one by one
            form = prefix.replace(b"%", b"%%") + b"%0" + str(digits).encode() + b"d"
            function = HASHERS[hasher].function
            hashed = np.fromiter(map(function, map(form.__mod__, range(low, high))), np.uint64)
        result[low - begin : high - begin] = hashed
        low = high
    return result
