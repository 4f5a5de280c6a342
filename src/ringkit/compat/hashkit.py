"""The key hashes of twemproxy's (and libmemcached's) hashkit, bit for bit.

twemproxy pools pick a key hash by name (``hash: fnv1a_64``); each is a 32-bit function written in
C, and several read the key through a plain ``char *``. On x86 ``char`` is signed, so a byte >= 0x80
is sign-extended before it is mixed in (``(uint32_t)key[x]`` is ``0xffffff80`` for byte ``0x80``).
These functions reproduce that, so keys with UTF-8 text land where nutcracker puts them. Note too
that twemproxy's ``fnv1a_64`` keeps only 32 bits of state (the 64-bit offset and prime truncated),
and its ``crc32`` is libmemcached's 15-bit variant; ``crc32a`` is the standard CRC-32.

Reference: twemproxy ``src/hashkit/nc_*.c`` (https://github.com/twitter/twemproxy), which took them
from libmemcached's libhashkit.

>>> hex(TWEMPROXY_HASHES["fnv1a_64"](b"foo"))
'0xfed9d577'
>>> hex(hash_crc16(b"123456789"))  # CRC-16/XMODEM's check value 0x31c3, high half kept
'0x869031c3'
>>> sorted(TWEMPROXY_HASHES)[:4]
['crc16', 'crc32', 'crc32a', 'fnv1_32']
"""

from __future__ import annotations

import hashlib
import importlib
import struct
import zlib
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from ringkit.compat.redis_cluster import CRC16_XMODEM_TABLE
from ringkit.errors import ConfigError

__all__ = [
    "TWEMPROXY_HASHES",
    "get_key_hash",
    "hash_crc16",
    "hash_crc32",
    "hash_crc32a",
    "hash_fnv1_32",
    "hash_fnv1_64",
    "hash_fnv1a_32",
    "hash_fnv1a_64",
    "hash_hsieh",
    "hash_jenkins",
    "hash_md5",
    "hash_murmur",
    "hash_one_at_a_time",
    "ketama_md5",
    "md5_word_parts",
]

_M32 = 0xFFFFFFFF
_M64 = 0xFFFFFFFFFFFFFFFF


def _sx(byte: int) -> int:
    # NOTE: a C `char` is signed on x86: bytes >= 0x80 become negative before widening.
    return byte - 0x100 if byte >= 0x80 else byte


def _md5_constructor() -> Callable[[bytes], Any]:
    """Return CPython's builtin MD5 (``_md5.md5``), else ``hashlib.md5``.

    NOTE: the digests are the same; the builtin one is ~8x faster for a short key (0.2 µs
    against 1.6 µs for OpenSSL's through ``hashlib`` on Python 3.11), and MD5 is the whole cost
    of a ketama lookup (benchmarks/bench_compat.py). A Python built without it falls back.
    """
    try:
        return importlib.import_module("_md5").md5  # type: ignore[no-any-return]
    except ImportError:  # pragma: no cover - CPython --without-builtin-hashlib-hashes
        return hashlib.md5


_md5 = _md5_constructor()
# NOTE: a precompiled struct reads the word ~2x faster than int.from_bytes(digest[:4], "little").
_little_word = struct.Struct("<I").unpack_from


def ketama_md5(data: bytes, alignment: int = 0) -> int:
    """Return little-endian uint32 word `alignment` (0-3) of MD5(`data`) (``ketama_hash``).

    >>> ketama_md5(b"VDEAAAAA") == 0xFFFCD1B5
    True
    """
    word: int = _little_word(_md5(data).digest(), 4 * alignment)[0]
    return word


def hash_md5(data: bytes) -> int:
    """Return twemproxy's ``md5``: the first little-endian word of the MD5 digest."""
    # ketama_md5 inlined: this is the key hash of every ketama lookup (Continuum inlines it
    # once more, see md5_word_parts).
    word: int = _little_word(_md5(data).digest())[0]
    return word


def md5_word_parts() -> tuple[Callable[[bytes], Any], Callable[[bytes], tuple[int, ...]]]:
    """Return the MD5 constructor and word reader ``hash_md5`` composes, for inlining."""
    return _md5, _little_word


def hash_fnv1_64(data: bytes) -> int:
    """Return twemproxy's ``fnv1_64``: 64-bit FNV-1 (signed bytes), truncated to 32 bits."""
    h = 0xCBF29CE484222325
    for byte in data:
        h = ((h * 0x100000001B3) & _M64) ^ (_sx(byte) & _M64)
    return h & _M32


def hash_fnv1a_64(data: bytes) -> int:
    """Return twemproxy's ``fnv1a_64``: FNV-1a with 32-bit state and truncated 64-bit constants."""
    h = 0x84222325
    for byte in data:
        h = ((h ^ (_sx(byte) & _M32)) * 0x1B3) & _M32
    return h


def hash_fnv1_32(data: bytes) -> int:
    """Return twemproxy's ``fnv1_32`` (signed bytes)."""
    h = 0x811C9DC5
    for byte in data:
        h = ((h * 0x01000193) & _M32) ^ (_sx(byte) & _M32)
    return h


def hash_fnv1a_32(data: bytes) -> int:
    """Return twemproxy's ``fnv1a_32`` (signed bytes)."""
    h = 0x811C9DC5
    for byte in data:
        h = ((h ^ (_sx(byte) & _M32)) * 0x01000193) & _M32
    return h


def hash_one_at_a_time(data: bytes) -> int:
    """Return Jenkins' one-at-a-time hash as twemproxy computes it (signed bytes)."""
    value = 0
    for byte in data:
        value = (value + (_sx(byte) & _M32)) & _M32
        value = (value + (value << 10)) & _M32
        value ^= value >> 6
    value = (value + (value << 3)) & _M32
    value ^= value >> 11
    return (value + (value << 15)) & _M32


def hash_crc32(data: bytes) -> int:
    """Return twemproxy's ``crc32``: libmemcached's CRC-32, bits 16-30 only (15 bits)."""
    return (zlib.crc32(data) >> 16) & 0x7FFF


def hash_crc32a(data: bytes) -> int:
    """Return twemproxy's ``crc32a``: the standard CRC-32 (as ``zlib.crc32``)."""
    return zlib.crc32(data)


def hash_crc16(data: bytes) -> int:
    """Return twemproxy 0.5.0's ``crc16``: CRC-16/XMODEM steps on a 32-bit register.

    The register is never cut to 16 bits, so long keys carry their early bytes into the high
    half: this is the function Debian's nutcracker 0.5.0 runs. (Later twemproxy sources replaced
    it with CRC-16/ARC, which ringkit does not offer.)
    """
    crc = 0
    for byte in data:
        crc = ((crc << 8) ^ CRC16_XMODEM_TABLE[((crc >> 8) ^ byte) & 0xFF]) & _M32
    return crc


def hash_murmur(data: bytes) -> int:
    """Return twemproxy's ``murmur``: MurmurHash2 (32-bit) seeded with ``0xdeadbeef * len``."""
    m = 0x5BD1E995
    length = len(data)
    h = ((0xDEADBEEF * length) & _M32) ^ (length & _M32)
    whole = length - length % 4
    for offset in range(0, whole, 4):
        k = (int.from_bytes(data[offset : offset + 4], "little") * m) & _M32
        k = ((k ^ (k >> 24)) * m) & _M32
        h = ((h * m) & _M32) ^ k
    tail = data[whole:]
    if tail:
        for i in reversed(range(len(tail))):
            h ^= tail[i] << (8 * i)
        h = (h * m) & _M32
    h = ((h ^ (h >> 13)) * m) & _M32
    return h ^ (h >> 15)


def _rot(x: int, k: int) -> int:
    return ((x << k) | (x >> (32 - k))) & _M32


def _jenkins_mix(a: int, b: int, c: int) -> tuple[int, int, int]:
    for r1, r2, r3 in ((4, 6, 8), (16, 19, 4)):
        a = ((a - c) & _M32) ^ _rot(c, r1)
        c = (c + b) & _M32
        b = ((b - a) & _M32) ^ _rot(a, r2)
        a = (a + c) & _M32
        c = ((c - b) & _M32) ^ _rot(b, r3)
        b = (b + a) & _M32
    return a, b, c


def _jenkins_final(a: int, b: int, c: int) -> int:
    c = ((c ^ b) - _rot(b, 14)) & _M32
    a = ((a ^ c) - _rot(c, 11)) & _M32
    b = ((b ^ a) - _rot(a, 25)) & _M32
    c = ((c ^ b) - _rot(b, 16)) & _M32
    a = ((a ^ c) - _rot(c, 4)) & _M32
    b = ((b ^ a) - _rot(a, 14)) & _M32
    return ((c ^ b) - _rot(b, 24)) & _M32


def hash_jenkins(data: bytes) -> int:
    """Return Bob Jenkins' lookup3 ``hashlittle`` with initval 13 (twemproxy ``jenkins``)."""
    a = b = c = (0xDEADBEEF + len(data) + 13) & _M32
    rest = data
    while len(rest) > 12:
        a = (a + int.from_bytes(rest[0:4], "little")) & _M32
        b = (b + int.from_bytes(rest[4:8], "little")) & _M32
        c = (c + int.from_bytes(rest[8:12], "little")) & _M32
        a, b, c = _jenkins_mix(a, b, c)
        rest = rest[12:]
    if not rest:
        return c
    padded = rest.ljust(12, b"\0")
    a = (a + int.from_bytes(padded[0:4], "little")) & _M32
    b = (b + int.from_bytes(padded[4:8], "little")) & _M32
    c = (c + int.from_bytes(padded[8:12], "little")) & _M32
    return _jenkins_final(a, b, c)


def hash_hsieh(data: bytes) -> int:
    """Return Paul Hsieh's SuperFastHash as twemproxy computes it (one signed byte read)."""
    if not data:
        return 0
    h = 0
    whole = len(data) - len(data) % 4
    for offset in range(0, whole, 4):
        h = (h + int.from_bytes(data[offset : offset + 2], "little")) & _M32
        tmp = ((int.from_bytes(data[offset + 2 : offset + 4], "little") << 11) ^ h) & _M32
        h = ((h << 16) & _M32) ^ tmp
        h = (h + (h >> 11)) & _M32
    tail = data[whole:]
    if len(tail) == 3:
        h = (h + int.from_bytes(tail[0:2], "little")) & _M32
        h ^= (h << 16) & _M32
        h ^= ((_sx(tail[2]) & _M32) << 18) & _M32
        h = (h + (h >> 11)) & _M32
    elif len(tail) == 2:
        h = (h + int.from_bytes(tail, "little")) & _M32
        h ^= (h << 11) & _M32
        h = (h + (h >> 17)) & _M32
    elif len(tail) == 1:
        h = (h + tail[0]) & _M32
        h ^= (h << 10) & _M32
        h = (h + (h >> 1)) & _M32
    for shift, add in ((3, False), (5, True), (4, False), (17, True), (25, False), (6, True)):
        h = (h + (h >> shift)) & _M32 if add else h ^ ((h << shift) & _M32)
    return h


TWEMPROXY_HASHES: Mapping[str, Callable[[bytes], int]] = MappingProxyType(
    {
        "crc16": hash_crc16,
        "crc32": hash_crc32,
        "crc32a": hash_crc32a,
        "fnv1_32": hash_fnv1_32,
        "fnv1_64": hash_fnv1_64,
        "fnv1a_32": hash_fnv1a_32,
        "fnv1a_64": hash_fnv1a_64,
        "hsieh": hash_hsieh,
        "jenkins": hash_jenkins,
        "md5": hash_md5,
        "murmur": hash_murmur,
        "one_at_a_time": hash_one_at_a_time,
    }
)


def get_key_hash(name: str) -> Callable[[bytes], int]:
    """Return twemproxy's key hash called `name`.

    >>> get_key_hash("md5") is hash_md5
    True

    :raises ConfigError: for an unknown name (the message lists the known ones)
    """
    try:
        return TWEMPROXY_HASHES[name]
    except (KeyError, TypeError):
        known = ", ".join(sorted(TWEMPROXY_HASHES))
        raise ConfigError(f"unknown key hash {name!r}; known: {known}") from None
