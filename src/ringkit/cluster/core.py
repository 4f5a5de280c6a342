"""What the sync and async sharded clients share: options, routing, encoding, quorum, counters.

:class:`ClientCore` validates every option once, at construction, parses the server map, and
holds the :class:`~ringkit.cluster.routing.Router` (the one swappable placement reference). The
two clients add the calls: :class:`~ringkit.cluster.client.ShardedClient` blocking,
:class:`~ringkit.cluster.aio.AsyncShardedClient` awaited; both behave the same.

>>> check_ttl(60), check_ttl(None)
(60, None)
>>> check_ttl(0)
Traceback (most recent call last):
...
ringkit.errors.ConfigError: ttl_s must be a number > 0 or None, got 0
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence, Set
from typing import Any, Generic, Protocol, TypeVar

from ringkit.cluster.health import (
    DEFAULT_DEAD_TIMEOUT_S,
    Hook,
    ServerHealth,
    ServerStats,
    StatsSnapshot,
)
from ringkit.cluster.hotkeys import HotKeys
from ringkit.cluster.routing import Router
from ringkit.cluster.serializers import Codec, Decoded, Serializer, VersionClock, get_serializer
from ringkit.cluster.servers import check_server_map, key_bytes
from ringkit.cluster.urls import ServerURL
from ringkit.errors import BackendError, ConfigError, UnsupportedError
from ringkit.placement import Placement

__all__ = ["DEFAULT_MAX_VALUE_BYTES", "ClientCore", "QuorumError", "ServerLike", "check_ttl"]

# Below memcached's default 1 MiB item limit, which also counts the key and item header.
DEFAULT_MAX_VALUE_BYTES = 1_000_000
_READ_MODES = ("first", "all")


class QuorumError(BackendError):
    """Fewer replicas than the write quorum acknowledged a write; `keys` lists those keys."""

    def __init__(self, message: str, keys: Sequence[bytes]) -> None:
        super().__init__(message)
        self.keys = list(keys)


class ServerLike(Protocol):
    """What the core reads of a server: its health, counters and backend URL."""

    health: ServerHealth
    stats: ServerStats

    @property
    def url(self) -> ServerURL: ...


S = TypeVar("S", bound=ServerLike)


def check_positive_int(label: str, value: object) -> int:
    """Return `value` if it is an int >= 1.

    :raises ConfigError: naming `label` and the value otherwise
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{label} must be an int >= 1, got {value!r}")
    return value


def check_ttl(ttl_s: float | None) -> float | None:
    """Return `ttl_s` if it is None or a finite number > 0.

    :raises ConfigError: otherwise, naming the value
    """
    if ttl_s is not None and not (
        isinstance(ttl_s, (int, float))
        and not isinstance(ttl_s, bool)
        and math.isfinite(ttl_s)
        and ttl_s > 0
    ):
        raise ConfigError(f"ttl_s must be a number > 0 or None, got {ttl_s!r}")
    return ttl_s


def check_delta(delta: object) -> int:
    """Return `delta` if it is an int (not a bool).

    :raises TypeError: otherwise
    """
    if isinstance(delta, bool) or not isinstance(delta, int):
        raise TypeError(f"delta must be int, got {type(delta).__name__}")
    return delta


class ClientCore(Generic[S]):
    """Options, routing, value encoding and quorum checks; subclasses open the servers.

    Options (keyword-only, all validated here, before any server is contacted):

    - `replicas`: copies of each key, on the first R distinct nodes of its preference list;
    - `write_quorum`: replicas that must acknowledge a write (<= replicas), else QuorumError;
    - `read`: ``"first"`` (first healthy replica, fall back on miss / error / timeout) or
      ``"all"`` (ask every replica, keep the highest version); `read_repair` fixes the rest;
    - `serializer`: ``"json"`` (default), ``"pickle"`` or a :class:`Serializer`;
    - `timeout_s`, `connect_timeout_s`: per call (pymemcache's timeout / connect_timeout);
    - `dead_timeout_s`: how long a failed server is skipped before a probe; `max_hints`: keys
      remembered per down server, deleted there on re-admission;
    - `max_value_bytes`: largest stored value; `max_connections`: pool size per server;
    - `hot_keys`: a :class:`HotKeys` policy, or None; `hooks`: callables given each OpEvent.
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
        self._replicas = check_positive_int("replicas", replicas)
        self._quorum = check_positive_int("write_quorum", write_quorum)
        if write_quorum > replicas:
            raise ConfigError(f"write_quorum must be <= replicas ({replicas}), got {write_quorum}")
        if read not in _READ_MODES:
            raise ConfigError(f"read must be one of {', '.join(_READ_MODES)}, got {read!r}")
        for label, value in (("timeout_s", timeout_s), ("connect_timeout_s", connect_timeout_s)):
            if value is not None and not value > 0:
                raise ConfigError(f"{label} must be > 0, got {value!r}")
        self._max_value_bytes = check_positive_int("max_value_bytes", max_value_bytes)
        check_positive_int("max_connections", max_connections)
        self._read_all = read == "all"
        self._read_repair = read_repair
        self._codec = Codec(get_serializer(serializer))
        self._clock = VersionClock()
        self._hot = hot_keys
        urls = check_server_map(placement, servers)
        self._servers: dict[str, S] = {
            name: self._open_server(
                name,
                url,
                ServerHealth(name, dead_timeout_s=dead_timeout_s, max_hints=max_hints),
                timeout_s=timeout_s,
                connect_timeout_s=connect_timeout_s,
                max_connections=max_connections,
                hooks=hooks,
            )
            for name, url in urls.items()
        }
        # One placement reference, read once per call: publishing a new one is one assignment.
        self._router = Router(placement, replicas=replicas, hot_keys=hot_keys)

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
    ) -> S:
        raise NotImplementedError  # each client opens its own kind of server

    # -- routing -------------------------------------------------------------------------------

    @property
    def placement(self) -> Placement:
        """The placement that routes keys."""
        return self._router.placement

    def replicas_for(self, key: str | bytes) -> list[str]:
        """Return the nodes that hold `key`: the first `replicas` of its preference list."""
        return self._router.replica_names(key_bytes(key))

    @property
    def router(self) -> Router:
        """The router: replicas, read order and write targets of keys, under the placement."""
        return self._router

    def server(self, name: str) -> S:
        """Return the server named `name` (its backend, health and counters)."""
        return self._servers[name]

    # -- values and quorum ---------------------------------------------------------------------

    def _encode(self, key: bytes, value: object, ttl_s: float | None) -> bytes:
        expires = int((time.time() + ttl_s) * 1000) if ttl_s else 0
        data = self._codec.encode(value, version=self._clock.next(), expires_at_ms=expires)
        if len(data) > self._max_value_bytes:
            raise ConfigError(
                f"value of key {key!r:.60} is {len(data)} bytes stored, more than "
                f"max_value_bytes={self._max_value_bytes}"
            )
        return data

    def _encode_many(self, items: Mapping[Any, object], ttl_s: float | None) -> dict[bytes, bytes]:
        """Validate and encode every item before anything is written."""
        check_ttl(ttl_s)
        return {
            (data := key_bytes(key)): self._encode(data, value, ttl_s)
            for key, value in items.items()
        }

    def _decode(self, stored: bytes) -> Decoded:
        return self._codec.decode(stored)

    def _check_counter(self) -> None:
        if self._read_all:
            raise UnsupportedError(
                "incr/decr cannot be reconciled by version with read='all'; "
                "use a client with read='first' for counters"
            )

    def _check_quorum(
        self, replicas: Mapping[bytes, list[str]], acked: Set[tuple[str, bytes]]
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

    # -- operating -----------------------------------------------------------------------------

    def stats(self) -> dict[str, StatsSnapshot]:
        """Return each server's counters: hits, misses, errors, failovers, latency."""
        return {name: server.stats.snapshot() for name, server in self._servers.items()}

    @property
    def down_servers(self) -> list[str]:
        """The names of the servers marked down right now."""
        return [name for name, server in self._servers.items() if not server.health.up]

    def __repr__(self) -> str:
        urls = {name: server.url.redacted() for name, server in self._servers.items()}
        return (
            f"{type(self).__name__}({type(self.placement).__name__} of {len(urls)} nodes, "
            f"servers={urls}, replicas={self._replicas}, write_quorum={self._quorum})"
        )
