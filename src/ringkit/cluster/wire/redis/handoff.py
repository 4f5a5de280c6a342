"""Bookkeeping kept on the servers themselves: hints for a down server, version-checked copies.

*Hints.* A write that could not reach server X leaves a *hint* on the servers that took it: the
key, added to a set under ``ringkit:hints:<X>`` (:func:`~ringkit.cluster.values.keys.hints_key`).
Whichever process re-admits X later first stamps ``ringkit:readmitted:<X>`` (the time, Unix ms)
on every server, then reads those sets, deletes the hinted keys on X, re-admits it, and removes
exactly the hints it applied (hints added meanwhile stay). A writer adds its hint, then reads the
stamp back (one Lua script on Redis): either the re-admitting process reads the hint, or the
writer sees a stamp newer than the failure it saw and invalidates the key on X itself before it
acknowledges (each server is linearizable, so one of the two orders holds). This
is Dynamo's hinted handoff (DeCandia et al. 2007, section 4.6), which keeps the hints on the
surviving nodes, not in the writer: a writer that crashes loses nothing, and a process that
never saw the writes still repairs X before serving from it. Here the hand-off invalidates (the
key is deleted on X, reads there miss and fall back to a replica that took the write) rather
than replays the value; the delete leaves a tombstone just below the version the holders have,
so a late read repair of an older value stands down (``ServerSet._invalidation`` in
:mod:`ringkit.cluster.core.servers`). On Redis a hint set is a SET, bounded in a Lua script; on
memcached and the memory backend it is one item of space-separated keys (keys hold no whitespace),
changed by compare-and-swap (memcached ``gets`` / ``cas``, protocol.txt) and bounded both in
keys and in bytes (memcached's item limit is 1 MiB).

*Copies.* :func:`copy_is_newer` decides whether a hot-key copy may replace what a server holds:
only a strictly higher envelope version (:mod:`ringkit.cluster.values.codec`) does, so an old copy
never overwrites a newer one. The Redis form is one Lua script (:data:`HANDOFF_SCRIPTS`).

>>> with_hints(None, [b"a", b"b"], max_hints=10)
(b'a b', 0)
>>> with_hints(b"a b", [b"b", b"c", b"d"], max_hints=3)
(b'a b c', 1)
>>> without_hints(b"a b c", [b"b"])
b'a c'
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from ringkit.cluster.values.codec import VERSION_LUA, stored_version

__all__ = [
    "COPY_TOMBSTONE",
    "HANDOFF_SCRIPTS",
    "MAX_CAS_TRIES",
    "MAX_HINTS_BYTES",
    "copy_is_newer",
    "copy_tombstone",
    "copy_version",
    "decode_hints",
    "is_copy_tombstone",
    "with_hints",
    "without_hints",
]

# Below memcached's default 1 MiB item limit: a hint list never grows into a refused item.
MAX_HINTS_BYTES = 900_000
# Compare-and-swap rounds before a bookkeeping update gives up (counted as a failure).
MAX_CAS_TRIES = 16
# A copy invalidated by a newer write: a marker byte and the 8-byte version of that write.
COPY_TOMBSTONE = 0xFD
_VERSION = struct.Struct(">Q")


def decode_hints(stored: bytes | None) -> list[bytes]:
    """Return the keys of a stored hint list (None or empty: none)."""
    return stored.split() if stored else []


def with_hints(stored: bytes | None, keys: Iterable[bytes], *, max_hints: int) -> tuple[bytes, int]:
    """Return the hint list `stored` with `keys` added, and how many did not fit.

    At most `max_hints` keys and :data:`MAX_HINTS_BYTES` bytes are kept; a key already there
    costs nothing.
    """
    held = dict.fromkeys(decode_hints(stored))
    size = len(stored or b"")
    dropped = 0
    for key in keys:
        if key in held:
            continue
        if len(held) >= max_hints or size + len(key) + 1 > MAX_HINTS_BYTES:
            dropped += 1
            continue
        held[key] = None
        size += len(key) + 1
    return b" ".join(held), dropped


def without_hints(stored: bytes | None, keys: Iterable[bytes]) -> bytes:
    """Return the hint list `stored` without `keys` (exactly those: newer hints stay)."""
    applied = set(keys)
    return b" ".join(key for key in decode_hints(stored) if key not in applied)


def copy_tombstone(version: int) -> bytes:
    """Return the stored form of a copy invalidated by a write of `version`."""
    return bytes([COPY_TOMBSTONE]) + _VERSION.pack(version)


def is_copy_tombstone(stored: bytes) -> bool:
    """Return True if `stored` is an invalidated copy (reads treat it as a miss)."""
    return len(stored) == 9 and stored[0] == COPY_TOMBSTONE


def copy_version(stored: bytes | None) -> int:
    """Return the version of a stored value: -1 when absent, 0 without an envelope."""
    if stored is None:
        return -1
    if len(stored) >= 9 and stored[0] == COPY_TOMBSTONE:
        version: int = _VERSION.unpack_from(stored, 1)[0]
        return version
    return int.from_bytes(stored_version(stored), "big")


def copy_is_newer(held: bytes | None, copy: bytes) -> bool:
    """Return True if `copy` may replace `held`: its version is strictly higher."""
    return copy_version(copy) > copy_version(held)


# KEYS: hint set, readmitted; ARGV: max hints, key_1..key_n. Adds while the set has room;
# returns how many keys did not fit and when a process last began re-admitting the server.
_ADD_HINTS = """
local size = redis.call('SCARD', KEYS[1])
local limit = tonumber(ARGV[1])
local dropped = 0
for i = 2, #ARGV do
  if size < limit then size = size + redis.call('SADD', KEYS[1], ARGV[i])
  elseif redis.call('SISMEMBER', KEYS[1], ARGV[i]) == 0 then dropped = dropped + 1 end
end
return {dropped, tonumber(redis.call('GET', KEYS[2]) or '0')}
"""
# KEYS: key; ARGV: copy, px ('' = none). Stores the copy only over a strictly older version
# (an envelope's, codec.stored_version, or a copy tombstone's bytes 2..9, big-endian; anything
# else is version 0).
_SET_COPY = (
    VERSION_LUA
    + f"""
local function version(value)
  if not value then return -1 end
  local bytes = env_version(value)
  if #value >= 9 and string.byte(value, 1) == {COPY_TOMBSTONE} then
    bytes = string.sub(value, 2, 9)
  end
  local n = 0
  for i = 1, #bytes do n = n * 256 + string.byte(bytes, i) end
  return n
end
if version(redis.call('GET', KEYS[1])) >= version(ARGV[1]) then return 0 end
if ARGV[2] == '' then redis.call('SET', KEYS[1], ARGV[1])
else redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) end
return 1
"""
)
HANDOFF_SCRIPTS = {"add_hints": _ADD_HINTS, "set_copy": _SET_COPY}
