"""HAProxy's key hashes (sdbm, djb2, wt6, crc32) and its avalanche, one key or many at once.

``hash-type consistent [sdbm|djb2|wt6|crc32] [avalanche]`` hashes a request's key (a header
value, the URI, a URL parameter...) with one of four 32-bit functions, then, with the
``avalanche`` modifier, through ``full_hash``: Bob Jenkins' 32-bit integer avalanche multiplied by
3221225473. The same ``full_hash`` places the servers' points. The scalar forms follow
HAProxy's ``src/hash.c`` and ``include/haproxy/intops.h`` (``__full_hash``) line by line; the
vectorised forms hash a batch of keys one byte column at a time with numpy, for
``node_for_many``.

>>> hex(sdbm(b"user:42")), hex(djb2(b"user:42")), hex(wt6(b"user:42")), hex(crc32(b"user:42"))
('0x789cb0ed', '0x45c1cda4', '0x2e68dc4f', '0x646f0d86')
>>> hex(full_hash(1 * 4096 + 0))
'0x49c2008b'
"""

from __future__ import annotations

import ipaddress
import zlib
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType

import numpy as np
import numpy.typing as npt

from ringkit.errors import ConfigError
from ringkit.hashing import Key, encode_key

__all__ = [
    "HAPROXY_HASHES",
    "crc32",
    "djb2",
    "full_hash",
    "full_hash_many",
    "hash_many_haproxy",
    "sdbm",
    "source",
    "wt6",
]

_M32 = 0xFFFFFFFF
UInt32Array = npt.NDArray[np.uint32]


def sdbm(data: bytes) -> int:
    """Return HAProxy's ``hash_sdbm`` (``c + (h << 6) + (h << 16) - h``, i.e. h * 65599 + c)."""
    h = 0
    for c in data:
        h = (h * 65599 + c) & _M32
    return h


def djb2(data: bytes) -> int:
    """Return HAProxy's ``hash_djb2`` (``h * 33 + c`` from 5381)."""
    h = 5381
    for c in data:
        h = (h * 33 + c) & _M32
    return h


def wt6(data: bytes) -> int:
    """Return HAProxy's ``hash_wt6`` (Willy Tarreau's 6-step rotating hash)."""
    h0, h1, step0, step1 = 0xA53C965A, 0x5CA6953A, 6, 18
    for t in data:
        h0 = ~(h0 ^ t) & _M32
        h1 = ~(h1 + t) & _M32
        # NOTE: a rotation by 0 is h1 | h1 >> 32; x86 masks the count to 0 and gives h1 | h1,
        # Python gives h1 | 0: the same h1 either way.
        t = ((h1 << step0) | (h1 >> (32 - step0))) & _M32
        h1 = ((h0 << step1) | (h0 >> (32 - step1))) & _M32
        h0 = t
        t = ((h0 >> 16) ^ h1) & 0xFFFF
        step0, step1 = t & 0x1F, t >> 11
    return h0 ^ h1


def crc32(data: bytes) -> int:
    """Return HAProxy's ``hash_crc32``: the CRC-32 of zlib (reflected 0xEDB88320)."""
    return zlib.crc32(data)


def full_hash(a: int) -> int:
    """Return HAProxy's ``full_hash``: Jenkins' 32-bit avalanche, times 3221225473, mod 2**32."""
    a = ((a + 0x7ED55D16) + (a << 12)) & _M32
    a = (a ^ 0xC761C23C) ^ (a >> 19)
    a = ((a + 0x165667B1) + (a << 5)) & _M32
    a = ((a + 0xD3A2646C) ^ (a << 9)) & _M32
    a = ((a + 0xFD7046C5) + (a << 3)) & _M32
    a = (a ^ 0xB55A4F09) ^ (a >> 16)
    return (a * 3221225473) & _M32


def source(data: bytes) -> int:
    """Return ``balance source``'s hash of a client address: its 32-bit words XORed.

    HAProxy's ``get_server_sh`` hashes no bytes: it XORs the address's big-endian words.

    >>> source(b"10.0.0.1") == 0x0A000001
    True

    :raises ConfigError: when `data` is not an IPv4 or IPv6 address
    """
    try:
        packed = ipaddress.ip_address(data.decode()).packed
    except (ValueError, UnicodeDecodeError):
        raise ConfigError(f"balance source hashes a client IP address, got {data!r}") from None
    h = 0
    for first in range(0, len(packed), 4):
        h ^= int.from_bytes(packed[first : first + 4], "big")
    return h


HAPROXY_HASHES: Mapping[str, Callable[[bytes], int]] = MappingProxyType(
    {"sdbm": sdbm, "djb2": djb2, "wt6": wt6, "crc32": crc32}
)
# What a backend's key goes through before the tree: a function above, or ``balance source``.
KEY_HASHES: Mapping[str, Callable[[bytes], int]] = MappingProxyType(
    {**HAPROXY_HASHES, "source": source}
)


# -- many keys at once -----------------------------------------------------------------------------


def full_hash_many(a: UInt32Array) -> UInt32Array:
    """Return ``full_hash`` of every value (uint32 arithmetic wraps as C's unsigned int does)."""
    a = a.astype(np.uint32)
    a = (a + np.uint32(0x7ED55D16)) + (a << np.uint32(12))
    a = (a ^ np.uint32(0xC761C23C)) ^ (a >> np.uint32(19))
    a = (a + np.uint32(0x165667B1)) + (a << np.uint32(5))
    a = (a + np.uint32(0xD3A2646C)) ^ (a << np.uint32(9))
    a = (a + np.uint32(0xFD7046C5)) + (a << np.uint32(3))
    a = (a ^ np.uint32(0xB55A4F09)) ^ (a >> np.uint32(16))
    result: UInt32Array = a * np.uint32(3221225473)
    return result


def _byte_columns(
    data: Sequence[bytes],
) -> tuple[npt.NDArray[np.uint8], list[int], npt.NDArray[np.intp]]:
    """Return the keys as a padded byte matrix (longest first), active rows per column, order.

    Row r of the matrix is key ``order[r]``; column j is active for its first ``active[j]``
    rows (the keys longer than j), so each step works on one contiguous slice.
    """
    lengths = np.fromiter((len(item) for item in data), dtype=np.intp, count=len(data))
    order = np.argsort(-lengths, kind="stable")
    lengths = lengths[order]
    width = int(lengths[0]) if len(lengths) else 0
    matrix = np.zeros((len(data), width), dtype=np.uint8)
    flat = np.frombuffer(b"".join(data[i] for i in order.tolist()), dtype=np.uint8)
    starts = np.cumsum(lengths) - lengths
    rows = np.repeat(np.arange(len(data)), lengths)
    matrix[rows, np.arange(len(flat)) - np.repeat(starts, lengths)] = flat
    active = np.searchsorted(-lengths, -np.arange(1, width + 1), side="right").tolist()
    return matrix, active, order


def _sdbm_columns(matrix: npt.NDArray[np.uint8], active: list[int]) -> UInt32Array:
    h = np.zeros(len(matrix), dtype=np.uint32)
    for j, rows in enumerate(active):
        h[:rows] = h[:rows] * np.uint32(65599) + matrix[:rows, j]
    return h


def _djb2_columns(matrix: npt.NDArray[np.uint8], active: list[int]) -> UInt32Array:
    h = np.full(len(matrix), 5381, dtype=np.uint32)
    for j, rows in enumerate(active):
        h[:rows] = h[:rows] * np.uint32(33) + matrix[:rows, j]
    return h


def _wt6_columns(matrix: npt.NDArray[np.uint8], active: list[int]) -> UInt32Array:
    # uint64 lanes holding 32-bit values, so that a shift by 32 (a rotation by 0) is defined.
    count, m32 = len(matrix), np.uint64(_M32)
    h0 = np.full(count, 0xA53C965A, dtype=np.uint64)
    h1 = np.full(count, 0x5CA6953A, dtype=np.uint64)
    step0 = np.full(count, 6, dtype=np.uint64)
    step1 = np.full(count, 18, dtype=np.uint64)
    for j, rows in enumerate(active):
        t = matrix[:rows, j].astype(np.uint64)
        a0 = ~(h0[:rows] ^ t) & m32
        a1 = ~(h1[:rows] + t) & m32
        s0, s1 = step0[:rows], step1[:rows]
        rotated = ((a1 << s0) | (a1 >> (np.uint64(32) - s0))) & m32
        h1[:rows] = ((a0 << s1) | (a0 >> (np.uint64(32) - s1))) & m32
        h0[:rows] = rotated
        t = ((rotated >> np.uint64(16)) ^ h1[:rows]) & np.uint64(0xFFFF)
        step0[:rows], step1[:rows] = t & np.uint64(0x1F), t >> np.uint64(11)
    return (h0 ^ h1).astype(np.uint32)


_COLUMN_HASHES: Mapping[str, Callable[[npt.NDArray[np.uint8], list[int]], UInt32Array]] = {
    "sdbm": _sdbm_columns,
    "djb2": _djb2_columns,
    "wt6": _wt6_columns,
}


def hash_many_haproxy(
    keys: Sequence[Key],
    function: str,
    *,
    avalanche: bool,
    key_part: Callable[[bytes], bytes] | None = None,
) -> UInt32Array:
    """Return HAProxy's hash of every key (`function` a name of ``KEY_HASHES``).

    `key_part` cuts each key to what the backend hashes (the URI's part for ``balance uri``).

    sdbm, djb2 and wt6 run one byte column at a time over all keys still that long; crc32 is
    zlib's C loop per key. Runtime: O(total bytes) numpy steps, O(longest key) Python steps.

    >>> hash_many_haproxy(["user:42", b"", 7], "sdbm", avalanche=False).tolist() == [
    ...     sdbm(b"user:42"), 0, sdbm(b"7")]
    True
    """
    data = [key.encode() if type(key) is str else encode_key(key) for key in keys]
    if key_part is not None:
        data = [key_part(item) for item in data]
    if function not in _COLUMN_HASHES:
        hashes = np.fromiter(map(KEY_HASHES[function], data), dtype=np.uint32, count=len(data))
    elif function == "crc32":
        hashes = np.fromiter(map(zlib.crc32, data), dtype=np.uint32, count=len(data))
    else:
        matrix, active, order = _byte_columns(data)
        hashes = np.empty(len(data), dtype=np.uint32)
        hashes[order] = _COLUMN_HASHES[function](matrix, active)
    return full_hash_many(hashes) if avalanche else hashes
