"""The servers behind a client: checked against the placement, counted, probed, re-admitted.

:func:`check_server_map` checks ``{node name: URL}`` once, at the boundary: every node of the
placement must have a URL, every URL must name a node and parse, so that a bad map fails
before anything is written. A :class:`Server` is one backend with its health, counters and
hooks; it does no I/O itself: the drivers (:mod:`ringkit.cluster.steps`) time each call and
report it with :meth:`Server.answered` or :meth:`Server.failed` (which marks the server down).

:class:`ServerSet` holds a client's servers and makes the decisions about them, once for the
sync and the async client: whether a server is usable (a down server is skipped until its dead
timeout passes, then probed), what a probe does (a ping, then the keys hinted while it was down
are deleted there, then re-admission: hinted handoff as invalidation, after DeCandia et al.
2007, Dynamo, section 4.6), and how a write that a server missed is remembered (:meth:`attempt`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Generic, Protocol, TypeVar

from ringkit.cluster.health import Hook, OpEvent, ServerHealth, ServerStats
from ringkit.cluster.keys import MAX_KEY_BYTES, key_bytes, route_key
from ringkit.cluster.steps import Call, Failed, Steps, failed_any
from ringkit.cluster.urls import ServerURL, parse_url
from ringkit.errors import (
    ConfigError,
    EpochLostError,
    StaleViewError,
    UnknownNodeError,
    format_names,
)
from ringkit.placement import Placement

__all__ = [
    "MAX_KEY_BYTES",
    "Fenced",
    "Server",
    "ServerSet",
    "check_server_map",
    "key_bytes",
    "route_key",
]


class Fenced(Protocol):
    """What a client's server holds, sync or async: a backend with a URL and the index switch."""

    url: ServerURL
    index_keys: bool


B = TypeVar("B", bound=Fenced)


class Server(Generic[B]):
    """One backend server of a client, with its health, counters and hooks (no I/O here)."""

    __slots__ = ("backend", "health", "hooks", "last_error", "name", "stats")

    def __init__(self, name: str, backend: B, health: ServerHealth, hooks: Sequence[Hook]) -> None:
        self.name = name
        self.backend = backend
        self.health = health
        self.stats = ServerStats()
        self.hooks = tuple(hooks)
        # The message of the latest failure (it names the URL and the cause), for the errors
        # of calls that found every server of a key down.
        self.last_error: str | None = None

    @property
    def url(self) -> ServerURL:
        """The server's URL (print it with ``redacted()``)."""
        return self.backend.url

    def answered(self, op: str, elapsed_s: float, hits: tuple[int, int] | None) -> None:
        """Count a call that answered; `hits` is (hits, misses) for reads."""
        hit, miss = hits if hits is not None else (0, 0)
        self.stats.record(elapsed_s, hits=hit, misses=miss)
        if self.hooks:
            outcome = "ok" if hits is None else ("hit" if hit else "miss")
            self._tell(OpEvent(self.name, op, outcome, elapsed_s))

    def failed(self, op: str, elapsed_s: float, error: Exception) -> None:
        """Count a failed call and mark the server down."""
        self.health.mark_down(now=time.monotonic())
        self.last_error = str(error)
        self.stats.record(elapsed_s, error=True)
        self._tell(OpEvent(self.name, op, "error", elapsed_s, str(error)))

    def _tell(self, event: OpEvent) -> None:
        for hook in self.hooks:
            hook(event)


class ServerSet(Generic[B]):
    """A client's servers by name, and the decisions about them: usable, probe, hint.

    Looking up: ``server(name)``, ``names``, ``items()``. Deciding: ``usable``, ``attempt``.
    Growing: ``join`` (servers that a newer view brings, opened by the client's `opener`).
    """

    def __init__(self, opener: Callable[[str, ServerURL], Server[B]]) -> None:
        self._open = opener
        self._servers: dict[str, Server[B]] = {}

    def server(self, name: str) -> Server[B]:
        """Return the server named `name`."""
        return self._servers[name]

    @property
    def names(self) -> list[str]:
        """The server names."""
        return list(self._servers)

    def items(self) -> list[tuple[str, Server[B]]]:
        """Return (name, server) pairs (a copy: the set may grow meanwhile)."""
        return list(self._servers.items())

    def join(self, urls: Mapping[str, str]) -> None:
        """Open the servers of `urls` that are not here yet."""
        joining = {
            name: self._open(name, parse_url(url))
            for name, url in urls.items()
            if name not in self._servers
        }
        if joining:
            # A new dict, not an update: other threads may be iterating the old one.
            self._servers = {**self._servers, **joining}

    def usable(self, name: str, epoch: int) -> Steps[bool]:
        """Return True if `name` is up, probing (and re-admitting) it when it is due."""
        server = self._servers[name]
        health = server.health
        if health.up:
            return True
        if not health.claim_probe(now=time.monotonic()):
            server.stats.bump("skipped")
            return False
        outcomes = yield (Call(name, "ping", (), epoch),)
        hints = [] if failed_any(outcomes) else health.take_hints()
        if hints:
            try:
                outcomes = yield tuple(
                    Call(name, "delete", (key,), epoch, "invalidate") for key in hints
                )
            except (EpochLostError, StaleViewError):  # the caller re-stamps or refreshes
                for key in hints:
                    health.hint(key)
                health.probe_failed(now=time.monotonic())
                raise
        if failed_any(outcomes):
            for key in hints:  # not invalidated yet: keep them for the next probe
                health.hint(key)
            health.probe_failed(now=time.monotonic())
            server.stats.bump("skipped")
            return False
        health.readmit()
        server.stats.bump("readmissions")
        return True

    def causes(self, names: Iterable[str]) -> str:
        """Return why the servers `names` that are down failed last, as ``"; cause: …"`` text.

        The empty string when none of them is down with a recorded failure.
        """
        seen = dict.fromkeys(names)
        errors = [
            error
            for name in seen
            if not (server := self._servers[name]).health.up
            and (error := server.last_error) is not None
        ]
        return "".join(f"; cause: {error}" for error in errors)

    def attempt(self, name: str, call: Call, keys: Sequence[bytes]) -> Steps[tuple[bool, object]]:
        """Run write `call` on `name`; on failure or when it is down, hint `keys` there.

        Return (True, answer) when the server answered, else (False, None).
        """
        server = self._servers[name]
        if server.health.up or (yield from self.usable(name, call.epoch)):
            [answer] = yield (call,)
            if not isinstance(answer, Failed):
                return True, answer
        for data in keys:
            server.health.hint(data)
        return False, None


def check_server_map(placement: Placement, servers: Mapping[str, str]) -> dict[str, ServerURL]:
    """Return the parsed URL of every node of `placement`, from ``{node name: URL}``.

    :raises UnknownNodeError: when a URL is given for a name that is not a node of the placement
    :raises ConfigError: when a node has no URL or a URL does not parse
    :raises TypeError: when `servers` is not a mapping
    """
    if not isinstance(servers, Mapping):
        raise TypeError(
            f"servers must be a mapping of node name to URL, got {type(servers).__name__}"
        )
    names = [node.name for node in placement.nodes]
    unknown = [name for name in servers if name not in placement]
    if unknown:
        raise UnknownNodeError(
            f"server {unknown[0]!r} is not a node of the placement "
            f"({len(names)} nodes: {format_names(names)})"
        )
    missing = [name for name in names if name not in servers]
    if missing:
        raise ConfigError(
            f"node {missing[0]!r} has no server URL; servers must map every "
            f"node of the placement, missing: {format_names(missing)}"
        )
    return {name: parse_url(servers[name]) for name in names}
