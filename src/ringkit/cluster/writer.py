"""The writer: how a client stores keys on their replicas, with a write quorum and hints.

Every value is validated and encoded before anything is written (size, TTL, serializer), with
a version from the writer's clock so that ``read="all"`` can reconcile copies. A write goes to
every target of its key (:meth:`~ringkit.cluster.routing.Router.write_names`: the replicas,
hot-key spread copies, and both sides while data moves), grouped per server: one round trip per
server, sent at once by the async client. A server that is down or fails gets a *hint* for the
key instead (:meth:`~ringkit.cluster.servers.ServerSet.attempt`), and the write is acknowledged
only when at least `write_quorum` of the key's replicas took it, else :class:`QuorumError`.

A delete leaves a *tombstone* on every target: the key is deleted and the delete's version is
kept beside it (:func:`~ringkit.cluster.keys.tombstone_key`), so that neither a read repair
that read the value before the delete nor, while data moves, a copy the coordinator read before
it lands after it (Cassandra's tombstones, kept for ``gc_grace_seconds``, serve the same end).
Tombstones expire by themselves: :data:`DELETE_TOMBSTONE_TTL_S` in a stable view,
:data:`TOMBSTONE_TTL_S` while data moves (issue 16, item 15).

A :class:`Writer` is a component over the client's servers and codec; like the reader its
calls are sans-I/O generators (:mod:`ringkit.cluster.steps`) driven by both clients.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Set
from typing import Any

from ringkit.cluster.expiry import refuse_ttl
from ringkit.cluster.keys import DELETE_TOMBSTONE_TTL_S, user_key
from ringkit.cluster.routing import Router
from ringkit.cluster.serializers import ValueCodec, VersionClock, tombstone
from ringkit.cluster.servers import ServerSet
from ringkit.cluster.steps import Call, Failed, Steps
from ringkit.errors import ConfigError, QuorumError

__all__ = ["DELETE_TOMBSTONE_TTL_S", "TOMBSTONE_TTL_S", "Writer", "check_ttl"]

# How long a delete made while data moves keeps its tombstone. It must outlast a copy in flight
# (one page between its read on the old owner and its write on the new one: milliseconds, or as
# long as a coordinator stays paused); an hour bounds the memory deletes take during a move.
TOMBSTONE_TTL_S = 3600.0


def check_ttl(ttl_s: float | None) -> float | None:
    """Return `ttl_s` if it is None or a finite number > 0.

    >>> check_ttl(60), check_ttl(None)
    (60, None)
    >>> check_ttl(0)
    Traceback (most recent call last):
    ...
    ringkit.errors.ConfigError: ttl_s must be a number > 0 or None, got 0

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


class Writer:
    """Writes of keys to a :class:`ServerSet`, encoded by a :class:`ValueCodec`.

    Encoding: ``encode_many``. Writing: ``set_many``, ``each`` (one key, every target, the
    replicas' answers). Deciding: ``check_quorum``.
    """

    def __init__(
        self, servers: ServerSet[Any], codec: ValueCodec, *, write_quorum: int, max_value_bytes: int
    ) -> None:
        self.servers = servers
        self.codec = codec
        self.write_quorum = write_quorum
        self.max_value_bytes = max_value_bytes
        self._clock = VersionClock()

    def _encode(self, key: bytes, value: object, ttl_s: float | None) -> bytes:
        expires = int((time.time() + ttl_s) * 1000) if ttl_s else 0
        data = self.codec.encode(value, version=self._clock.next(), expires_at_ms=expires)
        if len(data) > self.max_value_bytes:
            raise ConfigError(
                f"value of key {key!r:.60} is {len(data)} bytes stored, more than "
                f"max_value_bytes={self.max_value_bytes}"
            )
        return data

    def check_ttl(self, ttl_s: float | None) -> float | None:
        """Return `ttl_s` if it is None, or > 0 and no longer than every server keeps.

        Every server of the client is checked, not only the key's replicas, so that a TTL is
        accepted or refused alike for every key (:mod:`ringkit.cluster.expiry` has the limits).

        :raises ConfigError: naming the TTL, and the server and its limit when it is too long
        """
        checked = check_ttl(ttl_s)
        if checked is not None:
            now = time.time()
            for name, server in self.servers.items():
                refuse_ttl(checked, server.url.scheme, name, now)
        return checked

    def encode_many(self, items: Mapping[Any, object], ttl_s: float | None) -> dict[bytes, bytes]:
        """Validate and encode every item before anything is written.

        :raises ConfigError: when a key is invalid or reserved (``ringkit:``) or given twice (as
            str and bytes), a value is too large or `ttl_s` is not > 0 or too long
        :raises TypeError: when `items` is not a mapping or the serializer cannot encode a value
        """
        if not isinstance(items, Mapping):
            raise TypeError(f"items must be a mapping of key to value, got {type(items).__name__}")
        self.check_ttl(ttl_s)
        encoded: dict[bytes, bytes] = {}
        for key, value in items.items():
            data = user_key(key)
            if data in encoded:
                raise ConfigError(f"key {data!r:.60} is given twice, as str and as bytes")
            encoded[data] = self._encode(data, value, ttl_s)
        return encoded

    def check_quorum(
        self, replicas: Mapping[bytes, list[str]], acked: Set[tuple[str, bytes]]
    ) -> None:
        """Raise QuorumError naming the keys fewer than `write_quorum` replicas took."""
        quorum = self.write_quorum
        failed = [
            data
            for data, names in replicas.items()
            if sum((name, data) in acked for name in names) < min(quorum, len(names))
        ]
        if failed:
            raise QuorumError(
                f"{len(failed)} keys were acknowledged by fewer than write_quorum="
                f"{quorum} replicas, first: {failed[0]!r}"
                f"{self.servers.causes(replicas[failed[0]])}",
                failed,
            )

    def set_many(
        self, router: Router, encoded: Mapping[bytes, bytes], ttl_s: float | None
    ) -> Steps[None]:
        """Store every encoded item on its targets; one round trip per server.

        :raises QuorumError: listing the keys that fewer than `write_quorum` replicas took
        """
        epoch = router.view.epoch
        groups: dict[str, dict[bytes, bytes]] = {}
        replicas: dict[bytes, list[str]] = {}
        for data, stored in encoded.items():
            replicas[data] = router.replica_names(data)
            for name in router.write_names(data):
                groups.setdefault(name, {})[data] = stored
        usable: list[str] = []
        for name, group in groups.items():
            server = self.servers.server(name)
            if server.health.up or (yield from self.servers.usable(name, epoch)):
                usable.append(name)
            else:
                for data in group:
                    server.health.hint(data)
        outcomes = yield tuple(
            Call(name, "set_many", (groups[name], ttl_s), epoch) for name in usable
        )
        acked: set[tuple[str, bytes]] = set()
        for name, outcome in zip(usable, outcomes, strict=True):
            if isinstance(outcome, Failed):
                for data in groups[name]:
                    self.servers.server(name).health.hint(data)
            else:
                acked |= {(name, data) for data in groups[name]}
        self.check_quorum(replicas, acked)

    def delete(
        self, router: Router, data: bytes, done: dict[str, Any] | None = None
    ) -> Steps[list[Any]]:
        """Delete `data` on every target and leave a tombstone there.

        The tombstone keeps a read repair (or, while data moves, a copy) that read the value
        before the delete from writing it back after: without it, a fallback read racing a
        delete brings the key back on the replica that missed it. It lives
        :data:`DELETE_TOMBSTONE_TTL_S` in a stable view (longer than any read's repair takes,
        short enough to cost little memory) and :data:`TOMBSTONE_TTL_S` while data moves.

        :raises QuorumError: when fewer than `write_quorum` replicas answered
        """
        ttl_s = TOMBSTONE_TTL_S if router.view.transitional else DELETE_TOMBSTONE_TTL_S
        args = (data, tombstone(self._clock.next()), ttl_s)
        return (yield from self.each(router, data, "bury", args, done))

    def each(
        self,
        router: Router,
        data: bytes,
        method: str,
        args: tuple[Any, ...],
        done: dict[str, Any] | None = None,
    ) -> Steps[list[Any]]:
        """Run a single-key write on every target of `data`; return the replicas' answers.

        `done` (server name → answer) carries what earlier attempts of the same call applied:
        when a server refuses a call routed by an old view, the client refreshes and runs the
        call again, and a server that already took it must not take it twice (an ``incr``
        counted twice, an ``add`` reported as refused by the server that made it).

        :raises QuorumError: when fewer than `write_quorum` replicas answered
        """
        epoch = router.view.epoch
        replicas = router.replica_names(data)
        done = {} if done is None else done
        answers: list[Any] = []
        acked: set[tuple[str, bytes]] = set()
        for name in router.write_names(data):
            if name in done:
                ok, answer = True, done[name]
            else:
                ok, answer = yield from self.servers.attempt(
                    name, Call(name, method, args, epoch), [data]
                )
            if ok:
                done[name] = answer
                acked.add((name, data))
                if name in replicas:
                    answers.append(answer)
        self.check_quorum({data: replicas}, acked)
        return answers
