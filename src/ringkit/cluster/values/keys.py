"""Keys: the rules every backend accepts, hash-tag routing, and the reserved bookkeeping keys.

:func:`key_bytes` checks a key once, at the boundary, against the strictest backend
(memcached's text protocol: 1..250 bytes, no whitespace or control characters), so that switching
backends never breaks a key. :func:`route_key` picks what routes a key: the text of its first
non-empty ``{tag}`` (Redis Cluster's hash tags, twemproxy's ``hash_tag``), else the whole key.

Keys starting with ``ringkit:`` are reserved for the cluster's own bookkeeping, each defined
here once: the epoch of the newest view a server was given, that view, the audit log, the
rebalance checkpoint, the key index (:mod:`ringkit.cluster.wire.index`), the tombstones that
deletes leave while data moves (:func:`tombstone_key`), the hints kept for a down server
(:func:`hints_key`, :mod:`ringkit.cluster.wire.redis.handoff`) and the markers of spread hot keys
(:func:`spread_key`).

>>> route_key(b"user:{42}:cart"), route_key(b"plain"), route_key(b"empty:{}")
(b'42', b'plain', b'empty:{}')
"""

from __future__ import annotations

import hashlib
import re

from ringkit.errors import ConfigError

__all__ = [
    "AUDIT_KEY",
    "CHECKPOINT_KEY",
    "DELETE_TOMBSTONE_TTL_S",
    "EPOCH_KEY",
    "INDEX_KEY",
    "LEGACY_INDEX_KEY",
    "MAX_KEY_BYTES",
    "RESERVED_PREFIX",
    "TOMBSTONE_PREFIX",
    "VIEW_KEY",
    "hints_key",
    "key_bytes",
    "readmitted_key",
    "route_key",
    "spread_key",
    "tombstone_key",
    "user_key",
    "user_keys",
]

RESERVED_PREFIX = b"ringkit:"
EPOCH_KEY = b"ringkit:epoch"
VIEW_KEY = b"ringkit:view"
AUDIT_KEY = b"ringkit:audit"
CHECKPOINT_KEY = b"ringkit:checkpoint"
# The key index's layout record; its buckets are named after it (values.buckets).
INDEX_KEY = b"ringkit:ix"
# Where the index lived before it was bucketed: one sorted set, migrated on a move's first read.
LEGACY_INDEX_KEY = b"ringkit:index"
HINTS_PREFIX = b"ringkit:hints:"
READMITTED_PREFIX = b"ringkit:readmitted:"
SPREAD_PREFIX = b"ringkit:spread:"
TOMBSTONE_PREFIX = b"ringkit:tomb:"
# memcached's limit; applied to every backend so that switching backends never breaks a key.
MAX_KEY_BYTES = 250
_FORBIDDEN = re.compile(rb"[\x00-\x20\x7f]")


def key_bytes(key: object) -> bytes:
    """Return `key` as bytes after checking the rules every backend accepts.

    A key is a non-empty str or bytes of at most 250 bytes (UTF-8) with no whitespace or
    control characters (memcached's text protocol cannot carry them).

    >>> key_bytes("booking:42")
    b'booking:42'

    :raises TypeError: when `key` is not str or bytes
    :raises ConfigError: when `key` is empty, too long or has a space or control character
    """
    if isinstance(key, str):
        data = key.encode()
    elif isinstance(key, bytes):
        data = key
    else:
        raise TypeError(f"key must be str or bytes, got {type(key).__name__}")
    if not 0 < len(data) <= MAX_KEY_BYTES:
        raise ConfigError(
            f"key must be 1..{MAX_KEY_BYTES} bytes, got {len(data)} bytes: {key!r:.60}"
        )
    if _FORBIDDEN.search(data):
        raise ConfigError(f"key must have no whitespace or control characters, got {key!r}")
    return data


def user_key(key: object) -> bytes:
    """Return `key` as bytes if it is a valid key outside the reserved ``ringkit:`` prefix.

    Every verb of the sharded clients checks its keys here, once, before any server is asked:
    a user write to ``ringkit:epoch`` would otherwise fence the client out of its own servers.

    >>> user_key("booking:42")
    b'booking:42'
    >>> user_key("ringkit:epoch")
    Traceback (most recent call last):
    ...
    ringkit.errors.ConfigError: key must not start with the reserved prefix 'ringkit:', \
got 'ringkit:epoch'; that prefix holds the cluster's own bookkeeping, pick another key

    :raises TypeError: when `key` is not str or bytes
    :raises ConfigError: when `key` is invalid (see :func:`key_bytes`) or reserved
    """
    data = key_bytes(key)
    if data.startswith(RESERVED_PREFIX):
        raise ConfigError(
            f"key must not start with the reserved prefix {RESERVED_PREFIX.decode()!r}, "
            f"got {key!r:.60}; that prefix holds the cluster's own bookkeeping, pick another key"
        )
    return data


def user_keys(keys: list[str | bytes]) -> list[bytes]:
    """Return :func:`user_key` of each of `keys`, checked as a batch (a multi-key verb's keys).

    The rules are checked on all the keys at once: every byte of the batch against the
    forbidden characters in one regex search, the lengths in one pass, the reserved prefix in
    one ``find`` over the keys joined by NULs (which no valid key holds, so a match is the
    start of a key). A batch that breaks a rule is checked again key by key, so the error
    names the first bad key exactly as :func:`user_key` does.

    >>> user_keys(["booking:42", b"fare:7"])
    [b'booking:42', b'fare:7']

    :raises TypeError: when a key is not str or bytes
    :raises ConfigError: when a key is invalid (see :func:`key_bytes`) or reserved
    """
    try:
        datas = list(map(str.encode, keys))  # type: ignore[arg-type]  # all str: a loop in C
    except TypeError:
        if not all(type(key) is bytes for key in keys):
            return [user_key(key) for key in keys]  # mixed, or not keys at all: one by one
        datas = list(keys)  # type: ignore[arg-type]  # all bytes, checked above
    if (
        _FORBIDDEN.search(b"".join(datas)) is None
        and min(map(len, datas), default=1) > 0
        and max(map(len, datas), default=0) <= MAX_KEY_BYTES
        and (b"\0" + b"\0".join(datas)).find(b"\0" + RESERVED_PREFIX) < 0
    ):
        return datas
    return [user_key(key) for key in keys]  # raises, naming the first bad key


def route_key(key: bytes) -> bytes:
    """Return what routes `key`: the text of its first non-empty ``{tag}``, or the whole key.

    Keys sharing a tag live on the same nodes (Redis Cluster's hash tags, twemproxy hash_tag).
    """
    start = key.find(b"{")
    if start >= 0:
        end = key.find(b"}", start + 1)
        if end > start + 1:
            return key[start + 1 : end]
    return key


#: How long a delete's tombstone outlives it in a stable view: a read that found the value
#: before the delete and repairs a replica later than this (a process paused that long between
#: the two) could bring the key back there.
DELETE_TOMBSTONE_TTL_S = 60.0


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).hexdigest().encode()


def _server_key(prefix: bytes, server: str) -> bytes:
    """Return `prefix` + server name, or + its digest when the name is no valid key part."""
    name = server.encode()
    if len(prefix) + len(name) > MAX_KEY_BYTES or _FORBIDDEN.search(name):
        name = b"~" + _digest(name)
    return prefix + name


def hints_key(server: str) -> bytes:
    """Return the key under which the other servers keep the hints for down server `server`.

    The name itself when it is a valid key part, else its digest (a name may hold spaces).

    >>> hints_key("s2")
    b'ringkit:hints:s2'
    """
    return _server_key(HINTS_PREFIX, server)


def readmitted_key(server: str) -> bytes:
    """Return the key that says when a process last began re-admitting `server` (Unix ms).

    Kept beside :func:`hints_key` on the same servers, so that a writer still hinting for a
    server that another process has re-admitted learns it with its hint.
    """
    return _server_key(READMITTED_PREFIX, server)


def spread_key(key: bytes) -> bytes:
    """Return the marker key, on `key`'s replicas, that says `key` has spread hot-key copies.

    A digest of the key, so that any key of up to 250 bytes has a marker of bounded length.
    """
    return SPREAD_PREFIX + _digest(key)


def tombstone_key(key: bytes) -> bytes:
    """Return the reserved key that holds the tombstone of a delete of `key`.

    Beside the key, not in it, so that reads, ``add`` and ``incr`` never meet a tombstone. A
    key too long to take the prefix within memcached's 250 bytes is named by its BLAKE2b
    digest instead (128 bits: no two keys of one cluster share a tombstone in practice).

    >>> tombstone_key(b"cart:7")
    b'ringkit:tomb:cart:7'
    >>> len(tombstone_key(b"k" * 250))
    46
    """
    named = TOMBSTONE_PREFIX + key
    if len(named) <= MAX_KEY_BYTES:
        return named
    return TOMBSTONE_PREFIX + b"#" + hashlib.blake2b(key, digest_size=16).hexdigest().encode()
