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

Keys starting with ``ringkit:`` are reserved for this bookkeeping.

>>> member(5, b"k").hex()
'00000000000000056b'
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from ringkit.cluster.backends import Backend, MemoryBackend, RedisBackend
from ringkit.cluster.index import Index, RedisIndex, ScanIndex, member
from ringkit.cluster.urls import ServerURL
from ringkit.errors import BackendError, RingkitError, UnsupportedError

__all__ = [
    "AUDIT_KEY",
    "CHECKPOINT_KEY",
    "EPOCH_KEY",
    "RESERVED_PREFIX",
    "VIEW_KEY",
    "FencedBackend",
    "StaleViewError",
    "ViewConflictError",
    "fence",
    "member",
]

T = TypeVar("T")
RESERVED_PREFIX = b"ringkit:"
EPOCH_KEY = b"ringkit:epoch"
VIEW_KEY = b"ringkit:view"
AUDIT_KEY = b"ringkit:audit"
CHECKPOINT_KEY = b"ringkit:checkpoint"
_CHUNK = 4000
# memcached has no scripts: its fence is a read of the epoch, done at most this often.
MEMCACHED_FENCE_CHECK_S = 0.5
EpochOf = Callable[[], int]
PointOf = Callable[[bytes], int]


class StaleViewError(RingkitError, RuntimeError):
    """A server refused a call routed by an older view; `epoch` is the server's epoch."""

    def __init__(self, server: str, epoch: int, sent: int) -> None:
        super().__init__(
            f"server {server} is at epoch {epoch}, the call was routed by epoch {sent}; "
            f"refresh the cluster view"
        )
        self.server = server
        self.epoch = epoch


class ViewConflictError(RingkitError, RuntimeError):
    """A server holds a different view at the same epoch: two coordinators raced."""

    def __init__(self, server: str, epoch: int) -> None:
        super().__init__(
            f"server {server} holds another view at epoch {epoch}: run one coordinator at a "
            f"time; resume (or roll back) settles the cluster on one view"
        )
        self.server = server
        self.epoch = epoch


_CHECK = """
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if current > tonumber(ARGV[1]) then return redis.error_reply('STALEVIEW ' .. current) end
"""
# KEYS: epoch, k1..kn; ARGV: epoch.
_READ = _CHECK + "return redis.call('MGET', unpack(KEYS, 2))"
# KEYS: epoch, index, k1..kn; ARGV: epoch, px ('' = none), then member_i, value_i pairs
# (an empty member: do not index).
_SET = (
    _CHECK
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
    _CHECK
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
_DELETE = _CHECK + "redis.call('ZREM', KEYS[2], ARGV[2]) return redis.call('DEL', KEYS[3])"
# KEYS: epoch, key; ARGV: epoch, delta. memcached's rules: missing stays missing, stops at 0.
_INCR = (
    _CHECK
    + """
if redis.call('EXISTS', KEYS[2]) == 0 then return false end
local n = redis.call('INCRBY', KEYS[2], ARGV[2])
if n < 0 then redis.call('SET', KEYS[2], 0, 'KEEPTTL'); return 0 end
return n
"""
)
# KEYS: epoch, key; ARGV: epoch, px.
_TOUCH = _CHECK + "return redis.call('PEXPIRE', KEYS[2], ARGV[2])"
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


def _px(ttl_s: float | None) -> str:
    return "" if ttl_s is None else str(max(1, int(-(-ttl_s * 1000 // 1))))


class FencedBackend:
    """A backend whose every call carries an epoch; also the coordinator's handle on a server.

    Serving: the :class:`~ringkit.cluster.backends.Backend` methods; with `index_keys` off,
    Redis writes skip the key index (the rebalance's SCAN finds those keys). Coordinating:
    ``server_epoch``, ``read_view``, ``publish``, ``append_audit``, ``read_checkpoint``,
    ``write_checkpoint`` and ``index`` (the key index, for range reads).
    """

    def __init__(self, inner: Backend, epoch_of: EpochOf, point_of: PointOf) -> None:
        self.inner = inner
        self.url: ServerURL = inner.url
        self.epoch_of = epoch_of
        self.point_of = point_of
        self.index_keys = True
        self._known = 0
        self._checked_at = -MEMCACHED_FENCE_CHECK_S
        self._lock = _lock_for(str(inner.url))
        # The memory store is in-process: its epoch is one dict read, no round trip.
        self._store = inner.store if isinstance(inner, MemoryBackend) else None

    # The memory/memcached path: check, then act, under one process-wide lock per server.
    def _fenced(self, action: Callable[[], T]) -> T:
        with self._lock:
            self._check(self.epoch_of())
            return action()

    def _check(self, sent: int) -> None:
        if self._store is not None:
            entry = self._store.data.get(EPOCH_KEY)
            current = int(entry[0]) if entry else 0
        else:
            # Best effort (memcached): the epoch read is cached for a short while.
            now = time.monotonic()
            if now - self._checked_at >= MEMCACHED_FENCE_CHECK_S or self._known > sent:
                self._known, self._checked_at = self.server_epoch(), now
            current = self._known
        if current > sent:
            raise StaleViewError(str(self.url), current, sent)

    def get_many(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        return self._fenced(lambda: self.inner.get_many(keys))

    def set_many(self, items: Mapping[bytes, bytes], ttl_s: float | None) -> None:
        self._fenced(lambda: self.inner.set_many(items, ttl_s))

    def add(self, key: bytes, value: bytes, ttl_s: float | None) -> bool:
        return self._fenced(lambda: self.inner.add(key, value, ttl_s))

    def delete(self, key: bytes) -> bool:
        return self._fenced(lambda: self.inner.delete(key))

    def incr(self, key: bytes, delta: int) -> int | None:
        return self._fenced(lambda: self.inner.incr(key, delta))

    def touch(self, key: bytes, ttl_s: float) -> bool:
        return self._fenced(lambda: self.inner.touch(key, ttl_s))

    def ping(self) -> None:
        self.inner.ping()

    def flush(self) -> None:
        self.inner.flush()

    def close(self) -> None:
        self.inner.close()

    # -- coordinating --------------------------------------------------------------------------

    def server_epoch(self) -> int:
        """Return the epoch of the newest view this server was given (0 if none)."""
        found = self.inner.get_many([EPOCH_KEY]).get(EPOCH_KEY)
        return int(found) if found else 0

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
                raise ViewConflictError(str(self.url), epoch)
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
            name: self._redis.register_script(source)
            for name, source in (
                ("read", _READ), ("set", _SET), ("add", _ADD), ("delete", _DELETE),
                ("incr", _INCR), ("touch", _TOUCH), ("publish", _PUBLISH),
            )
        }  # fmt: skip
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
            text = str(error)
            if text.startswith("STALEVIEW "):
                sent = int(str(args[0]))  # every fenced script takes the epoch first
                raise StaleViewError(str(self.url), int(text.split()[1]), sent) from None
            if "not an integer" in text:
                raise ValueError(
                    f"value of key {keys[-1]!r} is not a decimal integer; incr/decr need one"
                ) from None
            raise BackendError(
                f"server {self.url} failed: {type(error).__name__}: {text}"
            ) from None

    def _member(self, key: bytes) -> bytes:
        return member(self.point_of(key), key) if self.index_keys else b""

    def _call(self, script: str, keys: Sequence[bytes], args: Sequence[object]) -> Any:
        return self._run(script, [EPOCH_KEY, *keys], [self.epoch_of(), *args])

    def get_many(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        found: dict[bytes, bytes] = {}
        # Lua's unpack() has a stack limit of about 8000 values: read in chunks below it.
        for at in range(0, len(keys), _CHUNK):
            chunk = keys[at : at + _CHUNK]
            values = self._call("read", chunk, [])
            found.update((k, v) for k, v in zip(chunk, values, strict=True) if v is not None)
        return found

    def set_many(self, items: Mapping[bytes, bytes], ttl_s: float | None) -> None:
        args: list[object] = [_px(ttl_s)]
        for key, value in items.items():
            args += [self._member(key), value]
        self._call("set", [b"ringkit:index", *items], args)

    def add(self, key: bytes, value: bytes, ttl_s: float | None) -> bool:
        args = [_px(ttl_s), self._member(key), value]
        return bool(self._call("add", [b"ringkit:index", key], args))

    def delete(self, key: bytes) -> bool:
        return bool(
            self._call("delete", [b"ringkit:index", key], [member(self.point_of(key), key)])
        )

    def incr(self, key: bytes, delta: int) -> int | None:
        result = self._call("incr", [key], [delta])
        return None if result is None else int(result)

    def touch(self, key: bytes, ttl_s: float) -> bool:
        return bool(self._call("touch", [key], [_px(ttl_s)]))

    def publish(self, epoch: int, view_json: bytes, *, replace: bool = False) -> int:
        args = [epoch, view_json, "1" if replace else "0"]
        held = int(self._run("publish", [EPOCH_KEY, VIEW_KEY], args))
        if held < 0:
            raise ViewConflictError(str(self.url), epoch)
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
