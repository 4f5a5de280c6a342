"""Named hash functions, scalar and vectorised, and how a key becomes a point.

A *key* (str, bytes or int) is encoded to bytes (:func:`encode_key`: str as UTF-8, bytes as is,
int as its decimal text, so that clients in other languages hashing the text agree), hashed by a
named function of a known width, and the hash is widened to a 64-bit *point* (:func:`widen`).

Every named hasher is a plain function ``bytes -> int`` importable by its name, returning its
native width (``fnv1a_32`` returns 32 bits), and registered in :data:`HASHERS` with that width:

>>> hex(fnv1a_32(b"a"))
'0xe40c292c'
>>> HASHERS["fnv1a_32"].bits
32
>>> hex(widen(0xE40C292C, 32))
'0xe40c292c00000000'

Widening is ``h << (64 - bits)``: order-preserving, so a ring of widened 32-bit tokens answers
exactly as the same ring in the 32-bit space would (first token >= point).

``fnv1a_32_mix`` is FNV-1a plus a mixing step so that similar names spread out, the hash of the
Gatepass teaching simulator (see :mod:`ringkit.sim`). Such a mix is a choice, not a standard;
ringkit uses FNV-1a-32 followed by MurmurHash3's 32-bit finalizer (``fmix32``), a well-known
avalanche step that makes keys differing in one digit land far apart.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np
import numpy.typing as npt
import xxhash

from ringkit.errors import ConfigError
from ringkit.murmur import fmix32, murmur3_32, murmur3_64, murmur3_x64_128

__all__ = [
    "CASSANDRA_MAX_TOKEN",
    "CASSANDRA_MIN_TOKEN",
    "DEFAULT_HASH",
    "HASHERS",
    "Hasher",
    "HasherLike",
    "cassandra_partition_key",
    "cassandra_token",
    "check_key_batch",
    "encode_key",
    "fmix32",
    "fnv1a_32",
    "fnv1a_32_mix",
    "fnv1a_64",
    "get_hasher",
    "hash_many",
    "md5",
    "murmur3_32",
    "murmur3_64",
    "murmur3_x64_128",
    "points_many",
    "registered_name",
    "sha1",
    "widen",
    "xxh3_64",
]

DEFAULT_HASH = "xxh3_64"

Key = str | bytes | int

_MASK32 = 0xFFFFFFFF
_MASK64 = 0xFFFFFFFFFFFFFFFF


def encode_key(key: Key) -> bytes:
    """Return the bytes a key is hashed as.

    str is UTF-8, bytes (and bytearray, memoryview) as is, int as its decimal text.

    >>> encode_key("é"), encode_key(b"\\x00"), encode_key(-42)
    (b'\\xc3\\xa9', b'\\x00', b'-42')

    :raises TypeError: for any other type (bool included: ``True`` is not the text ``"1"``)
    """
    if type(key) is str:
        return key.encode()
    if type(key) is bytes:
        return key
    if isinstance(key, (bytearray, memoryview)):
        return bytes(key)
    if isinstance(key, int) and not isinstance(key, bool):
        return str(key).encode()
    if isinstance(key, str):
        return key.encode()
    raise TypeError(f"key must be str, bytes or int, got {type(key).__name__}")


# -- FNV-1a (Fowler, Noll, Vo; http://www.isthe.com/chongo/tech/comp/fnv/) -------------------

_FNV32_OFFSET, _FNV32_PRIME = 0x811C9DC5, 0x01000193
_FNV64_OFFSET, _FNV64_PRIME = 0xCBF29CE484222325, 0x100000001B3


def fnv1a_32(data: bytes) -> int:
    """Return the 32-bit FNV-1a hash of `data`.

    >>> hex(fnv1a_32(b"")), hex(fnv1a_32(b"foobar"))
    ('0x811c9dc5', '0xbf9cf968')
    """
    h = _FNV32_OFFSET
    for byte in data:
        h = ((h ^ byte) * _FNV32_PRIME) & _MASK32
    return h


def fnv1a_64(data: bytes) -> int:
    """Return the 64-bit FNV-1a hash of `data`.

    >>> hex(fnv1a_64(b"a"))
    '0xaf63dc4c8601ec8c'
    """
    h = _FNV64_OFFSET
    for byte in data:
        h = ((h ^ byte) * _FNV64_PRIME) & _MASK64
    return h


def fnv1a_32_mix(data: bytes) -> int:
    """Return FNV-1a-32 of `data` passed through ``fmix32`` (the Gatepass lesson's hasher)."""
    return fmix32(fnv1a_32(data))


# -- cryptographic digests, truncated --------------------------------------------------------


def sha1(data: bytes) -> int:
    """Return the first 8 bytes of SHA-1(`data`) as a big-endian integer (textbook rings)."""
    return int.from_bytes(hashlib.sha1(data).digest()[:8], "big")


def md5(data: bytes) -> int:
    """Return the first 8 bytes of MD5(`data`) as a big-endian integer.

    This is not ketama's point rule (ketama takes little-endian 32-bit words of the digest; see
    ``ringkit.compat``).
    """
    return int.from_bytes(hashlib.md5(data).digest()[:8], "big")


# XXH3-64 (seed 0), the default hasher: fast and well distributed. NOTE: this is xxhash's C
# function itself, not a wrapper, so that lookups pay no extra Python call per hash (a wrapper
# cost ~40% of node_for_many; benchmarks/bench_lookup.py).
xxh3_64: Callable[[bytes], int] = xxhash.xxh3_64_intdigest


# -- the registry ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Hasher:
    """A hash function ``bytes -> int`` with a name and its output width in bits."""

    name: str
    function: Callable[[bytes], int]
    bits: int = 64

    def __post_init__(self) -> None:
        if self.bits not in (32, 64):
            raise ConfigError(f"hasher bits must be 32 or 64, got {self.bits!r}")
        if not callable(self.function):
            raise ConfigError(f"hasher function must be callable, got {self.function!r}")

    def __call__(self, data: bytes) -> int:
        return self.function(data)

    def point(self, data: bytes) -> int:
        """Return the 64-bit point of `data`: its hash, widened."""
        return widen(self.function(data), self.bits)


HasherLike = str | Hasher | Callable[[bytes], int]

HASHERS: Mapping[str, Hasher] = MappingProxyType(
    {
        hasher.name: hasher
        for hasher in (
            Hasher("fnv1a_32", fnv1a_32, 32),
            Hasher("fnv1a_32_mix", fnv1a_32_mix, 32),
            Hasher("fnv1a_64", fnv1a_64, 64),
            Hasher("md5", md5, 64),
            Hasher("murmur3_32", murmur3_32, 32),
            Hasher("murmur3_64", murmur3_64, 64),
            Hasher("sha1", sha1, 64),
            Hasher("xxh3_64", xxh3_64, 64),
        )
    }
)


def get_hasher(spec: HasherLike) -> Hasher:
    """Return the :class:`Hasher` named or wrapped by `spec`.

    A registered name, a ``Hasher``, or a bare callable ``bytes -> int`` (taken as 64 bits wide;
    wrap it in ``Hasher(name, function, bits=32)`` to state another width).

    >>> get_hasher("sha1").bits
    64

    :raises ConfigError: for an unknown name (the message lists the known ones)
    """
    if isinstance(spec, Hasher):
        return spec
    if isinstance(spec, str):
        try:
            return HASHERS[spec]
        except KeyError:
            known = ", ".join(sorted(HASHERS))
            raise ConfigError(f"unknown hasher {spec!r}; known: {known}") from None
    if callable(spec):
        return Hasher(getattr(spec, "__name__", "custom"), spec, 64)
    raise ConfigError(f"hasher must be a name, a Hasher or a callable, got {type(spec).__name__}")


def registered_name(hasher: Hasher, subject: str) -> str:
    """Return the registered name of `hasher`, for a serialised `subject` to name it by.

    >>> registered_name(get_hasher("md5"), "a ring")
    'md5'

    :raises ConfigError: when `hasher` is not the registered hasher of that name
    """
    if HASHERS.get(hasher.name) != hasher:
        raise ConfigError(
            f"cannot serialise {subject} with the unregistered hasher {hasher.name!r}; "
            f"known: {', '.join(sorted(HASHERS))}"
        )
    return hasher.name


def widen(h: int, bits: int) -> int:
    """Return the 64-bit point of a `bits`-wide hash: ``h << (64 - bits)`` (order-preserving)."""
    return h << (64 - bits)


def check_key_batch(keys: object, what: str) -> None:
    """Refuse a single str or bytes where a batch of keys is expected.

    A str is an iterable of one-character keys, so ``ring.node_for_many("abc")`` answered one
    owner per character; a batch is a list, tuple or other iterable of keys.

    >>> check_key_batch(["abc"], "node_for_many")
    >>> check_key_batch("abc", "node_for_many")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
      ...
    TypeError: node_for_many takes an iterable of keys, got the single str 'abc'; pass ['abc'] ...
    """
    if isinstance(keys, str | bytes | bytearray | memoryview):
        shown = repr(keys if len(keys) <= 40 else keys[:40])
        raise TypeError(
            f"{what} takes an iterable of keys, got the single {type(keys).__name__} {shown}; "
            f"pass [{shown}] for one key"
        )


def hash_many(keys: Iterable[Key], hasher: HasherLike = DEFAULT_HASH) -> npt.NDArray[np.uint64]:
    """Return the native hashes of many keys as a uint64 array.

    >>> hash_many(["a", b"a"], "fnv1a_32").tolist()
    [3826002220, 3826002220]
    """
    check_key_batch(keys, "hash_many")
    function = get_hasher(hasher).function
    return np.fromiter(_hashes(keys, function), dtype=np.uint64)


def points_many(keys: Iterable[Key], hasher: HasherLike = DEFAULT_HASH) -> npt.NDArray[np.uint64]:
    """Return the 64-bit points of many keys as a uint64 array (hashes, widened)."""
    check_key_batch(keys, "points_many")
    resolved = get_hasher(hasher)
    hashes = np.fromiter(_hashes(keys, resolved.function), dtype=np.uint64)
    if resolved.bits < 64:
        hashes <<= np.uint64(64 - resolved.bits)
    return hashes


def _hashes(keys: Iterable[Key], function: Callable[[bytes], int]) -> Iterable[int]:
    # NOTE: str keys are the common case; encoding them inline skips a call per key.
    for key in keys:
        yield function(key.encode() if type(key) is str else encode_key(key))


# -- Cassandra's Murmur3Partitioner --------------------------------------------------------------

CASSANDRA_MIN_TOKEN = -(1 << 63)
CASSANDRA_MAX_TOKEN = (1 << 63) - 1


def cassandra_token(key: bytes) -> int:
    """Return the Murmur3Partitioner token of a serialized partition key (a signed 64-bit int).

    The first 64 bits of MurmurHash3 x64_128 with the tail bytes read as Java's signed ``byte``,
    as a signed long; ``Long.MIN_VALUE`` is normalised to ``Long.MAX_VALUE`` and the empty key is
    the minimum token (Cassandra ``Murmur3Partitioner.getToken``). A partition key of several
    columns is hashed in its composite form: :func:`cassandra_partition_key`.

    Runtime: O(len(key)).

    >>> cassandra_token(b"123"), cassandra_token(b"\\xfe" * 8)
    (-7468325962851647638, -8927430733708461935)
    >>> cassandra_token(b"") == CASSANDRA_MIN_TOKEN
    True

    :raises TypeError: when `key` is not bytes (serialize values first: text as UTF-8, bigint as
        8 big-endian bytes)
    """
    if not isinstance(key, (bytes, bytearray, memoryview)):
        raise TypeError(f"key must be bytes (a serialized partition key), got {type(key).__name__}")
    data = bytes(key)
    if not data:
        return CASSANDRA_MIN_TOKEN
    h1 = murmur3_x64_128(data, signed_tail=True)[0]
    token = h1 - (1 << 64) if h1 >= 1 << 63 else h1
    # Murmur3Partitioner.normalize: MIN_VALUE is reserved for the minimum token.
    return CASSANDRA_MAX_TOKEN if token == CASSANDRA_MIN_TOKEN else token


def cassandra_partition_key(components: Iterable[bytes]) -> bytes:
    """Return the bytes Cassandra hashes for a partition key of serialized `components`.

    One component is hashed as is; several are encoded as ``CompositeType``: each as a 2-byte
    big-endian length, the bytes, and an end-of-component byte 0 (the routing key the drivers
    build).

    >>> cassandra_partition_key([b"a", b"bc"])
    b'\\x00\\x01a\\x00\\x00\\x02bc\\x00'

    :raises ConfigError: for no components, or a component longer than 65535 bytes
    :raises TypeError: when a component is not bytes
    """
    parts = list(components)
    if not parts:
        raise ConfigError("a partition key needs at least one component, got none")
    for part in parts:
        if not isinstance(part, (bytes, bytearray)):
            raise TypeError(f"partition key components must be bytes, got {type(part).__name__}")
        if len(part) > 0xFFFF:
            raise ConfigError(f"a partition key component must be <= 65535 bytes, got {len(part)}")
    if len(parts) == 1:
        return bytes(parts[0])
    return b"".join(struct.pack(">H", len(part)) + bytes(part) + b"\x00" for part in parts)
