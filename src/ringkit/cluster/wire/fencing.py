"""Redis behind the fence: every call as the scripts of :mod:`ringkit.cluster.wire.redis.scripts`.

On Redis the check and the write run in one Lua script, so they are atomic: no write routed by an
old view can land after the coordinator has moved the server on. Every Redis write also records
the key in the server's index (:mod:`ringkit.cluster.wire.index`), in the same script. The other
server kinds are run by :mod:`ringkit.cluster.wire.handles`; :func:`fence` and
:func:`fence_async` give each URL its handle.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

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
from ringkit.cluster.wire.aio_backends import AsyncRedisBackend
from ringkit.cluster.wire.backends import MemoryBackend, RedisBackend
from ringkit.cluster.wire.failures import server_failed
from ringkit.cluster.wire.fence import EpochOf, epoch_value
from ringkit.cluster.wire.handles import (
    AsyncFencedServer,
    Connection,
    FencedBackend,
)
from ringkit.cluster.wire.index import Index, IndexSweep, RedisIndex
from ringkit.cluster.wire.items import Hinted
from ringkit.cluster.wire.memory import MemoryServer, NoTransport
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
from ringkit.cluster.wire.urls import ServerURL
from ringkit.errors import BackendError, ViewConflictError

__all__ = ["AnyAsyncFenced", "AnyFenced", "AsyncFencedRedis", "FencedRedis", "fence", "fence_async"]


class _Fenced:
    """What both Redis forms hold: the inner backend, the routed epoch, the point of a key."""

    def __init__(self, inner: Any, epoch_of: EpochOf, point_of: PointOf) -> None:
        self.inner = inner
        self.url: ServerURL = inner.url
        self.epoch_of = epoch_of
        self.point_of = point_of
        self.index_keys = True
        self.sweep = IndexSweep()  # the bounded index sweep that rides on this client's writes

    def sweep_due(self, op: str, args: Sequence[Any]) -> list[Script]:
        """Return the index sweep step to run after write `op(*args)`, if one is due."""
        count = self.sweep.due(op, args) if self.index_keys else 0
        return [Script("sweep", (INDEX_KEY,), (self.sweep.cursor, count))] if count else []


class FencedRedis(_Fenced):
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

    def set_many(self, items: Mapping[bytes, bytes], ttl_s: float | None) -> None:
        self.serve("set_many", items, ttl_s)

    def add(self, key: bytes, value: bytes, ttl_s: float | None) -> bool:
        return bool(self.serve("add", key, value, ttl_s))

    def delete(self, key: bytes) -> bool:
        return bool(self.serve("delete", key))

    def repair(self, key: bytes, value: bytes, ttl_s: float | None) -> bool:
        return bool(self.serve("repair", key, value, ttl_s))

    def bury(self, key: bytes, tombstone: bytes, ttl_s: float) -> bool:
        return bool(self.serve("bury", key, tombstone, ttl_s))

    def bury_many(self, tombstones: Mapping[bytes, bytes], ttl_s: float) -> list[bytes]:
        gone: list[bytes] = self.serve("bury_many", tombstones, ttl_s)
        return gone

    def incr(self, key: bytes, delta: int) -> int | None:
        result: int | None = self.serve("incr", key, delta)
        return result

    def touch(self, key: bytes, ttl_s: float) -> bool:
        return bool(self.serve("touch", key, ttl_s))

    def ttl_left(self, key: bytes) -> float | None:
        left: float | None = self.serve("ttl_left", key)
        return left

    def ping(self) -> None:
        self.inner.ping()

    def flush(self) -> None:
        self.inner.flush()

    def close(self) -> None:
        self.inner.close()

    def mark_readmitted(self, server: str, at_ms: int) -> None:
        self.inner.set_many({readmitted_key(server): str(at_ms).encode()}, None)

    def read_markers(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        markers = {spread_key(key): key for key in keys}
        found = self.inner.get_many(list(markers))
        return {markers[marker]: value for marker, value in found.items()}

    def write_markers(self, markers: Mapping[bytes, bytes], ttl_s: float) -> None:
        self.inner.set_many({spread_key(key): value for key, value in markers.items()}, ttl_s)

    def server_epoch(self) -> int:
        return epoch_value(self.inner.get_many([EPOCH_KEY]).get(EPOCH_KEY))

    def read_view(self) -> bytes | None:
        view: bytes | None = self.inner.get_many([VIEW_KEY]).get(VIEW_KEY)
        return view

    def read_checkpoint(self) -> bytes | None:
        data: bytes | None = self.inner.get_many([CHECKPOINT_KEY]).get(CHECKPOINT_KEY)
        return data

    def write_checkpoint(self, data: bytes | None) -> None:
        if data is None:
            self.inner.delete(CHECKPOINT_KEY)
        else:
            self.inner.set_many({CHECKPOINT_KEY: data}, None)

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
            return self.serve(op, *args), self.read_markers(keys)
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


class AsyncFencedRedis(_Fenced):
    """The async form of :class:`FencedRedis`: ``await serve(op, *args)``."""

    inner: AsyncRedisBackend

    def __init__(self, inner: AsyncRedisBackend, epoch_of: EpochOf, point_of: PointOf) -> None:
        super().__init__(inner, epoch_of, point_of)
        client = inner.client
        self._scripts = {
            name: client.register_script(src)
            for name, src in {**SCRIPTS, **HANDOFF_SCRIPTS}.items()
        }

    async def serve(self, op: str, *args: Any) -> Any:
        """Await backend call `op(*args)` fenced by the routed epoch (ping, flush: unfenced)."""
        if op in _UNFENCED:
            return await getattr(self, op)(*args)
        sent = self.epoch_of()
        scripts = redis_scripts(op, args, sent, self.point_of, index_keys=self.index_keys)
        answer = redis_answer(op, args, await self._run_all(scripts), sent=sent, url=self.url)
        for step in self.sweep_due(op, args):
            with contextlib.suppress(BackendError):  # best effort, as in the sync form
                self.sweep.advance(await self._run(step))
        return answer

    async def _run(self, script: Script) -> Any:
        import redis

        try:
            if script.name not in self._scripts:  # a plain command (a read's MGET)
                client = self.inner.client
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
            pipe = self.inner.client.pipeline(transaction=False)
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

    async def _command(self, *command: Any) -> Any:
        import redis

        try:
            return await self.inner.client.execute_command(*command)
        except (TimeoutError, redis.RedisError, OSError) as error:
            raise server_failed(self.url, error) from None

    async def add_hints(self, server: str, keys: Sequence[bytes], max_hints: int) -> Hinted | None:
        """Keep hints for down `server` here, then read its re-admission stamp (see sync)."""
        keys_of = (hints_key(server), readmitted_key(server))
        dropped, stamp = await self._run(Script("add_hints", keys_of, (max_hints, *keys)))
        return int(dropped), int(stamp)

    async def mark_readmitted(self, server: str, at_ms: int) -> None:
        """Stamp here that a process begins re-admitting `server` at `at_ms` (Unix ms)."""
        await self.inner.set_many({readmitted_key(server): str(at_ms).encode()}, None)

    async def read_hints(self, server: str) -> list[bytes]:
        """Return the keys hinted here for `server`."""
        return list(await self._command("SMEMBERS", hints_key(server)))

    async def drop_hints(self, server: str, keys: Sequence[bytes]) -> None:
        """Remove exactly `keys` from the hints kept here for `server` (they were applied)."""
        for at in range(0, len(keys), KEYS_PER_CALL):
            await self._command("SREM", hints_key(server), *keys[at : at + KEYS_PER_CALL])

    async def set_copy(self, key: bytes, copy: bytes, ttl_s: float | None) -> bool | None:
        """Store hot-key `copy` unless this server holds a version as new; None: contended."""
        return bool(await self._run(Script("set_copy", (key,), (copy, px_argument(ttl_s)))))

    async def read_markers(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        """Return the spread markers held here for `keys`."""
        markers = {spread_key(key): key for key in keys}
        found = await self.inner.get_many(list(markers))
        return {markers[marker]: value for marker, value in found.items()}

    async def write_marked(
        self, op: str, args: Sequence[Any], keys: Sequence[bytes]
    ) -> tuple[Any, dict[bytes, bytes]]:
        """Run write `op(*args)`, then read the spread markers of `keys`, after it, here."""
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
                self.inner.client.pipeline(transaction=False), scripts, self._scripts, keys
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
        answer = await self.serve(op, *args)
        return answer, await self.read_markers(keys)

    async def write_markers(self, markers: Mapping[bytes, bytes], ttl_s: float) -> None:
        """Store spread markers ``{key: spread}`` here, expiring after `ttl_s`."""
        await self.inner.set_many({spread_key(k): value for k, value in markers.items()}, ttl_s)

    async def publish(self, epoch: int, view_json: bytes, replace: bool = False) -> int:
        """Give the server view `epoch` unless it holds a newer one (see FencedRedis.publish).

        :raises ViewConflictError: when the server holds another view at `epoch`
        """
        args = (epoch, view_json, "1" if replace else "0")
        held = int(await self._run(Script("publish", (EPOCH_KEY, VIEW_KEY), args)))
        if held < 0:
            raise ViewConflictError.on_server(str(self.url), epoch)
        return held

    async def ping(self) -> None:
        await self.inner.ping()

    async def flush(self) -> None:
        await self.inner.flush()

    async def close(self) -> None:
        await self.inner.close()


AnyFenced = FencedBackend | FencedRedis
AnyAsyncFenced = AsyncFencedServer | AsyncFencedRedis


def fence(backend: Any, epoch_of: EpochOf, point_of: PointOf) -> AnyFenced:
    """Return `backend` fenced by `epoch_of` (the epoch each call was routed with)."""
    if isinstance(backend, (FencedBackend, FencedRedis)):
        backend = backend.inner
    if isinstance(backend, RedisBackend):
        return FencedRedis(backend, epoch_of, point_of)
    if isinstance(backend, MemoryBackend):
        backend = Connection(MemoryServer(backend.url), NoTransport())
    return FencedBackend(backend, epoch_of, point_of)


def fence_async(backend: Any, epoch_of: EpochOf, point_of: PointOf) -> AnyAsyncFenced:
    """Return async `backend` fenced by `epoch_of` (the epoch each call was routed with)."""
    if isinstance(backend, AsyncRedisBackend):
        return AsyncFencedRedis(backend, epoch_of, point_of)
    return AsyncFencedServer(backend, epoch_of, point_of)


_UNFENCED = frozenset(
    {"ping", "flush", "read_view", "publish", "add_hints", "read_hints", "drop_hints"}
    | {"mark_readmitted", "read_markers", "set_copy", "write_marked", "write_markers"}
)
