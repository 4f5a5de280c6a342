"""The key index's layout on Redis: small hashes bucketed by point, split by linear hashing.

Each key ringkit writes is recorded under the bucket that holds its point: a hash whose field is
the key and whose value is the point's top :data:`TOP_BITS` bits (stored offset by ``2**23``, so
that every value is a 24-bit listpack integer: 5 bytes). A bucket covers a contiguous range of
points, so the keys of an arc are read bucket after bucket, in point order; and a bucket stays
small enough for Redis to keep it as a listpack (``hash-max-listpack-entries`` 128,
``hash-max-listpack-value`` 64 in Redis 7), where an entry costs its key plus about 7 bytes,
against about 130 bytes for a member of a skiplist-encoded sorted set.

The number of buckets follows the number of entries by linear hashing (Litwin, "Linear
hashing: a new tool for file and table addressing", VLDB 1980) over the points' top bits, which
keeps point order (a bucket is a prefix of the point, not a residue). The layout record
(:data:`~ringkit.cluster.values.keys.INDEX_KEY`, a hash) holds a ``level`` L, a ``split``
pointer s and the ``entries`` count. Bucket p of level L holds the points whose top L bits are
p; buckets 0 … s - 1 of level L have been split into buckets 0 … 2s - 1 of level L + 1. So there
are ``2**L + s`` buckets, and a point's bucket is its top-L prefix, or its top-(L + 1) prefix
when that is below s. When the entries pass :data:`FILL` per bucket, the write that added the
last one splits bucket s (one ``HGETALL``, two ``HSET``, one ``DEL``: its 24-bit values say
which half each key goes to) and moves the pointer on; a level is complete when s reaches
``2**L``. A split bucket holds about :data:`FILL` / 2 to :data:`FILL` entries and an unsplit one
up to 2 × :data:`FILL` (96): under the 128 of a listpack with 3 standard deviations to spare.
A fixed number of buckets would cost a key name, a dict entry and a listpack header per bucket
(about 100 bytes) for every few keys on an empty server, and leave listpack on a full one; a
split costs one bucket's worth of work once per :data:`FILL` new entries.

A bucket that empties is dropped by Redis itself; the level never goes down. Buckets are named
``ringkit:ix:<level>:<prefix>`` (they are not declared to the scripts as ``KEYS``: each server
is a standalone Redis, never a Redis Cluster node). A key longer than :data:`LONG_KEY` bytes
would turn its whole bucket into a hashtable (``hash-max-listpack-value``), so it goes to the
bucket's twin ``…<prefix>+`` instead: a list of ``top (3 bytes) .. key``, whose listpack nodes
take entries of any length, split with its bucket. Keys that share a hash tag share a point,
which no split separates: more than about a hundred of them turn their bucket into a hashtable.

A point is known to the server by its top 24 bits only: an arc whose end is not on a 2**40
boundary shares that end's 24-bit window with points on both sides, and the coordinator reads the
keys of that window and checks their exact points itself (:mod:`ringkit.cluster.wire.index`).

:data:`INDEX_LUA` defines the functions every script that touches the index runs:
``ix_add(meta, entry)`` and ``ix_rem(meta, entry)`` for an entry ``point (8 bytes) .. key``,
``ix_rem_at(meta, top, key)``, their batches ``ix_add_many(meta, entries)`` and
``ix_rem_many(meta, pairs)`` (``{top, key}`` pairs; one ``HSET`` or ``HDEL`` per bucket and one
``HINCRBY`` of the count per batch, which is how a move's page lands and leaves),
``ix_at(meta, top)`` (the keys whose top bits are `top`) and
``ix_page(meta, top, after, last, count)`` (up to `count` entries with tops from `top` to
`last`, in (top, key) order, after key `after` at `top`).

>>> top_of(2**64 - 1), top_of(2**40), window(5)
(16777215, 1, (5497558138880, 6597069766655))
"""

from __future__ import annotations

__all__ = ["FILL", "INDEX_LUA", "LONG_KEY", "TOP_BITS", "WINDOW_BITS", "top_of", "window"]

#: Bits of a point the index keeps (24: a listpack integer of 3 bytes, offset to be signed).
TOP_BITS = 24
#: Bits of a point below those kept: the width of one window of equal tops.
WINDOW_BITS = 64 - TOP_BITS
#: Entries per bucket at which the next bucket splits.
FILL = 48
#: Longer keys go to their bucket's long-key twin: a field longer than Redis's
#: ``hash-max-listpack-value`` (64) would turn the whole bucket into a hashtable.
LONG_KEY = 64


def top_of(point: int) -> int:
    """Return the top :data:`TOP_BITS` bits of a 64-bit `point`."""
    return point >> WINDOW_BITS


def window(top: int) -> tuple[int, int]:
    """Return the first and last 64-bit points whose top bits are `top`."""
    return top << WINDOW_BITS, ((top + 1) << WINDOW_BITS) - 1


INDEX_LUA = f"""
local IX_BITS, IX_FILL, IX_OFFSET, IX_LONG = {TOP_BITS}, {FILL}, {1 << (TOP_BITS - 1)}, {LONG_KEY}
local ix_state = nil
local function ix_load(meta)
  if not ix_state then
    local got = redis.call('HMGET', meta, 'level', 'split', 'entries')
    ix_state = {{tonumber(got[1] or '0'), tonumber(got[2] or '0'), tonumber(got[3] or '0')}}
  end
  return ix_state
end
local function ix_bucket(meta, top)
  local state = ix_load(meta)
  local level = state[1]
  local prefix = math.floor(top / 2 ^ (IX_BITS - level))
  if prefix < state[2] then
    level = level + 1
    prefix = math.floor(top / 2 ^ (IX_BITS - level))
  end
  return meta .. ':' .. level .. ':' .. prefix, level, prefix
end
local function ix_top(entry)
  local a, b, c = string.byte(entry, 1, 3)
  return (a * 256 + b) * 256 + c
end
local function ix_three(top)
  return string.char(math.floor(top / 65536), math.floor(top / 256) % 256, top % 256)
end
-- A bucket's entries as {{top, key}} pairs: its hash, then its long-key twin (top .. key each).
local function ix_entries(bucket)
  local out = {{}}
  local flat = redis.call('HGETALL', bucket)
  for i = 1, #flat, 2 do out[#out + 1] = {{tonumber(flat[i + 1]) + IX_OFFSET, flat[i]}} end
  for _, item in ipairs(redis.call('LRANGE', bucket .. '+', 0, -1)) do
    out[#out + 1] = {{ix_top(item), string.sub(item, 4)}}
  end
  return out
end
local function ix_put(bucket, top, key)
  if #key <= IX_LONG then return redis.call('HSET', bucket, key, top - IX_OFFSET) end
  local item = ix_three(top) .. key
  if redis.call('LPOS', bucket .. '+', item) then return 0 end
  redis.call('RPUSH', bucket .. '+', item)
  return 1
end
-- HSET of flat (field, value) pairs, a thousand arguments at a time (Lua's unpack has a limit);
-- returns how many fields are new.
local function ix_hset(bucket, fields)
  local added = 0
  for i = 1, #fields, 1000 do
    added = added + redis.call('HSET', bucket, unpack(fields, i, math.min(i + 999, #fields)))
  end
  return added
end
local function ix_split(meta)
  local state = ix_load(meta)
  local level, split = state[1], state[2]
  local old = meta .. ':' .. level .. ':' .. split
  local half = 2 ^ (IX_BITS - level - 1)
  local entries = ix_entries(old)
  redis.call('DEL', old, old .. '+')
  local short = {{[0] = {{}}, [1] = {{}}}}
  for _, entry in ipairs(entries) do
    local bit = math.floor(entry[1] / half) % 2
    local name = meta .. ':' .. (level + 1) .. ':' .. (2 * split + bit)
    if #entry[2] > IX_LONG then ix_put(name, entry[1], entry[2])
    else
      local side = short[bit]
      side[#side + 1] = entry[2]
      side[#side + 1] = entry[1] - IX_OFFSET
    end
  end
  for bit = 0, 1 do
    ix_hset(meta .. ':' .. (level + 1) .. ':' .. (2 * split + bit), short[bit])
  end
  split = split + 1
  if split == 2 ^ level then level, split = level + 1, 0 end
  state[1], state[2] = level, split
  redis.call('HSET', meta, 'level', level, 'split', split)
end
-- Entries are added and removed a batch at a time: one HSET or HDEL per bucket with all its
-- fields, and one HINCRBY of the count, then the splits the new count calls for. Splitting after
-- the batch rather than between its entries leaves the same buckets: the layout follows the
-- count alone, and a split rebuilds its bucket from what it holds.
local function ix_add_many(meta, entries)
  local fields, order, added = {{}}, {{}}, 0
  for _, entry in ipairs(entries) do
    local top, key = ix_top(entry), string.sub(entry, 9)
    local bucket = (ix_bucket(meta, top))
    if #key > IX_LONG then added = added + ix_put(bucket, top, key)
    else
      local here = fields[bucket]
      if not here then here = {{}}; fields[bucket] = here; order[#order + 1] = bucket end
      here[#here + 1] = key
      here[#here + 1] = top - IX_OFFSET
    end
  end
  for _, bucket in ipairs(order) do added = added + ix_hset(bucket, fields[bucket]) end
  if added == 0 then return end
  local state = ix_load(meta)
  state[3] = state[3] + added
  redis.call('HINCRBY', meta, 'entries', added)
  while state[3] > IX_FILL * (2 ^ state[1] + state[2]) and state[1] < IX_BITS do ix_split(meta) end
end
local function ix_add(meta, entry) ix_add_many(meta, {{entry}}) end
-- `found` holds {{top, key}} pairs; returns how many of their entries were there.
local function ix_rem_many(meta, found)
  local keys, order, gone = {{}}, {{}}, 0
  for _, pair in ipairs(found) do
    local top, key = pair[1], pair[2]
    local bucket = (ix_bucket(meta, top))
    if #key > IX_LONG then gone = gone + redis.call('LREM', bucket .. '+', 1, ix_three(top) .. key)
    else
      local here = keys[bucket]
      if not here then here = {{}}; keys[bucket] = here; order[#order + 1] = bucket end
      here[#here + 1] = key
    end
  end
  for _, bucket in ipairs(order) do
    local here = keys[bucket]
    for i = 1, #here, 1000 do
      gone = gone + redis.call('HDEL', bucket, unpack(here, i, math.min(i + 999, #here)))
    end
  end
  if gone == 0 then return 0 end
  local state = ix_load(meta)
  state[3] = state[3] - gone
  redis.call('HINCRBY', meta, 'entries', -gone)
  return gone
end
local function ix_rem_at(meta, top, key) return ix_rem_many(meta, {{{{top, key}}}}) end
local function ix_rem(meta, entry)
  return ix_rem_at(meta, ix_top(entry), string.sub(entry, 9))
end
local function ix_at(meta, top)
  local keys = {{}}
  for _, entry in ipairs(ix_entries((ix_bucket(meta, top)))) do
    if entry[1] == top then keys[#keys + 1] = entry[2] end
  end
  return keys
end
local function ix_before(a, b) return a[1] < b[1] or (a[1] == b[1] and a[2] < b[2]) end
local function ix_page(meta, top, after, last, count)
  local found, first = {{}}, top
  while top <= last and #found < count do
    local bucket, level, prefix = ix_bucket(meta, top)
    local ends = math.min(last, (prefix + 1) * 2 ^ (IX_BITS - level) - 1)
    local here = {{}}
    for _, entry in ipairs(ix_entries(bucket)) do
      local t = entry[1]
      if t >= top and t <= ends and (t > first or entry[2] > after) then here[#here + 1] = entry end
    end
    table.sort(here, ix_before)
    for _, entry in ipairs(here) do
      if #found == count then break end
      found[#found + 1] = entry
    end
    top = ends + 1
  end
  return found
end
local function ix_cursor(entry) return ix_three(entry[1]) .. entry[2] end
"""
