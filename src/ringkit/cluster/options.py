"""ClientOptions: every option of a sharded client, validated once, before any server is asked.

``ShardedClient(placement, servers, replicas=2, read="all")`` and its asyncio twin take their
options as keywords and hand them here; the client keeps the validated result as
``client.options``. Each rule is one of :mod:`ringkit.cluster.checks`, so a mistake fails the
same way whichever option it is in (a :class:`~ringkit.errors.ConfigError` naming the option
and the value). The options that build something (the serializer, the view store, the
credentials) are checked by what they build, when the client composes itself.

>>> ClientOptions(replicas=2, write_quorum=2).write_quorum
2
>>> ClientOptions(replicas=1, write_quorum=2)
Traceback (most recent call last):
...
ringkit.errors.ConfigError: write_quorum must be <= replicas (1), got 2
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ringkit.cluster.checks import (
    callables,
    instance_or_none,
    is_flag,
    non_negative_int,
    non_negative_seconds,
    one_of,
    positive_int,
    positive_seconds,
    positive_seconds_or_none,
)
from ringkit.cluster.core.health import DEFAULT_DEAD_TIMEOUT_S, Hook
from ringkit.cluster.core.hotkeys import HotKeys
from ringkit.cluster.remedies.nearcache import NearCache
from ringkit.cluster.values.codec import RAW, Serializer, get_serializer
from ringkit.cluster.views.stores import ViewStore
from ringkit.errors import ConfigError

__all__ = ["DEFAULT_MAX_VALUE_BYTES", "READ_MODES", "ClientOptions", "ServerOptions"]

# Below memcached's default 1 MiB item limit, which also counts the key and item header.
DEFAULT_MAX_VALUE_BYTES = 1_000_000
READ_MODES = ("first", "all")
# Why a raw client refuses what needs versions; named in each refusal.
RAW_WHY = "raw values carry no version to reconcile copies by; use serializer='json'"


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientOptions:
    """The options of one sharded client, each checked (see ``ShardedClient`` for each one).

    `hooks` becomes a tuple. `credentials` and `view_store` are left out of the repr: they may
    hold secrets.
    """

    replicas: int = 1
    write_quorum: int = 1
    read: str = "first"
    read_repair: bool = True
    serializer: str | Serializer = "json"
    timeout_s: float = 1.0
    connect_timeout_s: float | None = None
    dead_timeout_s: float = DEFAULT_DEAD_TIMEOUT_S
    max_hints: int = 100_000
    max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES
    max_connections: int = 32
    hot_keys: HotKeys | None = None
    hooks: Sequence[Hook] = ()
    view_store: str | ViewStore | None = field(default=None, repr=False)
    credentials: Mapping[str, str | tuple[str, str]] | None = field(default=None, repr=False)
    near_cache: NearCache | None = None
    index_keys: bool = True

    def __post_init__(self) -> None:
        replicas = positive_int("replicas", self.replicas)
        if positive_int("write_quorum", self.write_quorum) > replicas:
            raise ConfigError(
                f"write_quorum must be <= replicas ({replicas}), got {self.write_quorum}"
            )
        one_of("read", self.read, READ_MODES)
        is_flag("read_repair", self.read_repair)
        positive_seconds("timeout_s", self.timeout_s)
        positive_seconds_or_none("connect_timeout_s", self.connect_timeout_s)
        non_negative_seconds("dead_timeout_s", self.dead_timeout_s)
        non_negative_int("max_hints", self.max_hints)
        positive_int("max_value_bytes", self.max_value_bytes)
        positive_int("max_connections", self.max_connections)
        instance_or_none("hot_keys", self.hot_keys, HotKeys)
        instance_or_none("near_cache", self.near_cache, NearCache)
        is_flag("index_keys", self.index_keys)
        object.__setattr__(self, "hooks", callables("hooks", self.hooks))
        if self.raw:
            self._check_raw()
        else:
            get_serializer(self.serializer)  # an unknown name fails here, naming the known ones

    @property
    def raw(self) -> bool:
        """Whether values are stored as they are (``serializer="raw"``), with no version."""
        return self.serializer == RAW

    def _check_raw(self) -> None:
        """Refuse, naming the option and why, what needs versions when values are raw."""
        if self.replicas > 1:
            raise ConfigError(
                f"replicas must be 1 with serializer='raw', got {self.replicas}; {RAW_WHY}"
            )
        if self.read != "first":
            raise ConfigError(
                f"read must be 'first' with serializer='raw', got {self.read!r}; {RAW_WHY}"
            )
        if self.hot_keys is not None:
            raise ConfigError(
                f"hot_keys must be None with serializer='raw', got {self.hot_keys!r}; "
                f"hot-key copies could serve stale values: {RAW_WHY}"
            )

    @property
    def server_options(self) -> ServerOptions:
        """How each server is opened, a server learnt from a later view too."""
        return ServerOptions(
            self.timeout_s,
            self.connect_timeout_s,
            self.max_connections,
            tuple(self.hooks),
            self.dead_timeout_s,
            self.max_hints,
        )


@dataclass(frozen=True, slots=True)
class ServerOptions:
    """How a client opens its servers; a server that joins through a new view opens alike."""

    timeout_s: float
    connect_timeout_s: float | None
    max_connections: int
    hooks: tuple[Hook, ...]
    dead_timeout_s: float
    max_hints: int

    @property
    def connection(self) -> dict[str, Any]:
        """The keyword options of ``open_backend`` / ``open_async_backend``."""
        return {
            "timeout_s": self.timeout_s,
            "connect_timeout_s": self.connect_timeout_s,
            "max_connections": self.max_connections,
        }
