"""Fenced backends: every call carries the client's epoch; a server that has moved on refuses it.

Each server keeps the epoch of the newest cluster view it was given under the reserved key
``ringkit:epoch`` (and the view itself under ``ringkit:view``). A fenced backend sends the
epoch its client routed the call with; when the server's epoch is newer, the server refuses the
call and the client gets :class:`StaleViewError`, refreshes its view and retries. On Redis the
check and the write run in one Lua script, so they are atomic: no write routed by an old view
can land after the coordinator has moved the server on. Every Redis write also records the key
in the server's index (:mod:`ringkit.cluster.index`), in the same script.

On the memory backend the check holds a process-wide lock per store, which is atomic for every
client in the process. On memcached it is best effort: the epoch is read, then the write is sent,
and a coordinator can move the server on in between (memcached has no scripts). See
docs/rebalance.md.

The epoch a call was routed by travels in a context variable (:func:`routed_by`), set by the
client's driver around each backend call: it is per thread and per asyncio task, so the plain
:class:`~ringkit.cluster.backends.Backend` interface stays the same. The sync and the async
fenced backends share everything but the transport: the Lua scripts, the encoding of each call
into script arguments (:func:`redis_scripts`) and the decoding of the answers, and the epoch
gate of memcached (:class:`EpochGate`). Keys starting with ``ringkit:`` are reserved for this
bookkeeping (:mod:`ringkit.cluster.keys`).

>>> member(5, b"k").hex()
'00000000000000056b'
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from ringkit.cluster.backends import Backend, MemoryBackend, RedisBackend, server_failed
from ringkit.cluster.expiry import redis_px
from ringkit.cluster.index import (
    SWEEP_SCRIPT,
    Index,
    IndexSweep,
    RedisIndex,
    ScanIndex,
    member,
)
from ringkit.cluster.keys import (
    AUDIT_KEY,
    CHECKPOINT_KEY,
    EPOCH_KEY,
    INDEX_KEY,
    RESERVED_PREFIX,
    VIEW_KEY,
    tombstone_key,
)
from ringkit.cluster.memory import _not_integer
from ringkit.cluster.urls import ServerURL
from ringkit.errors import (
    BackendError,
    EpochLostError,
    StaleViewError,
    UnsupportedError,
    ViewConflictError,
)

if TYPE_CHECKING:
    from ringkit.cluster.aio_backends import AsyncBackend

__all__ = [
    "AUDIT_KEY",
    "CHECKPOINT_KEY",
    "EPOCH_KEY",
    "RESERVED_PREFIX",
    "VIEW_KEY",
    "AsyncFencedBackend",
    "EpochGate",
    "FencedBackend",
    "Script",
    "StaleViewError",
    "ViewConflictError",
    "fence",
    "fence_async",
    "member",
    "redis_scripts",
    "routed_by",
    "routed_epoch",
]

T = TypeVar("T")
_CHUNK = 4000
# memcached has no scripts: its fence is a read of the epoch, done at most this often.
MEMCACHED_FENCE_CHECK_S = 0.5
EpochOf = Callable[[], int]
PointOf = Callable[[bytes], int]
_ROUTED: ContextVar[int | None] = ContextVar("ringkit_routed_epoch", default=None)


class routed_by:  # used as a function: ``with routed_by(epoch):``
    """Send the backend calls made inside the block with `epoch` (this thread or task only).

    A class rather than ``@contextmanager``: it runs around every backend call.
    """

    __slots__ = ("_epoch", "_token")

    def __init__(self, epoch: int) -> None:
        self._epoch = epoch

    def __enter__(self) -> None:
        self._token = _ROUTED.set(self._epoch)

    def __exit__(self, *exc_info: object) -> None:
        _ROUTED.reset(self._token)


def routed_epoch(fallback: EpochOf) -> EpochOf:
    """Return an `epoch_of` that reads :func:`routed_by`'s epoch, else calls `fallback`."""

    def epoch_of() -> int:
        epoch = _ROUTED.get()
        return fallback() if epoch is None else epoch

    return epoch_of


_CHECK = """
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if current > tonumber(ARGV[1]) then return redis.error_reply('STALEVIEW ' .. current) end
"""
# Writes also refuse a server that lost its epoch (restarted empty) while the client routes by
# a published view: it would take writes that up-to-date clients never read (issue 16, item 6).
_CHECK_WRITE = (
    _CHECK
    + """
if current == 0 and tonumber(ARGV[1]) >= 1 then return redis.error_reply('NOEPOCH') end
"""
)
# KEYS: epoch, k1..kn; ARGV: epoch.
_READ = _CHECK + "return redis.call('MGET', unpack(KEYS, 2))"
# KEYS: epoch, index, k1..kn; ARGV: epoch, px ('' = none), then member_i, value_i pairs
# (an empty member: do not index).
_SET = (
    _CHECK_WRITE
    + """
for i = 3, #KEYS do
  local value = ARGV[2 * i - 2]
  if ARGV[2] == '' then redis.call('SET', KEYS[i], value)
  else redis.call('SET', KEYS[i], value, 'PX', ARGV[2]) end
  if ARGV[2 * i - 3] ~= '' then redis.call('ZADD', KEYS[2], 0, ARGV[2 * i - 3]) end
end
return #KEYS - 2
"""
)
# KEYS: epoch, index, key; ARGV: epoch, px, member, value.
_ADD = (
    _CHECK_WRITE
    + """
local done
if ARGV[2] == '' then done = redis.call('SET', KEYS[3], ARGV[4], 'NX')
else done = redis.call('SET', KEYS[3], ARGV[4], 'NX', 'PX', ARGV[2]) end
if not done then return 0 end
if ARGV[3] ~= '' then redis.call('ZADD', KEYS[2], 0, ARGV[3]) end
return 1
"""
)
# KEYS: epoch, index, key; ARGV: epoch, member.
_DELETE = _CHECK_WRITE + "redis.call('ZREM', KEYS[2], ARGV[2]) return redis.call('DEL', KEYS[3])"
# KEYS: epoch, index, key, tombstone; ARGV: epoch, px, member, value (an envelope). Read
# repair as a conditional write (serializers.supersedes): lands where the key is absent and
# not deleted at a newer version, or holds an older ringkit version; never over a newer one.
_REPAIR = (
    _CHECK_WRITE
    + """
local ours = string.sub(ARGV[4], 2, 9)
if redis.call('EXISTS', KEYS[3]) == 1 then
  if redis.call('TYPE', KEYS[3]).ok ~= 'string' then return 0 end
  local head = redis.call('GETRANGE', KEYS[3], 0, 8)
  if #head < 9 or string.byte(head, 1) ~= 254 or string.sub(head, 2, 9) >= ours then
    return 0
  end
else
  local tomb = redis.call('GET', KEYS[4])
  if tomb and string.sub(tomb, 2, 9) >= ours then return 0 end
end
if ARGV[2] == '' then redis.call('SET', KEYS[3], ARGV[4])
else redis.call('SET', KEYS[3], ARGV[4], 'PX', ARGV[2]) end
if ARGV[3] ~= '' then redis.call('ZADD', KEYS[2], 0, ARGV[3]) end
return 1
"""
)
# KEYS: epoch, index, key, tombstone; ARGV: epoch, member, tombstone value, px. A delete: the
# key goes unless it holds a newer version (serializers.buries), and its tombstone stays for px
# unless a newer one is there, so no older copy or repair lands after it.
_BURY = (
    _CHECK_WRITE
    + """
local theirs = string.sub(ARGV[3], 2, 9)
local gone = 0
if redis.call('EXISTS', KEYS[3]) == 1 then
  local keep = false
  if redis.call('TYPE', KEYS[3]).ok == 'string' then
    local head = redis.call('GETRANGE', KEYS[3], 0, 8)
    keep = #head == 9 and string.byte(head, 1) == 254 and string.sub(head, 2, 9) >= theirs
  end
  if not keep then
    redis.call('ZREM', KEYS[2], ARGV[2])
    gone = redis.call('DEL', KEYS[3])
  end
end
local tomb = redis.call('GET', KEYS[4])
if not tomb or string.sub(tomb, 2, 9) < theirs then
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


_SCRIPTS = {
    "read": _READ,
    "set": _SET,
    "add": _ADD,
    "delete": _DELETE,
    "incr": _INCR,
    "touch": _TOUCH,
    "publish": _PUBLISH,
    "repair": _REPAIR,
    "bury": _BURY,
    "sweep": SWEEP_SCRIPT,
}


def _px(ttl_s: float | None) -> str:
    return "" if ttl_s is None else str(redis_px(ttl_s, time.time()))


def _epoch_value(found: bytes | None) -> int:
    return int(found) if found else 0


@dataclass(frozen=True, slots=True)
class Script:
    """One fenced round trip on Redis: a script of ``_SCRIPTS`` with its keys and arguments."""

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

    if op == "get_many":
        keys = list(args[0])
        # Lua's unpack() has a stack limit of about 8000 values: read in chunks below it.
        return [
            Script("read", (EPOCH_KEY, *keys[at : at + _CHUNK]), (epoch,))
            for at in range(0, len(keys), _CHUNK)
        ]
    if op == "set_many":
        items, ttl_s = args
        values: list[object] = [epoch, _px(ttl_s)]
        for key, value in items.items():
            values += [member_of(key), value]
        return [Script("set", (EPOCH_KEY, INDEX_KEY, *items), tuple(values))]
    if op == "add":
        key, value, ttl_s = args
        values = [epoch, _px(ttl_s), member_of(key), value]
        return [Script("add", (EPOCH_KEY, INDEX_KEY, key), tuple(values))]
    if op == "delete":
        (key,) = args
        return [Script("delete", (EPOCH_KEY, INDEX_KEY, key), (epoch, member(point_of(key), key)))]
    if op == "repair":
        key, value, ttl_s = args
        guarded = (EPOCH_KEY, INDEX_KEY, key, tombstone_key(key))
        return [Script("repair", guarded, (epoch, _px(ttl_s), member_of(key), value))]
    if op == "bury":
        key, tomb, ttl_s = args
        guarded = (EPOCH_KEY, INDEX_KEY, key, tombstone_key(key))
        return [Script("bury", guarded, (epoch, member(point_of(key), key), tomb, _px(ttl_s)))]
    if op == "sweep_index":  # unfenced: it only drops the entries of keys that are gone
        cursor, batch = args
        return [Script("sweep", (INDEX_KEY,), (cursor, batch))]
    if op == "incr":
        key, delta = args
        return [Script("incr", (EPOCH_KEY, key), (epoch, delta))]
    if op == "touch":
        key, ttl_s = args
        return [Script("touch", (EPOCH_KEY, key), (epoch, _px(ttl_s)))]
    raise UnsupportedError(f"no fenced Redis form of {op!r}")


def redis_answer(op: str, args: Sequence[Any], answers: list[Any]) -> Any:
    """Return what backend call `op(*args)` answers, from its scripts' replies."""
    if op == "get_many":
        keys = list(args[0])
        found: dict[bytes, bytes] = {}
        for at, values in zip(range(0, len(keys), _CHUNK), answers, strict=True):
            chunk = keys[at : at + _CHUNK]
            found.update((k, v) for k, v in zip(chunk, values, strict=True) if v is not None)
        return found
    [answer] = answers
    if op == "set_many":
        return None
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
        return _not_integer(script.keys[-1] if script.keys else b"")
    return server_failed(url, error)


class EpochGate:
    """memcached's best-effort fence: the server's epoch, read again at most every 0.5 s.

    A server seen ahead of the sent epoch is asked again at once, so a refresh is not refused
    from a stale cache; so is one seen without an epoch, so a re-stamped server is let in.
    """

    def __init__(self) -> None:
        self.known = 0
        self.checked_at = -MEMCACHED_FENCE_CHECK_S

    def due(self, sent: int, now: float) -> bool:
        """Return True when the server's epoch should be read before a call sent at `sent`."""
        stale = now - self.checked_at >= MEMCACHED_FENCE_CHECK_S
        return stale or self.known > sent or (self.known == 0 and sent >= 1)

    def learn(self, found: bytes | None, now: float) -> None:
        """Remember the epoch the server holds (its stored bytes, or None)."""
        self.known, self.checked_at = _epoch_value(found), now

    def check(self, sent: int, url: ServerURL, *, write: bool = True) -> None:
        """Raise StaleViewError when the server is known to be past `sent`.

        :raises EpochLostError: on a `write` routed by a published view (`sent` >= 1) when the
            server holds no epoch (it restarted empty)
        """
        check_epoch(self.known, sent, url, write=write)


def check_epoch(current: int, sent: int, url: ServerURL, *, write: bool) -> None:
    """Refuse a call routed by epoch `sent` on a server at epoch `current` (0: none).

    :raises StaleViewError: when the server is past `sent`
    :raises EpochLostError: on a `write` when the server has no epoch and `sent` >= 1
    """
    if current > sent:
        raise StaleViewError(str(url), current, sent)
    if write and current == 0 and sent >= 1:
        raise EpochLostError(str(url), sent)


class _Fenced:
    """What both fenced forms hold: the inner backend, the routed epoch, the point of a key."""

    def __init__(self, inner: Any, epoch_of: EpochOf, point_of: PointOf) -> None:
        self.inner = inner
        self.url: ServerURL = inner.url
        self.epoch_of = epoch_of
        self.point_of = point_of
        self.index_keys = True
        self._gate = EpochGate()
        self.sweep = IndexSweep()  # the bounded index sweep that rides on this client's writes

    def sweep_due(self, op: str, args: Sequence[Any]) -> list[Script]:
        """Return the index sweep step to run on Redis after write `op(*args)`, if one is due.

        One step of the bounded sweep (:class:`~ringkit.cluster.index.IndexSweep`) at most.
        """
        count = self.sweep.due(op, args) if self.index_keys else 0
        return [Script("sweep", (INDEX_KEY,), (self.sweep.cursor, count))] if count else []


class FencedBackend(_Fenced):
    """A backend whose every call carries an epoch; also the coordinator's handle on a server.

    Serving: the :class:`~ringkit.cluster.backends.Backend` methods; with `index_keys` off,
    Redis writes skip the key index (the rebalance's SCAN finds those keys). Coordinating:
    ``server_epoch``, ``read_view``, ``publish``, ``append_audit``, ``read_checkpoint``,
    ``write_checkpoint`` and ``index`` (the key index, for range reads).
    """

    inner: Backend

    def __init__(self, inner: Backend, epoch_of: EpochOf, point_of: PointOf) -> None:
        super().__init__(inner, epoch_of, point_of)
        self._lock = _lock_for(str(inner.url))
        # The memory store is in-process: its epoch is one dict read, no round trip.
        self._store = inner.store if isinstance(inner, MemoryBackend) else None

    def serve(self, op: str, *args: Any) -> Any:
        """Run backend call `op(*args)` fenced by the routed epoch (check, then act, locked)."""
        with self._lock:
            self._check(self.epoch_of(), write=op != "get_many")
            return getattr(self.inner, op)(*args)

    def _check(self, sent: int, *, write: bool) -> None:
        if self._store is not None:
            entry = self._store.data.get(EPOCH_KEY)
            check_epoch(_epoch_value(entry[0] if entry else None), sent, self.url, write=write)
            return
        now = time.monotonic()
        if self._gate.due(sent, now):
            self._gate.learn(self.inner.get_many([EPOCH_KEY]).get(EPOCH_KEY), now)
        self._gate.check(sent, self.url, write=write)

    def get_many(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        result: dict[bytes, bytes] = self.serve("get_many", keys)
        return result

    def set_many(self, items: Mapping[bytes, bytes], ttl_s: float | None) -> None:
        self.serve("set_many", items, ttl_s)

    def add(self, key: bytes, value: bytes, ttl_s: float | None) -> bool:
        return bool(self.serve("add", key, value, ttl_s))

    def delete(self, key: bytes) -> bool:
        return bool(self.serve("delete", key))

    def repair(self, key: bytes, value: bytes, ttl_s: float | None) -> bool:
        """Store envelope `value` only where it supersedes what the server holds."""
        return bool(self.serve("repair", key, value, ttl_s))

    def bury(self, key: bytes, tombstone: bytes, ttl_s: float) -> bool:
        """Delete `key`, keeping `tombstone` beside it for `ttl_s` (a delete while data moves)."""
        return bool(self.serve("bury", key, tombstone, ttl_s))

    def incr(self, key: bytes, delta: int) -> int | None:
        result: int | None = self.serve("incr", key, delta)
        return result

    def touch(self, key: bytes, ttl_s: float) -> bool:
        return bool(self.serve("touch", key, ttl_s))

    def sweep_index(self, cursor: bytes, batch: int) -> tuple[int, bytes]:
        """Drop the index entries of vanished keys among `batch` from `cursor` (Redis only).

        Returns the entries removed and the next cursor (b"" at the end); (0, b"") where the
        server keeps no index (memory, memcached).
        """
        return 0, b""

    def ping(self) -> None:
        self.inner.ping()

    def flush(self) -> None:
        self.inner.flush()

    def close(self) -> None:
        self.inner.close()

    # -- coordinating --------------------------------------------------------------------------

    def server_epoch(self) -> int:
        """Return the epoch of the newest view this server was given (0 if none)."""
        return _epoch_value(self.inner.get_many([EPOCH_KEY]).get(EPOCH_KEY))

    def read_view(self) -> bytes | None:
        """Return the JSON of the newest view this server holds, or None."""
        return self.inner.get_many([VIEW_KEY]).get(VIEW_KEY)

    def publish(self, epoch: int, view_json: bytes, *, replace: bool = False) -> int:
        """Give the server view `epoch` unless it holds a newer one; return its epoch after.

        A different view at the same epoch is kept unless `replace` (a resume settles it).

        :raises ViewConflictError: when the server holds another view at `epoch`
        """
        with self._lock:
            current = self.server_epoch()
            if epoch == current and not replace and self.read_view() != view_json:
                raise ViewConflictError.on_server(str(self.url), epoch)
            if epoch >= current:
                self.inner.set_many({EPOCH_KEY: str(epoch).encode(), VIEW_KEY: view_json}, None)
                return epoch
            return current

    def append_audit(self, line: bytes) -> None:
        """Append one line (a JSON record) to the server's audit log."""
        with self._lock:
            old = self.inner.get_many([AUDIT_KEY]).get(AUDIT_KEY, b"")
            self.inner.set_many({AUDIT_KEY: old + line + b"\n"}, None)

    def read_audit(self) -> list[bytes]:
        """Return the audit log's lines, oldest first."""
        return self.inner.get_many([AUDIT_KEY]).get(AUDIT_KEY, b"").splitlines()

    def read_checkpoint(self) -> bytes | None:
        """Return the rebalance checkpoint stored on this server, or None."""
        return self.inner.get_many([CHECKPOINT_KEY]).get(CHECKPOINT_KEY)

    def write_checkpoint(self, data: bytes | None) -> None:
        """Store (or, with None, drop) the rebalance checkpoint on this server."""
        if data is None:
            self.inner.delete(CHECKPOINT_KEY)
        else:
            self.inner.set_many({CHECKPOINT_KEY: data}, None)

    @property
    def index(self) -> Index:
        """The key index of this server (a scan of the store on the memory backend).

        :raises UnsupportedError: on memcached, which cannot list its keys
        """
        if isinstance(self.inner, MemoryBackend):
            return ScanIndex(self.inner.store, self.point_of, self.epoch_of)
        raise UnsupportedError(
            f"server {self.url} cannot list its keys (memcached); online rebalancing needs "
            f"redis:// or memory:// servers"
        )


class FencedRedis(FencedBackend):
    """The Redis form: check and act in one Lua script, and index every key written."""

    def __init__(self, inner: RedisBackend, epoch_of: EpochOf, point_of: PointOf) -> None:
        super().__init__(inner, epoch_of, point_of)
        import redis

        self._redis: Any = inner._client
        self._errors: tuple[type[Exception], ...] = (redis.RedisError, OSError)
        self._scripts = {
            name: self._redis.register_script(source) for name, source in _SCRIPTS.items()
        }
        self._index = RedisIndex(self._redis, self.point_of, self.epoch_of, self._run)

    def _run(self, script: Any, keys: Sequence[bytes], args: Sequence[object]) -> Any:
        """Run a script (by name, or a registered one) or a plain command; map its errors."""
        try:
            arguments: list[Any] = list(args)
            if not isinstance(script, str):
                return script(keys=keys, args=arguments)
            if script in self._scripts:
                return self._scripts[script](keys=keys, args=arguments)
            return self._redis.execute_command(script, *keys, *args)
        except self._errors as error:
            raise redis_error(error, self.url, Script("", tuple(keys), tuple(args))) from None

    def serve(self, op: str, *args: Any) -> Any:
        sent = self.epoch_of()
        scripts = redis_scripts(op, args, sent, self.point_of, index_keys=self.index_keys)
        answer = redis_answer(op, args, [self._run(s.name, s.keys, s.args) for s in scripts])
        for step in self.sweep_due(op, args):
            # Best effort: the write was acknowledged; a failed sweep step changes nothing.
            with contextlib.suppress(BackendError):
                self.sweep.advance(self._run(step.name, step.keys, step.args))
        return answer

    def sweep_index(self, cursor: bytes, batch: int) -> tuple[int, bytes]:
        result: tuple[int, bytes] = self.serve("sweep_index", cursor, batch)
        return result

    def publish(self, epoch: int, view_json: bytes, *, replace: bool = False) -> int:
        args = [epoch, view_json, "1" if replace else "0"]
        held = int(self._run("publish", [EPOCH_KEY, VIEW_KEY], args))
        if held < 0:
            raise ViewConflictError.on_server(str(self.url), epoch)
        return held

    def append_audit(self, line: bytes) -> None:
        self._run("RPUSH", [AUDIT_KEY], [line])

    def read_audit(self) -> list[bytes]:
        lines: list[bytes] = self._run("LRANGE", [AUDIT_KEY], [0, -1])
        return lines

    @property
    def index(self) -> Index:
        return self._index


_LOCKS: dict[str, threading.RLock] = {}
_LOCKS_LOCK = threading.Lock()


def _lock_for(url: str) -> threading.RLock:
    with _LOCKS_LOCK:
        lock = _LOCKS.get(url)
        if lock is None:
            lock = _LOCKS[url] = threading.RLock()
        return lock


def fence(backend: Backend, epoch_of: EpochOf, point_of: PointOf) -> FencedBackend:
    """Return `backend` fenced by `epoch_of` (the epoch each call was routed with)."""
    if isinstance(backend, FencedBackend):
        backend = backend.inner
    if isinstance(backend, RedisBackend):
        return FencedRedis(backend, epoch_of, point_of)
    return FencedBackend(backend, epoch_of, point_of)


# -- async ---------------------------------------------------------------------------------------


_UNFENCED = frozenset({"ping", "flush", "read_view", "publish"})


class AsyncFencedBackend(_Fenced):
    """The async form of :class:`FencedBackend`: ``await serve(op, *args)`` and ``read_view``.

    Memory stores are served by the sync fenced backend (no I/O, same process-wide lock);
    memcached reads its epoch through the same :class:`EpochGate`; Redis sends the same
    scripts (:func:`redis_scripts`) through ``redis.asyncio``.
    """

    inner: AsyncBackend

    def __init__(self, inner: AsyncBackend, epoch_of: EpochOf, point_of: PointOf) -> None:
        from ringkit.cluster.aio_backends import AsyncMemoryBackend, AsyncRedisBackend

        super().__init__(inner, epoch_of, point_of)
        self._memory = (
            FencedBackend(inner._sync, epoch_of, point_of)
            if isinstance(inner, AsyncMemoryBackend)
            else None
        )
        self._scripts: dict[str, Any] = {}
        if isinstance(inner, AsyncRedisBackend):
            client = inner._client
            self._scripts = {name: client.register_script(src) for name, src in _SCRIPTS.items()}

    async def serve(self, op: str, *args: Any) -> Any:
        """Await backend call `op(*args)` fenced by the routed epoch (ping, flush: unfenced)."""
        if op in _UNFENCED:
            return await getattr(self, op)(*args)
        if op == "sweep_index" and not self._scripts:
            return 0, b""  # no index on memory or memcached
        if self._memory is not None:
            self._memory.index_keys = self.index_keys
            return self._memory.serve(op, *args)
        sent = self.epoch_of()
        if self._scripts:
            scripts = redis_scripts(op, args, sent, self.point_of, index_keys=self.index_keys)
            answer = redis_answer(op, args, [await self._run(script) for script in scripts])
            for step in self.sweep_due(op, args):
                with contextlib.suppress(BackendError):  # best effort, as in the sync form
                    self.sweep.advance(await self._run(step))
            return answer
        now = time.monotonic()
        if self._gate.due(sent, now):
            self._gate.learn((await self.inner.get_many([EPOCH_KEY])).get(EPOCH_KEY), now)
        self._gate.check(sent, self.url, write=op != "get_many")
        return await getattr(self.inner, op)(*args)

    async def _run(self, script: Script) -> Any:
        import redis

        try:
            return await self._scripts[script.name](keys=list(script.keys), args=list(script.args))
        except (TimeoutError, redis.RedisError, OSError) as error:
            raise redis_error(error, self.url, script) from None

    async def read_view(self) -> bytes | None:
        """Return the JSON of the newest view this server holds, or None."""
        return (await self.inner.get_many([VIEW_KEY])).get(VIEW_KEY)

    async def publish(self, epoch: int, view_json: bytes, *, replace: bool = False) -> int:
        """Give the server view `epoch` unless it holds a newer one (see FencedBackend.publish).

        :raises ViewConflictError: when the server holds another view at `epoch`
        """
        if self._memory is not None:
            return self._memory.publish(epoch, view_json, replace=replace)
        if self._scripts:
            args = (epoch, view_json, "1" if replace else "0")
            held = int(await self._run(Script("publish", (EPOCH_KEY, VIEW_KEY), args)))
            if held < 0:
                raise ViewConflictError.on_server(str(self.url), epoch)
            return held
        # memcached: best effort, like the sync form (no scripts).
        found = await self.inner.get_many([EPOCH_KEY, VIEW_KEY])
        current = _epoch_value(found.get(EPOCH_KEY))
        if epoch == current and not replace and found.get(VIEW_KEY) != view_json:
            raise ViewConflictError.on_server(str(self.url), epoch)
        if epoch >= current:
            await self.inner.set_many({EPOCH_KEY: str(epoch).encode(), VIEW_KEY: view_json}, None)
            return epoch
        return current

    async def ping(self) -> None:
        await self.inner.ping()

    async def flush(self) -> None:
        await self.inner.flush()

    async def close(self) -> None:
        await self.inner.close()


def fence_async(backend: AsyncBackend, epoch_of: EpochOf, point_of: PointOf) -> AsyncFencedBackend:
    """Return async `backend` fenced by `epoch_of` (the epoch each call was routed with)."""
    return AsyncFencedBackend(backend, epoch_of, point_of)
