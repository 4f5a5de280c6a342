"""Every Redis operation, written once as a generator of pipelines: the fenced scripts and the rest.

A fenced call is the scripts :func:`~ringkit.cluster.wire.redis.scripts.redis_scripts` encodes,
sent as one pipeline of ``EVALSHA`` (a read is one ``MGET`` of the epoch and the keys), read back
by :func:`~ringkit.cluster.wire.redis.scripts.redis_answer`. A server that does not hold a
script yet (a restart, a ``SCRIPT FLUSH``) answers ``NOSCRIPT`` for it, without running it: that
script, and only it, is sent again as ``EVAL`` with its source, which also loads it for the next
call. A write then takes a bounded step of the index sweep, best effort
(:class:`~ringkit.cluster.wire.index.IndexSweep`). The handoff's bookkeeping (hints, copies,
markers) and the coordinator's (view, audit log, checkpoint) are plain commands or the scripts of
:mod:`ringkit.cluster.wire.redis.handoff`. Blocking and asyncio clients run the very same
generators over their transports (:mod:`ringkit.cluster.wire.redis.transports`).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ringkit.cluster.values.expiry import redis_px
from ringkit.cluster.values.keys import (
    AUDIT_KEY,
    CHECKPOINT_KEY,
    EPOCH_KEY,
    INDEX_KEY,
    VIEW_KEY,
    hints_key,
    readmitted_key,
    spread_key,
)
from ringkit.cluster.wire.drive import Wire, drive_sync
from ringkit.cluster.wire.failures import server_failed
from ringkit.cluster.wire.fence import EpochOf, epoch_value
from ringkit.cluster.wire.index import INDEX_SCRIPTS, Index, IndexSweep, RedisIndex
from ringkit.cluster.wire.items import Hinted
from ringkit.cluster.wire.redis.handoff import HANDOFF_SCRIPTS
from ringkit.cluster.wire.redis.scripts import (
    KEYS_PER_CALL,
    SCRIPTS,
    PointOf,
    Script,
    px_argument,
    redis_answer,
    redis_error,
    redis_scripts,
    with_markers,
)
from ringkit.cluster.wire.redis.transports import Commands, PoolTransport
from ringkit.cluster.wire.urls import ServerURL
from ringkit.errors import BackendError, ViewConflictError

__all__ = ["RedisServer", "run_scripts"]

# INCRBY on an existing key only, clamped at 0, keeping the TTL: memcached's incr/decr rules,
# counting only what memcached counts (digits: no sign), so every backend refuses a stored -5.
_INCR_SCRIPT = """
local v = redis.call('GET', KEYS[1])
if not v then return false end
if not string.find(v, '^%d+$') then return redis.error_reply('ERR value is not an integer') end
local n = redis.call('INCRBY', KEYS[1], ARGV[1])
if n < 0 then redis.call('SET', KEYS[1], 0, 'KEEPTTL'); return 0 end
return n
"""
_SOURCES = {**SCRIPTS, **HANDOFF_SCRIPTS, **INDEX_SCRIPTS, "plain_incr": _INCR_SCRIPT}
_SHAS = {name: hashlib.sha1(source.encode()).hexdigest() for name, source in _SOURCES.items()}
# The calls that run as scripts fenced by the routed epoch (redis_scripts encodes them).
_FENCED = frozenset(
    {"get_many", "set_many", "add", "delete", "repair", "repair_many", "bury", "bury_many"}
    | {"incr", "touch", "ttl_left", "sweep_index"}
)


def _milliseconds(ttl_s: float | None, url: ServerURL) -> int | None:
    return None if ttl_s is None else redis_px(ttl_s, time.time(), str(url))


def _command(script: Script, *, load: bool = False) -> tuple[Any, ...]:
    """Return the command that runs `script`: EVALSHA (EVAL with `load`), or itself."""
    if script.name not in _SOURCES:  # a plain command (a read's MGET, a PTTL)
        return (script.name, *script.keys, *script.args)
    head = ("EVAL", _SOURCES[script.name]) if load else ("EVALSHA", _SHAS[script.name])
    return (*head, len(script.keys), *script.keys, *script.args)


def _not_loaded(reply: Any) -> bool:
    return isinstance(reply, Exception) and type(reply).__name__ == "NoScriptError"


def run_scripts(
    url: ServerURL, scripts: Sequence[Script], after: Sequence[tuple[Any, ...]] = ()
) -> Wire[list[Any]]:
    """Run `scripts` in one pipeline, then the plain commands `after`; return every reply.

    A script the server has not loaded is sent again, with its source, and `after` with it
    (what it reads must follow the write). A script's error reply is raised as its ringkit
    error (:func:`~ringkit.cluster.wire.redis.scripts.redis_error`).
    """
    replies: list[Any] = yield Commands((*map(_command, scripts), *after))
    missing = [at for at, reply in enumerate(replies[: len(scripts)]) if _not_loaded(reply)]
    if missing:
        loaded = [_command(scripts[at], load=True) for at in missing]
        again: list[Any] = yield Commands((*loaded, *after))
        for at, reply in zip(missing, again, strict=False):
            replies[at] = reply
        replies[len(scripts) :] = again[len(missing) :]
    for script, reply in zip(scripts, replies, strict=False):
        if isinstance(reply, Exception):
            raise redis_error(reply, url, script)
    return replies


def _plain(url: ServerURL, *command: Any) -> Wire[Any]:
    """Run one command unfenced; an error reply is the server's refusal."""
    [reply] = yield Commands((command,))
    if isinstance(reply, Exception):
        raise BackendError(f"server {url} refused the command: {reply}")
    return reply


class RedisServer:
    """The operations of one Redis server: each call fenced inside its own script."""

    def __init__(self, url: ServerURL) -> None:
        self.url = url
        self.index_keys = True
        self.sweep = IndexSweep()  # the bounded index sweep that rides on this client's writes
        self._index: RedisIndex | None = None

    def steps(self, method: str, args: Sequence[Any], sent: int, point_of: PointOf) -> Wire[Any]:
        """Return the operation of call `method(*args)`, routed by epoch `sent`."""
        if method == "get_many":
            return self._read(args[0], sent)
        if method in _FENCED:
            return self._fenced(method, args, sent, point_of)
        if method == "write_marked":
            return self._write_marked(sent, point_of, *args)
        operation: Wire[Any] = getattr(self, method)(*args)
        return operation

    def _fenced(self, op: str, args: Sequence[Any], sent: int, point_of: PointOf) -> Wire[Any]:
        scripts = redis_scripts(op, args, sent, point_of, index_keys=self.index_keys)
        replies = yield from run_scripts(self.url, scripts)
        answer = redis_answer(op, args, replies, sent=sent, url=self.url)
        yield from self._sweep_after(op, args)
        return answer

    def _read(self, keys: Sequence[bytes], sent: int) -> Wire[dict[bytes, bytes]]:
        """Return the keys found with their values, fenced at `sent`: one ``MGET``, no script.

        The ``MGET`` of the epoch and the keys is as atomic as a read script would be (check,
        then read), and :func:`redis_answer` makes the check. The server spares a script's Lua
        (a Lua string per value, both ways), the client the script's pipeline and its
        ``NOSCRIPT`` fallback; ``MGET`` has no ``unpack()`` limit, so no chunks. It is
        :func:`redis_scripts`'s read, sent as the plain command it is.
        """
        [found] = yield Commands((("MGET", EPOCH_KEY, *keys),))
        if isinstance(found, Exception):
            raise server_failed(self.url, found)
        values: dict[bytes, bytes] = redis_answer(
            "get_many", (keys,), [found], sent=sent, url=self.url
        )
        return values

    def _sweep_after(self, op: str, args: Sequence[Any]) -> Wire[None]:
        """Take the index sweep's step that write `op(*args)` owes, if one is due."""
        count = self.sweep.due(op, args) if self.index_keys else 0
        if count:
            step = Script("sweep", (INDEX_KEY,), (self.sweep.cursor, count))
            try:
                [reply] = yield from run_scripts(self.url, [step])
            except BackendError:  # the write was acknowledged: a failed step changes nothing
                return
            self.sweep.advance(reply)

    def _write_marked(
        self, sent: int, point_of: PointOf, op: str, args: Sequence[Any], keys: Sequence[bytes]
    ) -> Wire[tuple[Any, dict[bytes, bytes]]]:
        """Run write `op(*args)`, then read the spread markers of `keys`: one round trip.

        A write of one script reads them inside it; one of several has an MGET behind them.
        """
        scripts = redis_scripts(op, args, sent, point_of, index_keys=self.index_keys)
        markers = [spread_key(key) for key in keys]
        one = with_markers(scripts, markers)
        if one is not None:
            [(answer, found)] = yield from run_scripts(self.url, [one])
            answers = [answer]
        else:
            *answers, found = yield from run_scripts(self.url, scripts, [("MGET", *markers)])
        yield from self._sweep_after(op, args)
        held = {key: value for key, value in zip(keys, found, strict=True) if value is not None}
        return redis_answer(op, args, answers, sent=sent, url=self.url), held

    # -- unfenced: the plain backend ------------------------------------------------------------

    def plain(self, method: str, args: Sequence[Any]) -> Wire[Any]:
        """Return the unfenced operation of backend call `method(*args)`."""
        operation: Wire[Any] = getattr(self, "_plain_" + method)(*args)
        return operation

    def _plain_get_many(self, keys: Sequence[bytes]) -> Wire[dict[bytes, bytes]]:
        if not keys:
            return {}
        values = yield from _plain(self.url, "MGET", *keys)
        return {key: value for key, value in zip(keys, values, strict=True) if value is not None}

    def _plain_set_many(self, items: Mapping[bytes, bytes], ttl_s: float | None) -> Wire[None]:
        px = _milliseconds(ttl_s, self.url)
        if not items:
            return
        if px is None:
            yield from _plain(self.url, "MSET", *[part for item in items.items() for part in item])
            return
        replies = yield Commands(
            tuple(("SET", key, value, "PX", px) for key, value in items.items())
        )
        for reply in replies:
            if isinstance(reply, Exception):
                raise BackendError(f"server {self.url} refused the command: {reply}")

    def _plain_add(self, key: bytes, value: bytes, ttl_s: float | None) -> Wire[bool]:
        px = _milliseconds(ttl_s, self.url)
        expiry = () if px is None else ("PX", px)
        return (yield from _plain(self.url, "SET", key, value, "NX", *expiry)) is not None

    def _plain_delete(self, key: bytes) -> Wire[bool]:
        return bool((yield from _plain(self.url, "DEL", key)))

    def _plain_incr(self, key: bytes, delta: int) -> Wire[int | None]:
        # A stored value that is not a counter: redis_error's not_integer, naming `key`.
        [reply] = yield from run_scripts(self.url, [Script("plain_incr", (key,), (delta,))])
        return None if reply is None else int(reply)

    def _plain_touch(self, key: bytes, ttl_s: float) -> Wire[bool]:
        return bool((yield from _plain(self.url, "PEXPIRE", key, _milliseconds(ttl_s, self.url))))

    def _plain_ping(self) -> Wire[None]:
        yield from _plain(self.url, "PING")

    def _plain_flush(self) -> Wire[None]:
        yield from _plain(self.url, "FLUSHDB")

    def ping(self) -> Wire[None]:
        """Return when the server answers (the health check)."""
        return self._plain_ping()

    def flush(self) -> Wire[None]:
        """Delete every key of the database."""
        return self._plain_flush()

    # -- hints and copies (ringkit.cluster.wire.redis.handoff) ----------------------------------

    def add_hints(self, server: str, keys: Sequence[bytes], max_hints: int) -> Wire[Hinted | None]:
        """Keep hints for down `server` here, then read its re-admission stamp (one script)."""
        script = Script(
            "add_hints", (hints_key(server), readmitted_key(server)), (max_hints, *keys)
        )
        [(dropped, stamp)] = yield from run_scripts(self.url, [script])
        return int(dropped), int(stamp)

    def mark_readmitted(self, server: str, at_ms: int) -> Wire[None]:
        """Stamp here that a process begins re-admitting `server` at `at_ms` (Unix ms)."""
        yield from _plain(self.url, "SET", readmitted_key(server), str(at_ms))

    def read_hints(self, server: str) -> Wire[list[bytes]]:
        """Return the keys hinted here for `server`."""
        return list((yield from _plain(self.url, "SMEMBERS", hints_key(server))))

    def drop_hints(self, server: str, keys: Sequence[bytes]) -> Wire[None]:
        """Remove exactly `keys` from the hints kept here for `server` (one pipeline)."""
        chunks = [keys[at : at + KEYS_PER_CALL] for at in range(0, len(keys), KEYS_PER_CALL)]
        if chunks:
            yield Commands(tuple(("SREM", hints_key(server), *chunk) for chunk in chunks))

    def set_copy(self, key: bytes, copy: bytes, ttl_s: float | None) -> Wire[bool | None]:
        """Store hot-key `copy` unless this server holds a version as new."""
        script = Script("set_copy", (key,), (copy, px_argument(ttl_s)))
        [stored] = yield from run_scripts(self.url, [script])
        return bool(stored)

    def read_markers(self, keys: Sequence[bytes]) -> Wire[dict[bytes, bytes]]:
        """Return the spread markers held here for `keys`."""
        markers = {spread_key(key): key for key in keys}
        found = yield from self._plain_get_many(list(markers))
        return {markers[marker]: value for marker, value in found.items()}

    def write_markers(self, markers: Mapping[bytes, bytes], ttl_s: float) -> Wire[None]:
        """Store spread markers ``{key: spread}`` here, expiring after `ttl_s`."""
        yield from self._plain_set_many(
            {spread_key(key): value for key, value in markers.items()}, ttl_s
        )

    # -- coordinating ----------------------------------------------------------------------------

    def server_epoch(self) -> Wire[int]:
        """Return the epoch of the newest view this server was given (0 if none)."""
        return epoch_value((yield from _plain(self.url, "GET", EPOCH_KEY)))

    def read_view(self) -> Wire[bytes | None]:
        """Return the JSON of the newest view this server holds, or None."""
        view: bytes | None = yield from _plain(self.url, "GET", VIEW_KEY)
        return view

    def publish(self, epoch: int, view_json: bytes, replace: bool = False) -> Wire[int]:
        """Give the server view `epoch` unless it holds a newer one (one script, atomic).

        :raises ViewConflictError: when the server holds another view at `epoch`
        """
        args = (epoch, view_json, "1" if replace else "0")
        [held] = yield from run_scripts(self.url, [Script("publish", (EPOCH_KEY, VIEW_KEY), args)])
        if int(held) < 0:
            raise ViewConflictError.on_server(str(self.url), epoch)
        return int(held)

    def append_audit(self, line: bytes) -> Wire[None]:
        """Append one line (a JSON record) to the server's audit log."""
        yield from _plain(self.url, "RPUSH", AUDIT_KEY, line)

    def read_audit(self) -> Wire[list[bytes]]:
        """Return the audit log's lines, oldest first."""
        return list((yield from _plain(self.url, "LRANGE", AUDIT_KEY, 0, -1)))

    def read_checkpoint(self) -> Wire[bytes | None]:
        """Return the rebalance checkpoint stored on this server, or None."""
        data: bytes | None = yield from _plain(self.url, "GET", CHECKPOINT_KEY)
        return data

    def write_checkpoint(self, data: bytes | None) -> Wire[None]:
        """Store (or, with None, drop) the rebalance checkpoint on this server."""
        if data is None:
            yield from _plain(self.url, "DEL", CHECKPOINT_KEY)
        else:
            yield from _plain(self.url, "SET", CHECKPOINT_KEY, data)

    def index(self, epoch_of: EpochOf, point_of: PointOf, transport: Any) -> Index:
        """The key index of this server, run over the blocking `transport` as every call is."""
        if self._index is None:
            self._index = _index(self.url, transport, epoch_of, point_of)
        return self._index


def _index(
    url: ServerURL, transport: PoolTransport, epoch_of: EpochOf, point_of: PointOf
) -> RedisIndex:
    def run(name: str, keys: Sequence[bytes], args: Sequence[object]) -> Any:
        script = Script(name, tuple(keys), tuple(args))
        [reply] = drive_sync(run_scripts(url, [script]), transport)
        return reply

    return RedisIndex(point_of, epoch_of, run)
