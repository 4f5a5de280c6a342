"""ShardedClient: a cache client that routes every key through a placement to its servers.

The placement (any ringkit placement: ``HashRing``, ``Modulo``, …) picks a key's preference
list; the client writes to the first `replicas` nodes of it and needs `write_quorum` of them to
acknowledge. Reads go to the first healthy replica and fall back to the next on a miss, an error
or a timeout (``read="first"``), or ask every replica and keep the highest version
(``read="all"``); either way stale or missing copies are repaired when `read_repair` is on.
Failing servers are skipped and re-admitted after a health check (:mod:`ringkit.cluster.health`).
Multi-key calls make one round trip per server and per fallback round.

Guarantees: no read fails while a replica of its key is up; no acknowledged write is lost while
at most ``replicas - 1`` of its replicas are down (with ``write_quorum=replicas``, also across
later failures). The placement is held in one reference, read once per call, so a new placement
can be published by swapping it (the seam for live rebalancing).

>>> from ringkit import HashRing
>>> ring = HashRing(["a", "b", "c"])
>>> client = ShardedClient(ring, {n: f"memory://doctest-client-{n}" for n in "abc"}, replicas=2)
>>> client.set("booking:42", {"seat": "12A"}, ttl_s=60)
>>> client.get("booking:42")
{'seat': '12A'}
>>> client.get("booking:43") is None
True
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Any, TypeVar

from ringkit.cluster._reads import read_all, read_first, read_one
from ringkit.cluster.backends import Backend, open_backend
from ringkit.cluster.core import (
    DEFAULT_MAX_VALUE_BYTES,
    ClientCore,
    QuorumError,
    check_delta,
    check_ttl,
)
from ringkit.cluster.health import Hook, ServerHealth
from ringkit.cluster.servers import Server, key_bytes
from ringkit.cluster.urls import ServerURL
from ringkit.errors import BackendError, ConfigError

__all__ = ["DEFAULT_MAX_VALUE_BYTES", "QuorumError", "ShardedClient"]

T = TypeVar("T")


def _delete(backend: Backend, *, key: bytes) -> bool:
    return backend.delete(key)


def _set_many(backend: Backend, *, items: dict[bytes, bytes], ttl_s: float | None) -> None:
    backend.set_many(items, ttl_s)


class ShardedClient(ClientCore[Server]):
    """A replicated, failure-tolerant cache client over memory, Redis and memcached servers.

    Reading: ``get``, ``get_many``. Writing: ``set``, ``set_many``, ``add``, ``delete``,
    ``incr``, ``decr``, ``touch``. Operating: ``placement``, ``replicas_for``, ``stats``,
    ``down_servers``, ``check_health``, ``flush``, ``close``. Safe to share between threads;
    survives a fork. Options (keyword-only): see :class:`~ringkit.cluster.core.ClientCore`.
    """

    def _open_server(
        self,
        name: str,
        url: ServerURL,
        health: ServerHealth,
        *,
        timeout_s: float,
        connect_timeout_s: float | None,
        max_connections: int,
        hooks: Sequence[Hook],
    ) -> Server:
        backend = open_backend(
            url,
            timeout_s=timeout_s,
            connect_timeout_s=connect_timeout_s,
            max_connections=max_connections,
        )
        return Server(name, backend, health, hooks)

    def _record(self, keys: Iterable[bytes]) -> None:
        hot = self._hot
        if hot is None:
            return
        for data in keys:
            hot.record(data)
        for data in hot.drain_left():
            # A key left the hot set: delete its extra copies so they never serve stale values.
            for name in self._router.extra_copies(data):
                self._try(name, "delete", partial(_delete, key=data), [data])

    # -- reading -------------------------------------------------------------------------------

    def get(self, key: str | bytes) -> Any:
        """Return the value stored at `key`, or None when no replica has it.

        Runtime: one round trip when the first replica answers; one more per fallback.

        :raises BackendError: when no replica of the key could be reached
        :raises TypeError, ConfigError: when `key` is not a valid key
        """
        if self._read_all:
            return self.get_many([key]).get(key)
        data = key_bytes(key)
        if self._hot is not None:
            self._record((data,))
        found = read_one(self, data)
        return None if found is None else found.value

    def get_many(self, keys: Iterable[str | bytes]) -> dict[Any, Any]:
        """Return ``{key: value}`` for the keys found (missing keys are left out).

        Keys are grouped per server: one round trip per server in each fallback round.

        :raises BackendError: when no replica of some key could be reached
        """
        given = {key_bytes(key): key for key in keys}
        self._record(given)
        reader = read_all if self._read_all else read_first
        found = reader(self, list(given))
        return {given[data]: decoded.value for data, decoded in found.items()}

    # -- writing -------------------------------------------------------------------------------

    def set(self, key: str | bytes, value: object, *, ttl_s: float | None = None) -> None:
        """Store `value` at `key` on its replicas, expiring after `ttl_s` seconds if given.

        :raises QuorumError: when fewer than `write_quorum` replicas acknowledged
        :raises ConfigError: when the value is too large or `ttl_s` is not > 0
        :raises TypeError: when the serializer cannot encode the value
        """
        self.set_many({key: value}, ttl_s=ttl_s)

    def set_many(self, items: Mapping[str | bytes, object], *, ttl_s: float | None = None) -> None:
        """Store every item; one round trip per server. Validates everything before writing.

        :raises QuorumError: listing the keys that fewer than `write_quorum` replicas took
        """
        encoded = self._encode_many(items, ttl_s)
        groups: dict[str, dict[bytes, bytes]] = {}
        replicas: dict[bytes, list[str]] = {}
        for data, stored in encoded.items():
            replicas[data] = self._router.replica_names(data)
            for name in self._router.write_names(data):
                groups.setdefault(name, {})[data] = stored
        acked: set[tuple[str, bytes]] = set()
        for name, group in groups.items():
            if self._try(name, "set_many", partial(_set_many, items=group, ttl_s=ttl_s), group)[0]:
                acked |= {(name, data) for data in group}
        self._check_quorum(replicas, acked)

    def _try(
        self, name: str, op: str, action: Callable[[Backend], T], keys: Iterable[bytes]
    ) -> tuple[bool, T | None]:
        """Run a write on server `name`; on failure or when it is down, hint the keys.

        Return (True, answer) when the server answered, else (False, None).
        """
        server = self._servers[name]
        if server.usable():
            try:
                return True, server.call(op, action)
            except BackendError:
                pass
        for data in keys:
            server.health.hint(data)
        return False, None

    def _each(self, data: bytes, op: str, action: Callable[[Backend], T]) -> list[T]:
        """Run a single-key write on every target of `data`; return the replicas' answers."""
        replicas = self._router.replica_names(data)
        answers: list[T] = []
        acked: set[tuple[str, bytes]] = set()
        for name in self._router.write_names(data):
            ok, answer = self._try(name, op, action, [data])
            if ok:
                acked.add((name, data))
                if name in replicas:
                    answers.append(answer)  # type: ignore[arg-type]
        self._check_quorum({data: replicas}, acked)
        return answers

    def add(self, key: str | bytes, value: object, *, ttl_s: float | None = None) -> bool:
        """Store `value` only where `key` is absent; return what the first replica answered.

        :raises QuorumError: when fewer than `write_quorum` replicas answered
        """
        [(data, stored)] = self._encode_many({key: value}, ttl_s).items()
        return self._each(data, "add", lambda b: b.add(data, stored, ttl_s))[0]

    def delete(self, key: str | bytes) -> bool:
        """Delete `key` from its replicas; return True if any replica had it."""
        data = key_bytes(key)
        return any(self._each(data, "delete", lambda b: b.delete(data)))

    def incr(self, key: str | bytes, delta: int = 1) -> int | None:
        """Add `delta` to the integer at `key`; return the new value, or None if it is missing.

        Each replica counts on its own (server-side, atomic); the first replica's answer is
        returned. A decrement stops at 0 on every backend (memcached's rule).

        :raises UnsupportedError: with ``read="all"`` (counters carry no version to reconcile)
        :raises ValueError: when the stored value is not a decimal integer
        """
        check_delta(delta)
        self._check_counter()
        data = key_bytes(key)
        return self._each(data, "incr", lambda b: b.incr(data, delta))[0]

    def decr(self, key: str | bytes, delta: int = 1) -> int | None:
        """Subtract `delta` (stopping at 0); return the new value, or None if it is missing."""
        return self.incr(key, -check_delta(delta))

    def touch(self, key: str | bytes, ttl_s: float) -> bool:
        """Give `key` a new TTL on its replicas; return True if any replica had it."""
        if check_ttl(ttl_s) is None:
            raise ConfigError("ttl_s must be a number > 0, got None")
        data = key_bytes(key)
        return any(self._each(data, "touch", lambda b: b.touch(data, ttl_s)))

    # -- operating -----------------------------------------------------------------------------

    def check_health(self) -> list[str]:
        """Probe every down server whose dead timeout has passed; return those still down."""
        for server in self._servers.values():
            server.usable()
        return self.down_servers

    def flush(self) -> None:
        """Delete every key on every server (``flush_all`` / ``FLUSHDB``)."""
        for server in self._servers.values():
            server.call("flush", lambda b: b.flush())

    def close(self) -> None:
        """Close every connection pool."""
        for server in self._servers.values():
            server.backend.close()

    def __enter__(self) -> ShardedClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
