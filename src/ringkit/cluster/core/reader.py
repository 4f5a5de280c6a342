"""The reader: how a client finds keys on their servers, with fallback and read repair.

``read="first"`` asks each key's first usable server, then sends the misses and the failures to
the next server of the key's read order, round after round, grouping keys per server so that
each round costs one round trip per server (the async client sends a round's batches at once).
``read="all"`` asks every usable replica of every key in one round and keeps the highest
version (last writer wins, by the writer's clock). Both repair: a replica that missed (or held
an older version) is given the value found, with the TTL it has left, when `read_repair` is on
and the view is stable. A repair is a conditional write (``repair``: a Lua script on Redis,
``gets`` + ``cas`` on memcached, the store lock in memory): it lands only where the replica
holds no value or an older version, so a write acknowledged between the read and the repair
is never replaced by the older value read. Raw counters (ints)
carry no version and are not repaired.

A :class:`Reader` is a component over the client's servers and codec; each read takes the
:class:`~ringkit.cluster.core.routing.Router` of the view the call is bound to, and is a sans-I/O
generator (:mod:`ringkit.cluster.drivers.steps`) that the sync and the async client both drive.
"""

from __future__ import annotations

import time
from typing import Any

from ringkit.cluster.core.hotcopies import copy_ttl
from ringkit.cluster.core.routing import Router
from ringkit.cluster.core.servers import ServerSet
from ringkit.cluster.drivers.steps import Call, Failed, Steps
from ringkit.cluster.values.codec import (
    Decoded,
    ValueCodec,
    buries,
    is_readmission_tombstone,
    stored_version,
)
from ringkit.cluster.values.keys import DELETE_TOMBSTONE_TTL_S, tombstone_key
from ringkit.cluster.views.view import ClusterView
from ringkit.cluster.wire.redis.handoff import is_copy_tombstone
from ringkit.errors import BackendError

__all__ = ["Reader"]


def _unreachable(keys: list[bytes], causes: str) -> BackendError:
    return BackendError(
        f"no replica of {len(keys)} keys could be reached, first: {keys[0]!r}; "
        f"every server holding them is down{causes}"
    )


class Reader:
    """Reads of keys from a :class:`ServerSet`, decoded by a :class:`ValueCodec`.

    Reading: ``get`` (one key), ``get_many``. Deciding: ``repairs`` (whether a read repairs
    under a view).
    """

    def __init__(
        self, servers: ServerSet[Any], codec: ValueCodec, *, read_all: bool, read_repair: bool
    ) -> None:
        self.servers = servers
        self.codec = codec
        self.read_all = read_all
        self.read_repair = read_repair

    def repairs(self, view: ClusterView) -> bool:
        """Return True if reads under `view` repair stale copies (never while data moves)."""
        return self.read_repair and not view.transitional

    def _causes(self, router: Router, key: bytes) -> str:
        """Return why the servers of `key` failed last."""
        return self.servers.causes(router.read_order(key))

    def _usable(self, name: str, router: Router) -> Steps[bool]:
        server = self.servers.server(name)
        return server.health.up or (yield from self.servers.usable(name, router))

    def get(self, router: Router, key: bytes) -> Steps[Decoded | None]:
        """Return one key read from its first replica that hits, or None.

        :raises BackendError: when no replica of the key answered at all
        """
        if self.read_all:
            return (yield from self.get_many(router, [key])).get(key)
        epoch = router.view.epoch
        missed: list[str] = []
        answered = False
        for name in router.read_order(key):
            if not (yield from self._usable(name, router)):
                continue
            [found] = yield (Call(name, "get_many", ((key,),), epoch, "get"),)
            if isinstance(found, Failed):
                self.servers.server(name).stats.bump("failovers")
                continue
            answered = True
            stored = found.get(key)
            if stored is None or is_copy_tombstone(stored):  # an invalidated hot-key copy: a miss
                missed.append(name)
                continue
            decoded = self.codec.decode(stored)
            if missed and self.repairs(router.view):
                yield from self._repair(router, key, stored, decoded, missed)
            return decoded
        if not answered:
            raise _unreachable([key], self._causes(router, key))
        return None

    def get_many(
        self, router: Router, keys: list[bytes], *, partial: bool = False
    ) -> Steps[dict[bytes, Decoded]]:
        """Return the keys found (``read="first"`` or ``"all"``).

        With `partial`, keys no server of which answered are left out, as misses are.

        :raises BackendError: when no server of some key answered at all (unless `partial`)
        """
        if self.read_all:
            return (yield from self._read_all(router, keys, partial))
        return (yield from self._read_first(router, keys, partial))

    def _fetch(self, router: Router, groups: dict[str, list[bytes]]) -> Steps[list[Any]]:
        """Read each group from its server in one round; a failed server gives None."""
        epoch = router.view.epoch
        names = list(groups)
        outcomes = yield tuple(Call(name, "get_many", (groups[name],), epoch) for name in names)
        for name, outcome in zip(names, outcomes, strict=True):
            if isinstance(outcome, Failed):
                self.servers.server(name).stats.bump("failovers")
        return [None if isinstance(outcome, Failed) else _live(outcome) for outcome in outcomes]

    def _read_first(
        self, router: Router, keys: list[bytes], partial: bool
    ) -> Steps[dict[bytes, Decoded]]:
        # Keys with the same read order move together, round after round: each round asks the
        # same servers whether they are usable and sends them to the same one, and those that
        # miss go on to the same next server. So the rounds route groups of keys, not keys.
        by_order: dict[tuple[str, ...], list[bytes]] = {}
        for key, names in zip(keys, router.read_orders(keys), strict=True):
            by_order.setdefault(tuple(names), []).append(key)
        pending = [(order, 0, group) for order, group in by_order.items()]  # position: next try
        missed: dict[bytes, list[str]] = {}
        answered: set[bytes] = set()
        stored: dict[bytes, bytes] = {}
        found: dict[bytes, Decoded] = {}
        while pending:
            groups: dict[str, list[bytes]] = {}
            sent: dict[str, list[tuple[tuple[str, ...], int, list[bytes]]]] = {}
            usable: dict[str, bool] = {}  # asked once per server and round, not once per key
            for order, position, group in pending:
                while position < len(order):
                    name = order[position]
                    position += 1
                    if name not in usable:
                        usable[name] = yield from self._usable(name, router)
                    if usable[name]:
                        groups.setdefault(name, []).extend(group)
                        sent.setdefault(name, []).append((order, position, group))
                        break
            pending = []
            results = yield from self._fetch(router, groups)
            for name, values in zip(groups, results, strict=True):
                for order, position, group in sent[name]:
                    if values is None:
                        pending.append((order, position, group))
                        continue
                    answered.update(group)
                    hits = [key for key in group if key in values]
                    if len(hits) < len(group):
                        misses = [key for key in group if key not in values]
                        for key in misses:
                            missed.setdefault(key, []).append(name)
                        pending.append((order, position, misses))
                    datas = [values[key] for key in hits]
                    stored.update(zip(hits, datas, strict=True))
                    found.update(zip(hits, self.codec.decode_many(datas), strict=True))
        if len(answered) < len(keys) and not partial:
            unreachable = [key for key in keys if key not in answered]
            raise _unreachable(unreachable, self._causes(router, unreachable[0]))
        if missed and self.repairs(router.view):
            for key, names in missed.items():
                if key in found:
                    yield from self._repair(router, key, stored[key], found[key], names)
        return found

    def _read_all(
        self, router: Router, keys: list[bytes], partial: bool
    ) -> Steps[dict[bytes, Decoded]]:
        """Ask every replica for each key and its tombstone; the newest version wins.

        A tombstone takes part like a value (Cassandra reconciles deletes the same way): a
        replica that missed a delete (it was down, or its server missed the call) still holds
        the value, and without the tombstones of the others it would win and bring the key
        back. When a tombstone wins, the replicas that hold an older value are given it. A
        re-admission's tombstone records no delete (it only keeps late repairs off the server
        that missed a write, :func:`~ringkit.cluster.values.codec.readmission_tombstone`), so
        it takes no part.
        """
        groups: dict[str, list[bytes]] = {}
        for key in keys:
            for name in dict.fromkeys(router.read_order(key)):
                if (yield from self._usable(name, router)):
                    groups.setdefault(name, []).extend((key, tombstone_key(key)))
        answers: dict[bytes, dict[str, bytes | None]] = {}
        tombs: dict[bytes, bytes] = {}
        results = yield from self._fetch(router, groups)
        for (name, group), values in zip(groups.items(), results, strict=True):
            if values is not None:
                for key in group[::2]:
                    answers.setdefault(key, {})[name] = values.get(key)
                    tomb = values.get(tombstone_key(key))
                    if tomb is None or is_readmission_tombstone(tomb):  # no delete: see below
                        continue
                    if stored_version(tomb) > stored_version(tombs.get(key)):
                        tombs[key] = tomb
        unreachable = [key for key in keys if key not in answers]
        if unreachable and not partial:
            raise _unreachable(unreachable, self._causes(router, unreachable[0]))
        found: dict[bytes, Decoded] = {}
        for key, by_server in answers.items():
            copies = {
                name: (stored, self.codec.decode(stored))
                for name, stored in by_server.items()
                if stored is not None
            }
            tomb = tombs.get(key)
            if tomb is not None and copies:
                behind = [name for name, (stored, _) in copies.items() if buries(tomb, stored)]
                if behind and self.repairs(router.view):
                    yield from self._bury(router, key, tomb, behind)
                copies = {name: copy for name, copy in copies.items() if name not in behind}
            if not copies:
                continue
            stored, best = max(copies.values(), key=lambda copy: copy[1].version)
            found[key] = best
            stale = [
                name
                for name in by_server
                if name not in copies or copies[name][1].version < best.version
            ]
            if stale and self.repairs(router.view):
                yield from self._repair(router, key, stored, best, stale)
        return found

    def _bury(self, router: Router, key: bytes, tomb: bytes, names: list[str]) -> Steps[None]:
        """Carry the delete `tomb` to the servers `names`, where the key is still older."""
        epoch = router.view.epoch
        for name in names:
            call = Call(name, "bury", (key, tomb, DELETE_TOMBSTONE_TTL_S), epoch)
            yield from self.servers.attempt(router, name, call, [key])

    def _repair(
        self, router: Router, key: bytes, stored: bytes, decoded: Decoded, names: list[str]
    ) -> Steps[None]:
        """Copy `stored` to the servers `names` with the TTL it has left, where still older.

        Best effort: a server that fails is hinted; one that holds a newer value keeps it.
        """
        if decoded.version == 0:
            return  # a raw counter or a foreign value: its TTL is unknown, so leave it be
        ttl_s = None
        if decoded.expires_at_ms:
            ttl_s = decoded.expires_at_ms / 1000 - time.time()
            if ttl_s <= 0:
                return
        epoch = router.view.epoch
        replicas = router.replica_names(key)
        for name in names:
            if name in replicas:
                call = Call(name, "repair", (key, stored, ttl_s), epoch)
            else:  # a hot-key copy: version-checked, never over a newer write's copy
                call = Call(name, "set_copy", (key, stored, copy_ttl(ttl_s)), epoch, "repair")
            yield from self.servers.attempt(router, name, call, [key])


def _live(found: dict[bytes, bytes]) -> dict[bytes, bytes]:
    """Return `found` without invalidated hot-key copies (tombstones read as misses)."""
    # A copy tombstone is 9 bytes long: a length test in C spares the scan of every value.
    if 9 in map(len, found.values()) and any(map(is_copy_tombstone, found.values())):
        return {key: stored for key, stored in found.items() if not is_copy_tombstone(stored)}
    return found
