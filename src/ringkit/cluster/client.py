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

import builtins
import math
import time
from collections.abc import Callable, Iterable, Mapping, MutableSet, Sequence
from functools import partial
from typing import Any, TypeVar

from ringkit.cluster._reads import read_all, read_first
from ringkit.cluster.backends import Backend
from ringkit.cluster.health import DEFAULT_DEAD_TIMEOUT_S, Hook, StatsSnapshot
from ringkit.cluster.hotkeys import HotKeys
from ringkit.cluster.routing import Router
from ringkit.cluster.serializers import Codec, Decoded, Serializer, VersionClock, get_serializer
from ringkit.cluster.servers import Server, build_servers, key_bytes
from ringkit.errors import BackendError, ConfigError, UnsupportedError
from ringkit.placement import Placement

__all__ = ["DEFAULT_MAX_VALUE_BYTES", "QuorumError", "ShardedClient"]

T = TypeVar("T")
# Below memcached's default 1 MiB item limit, which also counts the key and item header.
DEFAULT_MAX_VALUE_BYTES = 1_000_000
_READ_MODES = ("first", "all")


class QuorumError(BackendError):
    """Fewer replicas than the write quorum acknowledged a write; `keys` lists those keys."""

    def __init__(self, message: str, keys: Sequence[bytes]) -> None:
        super().__init__(message)
        self.keys = list(keys)


def _delete(backend: Backend, *, key: bytes) -> bool:
    return backend.delete(key)


def _set_many(backend: Backend, *, items: dict[bytes, bytes], ttl_s: float | None) -> None:
    backend.set_many(items, ttl_s)


def _check_positive_int(label: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{label} must be an int >= 1, got {value!r}")
    return value


def _check_ttl(ttl_s: float | None) -> float | None:
    if ttl_s is not None and not (
        isinstance(ttl_s, (int, float))
        and math.isfinite(ttl_s)
        and ttl_s > 0
        and not isinstance(ttl_s, bool)
    ):
        raise ConfigError(f"ttl_s must be a number > 0 or None, got {ttl_s!r}")
    return ttl_s


class ShardedClient:
    """A replicated, failure-tolerant cache client over memory, Redis and memcached servers.

    Reading: ``get``, ``get_many``. Writing: ``set``, ``set_many``, ``add``, ``delete``,
    ``incr``, ``decr``, ``touch``. Operating: ``placement``, ``stats``, ``down_servers``,
    ``check_health``, ``flush``, ``close``. Safe to share between threads; survives a fork.
    """

    def __init__(
        self,
        placement: Placement,
        servers: Mapping[str, str],
        *,
        replicas: int = 1,
        write_quorum: int = 1,
        read: str = "first",
        read_repair: bool = True,
        serializer: str | Serializer = "json",
        timeout_s: float = 1.0,
        connect_timeout_s: float | None = None,
        dead_timeout_s: float = DEFAULT_DEAD_TIMEOUT_S,
        max_hints: int = 100_000,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
        max_connections: int = 32,
        hot_keys: HotKeys | None = None,
        hooks: Sequence[Hook] = (),
    ) -> None:
        self._replicas = _check_positive_int("replicas", replicas)
        self._quorum = _check_positive_int("write_quorum", write_quorum)
        if write_quorum > replicas:
            raise ConfigError(f"write_quorum must be <= replicas ({replicas}), got {write_quorum}")
        if read not in _READ_MODES:
            raise ConfigError(f"read must be one of {', '.join(_READ_MODES)}, got {read!r}")
        self._max_value_bytes = _check_positive_int("max_value_bytes", max_value_bytes)
        self._read_all = read == "all"
        self._read_repair = read_repair
        self._codec = Codec(get_serializer(serializer))
        self._clock = VersionClock()
        self._hot = hot_keys
        self._servers = build_servers(
            placement,
            servers,
            timeout_s=timeout_s,
            connect_timeout_s=connect_timeout_s,
            dead_timeout_s=dead_timeout_s,
            max_hints=max_hints,
            max_connections=_check_positive_int("max_connections", max_connections),
            hooks=hooks,
        )
        # One placement reference, read once per call: publishing a new one is one assignment.
        self._router = Router(placement, replicas=replicas, hot_keys=hot_keys)

    # -- routing -------------------------------------------------------------------------------

    @property
    def placement(self) -> Placement:
        """The placement that routes keys."""
        return self._router.placement

    def replicas_for(self, key: str | bytes) -> list[str]:
        """Return the nodes that hold `key`: the first `replicas` of its preference list."""
        return self._router.replica_names(key_bytes(key))

    def read_order(self, key: bytes) -> list[str]:
        """Return the servers a read of `key` tries, in order (hot keys rotate their copies)."""
        return self._router.read_order(key)

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
        found = self.get_many([key])
        return found.get(key)

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

    def _encode(self, key: bytes, value: object, ttl_s: float | None) -> bytes:
        expires = int((time.time() + ttl_s) * 1000) if ttl_s else 0
        data = self._codec.encode(value, version=self._clock.next(), expires_at_ms=expires)
        if len(data) > self._max_value_bytes:
            raise ConfigError(
                f"value of key {key!r:.60} is {len(data)} bytes stored, more than "
                f"max_value_bytes={self._max_value_bytes}"
            )
        return data

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
        _check_ttl(ttl_s)
        encoded: dict[bytes, bytes] = {}
        for key, value in items.items():
            data = key_bytes(key)
            encoded[data] = self._encode(data, value, ttl_s)
        groups: dict[str, dict[bytes, bytes]] = {}
        replicas: dict[bytes, list[str]] = {}
        for data, stored in encoded.items():
            replicas[data] = self._router.replica_names(data)
            for name in self._router.write_names(data):
                groups.setdefault(name, {})[data] = stored
        acked: MutableSet[tuple[str, bytes]] = builtins.set()
        for name, group in groups.items():
            if self._try(name, "set_many", partial(_set_many, items=group, ttl_s=ttl_s), group)[0]:
                acked |= {(name, data) for data in group}
        self._check_quorum(replicas, acked)

    def _check_quorum(
        self, replicas: Mapping[bytes, list[str]], acked: MutableSet[tuple[str, bytes]]
    ) -> None:
        failed = [
            data
            for data, names in replicas.items()
            if sum((name, data) in acked for name in names) < min(self._quorum, len(names))
        ]
        if failed:
            raise QuorumError(
                f"{len(failed)} keys were acknowledged by fewer than write_quorum="
                f"{self._quorum} replicas, first: {failed[0]!r}",
                failed,
            )

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

    def _each(self, key: str | bytes, op: str, action: Callable[[Backend], T]) -> list[T]:
        """Run a single-key write on every target of `key`; return the replicas' answers."""
        data = key_bytes(key)
        replicas = self._router.replica_names(data)
        answers: list[T] = []
        acked: MutableSet[tuple[str, bytes]] = builtins.set()
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
        _check_ttl(ttl_s)
        data = key_bytes(key)
        stored = self._encode(data, value, ttl_s)
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
        if isinstance(delta, bool) or not isinstance(delta, int):
            raise TypeError(f"delta must be int, got {type(delta).__name__}")
        if self._read_all:
            raise UnsupportedError(
                "incr/decr cannot be reconciled by version with read='all'; "
                "use a client with read='first' for counters"
            )
        data = key_bytes(key)
        return self._each(data, "incr", lambda b: b.incr(data, delta))[0]

    def decr(self, key: str | bytes, delta: int = 1) -> int | None:
        """Subtract `delta` (stopping at 0); return the new value, or None if it is missing."""
        if isinstance(delta, bool) or not isinstance(delta, int):
            raise TypeError(f"delta must be int, got {type(delta).__name__}")
        return self.incr(key, -delta)

    def touch(self, key: str | bytes, ttl_s: float) -> bool:
        """Give `key` a new TTL on its replicas; return True if any replica had it."""
        if _check_ttl(ttl_s) is None:
            raise ConfigError("ttl_s must be a number > 0, got None")
        data = key_bytes(key)
        return any(self._each(data, "touch", lambda b: b.touch(data, ttl_s)))

    # -- operating -----------------------------------------------------------------------------

    def server(self, name: str) -> Server:
        """Return the :class:`Server` named `name` (its backend, health and counters)."""
        return self._servers[name]

    def stats(self) -> dict[str, StatsSnapshot]:
        """Return each server's counters: hits, misses, errors, failovers, latency."""
        return {name: server.stats.snapshot() for name, server in self._servers.items()}

    def down_servers(self) -> list[str]:
        """Return the names of the servers marked down right now."""
        return [name for name, server in self._servers.items() if not server.health.up]

    def check_health(self) -> list[str]:
        """Probe every down server whose dead timeout has passed; return those still down."""
        for server in self._servers.values():
            server.usable()
        return self.down_servers()

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

    def __repr__(self) -> str:
        urls = {name: server.backend.url.redacted() for name, server in self._servers.items()}
        return (
            f"ShardedClient({type(self.placement).__name__} of {len(urls)} nodes, "
            f"servers={urls}, replicas={self._replicas}, write_quorum={self._quorum})"
        )

    def _decode(self, stored: bytes) -> Decoded:
        return self._codec.decode(stored)
