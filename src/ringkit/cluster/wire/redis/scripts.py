"""Redis's side of the fence: every fenced call as one Lua script, its arguments and its answer.

A fenced read on Redis is one ``MGET`` of the server's epoch and the keys (atomic, as a script
is), checked here, client side, before the values are used (:func:`redis_answer`).
A fenced write on Redis checks the server's epoch (``ringkit:epoch``) and writes in one script, so
no write routed by an old view can land after the coordinator moved the server on, and the same
script records the key in the index (:mod:`ringkit.cluster.wire.index`). :func:`redis_scripts`
encodes one backend call (``set_many``, ``add``, ``delete``, ``repair``, ``repair_many``, ``bury``,
``incr``, ``touch``, ``get_many``) into its scripts' keys and arguments, :func:`redis_answer`
decodes the replies into what the call answers, and :func:`redis_error` turns a script's refusal
into :class:`~ringkit.errors.StaleViewError`, :class:`~ringkit.errors.EpochLostError` or a
``ConfigError`` (Redis scripting: ``EVALSHA``, ``redis.error_reply``). The operations of
:mod:`ringkit.cluster.wire.redis.ops` send them, for the blocking and the asyncio client alike.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ringkit.cluster.values.buckets import INDEX_LUA
from ringkit.cluster.values.codec import HEAD_BYTES, VERSION_LUA
from ringkit.cluster.values.expiry import redis_px
from ringkit.cluster.values.keys import (
    EPOCH_KEY,
    INDEX_KEY,
    tombstone_key,
)
from ringkit.cluster.wire.failures import not_integer, server_failed
from ringkit.cluster.wire.fence import epoch_value
from ringkit.cluster.wire.index import (
    SWEEP_SCRIPT,
    member,
)
from ringkit.cluster.wire.urls import ServerURL
from ringkit.errors import (
    EpochLostError,
    StaleViewError,
    UnsupportedError,
)

__all__ = [
    "KEYS_PER_CALL",
    "SCRIPTS",
    "PointOf",
    "Script",
    "px_argument",
    "redis_answer",
    "redis_error",
    "redis_scripts",
    "with_markers",
]

# At most this many keys per script call: Lua's unpack() has a stack limit.
KEYS_PER_CALL = 4000
PointOf = Callable[[bytes], int]


_CHECK = """
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if current > tonumber(ARGV[1]) then return redis.error_reply('STALEVIEW ' .. current) end
"""
# Writes also refuse a server that lost its epoch (restarted empty) while the client routes by
# a published view: it would take writes that up-to-date clients never read.
_CHECK_WRITE = (
    _CHECK
    + """
if current == 0 and tonumber(ARGV[1]) >= 1 then return redis.error_reply('NOEPOCH') end
"""
)
# The version of a stored value or tombstone, of either envelope form (codec.stored_version),
# and the last byte of a value's head that it needs.
_VERSIONS = VERSION_LUA + f"local HEAD_END = {HEAD_BYTES - 1}\n"
# Drop the delete tombstone held under `tomb` if envelope `value`, just stored, is newer
# (codec.lifts: a tombstone is a wide 18-byte envelope, 0xfe, of kind 't', byte 116; the value's
# version of either form comes from env_version, so a script using this includes _VERSIONS).
_LIFT_LUA = """
local function lift(tomb, value)
  local ours = env_version(value)
  if ours == '' then return end
  local held = redis.call('GET', tomb)
  if held and #held == 18 and string.byte(held, 1) == 254 and string.byte(held, 18) == 116
      and string.sub(held, 2, 9) < ours then
    redis.call('DEL', tomb)
  end
end
"""
# KEYS: epoch, index, k1..kn, then tombstone_1..tombstone_n; ARGV: epoch, px ('' = none), then
# member_i, value_i pairs (an empty member: do not index). A value lifts its key's older delete
# (_LIFT_LUA). The entries are indexed as one batch after the writes (one HSET per bucket, one
# HINCRBY of the count), as a move's page lands: one entry at a time cost an HSET and an
# HINCRBY per key.
_SET = (
    INDEX_LUA
    + _VERSIONS
    + _LIFT_LUA
    + _CHECK_WRITE
    + """
local entries = {}
local n = (#KEYS - 2) / 2
for i = 3, n + 2 do
  local value = ARGV[2 * i - 2]
  if ARGV[2] == '' then redis.call('SET', KEYS[i], value)
  else redis.call('SET', KEYS[i], value, 'PX', ARGV[2]) end
  if ARGV[2 * i - 3] ~= '' then entries[#entries + 1] = ARGV[2 * i - 3] end
  lift(KEYS[i + n], value)
end
ix_add_many(KEYS[2], entries)
return n
"""
)
# KEYS: epoch, index, key, tombstone; ARGV: epoch, px, member, value.
_ADD = (
    INDEX_LUA
    + _VERSIONS
    + _LIFT_LUA
    + _CHECK_WRITE
    + """
local done
if ARGV[2] == '' then done = redis.call('SET', KEYS[3], ARGV[4], 'NX')
else done = redis.call('SET', KEYS[3], ARGV[4], 'NX', 'PX', ARGV[2]) end
if not done then return 0 end
if ARGV[3] ~= '' then ix_add(KEYS[2], ARGV[3]) end
lift(KEYS[4], ARGV[4])
return 1
"""
)
# KEYS: epoch, index, key; ARGV: epoch, member.
_DELETE = INDEX_LUA + _CHECK_WRITE + "ix_rem(KEYS[2], ARGV[2]) return redis.call('DEL', KEYS[3])"
# KEYS: epoch, index, then key_i, tombstone_i pairs; ARGV: epoch, px, then member_i, value_i
# pairs (an envelope each). Read repair, and a retried batch write, as conditional writes
# (codec.supersedes): each value lands where its key is absent and not deleted at a newer
# version, or holds an older ringkit version; never over a newer one. The entries of the keys
# that landed are indexed as one batch, and each lifts its key's older delete (_LIFT_LUA).
# Returns 1 or 0 per key: whether it landed.
_REPAIR = (
    INDEX_LUA
    + _VERSIONS
    + _LIFT_LUA
    + _CHECK_WRITE
    + """
local function supersedes(key, tomb, value)
  local ours = env_version(value)
  if ours == '' then return false end
  if redis.call('EXISTS', key) == 1 then
    if redis.call('TYPE', key).ok ~= 'string' then return false end
    local theirs = env_version(redis.call('GETRANGE', key, 0, HEAD_END))
    return theirs ~= '' and theirs < ours
  end
  local held = redis.call('GET', tomb)
  return not held or env_version(held) < ours
end
local landed, entries = {}, {}
for i = 3, #KEYS, 2 do
  local go = supersedes(KEYS[i], KEYS[i + 1], ARGV[i + 1])
  if go then
    if ARGV[2] == '' then redis.call('SET', KEYS[i], ARGV[i + 1])
    else redis.call('SET', KEYS[i], ARGV[i + 1], 'PX', ARGV[2]) end
    if ARGV[i] ~= '' then entries[#entries + 1] = ARGV[i] end
    lift(KEYS[i + 1], ARGV[i + 1])
  end
  landed[#landed + 1] = go and 1 or 0
end
ix_add_many(KEYS[2], entries)
return landed
"""
)
# KEYS: epoch, index, key, tombstone; ARGV: epoch, member, tombstone value, px. A delete: the
# key goes unless it holds a newer version (serializers.buries), and its tombstone stays for px
# unless a newer one is there, so no older copy or repair lands after it.
_BURY = (
    INDEX_LUA
    + _VERSIONS
    + _CHECK_WRITE
    + """
local theirs = env_version(ARGV[3])
local gone = 0
if redis.call('EXISTS', KEYS[3]) == 1 then
  local keep = false
  if redis.call('TYPE', KEYS[3]).ok == 'string' then
    local held = env_version(redis.call('GETRANGE', KEYS[3], 0, HEAD_END))
    keep = held ~= '' and held >= theirs
  end
  if not keep then
    ix_rem(KEYS[2], ARGV[2])
    gone = redis.call('DEL', KEYS[3])
  end
end
local tomb = redis.call('GET', KEYS[4])
if not tomb or env_version(tomb) < theirs then
  redis.call('SET', KEYS[4], ARGV[3], 'PX', ARGV[4])
end
return gone
"""
)
# KEYS: epoch, key; ARGV: epoch, delta. memcached's rules: missing stays missing, stops at 0,
# and only digits count (a stored -5 is refused as memcached refuses it, not clamped to 0).
_INCR = (
    _CHECK_WRITE
    + """
local v = redis.call('GET', KEYS[2])
if not v then return false end
if not string.find(v, '^%d+$') then return redis.error_reply('ERR value is not an integer') end
local n = redis.call('INCRBY', KEYS[2], ARGV[2])
if n < 0 then redis.call('SET', KEYS[2], 0, 'KEEPTTL'); return 0 end
return n
"""
)
# KEYS: epoch, key; ARGV: epoch, px.
_TOUCH = _CHECK_WRITE + "return redis.call('PEXPIRE', KEYS[2], ARGV[2])"
# KEYS: epoch, view; ARGV: epoch, view JSON, replace. Never moves a server back; returns its
# epoch after, or minus it when another view holds that same epoch (and replace is '0').
_PUBLISH = """
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) < current then return current end
if tonumber(ARGV[1]) == current and ARGV[3] == '0' and redis.call('GET', KEYS[2]) ~= ARGV[2] then
  return -current
end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], ARGV[2])
return tonumber(ARGV[1])
"""


# A write that also reads the spread markers of its keys (hot-key copies) after writing, in the
# same script: the markers are the last KEYS, their count the last ARGV. They are taken off
# KEYS and ARGV before the write's own body runs, so the body reads them as it always does.
_MARKED_HEAD = """
local marked = tonumber(ARGV[#ARGV])
ARGV[#ARGV] = nil
local markers = {}
for i = #KEYS, #KEYS - marked + 1, -1 do
  table.insert(markers, 1, KEYS[i])
  KEYS[i] = nil
end
local answer = (function()
"""
_MARKED_TAIL = """
end)()
if type(answer) == 'table' and answer.err then return answer end
return {answer, redis.call('MGET', unpack(markers))}
"""
MARKED = "+markers"
_WRITES = {
    "set": _SET,
    "add": _ADD,
    "delete": _DELETE,
    "incr": _INCR,
    "touch": _TOUCH,
    "repair": _REPAIR,
    "bury": _BURY,
}
SCRIPTS = {
    **_WRITES,
    "publish": _PUBLISH,
    "sweep": SWEEP_SCRIPT,
    **{name + MARKED: _MARKED_HEAD + body + _MARKED_TAIL for name, body in _WRITES.items()},
}


def ttl_of_pttl(pttl: object) -> float | None:
    """Return the seconds a Redis ``PTTL`` reply leaves (-1 no expiry, -2 missing: None)."""
    left = int(str(pttl))
    return None if left < 0 else max(left, 1) / 1000


def px_argument(ttl_s: float | None) -> str:
    return "" if ttl_s is None else str(redis_px(ttl_s, time.time()))


@dataclass(frozen=True, slots=True)
class Script:
    """One fenced round trip on Redis: a script of ``SCRIPTS`` with its keys and arguments."""

    name: str
    keys: tuple[bytes, ...]
    args: tuple[object, ...]


def redis_scripts(
    op: str, args: Sequence[Any], epoch: int, point_of: PointOf, *, index_keys: bool = True
) -> list[Script]:
    """Return the scripts that run backend call `op(*args)` fenced at `epoch` on Redis.

    Writes record each key in the index unless `index_keys` is off; a delete always drops the
    key's entry. Sync and async Redis backends both send exactly these scripts;
    :func:`redis_answer` reads their replies.
    """

    def member_of(key: bytes) -> bytes:
        return member(point_of(key), key) if index_keys else b""

    if op == "get_many":  # no script (RedisServer's read): one MGET of the epoch and the keys
        return [Script("MGET", (EPOCH_KEY, *args[0]), ())]
    if op == "set_many":
        items, ttl_s = args
        values: list[object] = [epoch, px_argument(ttl_s)]
        for key, value in items.items():
            values += [member_of(key), value]
        tombs = [tombstone_key(key) for key in items]
        return [Script("set", (EPOCH_KEY, INDEX_KEY, *items, *tombs), tuple(values))]
    if op == "add":
        key, value, ttl_s = args
        values = [epoch, px_argument(ttl_s), member_of(key), value]
        return [Script("add", (EPOCH_KEY, INDEX_KEY, key, tombstone_key(key)), tuple(values))]
    if op == "delete":
        (key,) = args
        return [Script("delete", (EPOCH_KEY, INDEX_KEY, key), (epoch, member(point_of(key), key)))]
    if op in ("repair", "repair_many"):  # one script: a key, or a batch
        items, ttl_s = ({args[0]: args[1]}, args[2]) if op == "repair" else args
        touched: list[bytes] = [EPOCH_KEY, INDEX_KEY]
        values = [epoch, px_argument(ttl_s)]
        for key, value in items.items():
            touched += [key, tombstone_key(key)]
            values += [member_of(key), value]
        return [Script("repair", tuple(touched), tuple(values))]
    if op == "bury":
        key, tomb, ttl_s = args
        guarded = (EPOCH_KEY, INDEX_KEY, key, tombstone_key(key))
        return [
            Script("bury", guarded, (epoch, member(point_of(key), key), tomb, px_argument(ttl_s)))
        ]
    if op == "bury_many":
        tombstones, ttl_s = args
        return [
            script
            for key, tomb in tombstones.items()
            for script in redis_scripts("bury", (key, tomb, ttl_s), epoch, point_of)
        ]
    if op == "sweep_index":  # unfenced: it only drops the entries of keys that are gone
        cursor, batch = args
        return [Script("sweep", (INDEX_KEY,), (cursor, batch))]
    if op == "incr":
        key, delta = args
        return [Script("incr", (EPOCH_KEY, key), (epoch, delta))]
    if op == "touch":
        key, ttl_s = args
        return [Script("touch", (EPOCH_KEY, key), (epoch, px_argument(ttl_s)))]
    if op == "ttl_left":  # unfenced: it only tells a split counter's parts how long to live
        return [Script("PTTL", (args[0],), ())]
    raise UnsupportedError(f"no fenced Redis form of {op!r}")


def with_markers(scripts: Sequence[Script], markers: Sequence[bytes]) -> Script | None:
    """Return the one script that runs `scripts` and then reads `markers`; None if none does.

    Only a write made of one script has such a form (its answer and the markers' values come
    back together, as ``[answer, [marker or nil, …]]``).
    """
    if len(scripts) != 1 or scripts[0].name not in _WRITES or not markers:
        return None
    [script] = scripts
    return Script(script.name + MARKED, (*script.keys, *markers), (*script.args, len(markers)))


def redis_answer(
    op: str, args: Sequence[Any], answers: list[Any], *, sent: int = 0, url: object = ""
) -> Any:
    """Return what backend call `op(*args)` answers, from its scripts' replies.

    A read (``get_many``) checks the epoch its MGET found, as the read script did: a server
    that holds a newer epoch than the `sent` one refuses (it names `url`).

    :raises StaleViewError: when a read's server holds a newer epoch than `sent`
    """
    if op == "get_many":
        [(held, *values)] = answers
        current = epoch_value(held)
        if current > sent:
            raise StaleViewError(str(url), current, sent)
        if None in values:
            return {k: v for k, v in zip(args[0], values, strict=True) if v is not None}
        return dict(zip(args[0], values, strict=True))
    if op == "bury_many":
        return [key for key, went in zip(args[0], answers, strict=True) if went]
    [answer] = answers
    if op == "set_many":
        return None
    if op == "repair":
        return bool(answer[0])
    if op == "repair_many":  # the keys that landed
        return [key for key, went in zip(args[0], answer, strict=True) if went]
    if op == "ttl_left":
        return ttl_of_pttl(answer)
    if op == "incr":
        return None if answer is None else int(answer)
    if op == "sweep_index":
        return int(answer[0]), bytes(answer[1])
    return bool(answer)


def redis_error(error: Exception, url: ServerURL, script: Script) -> Exception:
    """Return the ringkit error for a failed script (a refusal, a bad counter, a failure)."""
    text = str(error)
    if text.startswith("STALEVIEW "):
        sent = int(str(script.args[0]))  # every fenced script takes the epoch first
        return StaleViewError(str(url), int(text.split()[1]), sent)
    if text.startswith("NOEPOCH"):
        return EpochLostError(str(url), int(str(script.args[0])))
    if any(sign in text for sign in ("not an integer", "would overflow", "WRONGTYPE")):
        # A counter that is not one (a list stored by another program is WRONGTYPE to GET).
        return not_integer(script.keys[-1] if script.keys else b"")
    return server_failed(url, error)
