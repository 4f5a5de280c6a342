"""The servers behind a client: checked against the placement, counted, probed, re-admitted.

:func:`check_server_map` checks ``{node name: URL}`` once, at the boundary: every node of the
placement must have a URL, every URL must name a node and parse, so that a bad map fails
before anything is written. A :class:`Server` is one backend with its health, counters and
hooks; it does no I/O itself: the drivers (:mod:`ringkit.cluster.drivers.steps`) time each call and
report it with :meth:`Server.answered` or :meth:`Server.failed` (which marks the server down).

:class:`ServerSet` holds a client's servers and makes the decisions about them, once for the
sync and the async client: whether a server is usable (a down server is skipped until its dead
timeout passes, then probed), what a probe does (a ping, then the keys hinted for it on every
other server, by any process, are invalidated there below the newest version that the hints'
holders and the keys' current replicas hold, then re-admission and removal of exactly the
hints applied: hinted handoff as invalidation, after DeCandia et al. 2007, Dynamo, section 4.6;
see :mod:`ringkit.cluster.wire.redis.handoff`), and how a write that a server missed is remembered:
on the servers that took it (:meth:`hand_over`), in memory when none could keep the hint.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar

from ringkit.cluster.checks import mapping
from ringkit.cluster.core.health import Hook, OpEvent, ServerHealth, ServerStats
from ringkit.cluster.core.routing import Router
from ringkit.cluster.drivers.steps import Call, Failed, Steps, failed_any
from ringkit.cluster.values.codec import (
    is_readmission_tombstone,
    readmission_tombstone,
    stored_version,
)
from ringkit.cluster.values.keys import (
    DELETE_TOMBSTONE_TTL_S,
    tombstone_key,
)
from ringkit.cluster.wire.urls import ServerURL, parse_url
from ringkit.errors import (
    ConfigError,
    EpochLostError,
    StaleViewError,
    UnknownNodeError,
    format_names,
)
from ringkit.placement import Placement

__all__ = ["Fenced", "Server", "ServerSet", "carried_version", "check_server_map", "version_of"]


class Fenced(Protocol):
    """What a client's server holds, sync or async: a backend with a URL and the index switch."""

    url: ServerURL
    index_keys: bool


B = TypeVar("B", bound=Fenced)
# One logger for the operator: a server marked down and re-admitted, as pymemcache logs both.
# Lines name the server and its URL with the password shown as ***, never the secret.
_log = logging.getLogger("ringkit.cluster")


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
        self.stats.record(elapsed_s, hit, miss)
        if self.hooks:
            outcome = "ok" if hits is None else ("hit" if hit else "miss")
            self._tell(OpEvent(self.name, op, outcome, elapsed_s))

    def failed(self, op: str, elapsed_s: float, error: Exception) -> None:
        """Count a failed call and mark the server down."""
        was_up = self.health.up
        self.health.mark_down(now=time.monotonic())
        self.last_error = str(error)
        if was_up:
            _log.warning(
                "server %s (%s) marked down for %.1f s after a failed %s: %s",
                self.name,
                self.url.redacted(),
                self.health.dead_timeout_s,
                op,
                error,
            )
        self.stats.record(elapsed_s, error=True)
        self._tell(OpEvent(self.name, op, "error", elapsed_s, str(error)))

    def _tell(self, event: OpEvent) -> None:
        for hook in self.hooks:
            hook(event)


#: Keys per read of the versions the hint holders have, at re-admission.
_VERSION_PAGE = 500


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

    def usable(self, name: str, router: Router) -> Steps[bool]:
        """Return True if `name` is up, probing (and re-admitting) it when it is due.

        The re-admission routes by `router`, the view of the call that wants the server: its
        epoch fences every call, and its replicas of each hinted key are asked for the
        newest version before the key is invalidated (:meth:`_newest_versions`).
        """
        server = self._servers[name]
        health = server.health
        if health.up:
            return True
        if not health.claim_probe(now=time.monotonic()):
            server.stats.bump("skipped")
            return False
        epoch = router.view.epoch
        [answer] = yield (Call(name, "ping", (), epoch),)
        applied = None if isinstance(answer, Failed) else (yield from self._hand_off(name, router))
        if applied is None:
            health.probe_failed(now=time.monotonic())
            server.stats.bump("skipped")
            return False
        health.readmit()
        server.stats.bump("readmissions")
        _log.info(
            "server %s (%s) re-admitted: %d hinted keys invalidated on it",
            name,
            server.url.redacted(),
            sum(len(keys) for keys in applied.values()),
        )
        holders = [holder for holder, keys in applied.items() if keys]
        if holders:  # best effort: a hint left behind only costs a miss at the next re-admission
            yield tuple(
                Call(holder, "drop_hints", (name, applied[holder]), epoch, "hints")
                for holder in holders
            )
        return True

    def _hand_off(self, name: str, router: Router) -> Steps[dict[str, list[bytes]] | None]:
        """Delete on `name` every key hinted for it, on the other servers and in memory.

        Return the hints applied per server that held them, or None when a server holding
        hints or `name` itself failed (the memory hints are kept for the next probe).
        """
        epoch = router.view.epoch
        holders = [
            other for other, server in self._servers.items() if server.health.up and other != name
        ]
        # The stamp first, then the read: a writer hinting meanwhile either has its hint read
        # here or sees the stamp and invalidates the key on `name` itself (hand_over).
        stamp = int(time.time() * 1000)
        outcomes = yield tuple(
            Call(other, "mark_readmitted", (name, stamp), epoch, "hints") for other in holders
        )
        if failed_any(outcomes):
            return None
        outcomes = yield tuple(
            Call(other, "read_hints", (name,), epoch, "hints") for other in holders
        )
        if failed_any(outcomes):
            return None
        applied = dict(zip(holders, outcomes, strict=True))
        health = self._servers[name].health
        remembered = health.take_hints()
        hinted = list(dict.fromkeys([*remembered, *(k for keys in outcomes for k in keys)]))
        if not hinted:
            return applied
        try:
            versions = yield from self._newest_versions(name, hinted, applied, router)
            if versions is not None:
                for key, version in remembered.items():  # the write this client saw it miss
                    versions[key] = max(versions.get(key, 0), version)
                outcomes = yield tuple(
                    self._invalidation(name, key, versions.get(key), epoch) for key in hinted
                )
        except (EpochLostError, StaleViewError):  # the caller re-stamps or refreshes
            for key, version in remembered.items():
                health.hint(key, version)
            health.probe_failed(now=time.monotonic())
            raise
        if versions is None or failed_any(outcomes):
            for key, version in remembered.items():  # kept for the next probe
                health.hint(key, version)
            return None
        return applied

    def hand_over(
        self,
        missed: Mapping[str, Sequence[bytes]],
        holders: Mapping[bytes, Sequence[str]],
        router: Router,
        versions: Mapping[bytes, int] | None = None,
    ) -> Steps[None]:
        """Leave hints for the writes the servers of `missed` did not take, on the `holders`.

        `missed` maps a server to the keys it missed; `holders` maps a key to the servers
        that took it; `versions` the version each key was written at (absent: none, as for an
        ``incr``). Each holder gets one call per missed server, all in one round; a key that
        no holder kept is remembered in the missed server's memory instead, with its version.

        A key that no server took is not hinted at all. The write was not acknowledged, and
        no server holds it to fall back to, so invalidating the key at re-admission protects
        no read; it would delete whatever the server holds *by then*, and each replica is
        re-admitted in turn: a newer write that another client had acknowledged meanwhile
        went from every replica (found by the chaos check, a memcached restart under load;
        regression: ``test_a_write_no_server_took_never_deletes_a_newer_write``).
        """
        versions = versions or {}
        calls: dict[tuple[str, str], list[bytes]] = {}
        for name, keys in missed.items():
            health = self._servers[name].health
            for key in keys:
                took = holders.get(key, ())
                if not took:
                    continue
                kept = [holder for holder in took if holder != name]
                if not kept:
                    health.hint(key, versions.get(key, 0))
                for holder in kept:
                    calls.setdefault((holder, name), []).append(key)
        if not calls:
            return
        max_hints = {name: self._servers[name].health.max_hints for name in missed}
        epoch = router.view.epoch
        pairs = list(calls)
        outcomes = yield tuple(
            Call(holder, "add_hints", (name, calls[holder, name], max_hints[name]), epoch, "hints")
            for holder, name in pairs
        )
        readmitted: dict[str, dict[str, list[bytes]]] = {}  # name -> {holder: keys}
        for (holder, name), outcome in zip(pairs, outcomes, strict=True):
            health = self._servers[name].health
            if isinstance(outcome, tuple):
                dropped, stamp = outcome
                health.hints_dropped += dropped
                if stamp >= health.down_since_ms > 0:  # another process is re-admitting it
                    readmitted.setdefault(name, {})[holder] = calls[holder, name]
            else:  # the holder failed or was contended: remember the keys here instead
                for key in calls[holder, name]:
                    health.hint(key, versions.get(key, 0))
        for name, by_holder in readmitted.items():
            yield from self._invalidate(name, by_holder, router)

    def _invalidate(
        self, name: str, by_holder: Mapping[str, Sequence[bytes]], router: Router
    ) -> Steps[None]:
        """Delete on `name` the keys `by_holder` took, as another process re-admits `name`.

        Its hints may have been read before this client's were added: the keys are invalidated
        here before the write is acknowledged, and this client probes it at its next use.
        """
        health = self._servers[name].health
        epoch = router.view.epoch
        keys = list(dict.fromkeys(key for keys in by_holder.values() for key in keys))
        versions = yield from self._newest_versions(name, keys, by_holder, router)
        known = versions or {}  # a holder that failed since: invalidate without a tombstone
        outcomes = yield tuple(self._invalidation(name, key, known.get(key), epoch) for key in keys)
        if failed_any(outcomes):  # still failing: wait for a stamp newer than this failure
            health.down_since_ms = int(time.time() * 1000)
        else:
            health.probe_soon()

    def _newest_versions(
        self,
        name: str,
        keys: Sequence[bytes],
        hinted: Mapping[str, Sequence[bytes]],
        router: Router,
    ) -> Steps[dict[bytes, int] | None]:
        """Return the newest version each of `keys`, which `name` missed, has elsewhere.

        Asked of the servers that hinted a key (`hinted`: they took the write the hint stands
        for, so they hold it or something newer, a value or a delete's tombstone) and of the
        key's replicas under `router`'s view other than `name`, those up. A hint outlives its
        holder's copy when a move takes the key from the holder: the move's cleanup deletes
        that copy, and the hint, stored before the move by a write that the holder kept as a
        replica then, is read afterwards. Only the current replicas then know the key's
        versions (the move copied the hinted write to the new owner, and a newer write
        acknowledged since is on every replica, `name` included); without them the
        re-admission found no version and deleted the key outright on `name`, newer write and
        all (regression:
        ``test_a_hint_a_replica_kept_before_a_move_never_deletes_a_write_after_the_move``).
        A current replica's versions count as its value's and a delete's: a tombstone that an
        earlier re-admission left there is no write (``read="all"`` does not take it for a
        delete either), and a write acknowledged since with an older version (a set retried
        after a server restarted empty refused it) may be the newest one the replicas hold.
        None when one of the servers asked failed (the probe fails, as when the hints could
        not be read).
        """
        asks: dict[str, dict[bytes, None]] = {
            holder: dict.fromkeys(held) for holder, held in hinted.items()
        }
        holding = {(holder, key) for holder, held in hinted.items() for key in held}
        for key in keys:
            for replica in router.replica_names(key):
                server = self._servers.get(replica)
                if replica != name and server is not None and server.health.up:
                    asks.setdefault(replica, {})[key] = None
        # In pages: a server may hold up to `max_hints` (100,000 by default) for one name.
        pages = [
            (other, asked[start : start + _VERSION_PAGE])
            for other, held in asks.items()
            if (asked := list(held))
            for start in range(0, len(asked), _VERSION_PAGE)
        ]
        if not pages:
            return {}
        epoch = router.view.epoch
        answers = yield tuple(
            Call(other, "get_many", ([*page, *map(tombstone_key, page)],), epoch, "hints")
            for other, page in pages
        )
        if failed_any(answers):
            return None
        versions: dict[bytes, int] = {}
        for (other, page), found in zip(pages, answers, strict=True):
            for key in page:
                tomb = found.get(tombstone_key(key))
                if tomb is not None and (other, key) not in holding:
                    tomb = None if is_readmission_tombstone(tomb) else tomb
                newest = max(version_of(found.get(key)), version_of(tomb))
                if newest:
                    versions[key] = max(versions.get(key, 0), newest)
        return versions

    def _invalidation(self, name: str, key: bytes, hinted: int | None, epoch: int) -> Call:
        """The call that invalidates `key` on `name`, which missed a write of it.

        A ``bury`` with a tombstone just below `hinted`, the version the servers that took the
        write hold now: older values go, and a read repair that read the key before the hinted
        write and arrives after this stands down (``supersedes``), while the hinted write and
        anything newer may still repair the server. Without a tombstone that late repair found
        the server holding neither value nor tombstone and wrote the old value back, after the
        hint was gone (found by the chaos check; regression:
        ``test_a_repair_read_before_a_hinted_write_never_lands_after_its_hint``). These hints
        name the key, not the write (Dynamo's replay the write itself), hence the read of the
        holders' versions, and the version a hint kept in memory remembers. With no version
        known (a counter, a value gone since) a plain delete.

        The tombstone is a :func:`~ringkit.cluster.values.codec.readmission_tombstone`, which
        ``read="all"`` does not take for a delete: its version is the newest write the holders
        held, and a write acknowledged with an older version that lands after it on every
        replica (a call retried after a server restarted empty refused it) would be hidden
        from every read by a delete at that version (found by the chaos check,
        ``restart/redis/read_all``; regression:
        ``test_an_older_version_written_after_a_readmission_is_read_back``).
        """
        if not hinted:
            return Call(name, "delete", (key,), epoch, "invalidate")
        stone = readmission_tombstone(hinted - 1)
        return Call(name, "bury", (key, stone, DELETE_TOMBSTONE_TTL_S), epoch, "invalidate")

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

    def attempt(
        self, router: Router, name: str, call: Call, keys: Sequence[bytes], *, hint: bool = True
    ) -> Steps[tuple[bool, object]]:
        """Run write `call` (routed by `router`) on `name`; hint `keys` in memory if it fails.

        A server that is down and not due for a probe counts as failed.

        With `hint` off the caller leaves the hints (on the servers, :meth:`hand_over`).
        Return (True, answer) when the server answered, else (False, None).
        """
        server = self._servers[name]
        if server.health.up or (yield from self.usable(name, router)):
            [answer] = yield (call,)
            if not isinstance(answer, Failed):
                return True, answer
        if hint:
            version = carried_version(call.args)
            for data in keys:
                server.health.hint(data, version)
        return False, None


def version_of(stored: object) -> int:
    """Return the version of stored bytes (a value or a tombstone); 0 when they carry none.

    A raw counter, a foreign value or anything but bytes (an ``incr``'s delta) carries none.

    >>> version_of(readmission_tombstone(7)), version_of(b"41"), version_of(60.0)
    (7, 0, 0)
    """
    return int.from_bytes(stored_version(stored), "big") if isinstance(stored, bytes) else 0


def carried_version(args: Sequence[Any]) -> int:
    """Return the version a single-key write's `args`, ``(key, stored, ...)``, carry (0: none)."""
    return version_of(args[1]) if len(args) > 1 else 0


def check_server_map(placement: Placement, servers: Mapping[str, str]) -> dict[str, ServerURL]:
    """Return the parsed URL of every node of `placement`, from ``{node name: URL}``.

    :raises UnknownNodeError: when a URL is given for a name that is not a node of the placement
    :raises ConfigError: when `servers` is not a mapping, a node has no URL or a URL is not
        a str or does not parse
    """
    servers = mapping("servers", servers, "node name to URL")
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
