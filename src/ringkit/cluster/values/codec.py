"""Values on the wire: bytes stay bytes, str stays str, ints stay counters, the rest is serialised.

Every stored value is one of two forms, so that any backend can hold it as plain bytes:

- an ``int`` is stored as its decimal digits, so the servers' own ``incr`` / ``decr`` work on it
  (memcached and Redis both count in decimal text);
- anything else is an *envelope*: a header with the value's version and expiry (Unix
  milliseconds, 0 = never), then the payload. The version lets replicas be reconciled (highest
  wins); the expiry lets a read repair copy a value with the TTL it has left.

An envelope is written in its *compact* form: one marker byte that also says the value's kind
and whether an expiry follows (``0xf5`` bytes, ``0xf6`` str, ``0xf7`` serialized, followed by
the serializer's tag; ``0xf8``, ``0xf9``, ``0xfa`` the same with an expiry), the version in 7
bytes, then the expiry in 6 bytes when there is one:

    marker (1) | version (7) | [expiry (6)] | [tag (1)] | payload

So a str or bytes value without a TTL costs 8 bytes over its payload (18 in the wide form), 14
with one. What a server saves is those bytes rounded to its allocator's size classes: Redis keeps
a 100-byte value with 8 more in jemalloc's 112-byte class, the bare value's, where 18 more took
it to 128; classes are 16 bytes apart up to 128 and wider above, so the gain in a given class
depends on the value's size. Versions are wall-clock microseconds (:class:`VersionClock`), below
``2**56`` until the year 4254, and expiries below ``2**48`` ms until the year 10889. A version
or expiry past those, and every tombstone (:func:`tombstone`), use the *wide* form that every
earlier ringkit wrote, which stays readable: a marker byte ``0xfe``, an 8-byte version, an
8-byte expiry, a kind byte (``b``, ``s``, the serializer's tag, or ``t`` / ``r`` for the
tombstones) and the payload. :func:`stored_version` gives the version of either form as the same
8 big-endian bytes, in Python as in the Redis scripts (:data:`VERSION_LUA`), so versions of both
forms compare as byte strings everywhere. A client older than this form reads a compact value
as raw bytes, and its scripts take it for a value without a version (never repaired over, always
deleted by a tombstone): upgrade every client before any writes the compact form.

A value written by another program (neither form) reads back as raw bytes. The false positive
the wide form always had is kept, with more markers: bytes that start with ``0xf5``-``0xfa`` or
``0xfe`` and are at least as long as that marker's header are read as an envelope, so another
program's binary value of that shape comes back wrong (or, with an unknown tag, refused). None
of those bytes ever starts UTF-8 text, so text values are safe; keep foreign binary values under
keys ringkit does not read, or read them with ``serializer="raw"``. :class:`RawCodec`
(``serializer="raw"``) writes no envelope at all, so that clients in other languages sharing the
servers read the values too; it gives up the version and expiry. Objects go through a
:class:`Serializer`: JSON by default; pickle only when asked for, because unpickling runs code
chosen by whoever wrote the value. A value stored by one serializer is refused by a client that
uses another, never guessed at.

>>> codec = Codec(JSON)
>>> stored = codec.encode({"seat": "12A"}, version=7, expires_at_ms=0)
>>> codec.decode(stored).value, codec.decode(stored).version
({'seat': '12A'}, 7)
>>> compact = codec.encode("12A", version=7, expires_at_ms=0)
>>> compact[:1].hex(), compact[1:8].hex(), compact[8:]
('f6', '00000000000007', b'12A')
>>> codec.encode(41, version=1, expires_at_ms=0)
b'41'
"""

from __future__ import annotations

import json
import pickle
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from ringkit.errors import ConfigError

__all__ = [
    "HEAD_BYTES",
    "JSON",
    "PICKLE",
    "RAW",
    "VERSION_LUA",
    "Codec",
    "Decoded",
    "RawCodec",
    "Serializer",
    "ValueCodec",
    "VersionClock",
    "get_serializer",
    "is_readmission_tombstone",
    "lifts",
    "readmission_tombstone",
    "stamped",
    "stored_version",
    "supersedes",
    "tombstone",
]

# The wide envelope (every tombstone, and a version or expiry too large for the compact form).
_MARK = 0xFE
_HEADER = struct.Struct(">BQQc")  # marker, version, expires_at_ms, kind
_RESERVED_TAGS = (b"b", b"s")
_HEADER_SIZE = _HEADER.size
_KIND_AT, _STR, _BYTES = _HEADER_SIZE - 1, ord("s"), ord("b")
# The compact envelope: a marker per kind, then the same three plus _WITH_EXPIRY with an expiry.
_BYTES_MARK, _STR_MARK, _TAGGED_MARK = 0xF5, 0xF6, 0xF7
_WITH_EXPIRY = 3
_FIRST_MARK, _LAST_MARK = _BYTES_MARK, _TAGGED_MARK + _WITH_EXPIRY
_KIND_MARKS = {b"b": _BYTES_MARK, b"s": _STR_MARK}
_VERSION_BYTES, _EXPIRY_BYTES = 7, 6
_COMPACT_VERSIONS, _COMPACT_EXPIRIES = 1 << (8 * _VERSION_BYTES), 1 << (8 * _EXPIRY_BYTES)
_COMPACT_SIZE = 1 + _VERSION_BYTES  # a str or bytes value without an expiry: its payload here
_EXPIRY_END = _COMPACT_SIZE + _EXPIRY_BYTES
# The header size of each compact marker, from _FIRST_MARK on.
_COMPACT_SIZES = (8, 8, 9, 14, 14, 15)
_FIRST_WORD = struct.Struct(">Q")  # the marker and the version, one integer
_VERSION_MASK = _COMPACT_VERSIONS - 1
_STR_FIRST, _BYTES_FIRST = _STR_MARK << 56, _BYTES_MARK << 56
# Every marker's header size: what stored_version checks a value's length against.
_SIZES = {
    **dict(zip(range(_FIRST_MARK, _LAST_MARK + 1), _COMPACT_SIZES, strict=True)),
    _MARK: _HEADER_SIZE,
}
# Ints the servers can count with are stored as digits; larger ones go through the serializer.
_INT_MIN, _INT_MAX = -(1 << 63), (1 << 64) - 1


@dataclass(frozen=True, slots=True)
class Serializer:
    """A named way to turn objects into bytes and back; `tag` marks its values (one byte)."""

    name: str
    tag: bytes
    dumps: Callable[[Any], bytes]
    loads: Callable[[bytes], Any]

    def __post_init__(self) -> None:
        if len(self.tag) != 1 or self.tag in _RESERVED_TAGS:
            raise ConfigError(
                f"serializer tag must be one byte other than b or s, got {self.tag!r}"
            )


_JSON_SCALARS = (str, int, float, bool, type(None))
# What json.dumps turns a tuple, or a subclass of a JSON type, into: json.loads gives that back.
_JSON_BECOMES = {
    tuple: "a list",
    list: "a list",
    dict: "a dict",
    str: "a str",
    int: "an int",
    float: "a float",
}


def _refuse_inexact_json(value: Any) -> None:
    """Raise TypeError naming the first part of `value` that JSON would not give back as is.

    JSON gives back exactly: None, bool, int, finite float, str, list, and dict with str keys,
    nested; not a tuple (it comes back as a list), a dict key of another type (it comes back as
    a str) or a subclass (an IntEnum comes back as an int, an OrderedDict as a dict).
    """
    stack, seen = [value], set()
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind in _JSON_SCALARS:
            continue
        if id(item) in seen:
            continue  # shared, or a cycle: json.dumps refuses a cycle itself
        seen.add(id(item))
        if kind is list:
            stack.extend(item)
        elif kind is dict:
            for key in item:
                if type(key) is not str:
                    raise TypeError(
                        f"dict key of type {type(key).__name__} ({key!r:.40}) would come back "
                        f"as a str"
                    )
            stack.extend(item.values())
        else:
            # A tuple, or a subclass that json.dumps takes as its base type: refused, since it
            # would come back as that base type; anything else is not JSON at all.
            base = next((base for base in _JSON_BECOMES if isinstance(item, base)), None)
            if base is not None:
                raise TypeError(
                    f"{kind.__name__} {item!r:.40} would come back as {_JSON_BECOMES[base]}"
                )
            raise TypeError(f"{kind.__name__} is not a JSON type")


def _json_dumps(value: Any) -> bytes:
    _refuse_inexact_json(value)
    return json.dumps(value, separators=(",", ":"), allow_nan=False).encode()


JSON = Serializer("json", b"j", _json_dumps, json.loads)
PICKLE = Serializer("pickle", b"p", lambda value: pickle.dumps(value, protocol=5), pickle.loads)
_NAMED = {"json": JSON, "pickle": PICKLE}
# The name of the envelope-free codec (RawCodec): not a Serializer, since it has no kind byte.
RAW = "raw"


def get_serializer(spec: str | Serializer) -> Serializer:
    """Return the serializer named `spec` (``json`` or ``pickle``), or `spec` itself.

    :raises ConfigError: when the name is unknown
    """
    if isinstance(spec, Serializer):
        return spec
    if spec not in _NAMED:
        known = ", ".join(sorted([*_NAMED, RAW]))
        raise ConfigError(f"unknown serializer {spec!r}; known: {known}")
    return _NAMED[spec]


class Decoded(NamedTuple):
    """A value read back: the object, its version (0 if it has none) and expiry (0 = never).

    A NamedTuple, not a frozen dataclass, because one is built per value read: a frozen
    dataclass's ``__init__`` goes through ``object.__setattr__`` per field, several times slower.
    """

    value: Any
    version: int
    expires_at_ms: int


class VersionClock:
    """Versions for writes: wall-clock microseconds, strictly increasing within one process."""

    def __init__(self) -> None:
        self._last = 0
        self._lock = threading.Lock()

    def next(self) -> int:
        """Return a version larger than every one this clock returned before."""
        now = time.time_ns() // 1000
        with self._lock:
            last = self._last + 1
            if now > last:  # not max(): a builtin call on every write
                last = now
            self._last = last
            return last


class ValueCodec(Protocol):
    """What the reader and the writer need: values to stored bytes and back."""

    def encode(self, value: object, *, version: int, expires_at_ms: int) -> bytes:
        """Return the stored form of `value`."""
        ...  # pragma: no cover

    def decode(self, data: bytes) -> Decoded:
        """Return the value stored as `data`, with its version and expiry."""
        ...  # pragma: no cover

    def decode_many(self, datas: list[bytes]) -> list[Decoded]:
        """Return :meth:`decode` of each of `datas`, in order (a multi-key read's values)."""
        ...  # pragma: no cover

    def stamp(self, data: bytes, version: int) -> bytes:
        """Return `data`, which :meth:`encode` returned, carrying `version` instead of its own."""
        ...  # pragma: no cover

    def decode_value(self, data: bytes) -> Any:
        """Return ``decode(data).value``: the value alone (a single-key read's)."""
        ...  # pragma: no cover


class Codec:
    """Encode values into stored bytes and decode them back with one serializer."""

    def __init__(self, serializer: Serializer) -> None:
        self.serializer = serializer

    def encode(self, value: object, *, version: int, expires_at_ms: int) -> bytes:
        """Return the stored form of `value`.

        :raises TypeError: when the serializer cannot encode `value` (named by its type)
        """
        # Exact types only: a bytearray, or a str or int subclass (an IntEnum), would come back
        # as plain bytes, str or int; the serializer decides whether it can keep them.
        if type(value) is int and _INT_MIN <= value <= _INT_MAX:
            return str(value).encode()
        if type(value) is bytes:
            kind, payload = b"b", value
        elif type(value) is str:
            # surrogatepass: a lone surrogate ("\ud800") round-trips, as it does inside JSON.
            kind, payload = b"s", value.encode("utf-8", "surrogatepass")
        else:
            kind, payload = self.serializer.tag, self._dumps(value)
        if not expires_at_ms and 0 <= version < _COMPACT_VERSIONS:  # the common header, inline
            if kind == b"s":
                return _FIRST_WORD.pack(_STR_FIRST | version) + payload
            if kind == b"b":
                return _FIRST_WORD.pack(_BYTES_FIRST | version) + payload
        return _header(kind, version, expires_at_ms) + payload

    def stamp(self, data: bytes, version: int) -> bytes:
        """Return envelope `data` at `version` (an int stored as digits carries none)."""
        return stamped(data, version)

    def _dumps(self, value: object) -> bytes:
        try:
            return self.serializer.dumps(value)
        except (
            TypeError,
            ValueError,
            RecursionError,
            pickle.PicklingError,
            AttributeError,
        ) as error:
            raise TypeError(
                f"value of type {type(value).__name__} cannot be stored with the "
                f"{self.serializer.name} serializer ({error}); pass serializer=... to the client"
            ) from None

    def decode(self, data: bytes) -> Decoded:
        """Return the value stored as `data`, with its version and expiry.

        :raises ConfigError: when the value was stored by another serializer
        """
        if len(data) >= _COMPACT_SIZE:
            mark = data[0]
            if mark == _STR_MARK:  # the common envelope, opened inline
                value = data[_COMPACT_SIZE:].decode("utf-8", "surrogatepass")
                return Decoded(value, _FIRST_WORD.unpack_from(data)[0] & _VERSION_MASK, 0)
            opened = _opened(data)
            if opened is not None:
                kind, version, expires_at_ms, at = opened
                return Decoded(self._load(kind, data[at:]), version, expires_at_ms)
        # memcached's decr keeps the value's length and pads it with spaces ("10" -> "9 ").
        digits = data.rstrip(b" ")
        if _is_decimal(digits):
            return Decoded(int(digits), 0, 0)
        return Decoded(data, 0, 0)

    def decode_value(self, data: bytes) -> Any:
        """Return ``decode(data).value``, the envelope of a str or bytes value opened inline.

        :raises ConfigError: when the value was stored by another serializer
        """
        if len(data) >= _COMPACT_SIZE:
            mark = data[0]  # an int: no slice to compare
            if mark == _STR_MARK:
                return data[_COMPACT_SIZE:].decode("utf-8", "surrogatepass")
            if mark == _BYTES_MARK:
                return data[_COMPACT_SIZE:]
            if mark == _MARK and len(data) >= _HEADER_SIZE:
                kind = data[_KIND_AT]
                if kind == _STR:
                    return data[_HEADER_SIZE:].decode("utf-8", "surrogatepass")
                if kind == _BYTES:
                    return data[_HEADER_SIZE:]
        return self.decode(data).value

    def decode_many(self, datas: list[bytes]) -> list[Decoded]:
        """Return :meth:`decode` of each of `datas`, in order.

        The compact envelopes of str and bytes values without an expiry are opened inline, with
        the struct and the constants bound once for the batch; anything else goes through
        :meth:`decode`.

        :raises ConfigError: when a value was stored by another serializer
        """
        size, unpack, mask = _COMPACT_SIZE, _FIRST_WORD.unpack_from, _VERSION_MASK
        decode = self.decode
        # tuple.__new__ itself: a NamedTuple's own __new__ is a Python function, a frame a value.
        new = tuple.__new__
        decoded: list[Decoded] = []
        append = decoded.append
        for data in datas:
            if len(data) >= size:
                mark = data[0]
                if mark == _STR_MARK:
                    value = data[size:].decode(errors="surrogatepass")
                    append(new(Decoded, (value, unpack(data)[0] & mask, 0)))
                    continue
                if mark == _BYTES_MARK:
                    append(new(Decoded, (data[size:], unpack(data)[0] & mask, 0)))
                    continue
            append(decode(data))
        return decoded

    def _load(self, kind: bytes, payload: bytes) -> Any:
        if kind == b"b":
            return payload
        if kind == b"s":
            return payload.decode(errors="surrogatepass")
        if kind != self.serializer.tag:
            raise ConfigError(
                f"value was stored with serializer tag {kind!r}; this client uses "
                f"{self.serializer.name!r} (tag {self.serializer.tag!r})"
            )
        return self.serializer.loads(payload)


# The kind byte of a tombstone: a delete's version, with no payload (never a value to decode).
_TOMBSTONE = b"t"
# The kind byte of a re-admission's tombstone: a version below which the server that missed a
# write takes no repair, not a delete.
_READMISSION = b"r"


def tombstone(version: int) -> bytes:
    """Return the stored form of a delete at `version`: an envelope of kind ``t``, no payload.

    >>> stored_version(tombstone(7)).hex()
    '0000000000000007'
    """
    return _HEADER.pack(_MARK, version, 0, _TOMBSTONE)


def readmission_tombstone(version: int) -> bytes:
    """Return the tombstone a re-admission leaves on a server that missed a write at `version` + 1.

    The servers compare it as any tombstone (by version: a late read repair of an older value
    stands down, ``supersedes``), but it records no delete, so ``read="all"`` never reconciles
    by it (:func:`is_readmission_tombstone`). Its version comes from the write the other replicas
    held at re-admission, not from a delete: a write acknowledged with an older version that
    lands after it (a retried call, or a machine whose clock is behind) is newer by arrival on
    every replica, and a delete at this version would hide it from every read.

    >>> stored_version(readmission_tombstone(7)).hex(), is_readmission_tombstone(tombstone(7))
    ('0000000000000007', False)
    """
    return _HEADER.pack(_MARK, version, 0, _READMISSION)


def is_readmission_tombstone(stored: bytes) -> bool:
    """Return True if `stored` is a :func:`readmission_tombstone` (no delete: no reconciling)."""
    return len(stored) == _HEADER_SIZE and stored[0] == _MARK and stored[_KIND_AT:] == _READMISSION


def stored_version(data: bytes | None) -> bytes:
    """Return the 8 version bytes of an envelope, or b"" (a counter, a foreign value, None).

    Big-endian and 8 bytes for both forms (a compact envelope's 7 with a zero byte before), so
    comparing the bytes compares the versions, in Python as in a Lua script (:data:`VERSION_LUA`).

    >>> stored_version(Codec(JSON).encode("fare", version=7, expires_at_ms=0)).hex()
    '0000000000000007'
    """
    if not data:
        return b""
    size = _SIZES.get(data[0])
    if size is None or len(data) < size:
        return b""
    return data[1:9] if size == _HEADER_SIZE else b"\0" + data[1:_COMPACT_SIZE]


#: The most leading bytes of a stored value that :func:`stored_version` reads: a script reads
#: this much of a value (``GETRANGE key 0 HEAD_BYTES-1``), not the whole value, for its version.
HEAD_BYTES = _HEADER_SIZE

#: :func:`stored_version` for the Redis scripts: ``env_version(stored)`` is the 8 version bytes
#: of an envelope of either form, or '' (nil, a counter, a foreign value), from the whole value
#: or its first :data:`HEAD_BYTES` bytes; so scripts compare versions as byte strings.
VERSION_LUA = f"""
local ENV_SIZES = {{{", ".join(f"[{mark}] = {size}" for mark, size in _SIZES.items())}}}
local function env_version(stored)
  if not stored or #stored == 0 then return '' end
  local mark = string.byte(stored, 1)
  local size = ENV_SIZES[mark]
  if not size or #stored < size then return '' end
  if mark == {_MARK} then return string.sub(stored, 2, 9) end
  return '\\0' .. string.sub(stored, 2, {_COMPACT_SIZE})
end
"""


def stamped(data: bytes, version: int) -> bytes:
    """Return envelope `data` carrying `version` instead of its own; anything else as it is.

    A compact envelope stays compact while `version` fits in it, and becomes wide otherwise.

    >>> stored_version(stamped(tombstone(7), 9)).hex(), stamped(b"41", 9)
    ('0000000000000009', b'41')
    """
    opened = _opened(data)
    if opened is None:  # a counter's digits or a foreign value: no version to give
        return data
    if data[0] == _MARK:
        return data[:1] + version.to_bytes(8, "big") + data[9:]
    if 0 <= version < _COMPACT_VERSIONS:
        return data[:1] + version.to_bytes(_VERSION_BYTES, "big") + data[_COMPACT_SIZE:]
    kind, _, expires_at_ms, at = opened
    return _HEADER.pack(_MARK, version, expires_at_ms, kind) + data[at:]


def _header(kind: bytes, version: int, expires_at_ms: int) -> bytes:
    """Return the envelope header of a value of `kind` (``b``, ``s`` or a serializer's tag).

    Compact when the version and the expiry fit in it, wide otherwise.
    """
    if 0 <= version < _COMPACT_VERSIONS and 0 <= expires_at_ms < _COMPACT_EXPIRIES:
        mark = _KIND_MARKS.get(kind, _TAGGED_MARK)
        tag = kind if mark == _TAGGED_MARK else b""
        if not expires_at_ms:
            return _FIRST_WORD.pack(mark << 56 | version) + tag
        first = _FIRST_WORD.pack((mark + _WITH_EXPIRY) << 56 | version)
        return first + expires_at_ms.to_bytes(_EXPIRY_BYTES, "big") + tag
    return _HEADER.pack(_MARK, version, expires_at_ms, kind)


def _opened(data: bytes) -> tuple[bytes, int, int, int] | None:
    """Return an envelope's kind, version, expiry and where its payload starts (None: none)."""
    if not data:
        return None
    mark = data[0]
    if _FIRST_MARK <= mark <= _LAST_MARK:
        at = _COMPACT_SIZES[mark - _FIRST_MARK]
        if len(data) < at:
            return None
        version = _FIRST_WORD.unpack_from(data)[0] & _VERSION_MASK
        expires_at_ms = 0
        if mark >= _FIRST_MARK + _WITH_EXPIRY:
            mark -= _WITH_EXPIRY
            expires_at_ms = int.from_bytes(data[_COMPACT_SIZE:_EXPIRY_END], "big")
        if mark == _BYTES_MARK:
            return b"b", version, expires_at_ms, at
        if mark == _STR_MARK:
            return b"s", version, expires_at_ms, at
        return data[at - 1 : at], version, expires_at_ms, at
    if mark == _MARK and len(data) >= _HEADER_SIZE:
        _, version, expires_at_ms, kind = _HEADER.unpack_from(data)
        return kind, version, expires_at_ms, _HEADER_SIZE
    return None


def buries(tomb: bytes, there: bytes | None) -> bool:
    """Return True if tombstone `tomb` deletes what a server holds under the key: a conditional
    delete, the rule of ``bury``.

    Anything but a value written at a version at least the tombstone's goes: last writer wins,
    by version, for deletes as for writes, so a delete that a read repair carries to a replica
    that missed it never removes a newer write that landed there meanwhile.

    >>> older, newer = (Codec(JSON).encode("fare", version=v, expires_at_ms=0) for v in (2, 4))
    >>> buries(tombstone(3), older), buries(tombstone(3), newer), buries(tombstone(3), b"41")
    (True, False, True)
    """
    if there is None:
        return False
    theirs = stored_version(there)
    return not theirs or theirs < stored_version(tomb)


def supersedes(value: bytes, there: bytes | None, tomb: bytes | None) -> bool:
    """Return True if envelope `value` may replace what a server holds: a conditional write.

    `there` is the key's stored bytes (None: absent) and `tomb` its tombstone (None: none).
    `value` lands where the key is absent and not deleted at a newer version, or holds an
    older version; never over a value without a version (a counter, a foreign value), whose
    age is unknown. The rule of read repair and of the rebalance's copies (Dynamo's
    reconciliation by version, DeCandia et al. 2007, section 4.4, with last writer wins).

    >>> older, newer = (Codec(JSON).encode("fare", version=v, expires_at_ms=0) for v in (2, 3))
    >>> supersedes(newer, older, None), supersedes(older, newer, None)
    (True, False)
    >>> supersedes(older, None, None), supersedes(older, None, tombstone(3))
    (True, False)
    >>> supersedes(newer, b"41", None)  # a counter: no version, never replaced
    False
    """
    ours = stored_version(value)
    if not ours:
        return False
    if there is not None:
        theirs = stored_version(there)
        return bool(theirs) and theirs < ours
    return tomb is None or stored_version(tomb) < ours


def lifts(value: bytes, tomb: bytes | None) -> bool:
    """Return True if a write of envelope `value` makes delete tombstone `tomb` void.

    A ``set`` that lands beside a delete's tombstone older than its own version comes after that
    delete both by arrival and by version, so the tombstone no longer hides anything on that
    server: the server drops it in the same step as it stores the value. Otherwise a ``set``
    stamped before the delete and delayed past that newer write (its own round trips, a
    timeout applied late) would replace the write on that server with a value older than the
    tombstone, and ``read="all"`` would read the key as deleted, losing both writes. An older
    ``set`` landing late never lifts a delete, nor does anything lift a re-admission's
    tombstone (no delete) or a value without a version (its age is unknown).

    >>> older, newer = (Codec(JSON).encode("fare", version=v, expires_at_ms=0) for v in (2, 4))
    >>> lifts(newer, tombstone(3)), lifts(older, tombstone(3)), lifts(newer, None)
    (True, False, False)
    >>> lifts(newer, readmission_tombstone(3)), lifts(b"41", tombstone(3))
    (False, False)
    """
    if tomb is None or len(tomb) != _HEADER_SIZE or tomb[_KIND_AT:] != _TOMBSTONE:
        return False
    ours = stored_version(value)
    return bool(ours) and stored_version(tomb) < ours


def _is_decimal(data: bytes) -> bool:
    digits = data[1:] if data[:1] == b"-" else data
    return 0 < len(digits) <= 20 and digits.isdigit()


class RawCodec:
    """Values stored exactly as given, with no envelope: what other languages' clients read.

    ``bytes`` are stored as is, ``str`` as UTF-8 and an ``int`` (64-bit) as its decimal digits
    (so ``incr`` / ``decr`` count it); anything else is refused. Reads return the stored bytes,
    whatever wrote them. No version and no expiry are stored, so copies cannot be reconciled,
    read-repaired or moved safely: the client refuses the options that need them.

    >>> codec = RawCodec()
    >>> [codec.encode(value, version=7, expires_at_ms=0) for value in ("café", 41)]
    [b'caf\\xc3\\xa9', b'41']
    >>> codec.decode(b"caf\\xc3\\xa9")
    Decoded(value=b'caf\\xc3\\xa9', version=0, expires_at_ms=0)
    """

    def encode(self, value: object, *, version: int, expires_at_ms: int) -> bytes:
        """Return `value` as the bytes stored (`version` and `expires_at_ms` are not kept).

        :raises TypeError: when `value` is not bytes, str or a 64-bit int (named by its type)
        """
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
        if isinstance(value, str):
            return value.encode()
        if type(value) is int and _INT_MIN <= value <= _INT_MAX:
            return str(value).encode()
        raise TypeError(
            f"value must be bytes, str or a 64-bit int with serializer='raw', got "
            f"{type(value).__name__}; encode it yourself, or use serializer='json'"
        )

    def decode(self, data: bytes) -> Decoded:
        """Return the stored bytes themselves, with no version and no expiry."""
        return Decoded(data, 0, 0)

    def decode_many(self, datas: list[bytes]) -> list[Decoded]:
        """Return :meth:`decode` of each of `datas`, in order."""
        return [Decoded(data, 0, 0) for data in datas]

    def decode_value(self, data: bytes) -> bytes:
        """Return the stored bytes themselves."""
        return data

    def stamp(self, data: bytes, version: int) -> bytes:
        """Return `data` unchanged: raw bytes carry no version (one may look like an envelope)."""
        return data
