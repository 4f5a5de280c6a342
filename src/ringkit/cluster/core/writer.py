"""The writer: how a client stores keys on their replicas, with a write quorum and hints.

Every value is validated and encoded before anything is written (size, TTL, serializer), and
given a version from the writer's clock just before it is sent (:meth:`Writer.set_many`), so
that ``read="all"`` can reconcile copies. A write goes to
every target of its key (:meth:`~ringkit.cluster.core.routing.Router.write_names`: the replicas,
hot-key spread copies, and both sides while data moves), grouped per server: one round trip per
server, sent at once by the async client. For a server that is down or fails, the servers that
took the key keep a *hint* for it (:meth:`~ringkit.cluster.core.servers.ServerSet.hand_over`),
before the write is acknowledged, so that any process re-admitting that server repairs it first; the
write is acknowledged only when at least `write_quorum` of the key's replicas took it, else
:class:`QuorumError`.

A delete leaves a *tombstone* on every target: the key is deleted and the delete's version is
kept beside it (:func:`~ringkit.cluster.values.keys.tombstone_key`), so that neither a read repair
that read the value before the delete nor, while data moves, a copy the coordinator read before
it lands after it (Cassandra's tombstones, kept for ``gc_grace_seconds``, serve the same end).
Tombstones expire by themselves: :data:`DELETE_TOMBSTONE_TTL_S` in a stable view,
:data:`TOMBSTONE_TTL_S` while data moves.

A :class:`Writer` is a component over the client's servers and codec; like the reader its
calls are sans-I/O generators (:mod:`ringkit.cluster.drivers.steps`) driven by both clients.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Set
from typing import Any, cast

from ringkit.cluster.checks import positive_seconds_or_none
from ringkit.cluster.core.hotcopies import HotCopies, spread_of
from ringkit.cluster.core.routing import Router
from ringkit.cluster.core.servers import ServerSet, carried_version, version_of
from ringkit.cluster.drivers.steps import Call, Failed, Steps
from ringkit.cluster.values.codec import ValueCodec, VersionClock, tombstone
from ringkit.cluster.values.expiry import refuse_ttl
from ringkit.cluster.values.keys import DELETE_TOMBSTONE_TTL_S, user_key
from ringkit.cluster.wire.redis.handoff import copy_tombstone, copy_version
from ringkit.errors import ConfigError, QuorumError

__all__ = ["TOMBSTONE_TTL_S", "Writer", "check_ttl"]

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
    return positive_seconds_or_none("ttl_s", ttl_s)


class Writer:
    """Writes of keys to a :class:`ServerSet`, encoded by a :class:`ValueCodec`.

    Encoding: ``encode_many``. Writing: ``set_many``, ``delete_many``, ``delete``, ``each``
    (one key, every target, the replicas' answers). Deciding: ``check_quorum``.
    """

    def __init__(
        self, servers: ServerSet[Any], codec: ValueCodec, *, write_quorum: int, max_value_bytes: int
    ) -> None:
        self.servers = servers
        self.codec = codec
        self.write_quorum = write_quorum
        self.max_value_bytes = max_value_bytes
        self._clock = VersionClock()
        self.copies = HotCopies(servers, codec)

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
        accepted or refused alike for every key (:mod:`ringkit.cluster.values.expiry` has the
        limits).

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

    def encode_one(self, key: object, value: object, ttl_s: float | None) -> dict[bytes, bytes]:
        """Return ``{key: stored}`` for one item, as :meth:`encode_many` of it would.

        Checked in the same order (the TTL, then the key, then the value), without building
        and walking a mapping of one item: the path of every ``set``.

        :raises ConfigError, TypeError: as :meth:`encode_many`
        """
        if ttl_s is not None:
            self.check_ttl(ttl_s)
        data = user_key(key)
        return {data: self._encode(data, value, ttl_s)}

    def _copy_of(self, stored: bytes) -> bytes:
        """Return what a hot-key copy of `stored` holds: the value, or a tombstone.

        A value without a version (a counter's digits) could not win a version check against
        an older copy, so its copies are invalidated instead.
        """
        return stored if copy_version(stored) > 0 else copy_tombstone(self._clock.next())

    def _read_markers(
        self,
        router: Router,
        keys: set[bytes],
        holders: Mapping[bytes, list[str]],
        markers: dict[bytes, int],
    ) -> Steps[None]:
        """Read the spread markers of `keys` from a server that took each (after its write)."""
        asks: dict[str, list[bytes]] = {}
        for data in keys:
            if holders.get(data):
                asks.setdefault(holders[data][0], []).append(data)
        names = list(asks)
        epoch = router.view.epoch
        outcomes = yield tuple(Call(name, "read_markers", (asks[name],), epoch) for name in names)
        for outcome in outcomes:
            if not isinstance(outcome, Failed):
                _mark(markers, outcome)

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
        self,
        router: Router,
        encoded: Mapping[bytes, bytes],
        ttl_s: float | None,
        *,
        retried: bool = False,
    ) -> Steps[None]:
        """Store every encoded item on its targets; one round trip per server.

        A write `retried` after a server refused it (a newer view, a server restarted empty)
        may have landed on the other servers already, and another client's newer write after
        it: sent again as it was, it would replace that write there, on every replica, and
        ``read="all"`` would find the newer write's tombstone, if it was a delete, over both
        copies (found by the chaos check, ``restart/redis/read_all``). So a retry of versioned
        values is a conditional write (``repair_many``, the rule of
        :func:`~ringkit.cluster.values.codec.supersedes` for each key): a key lands only where
        the server holds no newer version of it. Still one round trip per server on Redis (one
        script over the keys) and the memory store; a few on memcached (pipelined ``gets``,
        then ``cas`` / ``add``), whatever the number of keys.

        Each attempt gives the values a fresh version from the writer's clock just before it
        sends them, after the steps that may take long (a view refresh, a probe re-admitting a
        server, a refusal and its re-stamp): a plain ``set`` replaces whatever the server
        holds, so a version stamped before those steps could land after a delete and a newer
        write that other clients made meanwhile, replace that write and sit below the delete's
        tombstone, and ``read="all"`` would then read the key as deleted on every replica
        (found by the chaos check, ``kill/memcached/read_all`` under load: a ``set`` encoded
        before a 160 ms view refresh, during which another process deleted the key and wrote
        it again, reached memcached after both).

        :raises QuorumError: listing the keys that fewer than `write_quorum` replicas took
        """

        def copy_of(data: bytes, stored: bytes) -> bytes:  # asked only for the keys found spread
            return self._copy_of(stored)

        def fresh(stored: bytes) -> bytes:
            return self.codec.stamp(stored, self._clock.next())

        conditional = retried and all(version_of(stored) for stored in encoded.values())
        method = "repair_many" if conditional else "set_many"
        yield from self._batch(
            router, method, encoded, ttl_s, copy_of, ttl_s, op="set_many", fresh=fresh
        )

    def delete_many(self, router: Router, keys: list[bytes], gone: set[bytes]) -> Steps[None]:
        """Delete every key on its targets and leave tombstones; one round trip per server.

        The keys some server had are added to `gone` (kept across the retries of a refused
        call, as :meth:`each`'s `done`). Tombstones as in :meth:`delete`.

        :raises QuorumError: listing the keys that fewer than `write_quorum` replicas took
        """
        ttl_s = TOMBSTONE_TTL_S if router.view.transitional else DELETE_TOMBSTONE_TTL_S
        tombs = {data: tombstone(self._clock.next()) for data in keys}

        def copy_of(data: bytes, stored: bytes) -> bytes:
            return copy_tombstone(self._clock.next())

        answers = yield from self._batch(router, "bury_many", tombs, ttl_s, copy_of, None)
        for name, went in answers.items():  # as delete answers: what the replicas had
            gone.update(data for data in went if name in router.replica_names(data))

    def _batch(
        self,
        router: Router,
        method: str,
        items: Mapping[bytes, bytes],
        ttl_s: float | None,
        copy_of: Callable[[bytes, bytes], bytes],
        copy_ttl_s: float | None,
        *,
        op: str = "",
        fresh: Callable[[bytes], bytes] | None = None,
    ) -> Steps[dict[str, Any]]:
        """Write `items` to their targets with `method(group, ttl_s)`, one call per server.

        Hot keys found spread get ``copy_of(key, stored)`` on their copies (the new value, or
        an invalidation) before the ack; returns each server's answer. `op` names the calls in
        counters and hooks (default: `method`): a retried ``set_many`` is still one. `fresh`
        gives each item what is sent instead, once the servers to send to are known (probed).

        :raises QuorumError: listing the keys that fewer than `write_quorum` replicas took
        """
        epoch = router.view.epoch
        groups: dict[str, dict[bytes, bytes]] = {}
        replicas: dict[bytes, list[str]] = {}
        for data, stored in items.items():
            replicas[data] = router.replica_names(data)
            for name in router.write_names(data):
                groups.setdefault(name, {})[data] = stored
        usable: list[str] = []
        missed: dict[str, list[bytes]] = {}
        for name, group in groups.items():
            server = self.servers.server(name)
            if server.health.up or (yield from self.servers.usable(name, router)):
                usable.append(name)
            else:
                missed[name] = list(group)
        if fresh is not None:
            items = {data: fresh(stored) for data, stored in items.items()}
            groups = {name: {data: items[data] for data in group} for name, group in groups.items()}
        # Each key's spread marker is read back from one server that takes the write (a marker
        # is on every replica); from another that took it if that one fails. None at all while
        # the view says no key is spread: then no client makes copies (HotCopies.spread).
        asks: dict[str, list[bytes]] = {name: [] for name in usable}
        if router.view.hot_copies:
            reader = {data: name for name in reversed(usable) for data in groups[name]}
            asks = {
                name: [data for data in groups[name] if reader[data] == name] for name in usable
            }
        calls = []
        for name in usable:
            call = Call(name, method, (groups[name], ttl_s), epoch, op)
            calls.append(_marked(call, asks[name]) if asks[name] else call)
        outcomes = yield tuple(calls)
        unread: set[bytes] = set()
        acked: set[tuple[str, bytes]] = set()
        holders: dict[bytes, list[str]] = {}
        markers: dict[bytes, int] = {}
        answers: dict[str, Any] = {}
        for name, outcome in zip(usable, outcomes, strict=True):
            if isinstance(outcome, Failed):
                missed[name] = list(groups[name])
                unread.update(asks[name])
                continue
            acked |= {(name, data) for data in groups[name]}
            for data in groups[name]:
                holders.setdefault(data, []).append(name)
            answers[name] = outcome
            if asks[name]:
                answers[name], found = outcome
                _mark(markers, found)
        if unread:
            yield from self._read_markers(router, unread, holders, markers)
        if missed:
            versions = {data: version_of(stored) for data, stored in items.items()}
            keepers = _keepers(holders, replicas)
            yield from self.servers.hand_over(missed, keepers, router, versions)
        if markers:  # spread hot keys: their copies take the new values before the ack
            follow = {data: copy_of(data, items[data]) for data in markers}
            yield from self.copies.follow(router, markers, follow, copy_ttl_s, holders)
        self.check_quorum(replicas, acked)
        return answers

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
        missed: dict[str, list[bytes]] = {}
        markers: dict[bytes, int] = {}
        marked = not router.view.hot_copies  # no key is spread: no marker to read
        for name in router.write_names(data):
            if name in done:  # taken by an earlier attempt of this call (see `done`)
                ok, answer = True, done[name]
            else:
                # The marker is read back from the first server that takes the write.
                call = Call(name, method, args, epoch)
                asked = not marked
                ok, outcome = yield from self.servers.attempt(
                    router, name, _marked(call, [data]) if asked else call, [data], hint=False
                )
                answer = outcome
                if ok and asked:
                    answer, found = cast(tuple[Any, dict[bytes, bytes]], outcome)
                    _mark(markers, found)
                    marked = True
            if ok:
                done[name] = answer
                acked.add((name, data))
                if name in replicas:
                    answers.append(answer)
            else:
                missed[name] = [data]
        holders = {data: [name for name, _ in acked]}
        if acked and not marked:  # every server that took it did so in an earlier attempt
            yield from self._read_markers(router, {data}, holders, markers)
        if missed:
            versions = {data: carried_version(args)}
            keepers = _keepers(holders, {data: replicas})
            yield from self.servers.hand_over(missed, keepers, router, versions)
        if markers:  # a spread hot key: its copies are invalidated before the ack
            copies = {data: copy_tombstone(self._clock.next())}
            yield from self.copies.follow(router, markers, copies, None, holders)
        self.check_quorum({data: replicas}, acked)
        return answers


def _keepers(
    holders: Mapping[bytes, list[str]], replicas: Mapping[bytes, list[str]]
) -> dict[bytes, list[str]]:
    """Return, of the servers that took each key, those that keep it: its replicas.

    Only they may hold a hint for a server that missed the write. While data moves a write also
    goes to the old owners, and the move's cleanup deletes their copies once the final view is
    out: a hint kept there would outlive the write it stands for, and the re-admission that
    reads it would find no version on its holder and delete the key outright on the server that
    missed it, or bury it at the version of a write that no replica keeps. A newer write
    acknowledged meanwhile on every replica of the key went with it (found by the chaos check,
    a server added under ``read="all"``). A write that no replica took was not acknowledged,
    and is not hinted at all, as a write that no server took (:meth:`ServerSet.hand_over`).
    """
    return {
        data: [name for name in names if name in replicas[data]] for data, names in holders.items()
    }


def _marked(call: Call, keys: list[bytes]) -> Call:
    """Return `call` made to read the spread markers of `keys` back after it, on its server."""
    op = call.op or call.method
    return Call(call.server, "write_marked", (call.method, call.args, keys), call.epoch, op)


def _mark(markers: dict[bytes, int], found: Mapping[bytes, bytes]) -> None:
    """Merge the spread markers a replica returned into `markers` (the largest spread wins)."""
    for data, marker in found.items():
        spread = spread_of(marker)
        if spread > markers.get(data, 0):
            markers[data] = spread
