"""Fenced backends: every call carries the client's epoch; a server that has moved on refuses it.

Each server keeps the epoch of the newest cluster view it was given under the reserved key
``ringkit:epoch`` (and the view itself under ``ringkit:view``). A fenced backend sends the
epoch its client routed the call with; when the server's epoch is newer, the server refuses the
call and the client gets :class:`StaleViewError`, refreshes its view and retries. On Redis the
check and the write run in one Lua script, so they are atomic: no write routed by an old view
can land after the coordinator has moved the server on. Every Redis write also records the key
in the server's index (:mod:`ringkit.cluster.wire.index`), in the same script.

On the memory backend the check holds a process-wide lock per store, which is atomic for every
client in the process. On memcached it is best effort: the epoch is read, then the write is sent,
and a coordinator can move the server on in between (memcached has no scripts). See
docs/rebalance.md.

The epoch a call was routed by travels in a context variable (:func:`routed_by`), set by the
client's driver around each backend call: it is per thread and per asyncio task, so the plain
:class:`~ringkit.cluster.wire.backends.Backend` interface stays the same. The sync and the async
fenced backends share everything but the transport: the Lua scripts, the encoding of each call
into script arguments and the decoding of the answers (:mod:`ringkit.cluster.wire.redis.scripts`),
and the epoch gate of memcached (:class:`EpochGate`). Keys starting with ``ringkit:`` are reserved
for this bookkeeping (:mod:`ringkit.cluster.values.keys`).

>>> member(5, b"k").hex()
'00000000000000056b'
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeVar

from ringkit.cluster.values.expiry import memcached_exptime
from ringkit.cluster.values.keys import (
    AUDIT_KEY,
    CHECKPOINT_KEY,
    EPOCH_KEY,
    INDEX_KEY,
    RESERVED_PREFIX,
    VIEW_KEY,
    hints_key,
    readmitted_key,
    spread_key,
)
from ringkit.cluster.wire.backends import (
    Backend,
    MemcachedBackend,
    MemoryBackend,
    RedisBackend,
    server_failed,
)
from ringkit.cluster.wire.index import (
    Index,
    IndexSweep,
    RedisIndex,
    ScanIndex,
    member,
)
from ringkit.cluster.wire.redis.handoff import (
    HANDOFF_SCRIPTS,
    MAX_CAS_TRIES,
    copy_is_newer,
    decode_hints,
    with_hints,
    without_hints,
)
from ringkit.cluster.wire.redis.scripts import (
    KEYS_PER_CALL,
    SCRIPTS,
    PointOf,
    Script,
    epoch_value,
    px_argument,
    redis_answer,
    redis_error,
    redis_scripts,
    with_markers,
)
from ringkit.cluster.wire.urls import ServerURL
from ringkit.errors import (
    BackendError,
    EpochLostError,
    StaleViewError,
    UnsupportedError,
    ViewConflictError,
)

if TYPE_CHECKING:
    from ringkit.cluster.wire.aio_backends import AsyncBackend

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
# memcached has no scripts: its fence is a read of the epoch, done at most this often.
MEMCACHED_FENCE_CHECK_S = 0.5
EpochOf = Callable[[], int]
# An atomic read-modify-write of one key: the new value (None: unchanged) and the result.
Update = Callable[[bytes | None], tuple[bytes | None, Any]]
# The bookkeeping calls of ringkit.cluster.wire.redis.handoff: unfenced, they are no data of
# the view.
HANDOFF_OPS = frozenset(
    {
        "add_hints",
        "read_hints",
        "drop_hints",
        "mark_readmitted",
        "read_markers",
        "set_copy",
        "write_marked",
        "write_markers",
    }
)
# What add_hints answers: how many keys did not fit, and the server's re-admission stamp (ms).
Hinted = tuple[int, int]
_ROUTED: ContextVar[int | None] = ContextVar("ringkit_routed_epoch", default=None)


# Calls that change nothing: a server that lost its epoch still answers them (it misses).
_READS = frozenset({"get_many", "ttl_left"})


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
        self.known, self.checked_at = epoch_value(found), now

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

        One step of the bounded sweep (:class:`~ringkit.cluster.wire.index.IndexSweep`) at most.
        """
        count = self.sweep.due(op, args) if self.index_keys else 0
        return [Script("sweep", (INDEX_KEY,), (self.sweep.cursor, count))] if count else []


class FencedBackend(_Fenced):
    """A backend whose every call carries an epoch; also the coordinator's handle on a server.

    Serving: the :class:`~ringkit.cluster.wire.backends.Backend` methods; with `index_keys` off,
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
            self._check(self.epoch_of(), write=op not in _READS)
            return getattr(self.inner, op)(*args)

    def _check(self, sent: int, *, write: bool) -> None:
        if self._store is not None:
            entry = self._store.data.get(EPOCH_KEY)
            check_epoch(epoch_value(entry[0] if entry else None), sent, self.url, write=write)
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

    def bury_many(self, tombstones: Mapping[bytes, bytes], ttl_s: float) -> list[bytes]:
        """:meth:`bury` each key with its tombstone (pipelined on Redis); return those gone."""
        gone: list[bytes] = self.serve("bury_many", tombstones, ttl_s)
        return gone

    def incr(self, key: bytes, delta: int) -> int | None:
        result: int | None = self.serve("incr", key, delta)
        return result

    def touch(self, key: bytes, ttl_s: float) -> bool:
        return bool(self.serve("touch", key, ttl_s))

    def ttl_left(self, key: bytes) -> float | None:
        """Return the seconds `key` has left; None when it has no expiry or is missing."""
        left: float | None = self.serve("ttl_left", key)
        return left

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

    # -- hints and copies (ringkit.cluster.wire.redis.handoff) ---------------------------------

    def _swap(self, key: bytes, update: Update, ttl_s: float | None) -> Any:
        """Apply `update` to `key` atomically; return its result (None after MAX_CAS_TRIES)."""
        inner = self.inner
        if not isinstance(inner, MemcachedBackend):  # the memory store: atomic under the lock
            with self._lock:
                held = inner.get_many([key]).get(key)
                new, result = update(held)
                if new is not None and new != held:
                    inner.set_many({key: new}, ttl_s)
                return result
        for _ in range(MAX_CAS_TRIES):
            held, token = inner.gets(key)
            new, result = update(held)
            if new is None or new == held:
                return result
            if inner.store_unchanged(key, new, token, ttl_s):
                return result
        return None

    def add_hints(self, server: str, keys: Sequence[bytes], max_hints: int) -> Hinted | None:
        """Keep hints for down `server` here, then read its re-admission stamp.

        Return (keys that did not fit, stamp in Unix ms, 0 if none); None: not kept.
        """
        dropped: int | None = self._swap(
            hints_key(server), lambda held: with_hints(held, keys, max_hints=max_hints), None
        )
        if dropped is None:
            return None
        stamp = self.inner.get_many([readmitted_key(server)]).get(readmitted_key(server))
        return dropped, int(stamp or 0)

    def mark_readmitted(self, server: str, at_ms: int) -> None:
        """Stamp here that a process begins re-admitting `server` at `at_ms` (Unix ms)."""
        self.inner.set_many({readmitted_key(server): str(at_ms).encode()}, None)

    def read_hints(self, server: str) -> list[bytes]:
        """Return the keys hinted here for `server`."""
        key = hints_key(server)
        return decode_hints(self.inner.get_many([key]).get(key))

    def drop_hints(self, server: str, keys: Sequence[bytes]) -> None:
        """Remove exactly `keys` from the hints kept here for `server` (they were applied)."""
        self._swap(hints_key(server), lambda held: (without_hints(held, keys), None), None)

    def set_copy(self, key: bytes, copy: bytes, ttl_s: float | None) -> bool | None:
        """Store hot-key `copy` unless this server holds a version as new; None: contended."""
        result: bool | None = self._swap(
            key, lambda held: (copy, True) if copy_is_newer(held, copy) else (None, False), ttl_s
        )
        return result

    def read_markers(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        """Return the spread markers held here for `keys` (see :func:`spread_key`)."""
        markers = {spread_key(key): key for key in keys}
        found = self.inner.get_many(list(markers))
        return {markers[marker]: value for marker, value in found.items()}

    def write_marked(
        self, op: str, args: Sequence[Any], keys: Sequence[bytes]
    ) -> tuple[Any, dict[bytes, bytes]]:
        """Run write `op(*args)`, then read the spread markers of `keys`, after it, here.

        On memcached a ``set_many`` and the read are pipelined: one round trip.
        """
        if op == "set_many" and isinstance(self.inner, MemcachedBackend):
            items, ttl_s = args
            markers = {spread_key(key): key for key in keys}
            with self._lock:
                self._check(self.epoch_of(), write=True)
                found = self.inner.set_many_then_get(items, ttl_s, list(markers))
            return None, {markers[marker]: value for marker, value in found.items()}
        answer = getattr(self, op)(*args)
        return answer, self.read_markers(keys)

    def write_markers(self, markers: Mapping[bytes, bytes], ttl_s: float) -> None:
        """Store spread markers ``{key: spread}`` here, expiring after `ttl_s`."""
        self.inner.set_many({spread_key(key): value for key, value in markers.items()}, ttl_s)

    # -- coordinating --------------------------------------------------------------------------

    def server_epoch(self) -> int:
        """Return the epoch of the newest view this server was given (0 if none)."""
        return epoch_value(self.inner.get_many([EPOCH_KEY]).get(EPOCH_KEY))

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

        self._redis: Any = inner.client
        self._errors: tuple[type[Exception], ...] = (redis.RedisError, OSError)
        self._scripts = {
            name: self._redis.register_script(source)
            for name, source in {**SCRIPTS, **HANDOFF_SCRIPTS}.items()
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

    def get_many(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        # The read's one command, sent straight (the most frequent call: no list of scripts to
        # build and run); encoded and checked by the same functions as every fenced call.
        sent = self.epoch_of()
        [read] = redis_scripts("get_many", (keys,), sent, self.point_of)
        try:
            found = self._redis.execute_command(read.name, *read.keys)
        except self._errors as error:
            raise redis_error(error, self.url, read) from None
        answer: dict[bytes, bytes] = redis_answer(
            "get_many", (keys,), [found], sent=sent, url=self.url
        )
        return answer

    def serve(self, op: str, *args: Any) -> Any:
        sent = self.epoch_of()
        scripts = redis_scripts(op, args, sent, self.point_of, index_keys=self.index_keys)
        answer = redis_answer(op, args, self._run_all(scripts), sent=sent, url=self.url)
        for step in self.sweep_due(op, args):
            # Best effort: the write was acknowledged; a failed sweep step changes nothing.
            with contextlib.suppress(BackendError):
                self.sweep.advance(self._run(step.name, step.keys, step.args))
        return answer

    def _run_all(self, scripts: Sequence[Script]) -> list[Any]:
        """Run `scripts` in order; more than one in one round trip (pipelined EVALSHAs)."""
        if len(scripts) == 1:
            [script] = scripts
            return [self._run(script.name, script.keys, script.args)]
        try:
            pipe = self._redis.pipeline(transaction=False)
            for script in scripts:
                sha = self._scripts[script.name].sha
                pipe.evalsha(sha, len(script.keys), *script.keys, *script.args)
            replies: list[Any] = pipe.execute(raise_on_error=False)
        except self._errors as error:
            raise server_failed(self.url, error) from None
        if any(type(reply).__name__ == "NoScriptError" for reply in replies):
            # A script not loaded yet (a restarted server): one by one, each loads its own.
            # The scripts that did run are version-checked writes or reads: safe to repeat.
            return [self._run(script.name, script.keys, script.args) for script in scripts]
        for script, reply in zip(scripts, replies, strict=True):
            if isinstance(reply, Exception):
                raise redis_error(reply, self.url, script)
        return replies

    def sweep_index(self, cursor: bytes, batch: int) -> tuple[int, bytes]:
        result: tuple[int, bytes] = self.serve("sweep_index", cursor, batch)
        return result

    def publish(self, epoch: int, view_json: bytes, *, replace: bool = False) -> int:
        args = [epoch, view_json, "1" if replace else "0"]
        held = int(self._run("publish", [EPOCH_KEY, VIEW_KEY], args))
        if held < 0:
            raise ViewConflictError.on_server(str(self.url), epoch)
        return held

    def add_hints(self, server: str, keys: Sequence[bytes], max_hints: int) -> Hinted | None:
        keys_of = [hints_key(server), readmitted_key(server)]
        dropped, stamp = self._run("add_hints", keys_of, [max_hints, *keys])
        return int(dropped), int(stamp)

    def read_hints(self, server: str) -> list[bytes]:
        return list(self._run("SMEMBERS", [hints_key(server)], []))

    def drop_hints(self, server: str, keys: Sequence[bytes]) -> None:
        for at in range(0, len(keys), KEYS_PER_CALL):
            self._run("SREM", [hints_key(server)], keys[at : at + KEYS_PER_CALL])

    def set_copy(self, key: bytes, copy: bytes, ttl_s: float | None) -> bool | None:
        return bool(self._run("set_copy", [key], [copy, px_argument(ttl_s)]))

    def write_marked(
        self, op: str, args: Sequence[Any], keys: Sequence[bytes]
    ) -> tuple[Any, dict[bytes, bytes]]:
        # One round trip: the write's script reads the markers after writing; a write of
        # several scripts is pipelined with the markers' MGET behind it.
        scripts = redis_scripts(
            op, args, self.epoch_of(), self.point_of, index_keys=self.index_keys
        )
        one = with_markers(scripts, [spread_key(key) for key in keys])
        if one is not None:
            reply = self._run(one.name, one.keys, one.args)  # loads it if it must
            answer = _marked_reply(op, args, keys, reply)
            for step in self.sweep_due(op, args):  # as serve does after a write
                with contextlib.suppress(BackendError):
                    self.sweep.advance(self._run(step.name, step.keys, step.args))
            return answer
        try:
            pipe = self._redis.pipeline(transaction=False)
            replies = _marked_pipeline(pipe, scripts, self._scripts, keys).execute(
                raise_on_error=False
            )
        except self._errors as error:
            raise server_failed(self.url, error) from None
        marked = _marked_answer(op, args, keys, scripts, replies, self.url)
        if marked is None:
            return super().write_marked(op, args, keys)
        for step in self.sweep_due(op, args):  # as serve does after a write
            with contextlib.suppress(BackendError):
                self.sweep.advance(self._run(step.name, step.keys, step.args))
        return marked

    def append_audit(self, line: bytes) -> None:
        self._run("RPUSH", [AUDIT_KEY], [line])

    def read_audit(self) -> list[bytes]:
        lines: list[bytes] = self._run("LRANGE", [AUDIT_KEY], [0, -1])
        return lines

    @property
    def index(self) -> Index:
        return self._index


def _marked_pipeline(
    pipe: Any, scripts: Sequence[Script], registered: Mapping[str, Any], keys: Sequence[bytes]
) -> Any:
    """Queue `scripts` (by SHA, as loaded) then the MGET of `keys`' spread markers on `pipe`."""
    for script in scripts:
        sha = registered[script.name].sha
        pipe.evalsha(sha, len(script.keys), *script.keys, *script.args)
    pipe.mget([spread_key(key) for key in keys])
    return pipe


def _marked_reply(
    op: str, args: Sequence[Any], keys: Sequence[bytes], reply: list[Any]
) -> tuple[Any, dict[bytes, bytes]]:
    """Return a write's answer and the markers found, from its marked script's reply."""
    answer, markers = reply
    found = {key: value for key, value in zip(keys, markers, strict=True) if value is not None}
    return redis_answer(op, args, [answer]), found


def _marked_answer(
    op: str,
    args: Sequence[Any],
    keys: Sequence[bytes],
    scripts: Sequence[Script],
    replies: list[Any],
    url: ServerURL,
) -> tuple[Any, dict[bytes, bytes]] | None:
    """Return a pipelined ``write_marked``'s answer; None when a script was not loaded yet.

    :raises StaleViewError: when the server refused the write (a newer epoch)
    """
    *answers, markers = replies
    for script, reply in zip(scripts, answers, strict=True):
        if isinstance(reply, Exception):
            if type(reply).__name__ == "NoScriptError":  # nothing ran: the caller loads it
                return None
            raise redis_error(reply, url, script)
    found = {key: value for key, value in zip(keys, markers, strict=True) if value is not None}
    return redis_answer(op, args, answers), found


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
        from ringkit.cluster.wire.aio_backends import (
            AsyncMemcachedBackend,
            AsyncMemoryBackend,
            AsyncRedisBackend,
        )

        super().__init__(inner, epoch_of, point_of)
        self._memcached = inner if isinstance(inner, AsyncMemcachedBackend) else None
        self._memory = (
            FencedBackend(inner.sync, epoch_of, point_of)
            if isinstance(inner, AsyncMemoryBackend)
            else None
        )
        self._scripts: dict[str, Any] = {}
        if isinstance(inner, AsyncRedisBackend):
            client = inner.client
            self._scripts = {
                name: client.register_script(src)
                for name, src in {**SCRIPTS, **HANDOFF_SCRIPTS}.items()
            }

    async def serve(self, op: str, *args: Any) -> Any:
        """Await backend call `op(*args)` fenced by the routed epoch (ping, flush: unfenced)."""
        if op in _UNFENCED or op in HANDOFF_OPS:
            return await getattr(self, op)(*args)
        if op == "sweep_index" and not self._scripts:
            return 0, b""  # no index on memory or memcached
        if self._memory is not None:
            self._memory.index_keys = self.index_keys
            return self._memory.serve(op, *args)
        sent = self.epoch_of()
        if self._scripts:
            scripts = redis_scripts(op, args, sent, self.point_of, index_keys=self.index_keys)
            answer = redis_answer(op, args, await self._run_all(scripts), sent=sent, url=self.url)
            for step in self.sweep_due(op, args):
                with contextlib.suppress(BackendError):  # best effort, as in the sync form
                    self.sweep.advance(await self._run(step))
            return answer
        await self._gate_check(sent, write=op not in _READS)
        return await getattr(self.inner, op)(*args)

    async def _gate_check(self, sent: int, *, write: bool) -> None:
        """memcached's fence: the server's epoch, read again at most every 0.5 s."""
        now = time.monotonic()
        if self._gate.due(sent, now):
            self._gate.learn((await self.inner.get_many([EPOCH_KEY])).get(EPOCH_KEY), now)
        self._gate.check(sent, self.url, write=write)

    async def _run(self, script: Script) -> Any:
        import redis

        try:
            if script.name not in self._scripts:  # a plain command (a read's MGET)
                client = self.inner.client  # type: ignore[attr-defined]
                return await client.execute_command(script.name, *script.keys, *script.args)
            return await self._scripts[script.name](keys=list(script.keys), args=list(script.args))
        except (TimeoutError, redis.RedisError, OSError) as error:
            raise redis_error(error, self.url, script) from None

    async def _run_all(self, scripts: Sequence[Script]) -> list[Any]:
        """Run `scripts` in order; more than one in one round trip (as the sync form)."""
        import redis

        if len(scripts) == 1:
            return [await self._run(scripts[0])]
        try:
            pipe = self.inner.client.pipeline(transaction=False)  # type: ignore[attr-defined]
            for script in scripts:
                sha = self._scripts[script.name].sha
                pipe.evalsha(sha, len(script.keys), *script.keys, *script.args)
            replies: list[Any] = await pipe.execute(raise_on_error=False)
        except (TimeoutError, redis.RedisError, OSError) as error:
            raise server_failed(self.url, error) from None
        if any(type(reply).__name__ == "NoScriptError" for reply in replies):
            return [await self._run(script) for script in scripts]  # each loads its own
        for script, reply in zip(scripts, replies, strict=True):
            if isinstance(reply, Exception):
                raise redis_error(reply, self.url, script)
        return replies

    async def read_view(self) -> bytes | None:
        """Return the JSON of the newest view this server holds, or None."""
        return (await self.inner.get_many([VIEW_KEY])).get(VIEW_KEY)

    # -- hints and copies (ringkit.cluster.wire.redis.handoff): as FencedBackend's, awaited ------

    async def _command(self, *command: Any) -> Any:
        import redis

        try:
            return await self.inner.client.execute_command(*command)  # type: ignore[attr-defined]
        except (TimeoutError, redis.RedisError, OSError) as error:
            raise server_failed(self.url, error) from None

    async def _swap(self, key: bytes, update: Update, ttl_s: float | None) -> Any:
        """memcached's compare-and-swap loop (protocol.txt ``gets`` / ``cas``), awaited."""
        inner: Any = self.inner
        expire = memcached_exptime(ttl_s, time.time())
        for _ in range(MAX_CAS_TRIES):
            held, token = await inner.gets(key)
            new, result = update(held)
            if new is None or new == held:
                return result
            if held is None:
                done = await inner.add(key, new, ttl_s)
            else:
                done = await inner.cas(key, new, token, expire)
            if done:
                return result
        return None

    async def add_hints(self, server: str, keys: Sequence[bytes], max_hints: int) -> Hinted | None:
        """Keep hints for down `server` here, then read its re-admission stamp (see sync)."""
        if self._memory is not None:
            return self._memory.add_hints(server, keys, max_hints)
        if self._scripts:
            keys_of = (hints_key(server), readmitted_key(server))
            dropped, stamp = await self._run(Script("add_hints", keys_of, (max_hints, *keys)))
            return int(dropped), int(stamp)
        kept: int | None = await self._swap(
            hints_key(server), lambda held: with_hints(held, keys, max_hints=max_hints), None
        )
        if kept is None:
            return None
        found = (await self.inner.get_many([readmitted_key(server)])).get(readmitted_key(server))
        return kept, int(found or 0)

    async def mark_readmitted(self, server: str, at_ms: int) -> None:
        """Stamp here that a process begins re-admitting `server` at `at_ms` (Unix ms)."""
        await self.inner.set_many({readmitted_key(server): str(at_ms).encode()}, None)

    async def read_hints(self, server: str) -> list[bytes]:
        """Return the keys hinted here for `server`."""
        if self._memory is not None:
            return self._memory.read_hints(server)
        if self._scripts:
            return list(await self._command("SMEMBERS", hints_key(server)))
        key = hints_key(server)
        return decode_hints((await self.inner.get_many([key])).get(key))

    async def drop_hints(self, server: str, keys: Sequence[bytes]) -> None:
        """Remove exactly `keys` from the hints kept here for `server` (they were applied)."""
        if self._memory is not None:
            self._memory.drop_hints(server, keys)
        elif self._scripts:
            for at in range(0, len(keys), KEYS_PER_CALL):
                await self._command("SREM", hints_key(server), *keys[at : at + KEYS_PER_CALL])
        else:
            await self._swap(
                hints_key(server), lambda held: (without_hints(held, keys), None), None
            )

    async def set_copy(self, key: bytes, copy: bytes, ttl_s: float | None) -> bool | None:
        """Store hot-key `copy` unless this server holds a version as new; None: contended."""
        if self._memory is not None:
            return self._memory.set_copy(key, copy, ttl_s)
        if self._scripts:
            return bool(await self._run(Script("set_copy", (key,), (copy, px_argument(ttl_s)))))
        result: bool | None = await self._swap(
            key, lambda held: (copy, True) if copy_is_newer(held, copy) else (None, False), ttl_s
        )
        return result

    async def read_markers(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        """Return the spread markers held here for `keys`."""
        markers = {spread_key(key): key for key in keys}
        found = await self.inner.get_many(list(markers))
        return {markers[marker]: value for marker, value in found.items()}

    async def write_marked(
        self, op: str, args: Sequence[Any], keys: Sequence[bytes]
    ) -> tuple[Any, dict[bytes, bytes]]:
        """Run write `op(*args)`, then read the spread markers of `keys`, after it, here."""
        if self._scripts and self._memory is None:  # Redis: one pipelined round trip
            import redis

            scripts = redis_scripts(
                op, args, self.epoch_of(), self.point_of, index_keys=self.index_keys
            )
            one = with_markers(scripts, [spread_key(key) for key in keys])
            if one is not None:  # the write's script reads the markers: one round trip
                answer = _marked_reply(op, args, keys, await self._run(one))
                for step in self.sweep_due(op, args):  # as serve does after a write
                    with contextlib.suppress(BackendError):
                        self.sweep.advance(await self._run(step))
                return answer
            try:
                pipe = _marked_pipeline(
                    self.inner.client.pipeline(transaction=False),  # type: ignore[attr-defined]
                    scripts,
                    self._scripts,
                    keys,
                )
                replies = await pipe.execute(raise_on_error=False)
            except (TimeoutError, redis.RedisError, OSError) as error:
                raise server_failed(self.url, error) from None
            marked = _marked_answer(op, args, keys, scripts, replies, self.url)
            if marked is not None:
                for step in self.sweep_due(op, args):  # as serve does after a write
                    with contextlib.suppress(BackendError):
                        self.sweep.advance(await self._run(step))
                return marked
        if op == "set_many" and self._memcached is not None:
            items, ttl_s = args  # memcached: the set and the markers' get pipelined
            markers = {spread_key(key): key for key in keys}
            await self._gate_check(self.epoch_of(), write=True)
            found = await self._memcached.set_many_then_get(items, ttl_s, list(markers))
            return None, {markers[marker]: value for marker, value in found.items()}
        answer = await self.serve(op, *args)
        return answer, await self.read_markers(keys)

    async def write_markers(self, markers: Mapping[bytes, bytes], ttl_s: float) -> None:
        """Store spread markers ``{key: spread}`` here, expiring after `ttl_s`."""
        await self.inner.set_many({spread_key(k): value for k, value in markers.items()}, ttl_s)

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
        current = epoch_value(found.get(EPOCH_KEY))
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
