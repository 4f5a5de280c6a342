"""Keys: the rules every backend accepts, hash-tag routing, and the reserved bookkeeping keys.

:func:`key_bytes` checks a key once, at the boundary, against the strictest backend
(memcached's text protocol: 1..250 bytes, no whitespace or control characters), so that switching
backends never breaks a key. :func:`route_key` picks what routes a key: the text of its first
non-empty ``{tag}`` (Redis Cluster's hash tags, twemproxy's ``hash_tag``), else the whole key.

Keys starting with ``ringkit:`` are reserved for the cluster's own bookkeeping, each defined
here once: the epoch of the newest view a server was given, that view, the audit log, the
rebalance checkpoint, the key index (:mod:`ringkit.cluster.index`) and the tombstones that
deletes leave while data moves (:func:`tombstone_key`).

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
    "MAX_KEY_BYTES",
    "RESERVED_PREFIX",
    "TOMBSTONE_PREFIX",
    "VIEW_KEY",
    "key_bytes",
    "route_key",
    "tombstone_key",
    "user_key",
]

RESERVED_PREFIX = b"ringkit:"
EPOCH_KEY = b"ringkit:epoch"
VIEW_KEY = b"ringkit:view"
AUDIT_KEY = b"ringkit:audit"
CHECKPOINT_KEY = b"ringkit:checkpoint"
INDEX_KEY = b"ringkit:index"
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
