"""ShardedClient: a cache client that routes every key through a placement to its servers.

The placement (any ringkit placement: ``HashRing``, ``Modulo``, …) picks a key's preference
list; the client writes to the first `replicas` nodes of it and needs `write_quorum` of them to
acknowledge. Reads go to the first healthy replica and fall back to the next on a miss, an error
or a timeout (``read="first"``), or ask every replica and keep the highest version
(``read="all"``); either way stale or missing copies are repaired when `read_repair` is on.
Failing servers are skipped and re-admitted after a health check
(:mod:`ringkit.cluster.core.health`). Multi-key calls make one round trip per server and per
fallback round, to every server at once: the calls of a round run in a small pool of threads
(:class:`~ringkit.cluster.drivers.fanout.FanOut`), so a ``get_many`` over S servers costs about one
round trip, not S.

Guarantees: no read fails while a replica of its key is up; no acknowledged write is lost while
at most ``replicas - 1`` of its replicas are down (with ``write_quorum=replicas``, also across
later failures), nor by a membership change (every call is fenced by its view's epoch; see
:mod:`ringkit.cluster.core.tracker`). The client is composed, not assembled: it *has* a view store,
servers, a reader and a writer (:mod:`ringkit.cluster.clientcore`, where every decision lives, once
for this client and :class:`~ringkit.cluster.aio.AsyncShardedClient`); this module only opens
blocking backends, runs the core's steps and makes its lone calls (a single-key ``get`` or ``set``
that is one call, :mod:`ringkit.cluster.core.alone`).

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

from collections.abc import Iterable, Mapping
from functools import cached_property
from typing import Any, TypeVar

from ringkit.cluster.clientcore import REFUSED, STEPS, ClientCore, check_delta
from ringkit.cluster.core.servers import Server
from ringkit.cluster.drivers.fanout import FanOut
from ringkit.cluster.drivers.steps import Call, Steps, call_sync, run_sync
from ringkit.cluster.options import ServerOptions
from ringkit.cluster.rebalance.options import RebalanceOptions, RebalanceReport
from ringkit.cluster.values.expiry import ttl_keyword
from ringkit.cluster.values.keys import user_key
from ringkit.cluster.views.view import ClusterView
from ringkit.cluster.wire.backends import open_backend
from ringkit.cluster.wire.fence import routed_epoch
from ringkit.cluster.wire.handles import FencedBackend, fence
from ringkit.cluster.wire.urls import ServerURL
from ringkit.errors import EpochLostError, StaleViewError

__all__ = ["ShardedClient"]

T = TypeVar("T")


class ShardedClient(ClientCore[FencedBackend]):
    """A replicated, failure-tolerant cache client over memory, Redis and memcached servers.

    Reading: ``get``, ``get_many``. Writing: ``set``, ``set_many``, ``add``, ``delete``,
    ``delete_many``, ``incr``, ``decr``, ``touch``. Membership: ``view``, ``epoch``,
    ``refresh_view``, ``adopt_view``, ``add_server``, ``remove_server``. Operating: ``placement``,
    ``replicas_for``, ``stats``, ``down_servers``, ``check_health``, ``flush``, ``close``.
    Safe to share between threads; survives a fork. Options (keyword-only): see
    :class:`~ringkit.cluster.clientcore.ClientCore`.
    """

    def _open_backend(self, url: ServerURL, options: ServerOptions) -> FencedBackend:
        backend = open_backend(url, **options.connection)
        return fence(backend, routed_epoch(self._epoch), self._point_of)

    @cached_property
    def fan_out(self) -> FanOut:
        """The threads that send the calls of one round to their servers at once.

        At most `max_connections` threads, started when a round first needs them; after
        ``fan_out.close()`` (or the client's ``close``) rounds go to one server after another.
        """
        return FanOut(max_threads=self._server_options.max_connections)

    def _run(self, steps: Steps[T]) -> T:
        return run_sync(steps, self._servers.server, self.fan_out)

    def _call_alone(self, call: Call, server: Server[FencedBackend]) -> Any:
        """Make a lone call (:mod:`ringkit.cluster.core.alone`); a refusal answers REFUSED."""
        try:
            return call_sync(call, server)
        except (StaleViewError, EpochLostError):
            return REFUSED

    def _write(self, encoded: Mapping[bytes, bytes], ttl_s: float | None) -> None:
        lone = self._lone_set(encoded, ttl_s)
        if lone is None or not self._lone_done(self._call_alone(*lone)):
            self._run(self._set_encoded(encoded, ttl_s))

    # -- reading -------------------------------------------------------------------------------

    def get(self, key: str | bytes) -> Any:
        """Return the value stored at `key`, or None when no replica has it.

        With ``serializer="raw"`` the value is the stored bytes, whatever their writer.

        Runtime: one round trip when the first replica answers; one more per fallback.

        :raises BackendError: when no replica of the key could be reached
        :raises TypeError, ConfigError: when `key` is not a valid key
        """
        data = user_key(key)
        lone = self._lone_get(data)
        if lone is not None:
            value = self._lone_got(lone, data, self._call_alone(*lone))
            if value is not STEPS:
                return value
        return self._run(self._get(data))

    def get_many(self, keys: Iterable[str | bytes], *, on_error: str = "raise") -> dict[Any, Any]:
        """Return ``{key: value}`` for the keys found (missing keys are left out).

        Keys are grouped per server: one round trip per server in each fallback round, to
        every server at once (:attr:`fan_out`). With ``on_error="miss"``, a key no replica of
        which could be reached is left out too, so the healthy servers' keys are returned.

        :raises BackendError: when no replica of some key could be reached (``"raise"``)
        """
        return self._run(self._get_many(keys, on_error))

    # -- writing -------------------------------------------------------------------------------

    @ttl_keyword
    def set(self, key: str | bytes, value: object, *, ttl_s: float | None = None) -> None:
        """Store `value` at `key` on its replicas, expiring after `ttl_s` seconds if given.

        :raises QuorumError: when fewer than `write_quorum` replicas acknowledged
        :raises ConfigError: when the value is too large or `ttl_s` is not > 0
        :raises TypeError: when the serializer cannot encode the value
        """
        self._write(self.writer.encode_one(key, value, ttl_s), ttl_s)

    @ttl_keyword
    def set_many(self, items: Mapping[str | bytes, object], *, ttl_s: float | None = None) -> None:
        """Store every item; one round trip per server. Validates everything before writing.

        :raises QuorumError: listing the keys that fewer than `write_quorum` replicas took
        """
        self._write(self.writer.encode_many(items, ttl_s), ttl_s)

    @ttl_keyword
    def add(self, key: str | bytes, value: object, *, ttl_s: float | None = None) -> bool:
        """Store `value` only where `key` is absent; return what the first replica answered.

        :raises QuorumError: when fewer than `write_quorum` replicas answered
        """
        return self._run(self._add(key, value, ttl_s))

    def delete(self, key: str | bytes) -> bool:
        """Delete `key` from its replicas; return True if any replica had it."""
        return self._run(self._delete(key))

    def delete_many(self, keys: Iterable[str | bytes]) -> int:
        """Delete every key from its replicas; return how many some replica had.

        One round trip per server (pipelined on Redis; memcached deletes key by key, its
        ``gets`` + ``cas`` per key), to every server at once (:attr:`fan_out`). Each key keeps
        a tombstone as with :meth:`delete`.

        :raises QuorumError: listing the keys that fewer than `write_quorum` replicas took
        :raises TypeError, ConfigError: when a key is not valid (nothing is deleted then)
        """
        return self._run(self._delete_many(keys))

    def incr(self, key: str | bytes, delta: int = 1) -> int | None:
        """Add `delta` to the integer at `key`; return the new value, or None if it is missing.

        Each replica counts on its own (server-side, atomic); the first replica's answer is
        returned. A decrement stops at 0 on every backend (memcached's rule).

        :raises UnsupportedError: with ``read="all"`` (counters carry no version to reconcile)
        :raises ConfigError: when the stored value is not a decimal integer in [0, 2**64 - 1]
        """
        return self._run(self._incr(key, delta))

    def decr(self, key: str | bytes, delta: int = 1) -> int | None:
        """Subtract `delta` (stopping at 0); return the new value, or None if it is missing."""
        return self.incr(key, -check_delta(delta))

    @ttl_keyword
    def touch(self, key: str | bytes, ttl_s: float) -> bool:
        """Give `key` a new TTL on its replicas; return True if any replica had it."""
        return self._run(self._touch(key, ttl_s))

    # -- membership ----------------------------------------------------------------------------

    def refresh_view(self, *, at_least: int = 0) -> ClusterView:
        """Read the newest view from the view store and adopt it if it is newer; return the view.

        `at_least` is an epoch some server announced: servers are asked until one has it.

        :raises BackendError: when the view store could not be read
        """
        return self._run(self._refresh(at_least))

    def add_server(
        self, name: str, url: str, *, options: RebalanceOptions | None = None
    ) -> RebalanceReport:
        """Add server `name` at `url` and move its keys to it while traffic goes on.

        The registered coordinator (:class:`~ringkit.cluster.rebalance.coordinator.Rebalancer`)
        publishes a transitional view, streams exactly the moved arcs, publishes the final view,
        then deletes the moved copies from their old owners. Returns what was moved.

        :raises UnsupportedError: with ``serializer="raw"`` (values carry no version)
        :raises DuplicateNodeError: when `name` is already a node
        :raises ConfigError: when a rebalance is already in progress (resume or roll it back)
        :raises BackendError: when a server the change needs cannot be reached
        """
        self._check_change("add")
        return self._change(self.refresh_view(), options, "add", name, url)

    def remove_server(
        self, name: str, *, options: RebalanceOptions | None = None
    ) -> RebalanceReport:
        """Remove server `name`, moving its keys to their new owners while traffic goes on.

        If the server is down and ``replicas >= 2``, its copies are rebuilt from the surviving
        replicas.

        :raises UnknownNodeError: when `name` is not a node
        :raises BackendError: when the server is down and its keys have no other copy
        """
        self._check_change("remove")
        return self._change(self.refresh_view(), options, "remove", name)

    # -- operating -----------------------------------------------------------------------------

    def check_health(self) -> list[str]:
        """Probe every down server whose dead timeout has passed; return those still down."""
        return self._run(self._check_health())

    def sweep_index(self) -> int:
        """Drop the key index entries of keys that expired or were evicted; return how many.

        Writes already sweep the index a bounded step at a time, which keeps it within about
        4/3 entries per live key; this sweeps all of it at once (Redis servers; 0 elsewhere).

        :raises BackendError: when a server fails
        """
        return self._run(self._sweep_index())

    def flush(self) -> None:
        """Delete every key on every server (``flush_all`` / ``FLUSHDB``)."""
        self._run(self._flush())

    def close(self) -> None:
        """Close every connection pool, stop the fan-out threads and following the view store."""
        self.fan_out.close()
        self._tracker.close()
        if self.metrics is not None:
            self.metrics.untrack()
        for _, server in self._servers.items():
            server.backend.close()

    def __enter__(self) -> ShardedClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
