"""The servers behind a client: checked against the placement, called with bookkeeping.

:func:`check_server_map` checks ``{node name: URL}`` once, at the boundary: every node of the
placement must have a URL, every URL must name a node and parse, so that a bad map fails
before anything is written. :meth:`Server.call` runs
one backend call, times it, counts it, tells the hooks, and marks the server down when the call
fails; :meth:`Server.usable` skips a down server and re-admits it after a successful probe.

This module also holds the key rules every backend shares (:func:`key_bytes`, :func:`route_key`).

>>> route_key(b"user:{42}:cart"), route_key(b"plain"), route_key(b"empty:{}")
(b'42', b'plain', b'empty:{}')
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import TypeVar

from ringkit.cluster.backends import Backend
from ringkit.cluster.health import Hook, OpEvent, ServerHealth, ServerStats
from ringkit.cluster.urls import ServerURL, parse_url
from ringkit.errors import BackendError, ConfigError, UnknownNodeError, format_names
from ringkit.placement import Placement

__all__ = ["MAX_KEY_BYTES", "Server", "check_server_map", "key_bytes", "route_key"]

T = TypeVar("T")
# memcached's limit; applied to every backend so that switching backends never breaks a key.
MAX_KEY_BYTES = 250
_FORBIDDEN = re.compile(rb"[\x00-\x20\x7f]")


def key_bytes(key: object) -> bytes:
    """Return `key` as bytes after checking the rules every backend accepts.

    A key is a non-empty str or bytes of at most 250 bytes (UTF-8) with no whitespace or
    control characters (memcached's text protocol cannot carry them).

    >>> key_bytes("booking:42")
    b'booking:42'

    :raises TypeError: when `key` is not str or bytes
    :raises ConfigError: when `key` is empty, too long or has a space or control character
    """
    if isinstance(key, str):
        data = key.encode()
    elif isinstance(key, bytes):
        data = key
    else:
        raise TypeError(f"key must be str or bytes, got {type(key).__name__}")
    if not 0 < len(data) <= MAX_KEY_BYTES:
        raise ConfigError(
            f"key must be 1..{MAX_KEY_BYTES} bytes, got {len(data)} bytes: {key!r:.60}"
        )
    if _FORBIDDEN.search(data):
        raise ConfigError(f"key must have no whitespace or control characters, got {key!r}")
    return data


def route_key(key: bytes) -> bytes:
    """Return what routes `key`: the text of its first non-empty ``{tag}``, or the whole key.

    Keys sharing a tag live on the same nodes (Redis Cluster's hash tags, twemproxy hash_tag).
    """
    start = key.find(b"{")
    if start >= 0:
        end = key.find(b"}", start + 1)
        if end > start + 1:
            return key[start + 1 : end]
    return key


class Server:
    """One backend server of a client, with its health, counters and hooks."""

    __slots__ = ("backend", "health", "hooks", "name", "stats")

    def __init__(
        self, name: str, backend: Backend, health: ServerHealth, hooks: Sequence[Hook]
    ) -> None:
        self.name = name
        self.backend = backend
        self.health = health
        self.stats = ServerStats()
        self.hooks = tuple(hooks)

    @property
    def url(self) -> ServerURL:
        """The server's URL (print it with ``redacted()``)."""
        return self.backend.url

    def call(
        self,
        op: str,
        action: Callable[[Backend], T],
        *,
        hits: Callable[[T], tuple[int, int]] | None = None,
    ) -> T:
        """Run `action` on the backend; count it; mark the server down if it fails.

        `hits` maps the result to (hits, misses) for read calls.

        :raises BackendError: when the server fails (it is then marked down)
        """
        start = time.perf_counter()
        try:
            result = action(self.backend)
        except BackendError as error:
            elapsed = time.perf_counter() - start
            self.health.mark_down(now=time.monotonic())
            self.stats.record(elapsed, error=True)
            self._tell(OpEvent(self.name, op, "error", elapsed, str(error)))
            raise
        elapsed = time.perf_counter() - start
        hit, miss = hits(result) if hits is not None else (0, 0)
        self.stats.record(elapsed, hits=hit, misses=miss)
        if self.hooks:
            outcome = "ok" if hits is None else ("hit" if hit else "miss")
            self._tell(OpEvent(self.name, op, outcome, elapsed))
        return result

    def get_one(self, key: bytes) -> bytes | None:
        """Return the stored bytes of `key` or None: ``call`` for one read, without closures.

        :raises BackendError: when the server fails (it is then marked down)
        """
        start = time.perf_counter()
        try:
            stored = self.backend.get_many((key,)).get(key)
        except BackendError as error:
            elapsed = time.perf_counter() - start
            self.health.mark_down(now=time.monotonic())
            self.stats.record(elapsed, error=True)
            self._tell(OpEvent(self.name, "get", "error", elapsed, str(error)))
            raise
        elapsed = time.perf_counter() - start
        hit = stored is not None
        self.stats.record(elapsed, hits=hit, misses=not hit)
        if self.hooks:
            self._tell(OpEvent(self.name, "get", "hit" if hit else "miss", elapsed))
        return stored

    def _tell(self, event: OpEvent) -> None:
        for hook in self.hooks:
            hook(event)

    def usable(self) -> bool:
        """Return True if the server is up, probing it first when its dead timeout has passed.

        A successful probe deletes the keys hinted while the server was down, then re-admits it.
        """
        health = self.health
        if health.up:
            return True
        now = time.monotonic()
        if not health.claim_probe(now=now):
            self.stats.bump("skipped")
            return False
        try:
            self.call("ping", lambda backend: backend.ping())
            hints = health.take_hints()
            if hints:
                self.call("invalidate", partial(_delete_all, keys=hints))
        except BackendError:
            health.probe_failed(now=time.monotonic())
            self.stats.bump("skipped")
            return False
        health.readmit()
        self.stats.bump("readmissions")
        return True


def _delete_all(backend: Backend, *, keys: list[bytes]) -> None:
    for key in keys:
        backend.delete(key)


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
