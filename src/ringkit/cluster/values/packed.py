"""Moving a page of keys between Redis servers as one packed string, read and written by Lua.

The coordinator of a rebalance (:mod:`ringkit.cluster.rebalance.coordinator`) should cost the
servers' time, not its own: a page of an arc is read, packed, restored and indexed entirely inside
Redis (Redis scripting, ``EVALSHA``), and the coordinator only carries one string from the source's
reply to the destination's argument. Per page that is two round trips and no per-key work in Python;
before, each key was decoded from a DUMP reply, re-hashed for its index member and encoded again as
four script arguments, which cost the coordinator about 40 µs per key.

:data:`DUMP_PAGE` reads up to ``count`` entries of a range of the index's buckets
(:mod:`ringkit.cluster.values.buckets`) and packs every key still there as one record (Lua's
``struct``, big-endian)::

    key length (u32) | key | kind (u8) | value length (u32) | value | TTL left (ms, double)
    | point (8 bytes)

A string travels as itself (kind 1: ``MGET`` of the page, landed with ``SET ... PX``), anything
else as its ``DUMP`` payload (kind 2: landed with ``RESTORE``); the entries of keys found gone
are dropped.
:data:`RESTORE_PAGE` lands each record with the rules of the per-key copy it replaces: where the
key is absent and not deleted at a newer version (its tombstone), or holds an older ringkit
version; with ``mode`` 1 (a rollback) also over a value without a version. It adds the landed
keys' index members in batches. A page is bounded by bytes as well as keys (``STRLEN`` of each
entry before any value is read), and holds one key at least. :data:`DELETE_PAGE` deletes a page
of an arc and its index entries in one script (``UNLINK`` of the page, ``HDEL`` of exactly the
entries read).

A key whose tombstone name is a digest (a key too long for the prefix,
:func:`~ringkit.cluster.values.keys.tombstone_key`) is named by the source's reply, and the
coordinator passes its tombstone's name along: Lua has no BLAKE2b.

>>> page = pack_records([Record(b"k", b"payload", -1, b"")], lambda key: 7)
>>> len(page), page[0].key, page.size_bytes
(1, b'k', 8)
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import overload

from ringkit.cluster.values.buckets import INDEX_LUA
from ringkit.cluster.values.codec import HEAD_BYTES, VERSION_LUA, stored_version
from ringkit.cluster.values.keys import MAX_KEY_BYTES, TOMBSTONE_PREFIX, tombstone_key

__all__ = [
    "DELETE_PAGE",
    "DUMP_PAGE",
    "RESTORE_PAGE",
    "PackedRecords",
    "Record",
    "long_key_tombstones",
    "pack_records",
    "version_of",
]

_RECORD = ">I4c0BI4c0dc8"  # the Lua struct format of one record (see the module docstring)
_KIND_STRING, _KIND_DUMP = 1, 2
# Keys longer than this have a digest for a tombstone name (keys.tombstone_key).
_LONGEST_PREFIXED = MAX_KEY_BYTES - len(TOMBSTONE_PREFIX)


@dataclass(frozen=True, slots=True)
class Record:
    """One key read for moving: its payload, the TTL left (-1: none) and version (b"": none).

    `payload` is a ``DUMP`` payload, or with `kind` 1 (a string) the value itself; `point` is
    the key's index point (8 bytes, exact to its top 24 bits) when the source's index gave it.
    """

    key: bytes
    payload: bytes
    pttl_ms: int
    version: bytes
    kind: int = field(default=_KIND_DUMP, kw_only=True)
    point: bytes = field(default=b"", kw_only=True, compare=False)

    @property
    def size_bytes(self) -> int:
        """Bytes moved for this key."""
        return len(self.key) + len(self.payload)


class PackedRecords(Sequence[Record]):
    """A page of records as the source's script packed it; decoded only when indexed."""

    def __init__(
        self, blob: bytes, count: int, size_bytes: int, long_keys: Sequence[bytes]
    ) -> None:
        self.blob, self.size_bytes, self.long_keys = blob, size_bytes, list(long_keys)
        self._count = count
        self._decoded: list[Record] | None = None

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, at: int) -> Record: ...
    @overload
    def __getitem__(self, at: slice) -> Sequence[Record]: ...
    def __getitem__(self, at: int | slice) -> Record | Sequence[Record]:
        if self._decoded is None:
            self._decoded = list(_unpack(self.blob))
        return self._decoded[at]

    def __iter__(self) -> Iterator[Record]:
        return iter(self[:])


def version_of(head: bytes) -> bytes:
    """Return the ringkit version in a value or its first :data:`HEAD_BYTES` (b"": none)."""
    return stored_version(head)


def _unpack(blob: bytes) -> Iterator[Record]:
    at, size, unpack_from = 0, len(blob), struct.unpack_from
    while at < size:
        (n,) = unpack_from(">I", blob, at)
        key = blob[at + 4 : at + 4 + n]
        at += 4 + n
        kind, n = unpack_from(">BI", blob, at)
        value = blob[at + 5 : at + 5 + n]
        at += 5 + n
        pttl, point = unpack_from(">d8s", blob, at)
        at += 16
        version = version_of(value) if kind == _KIND_STRING else b""
        yield Record(key, value, int(pttl), version, kind=kind, point=point)


def pack_records(records: Sequence[Record], point_of: Callable[[bytes], int]) -> PackedRecords:
    """Return `records` packed as :data:`DUMP_PAGE` packs them (for :data:`RESTORE_PAGE`)."""
    if isinstance(records, PackedRecords):
        return records
    parts = []
    for record in records:
        point = record.point or point_of(record.key).to_bytes(8, "big")
        parts += [
            struct.pack(">I", len(record.key)),
            record.key,
            struct.pack(">BI", record.kind, len(record.payload)),
            record.payload,
            struct.pack(">d8s", record.pttl_ms, point),
        ]
    long_keys = [r.key for r in records if len(r.key) > _LONGEST_PREFIXED]
    size = sum(record.size_bytes for record in records)
    return PackedRecords(b"".join(parts), len(records), size, long_keys)


def long_key_tombstones(page: PackedRecords) -> list[bytes]:
    """Return the (key, tombstone name) arguments :data:`RESTORE_PAGE` needs for `page`."""
    return [name for key in page.long_keys for name in (key, tombstone_key(key))]


# KEYS: index; ARGV: cursor (the first top, 3 bytes, then the last key read at it or nothing),
# last top, count, bytes (the page's most keys and most bytes, 0: no bound), then edge tops.
# Returns the packed records, their count, their bytes, the next cursor ('' at the end of the
# range), how many records have an edge top (the reader checks their exact points), then the keys
# too long to have a prefixed tombstone. A page stops before the entry that would pass `bytes`
# (sizes by STRLEN, O(1), before any value is read), but holds one entry at least: a value
# larger than a page moves alone. So a page of large values holds the server for a bounded
# time, as a page of small ones does.
DUMP_PAGE = (
    INDEX_LUA
    + f"""
local count, most = tonumber(ARGV[3]), tonumber(ARGV[4] or '0')
local first = ix_top(ARGV[1])
local found = ix_page(KEYS[1], first, string.sub(ARGV[1], 4), tonumber(ARGV[2]), count)
local full = #found == count
if most > 0 then
  local sized, taken = 0, {{}}
  for i, entry in ipairs(found) do
    local length = redis.pcall('STRLEN', entry[2])
    if type(length) ~= 'number' then length = 0 end  -- not a string: its DUMP goes as is
    sized = sized + #entry[2] + length
    if i > 1 and sized > most then full = true; break end
    taken[i] = entry
  end
  found = taken
end
local keys = {{}}
for i, entry in ipairs(found) do keys[i] = entry[2] end
local strings = {{}}
for i = 1, #keys, 1000 do  -- MGET answers nil for a key that is gone or not a string
  local got = redis.call('MGET', unpack(keys, i, math.min(i + 999, #keys)))
  for j = 1, #got do strings[i + j - 1] = got[j] end
end
local parts, n, size, long, dead, edge, at_edges = {{}}, 0, 0, {{}}, {{}}, {{}}, 0
for i = 5, #ARGV do edge[tonumber(ARGV[i])] = true end
for i, entry in ipairs(found) do
  local key, kind, value = keys[i], {_KIND_STRING}, strings[i]
  if not value then kind, value = {_KIND_DUMP}, redis.call('DUMP', key) end
  if value then
    local pttl = redis.call('PTTL', key)
    parts[#parts + 1] = struct.pack('{_RECORD}', #key, key, kind, #value, value, pttl,
      struct.pack('>I4', entry[1] * 256) .. '\\0\\0\\0\\0')
    n = n + 1
    size = size + #key + #value
    if #key > {_LONGEST_PREFIXED} then long[#long + 1] = key end
    if edge[entry[1]] then at_edges = at_edges + 1 end
  else
    dead[#dead + 1] = entry
  end
end
ix_rem_many(KEYS[1], dead)
local after = ''
if full then after = ix_cursor(found[#found]) end
return {{table.concat(parts), n, size, after, at_edges, unpack(long)}}
"""
)

# KEYS: epoch, index; ARGV: epoch, mode, packed records, then (key, tombstone name) pairs for
# long keys. Returns how many landed. When none of the page's keys nor tombstones is here (one
# EXISTS per 500 keys: a new owner), every record lands without a per-key check, and the ones
# without a TTL with one MSET.
RESTORE_PAGE = (
    INDEX_LUA
    + VERSION_LUA
    + f"""
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if current > tonumber(ARGV[1]) then return redis.error_reply('STALEVIEW ' .. current) end
local named = {{}}
for i = 4, #ARGV, 2 do named[ARGV[i]] = ARGV[i + 1] end
local blob, at, n = ARGV[3], 1, 0
local keys, kinds, values, ttls, points, names = {{}}, {{}}, {{}}, {{}}, {{}}, {{}}
while at <= #blob do
  n = n + 1
  keys[n], kinds[n], values[n], ttls[n], points[n], at = struct.unpack('{_RECORD}', blob, at)
  names[2 * n - 1] = keys[n]
  names[2 * n] = named[keys[n]] or ('{TOMBSTONE_PREFIX.decode()}' .. keys[n])
end
local clash = 0
for i = 1, #names, 1000 do
  clash = clash + redis.call('EXISTS', unpack(names, i, math.min(i + 999, #names)))
end
local function lands(i)
  local key, version = keys[i], ''
  if kinds[i] == {_KIND_STRING} then version = env_version(values[i]) end
  if redis.call('EXISTS', key) == 0 then
    local dead = redis.call('GET', names[2 * i])
    return not dead or (version ~= '' and env_version(dead) < version)
  end
  local theirs = ''
  if redis.call('TYPE', key).ok == 'string' then
    theirs = env_version(redis.call('GETRANGE', key, 0, {HEAD_BYTES - 1}))
  end
  local go
  if version ~= '' and theirs ~= '' then go = theirs < version else go = ARGV[2] == '1' end
  if go then redis.call('DEL', key) end
  return go
end
-- Index first, then land: a landing that fails midway (a payload this Redis cannot RESTORE)
-- leaves at most entries of absent keys, which the sweep drops, never a key without an entry.
local going, members = {{}}, {{}}
for i = 1, n do
  if clash == 0 or lands(i) then
    going[#going + 1] = i
    members[#members + 1] = points[i] .. keys[i]
  end
end
ix_add_many(KEYS[2], members)
local plain = {{}}
for _, i in ipairs(going) do
  local key, value, pttl = keys[i], values[i], ttls[i]
  if kinds[i] ~= {_KIND_STRING} then
    redis.call('RESTORE', key, math.max(0, pttl), value)
  elseif pttl >= 0 then
    redis.call('SET', key, value, 'PX', math.max(1, pttl))
  else
    plain[#plain + 1] = key
    plain[#plain + 1] = value
  end
end
for i = 1, #plain, 1000 do redis.call('MSET', unpack(plain, i, math.min(i + 999, #plain))) end
return #going
"""
)

# KEYS: epoch, index; ARGV: epoch, cursor (as DUMP_PAGE's), last top, count, then edge tops.
# Deletes a page of the range's keys and exactly their index entries; returns the keys that
# existed, the next cursor ('' at the end), then the keys at the edge tops (left in place: the
# reader deletes those whose exact points are in range).
DELETE_PAGE = (
    INDEX_LUA
    + """
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if current > tonumber(ARGV[1]) then return redis.error_reply('STALEVIEW ' .. current) end
local count = tonumber(ARGV[4])
local first = ix_top(ARGV[2])
local edges = {}
for i = 5, #ARGV do
  for _, key in ipairs(ix_at(KEYS[2], tonumber(ARGV[i]))) do edges[#edges + 1] = key end
end
local found = ix_page(KEYS[2], first, string.sub(ARGV[2], 4), tonumber(ARGV[3]), count)
if #found == 0 then return {0, '', unpack(edges)} end
local keys = {}
for i, entry in ipairs(found) do keys[i] = entry[2] end
local gone = 0
for at = 1, #keys, 1000 do
  -- UNLINK: a page of large values is freed in the background, not while the script runs
  gone = gone + redis.call('UNLINK', unpack(keys, at, math.min(at + 999, #keys)))
end
ix_rem_many(KEYS[2], found)
local after = ''
if #found == count then after = ix_cursor(found[#found]) end
return {gone, after, unpack(edges)}
"""
)
