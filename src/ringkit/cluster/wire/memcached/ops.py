"""Every memcached operation, written once as a generator of exchanges, and its fence.

Each plain call is one :class:`~ringkit.cluster.wire.memcached.protocol.Exchange` (a ``get`` of
many keys, or many ``set`` commands, is one round trip: memcached answers a connection's commands
in order, doc/protocol.txt) and the reading of its replies; the blocking and the asyncio clients
run the same generators over their own transports (:mod:`ringkit.cluster.wire.drive`). The
conditional writes are ``gets`` then ``cas`` (``add`` where the key is absent): a write that lands
in between makes either refuse, so a repair never replaces it and a delete never removes it.
memcached's fence is the :class:`~ringkit.cluster.wire.fence.EpochGate` read before a call.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ringkit.cluster.values.codec import buries, lifts, stored_version, supersedes
from ringkit.cluster.values.expiry import memcached_exptime
from ringkit.cluster.values.keys import EPOCH_KEY, spread_key, tombstone_key
from ringkit.cluster.wire.drive import Wire
from ringkit.cluster.wire.failures import not_integer
from ringkit.cluster.wire.fence import EpochGate, EpochOf
from ringkit.cluster.wire.items import ItemServer, Update
from ringkit.cluster.wire.memcached.protocol import (
    Exchange,
    Reply,
    checked,
    get,
    gets,
    store,
    values,
)
from ringkit.cluster.wire.redis.handoff import MAX_CAS_TRIES
from ringkit.cluster.wire.urls import ServerURL
from ringkit.errors import BackendError, UnsupportedError

if TYPE_CHECKING:
    from ringkit.cluster.wire.index import Index

__all__ = ["MemcachedServer", "ttl_of_meta"]


def _expire(ttl_s: float | None, url: ServerURL) -> int:
    if ttl_s is None:  # most writes: no clock, no URL text for an error that cannot happen
        return 0
    return memcached_exptime(ttl_s, time.time(), str(url))


def _all_stored(replies: Sequence[Reply], url: ServerURL, items: Mapping[bytes, bytes]) -> None:
    for reply in replies:  # a loop, not any() over a generator: most writes are of one key
        if checked(reply, url, items) != b"STORED":
            raise BackendError(
                f"server {url} did not store every key: {[r[0] for r in replies[:3]]}"
            )


def _sets(items: Mapping[bytes, bytes], expire: int) -> bytes:
    if len(items) == 1:  # most writes are of one key: its command, no list to build and join
        [(key, value)] = items.items()
        return store(b"set", key, value, expire)
    return b"".join([store(b"set", key, value, expire) for key, value in items.items()])


def get_many(url: ServerURL, keys: Sequence[bytes]) -> Wire[dict[bytes, bytes]]:
    """Return the keys found with their values: one ``get``."""
    if not keys:
        return {}
    [reply] = yield Exchange(get(keys), 1)
    checked(reply, url)
    return values(reply)


def _tombs_of(items: Mapping[bytes, bytes]) -> dict[bytes, bytes]:
    """Return the tombstone key of each item that carries a version, to the item's key."""
    if len(items) == 1:  # most writes are of one key: no comprehension to run
        [(key, value)] = items.items()
        return {tombstone_key(key): key} if stored_version(value) else {}
    return {tombstone_key(key): key for key, value in items.items() if stored_version(value)}


def set_many(url: ServerURL, items: Mapping[bytes, bytes], ttl_s: float | None) -> Wire[None]:
    """Store every item, expiring after `ttl_s`, and lift the older deletes beside them.

    The ``set`` commands and a ``gets`` of the values' tombstones are one round trip; a
    tombstone older than the value set is then taken away (:func:`_lift`, a second round trip),
    only where one is found (a key deleted, then written again).
    """
    if not items:
        return
    tombs = _tombs_of(items)
    request = _sets(items, _expire(ttl_s, url))
    if not tombs:
        replies = yield Exchange(request, len(items))
        _all_stored(replies, url, items)
        return
    *stored, found = yield Exchange(request + gets(list(tombs)), len(items) + 1)
    _all_stored(stored, url, items)
    if found[1]:  # a tombstone is held: most writes find none
        yield from _lift_older(url, items, tombs, _cas_all(found, url))
    else:
        checked(found, url)


def set_many_then_get(
    url: ServerURL, items: Mapping[bytes, bytes], ttl_s: float | None, keys: Sequence[bytes]
) -> Wire[dict[bytes, bytes]]:
    """Store every item, then read `keys`, in one round trip (the get sees the stores).

    The read also takes the tombstones of the items, lifted after it as :func:`set_many` does.
    """
    tombs = _tombs_of(items)
    request = _sets(items, _expire(ttl_s, url)) + gets([*keys, *tombs])
    *stored, found = yield Exchange(request, len(items) + 1)
    _all_stored(stored, url, items)
    held = _cas_all(found, url)
    yield from _lift_older(url, items, tombs, held)
    return {key: held[key][0] for key in keys if key in held}


def _lift_older(
    url: ServerURL,
    items: Mapping[bytes, bytes],
    tombs: Mapping[bytes, bytes],
    held: Mapping[bytes, tuple[bytes, bytes]],
) -> Wire[None]:
    """Lift the tombstones read in `held` that the values of `items` are newer than."""
    lifted = {
        tomb: held[tomb]
        for tomb, key in tombs.items()
        if tomb in held and lifts(items[key], held[tomb][0])
    }
    if lifted:
        yield from _lift(url, lifted)


def _lift(url: ServerURL, tombs: Mapping[bytes, tuple[bytes, bytes]]) -> Wire[None]:
    """Take away delete tombstones ``{key: (tombstone, cas token)}`` the values set outdate.

    A conditional delete (:func:`_delete_unchanged`): a newer delete that ran since the ``gets``
    changed the tombstone, and it stays. The write waits for the answers, so it is acknowledged
    only once its tombstones are gone: the connection's next command would run after them, but
    another connection's may run first (memcached serves each on a thread of its own), and a
    write stamped before the delete that landed in between would then be read as deleted, on
    every replica, after this one was acknowledged. A second round trip, only for a write that
    finds an older delete beside it.
    """
    yield from _delete_unchanged(url, tombs)


def _delete_unchanged(
    url: ServerURL, held: Mapping[bytes, tuple[bytes, bytes]]
) -> Wire[list[bool]]:
    """Delete each key of ``{key: (value, cas token)}`` unless it changed since the ``gets``
    that gave the token; return, per key, whether it was deleted (one round trip).

    memcached's meta delete with a cas compare (``md KEY C<token>``, memcached >= 1.6: ``HD``
    deleted, ``EX`` changed, ``NF`` gone) frees the item at once. A server without meta
    commands answers ``ERROR``; it gets the same deletes as ``cas`` with a negative exptime
    (protocol.txt: expired at once), one more round trip. That leaves the item in place,
    expired, until memcached next looks at it: the next command that reads the key (a write's
    ``gets`` of its tombstone, say) pays for unlinking it.
    """
    request = b"".join(b"md %s C%s\r\n" % (key, token) for key, (_, token) in held.items())
    replies = yield Exchange(request, len(held))
    if replies[0][0] != b"ERROR":
        return [checked(reply, url) == b"HD" for reply in replies]
    request = b"".join(store(b"cas", key, data, -1, token) for key, (data, token) in held.items())
    replies = yield Exchange(request, len(held))
    return [checked(reply, url) == b"STORED" for reply in replies]


def _one(url: ServerURL, request: bytes, items: Mapping[bytes, bytes] | None = None) -> Wire[bytes]:
    [reply] = yield Exchange(request, 1)
    return checked(reply, url, items)


def add(url: ServerURL, key: bytes, value: bytes, ttl_s: float | None) -> Wire[bool]:
    """Store `value` only if `key` is absent; return whether it was stored.

    A value with a version lifts an older delete beside it, as :func:`set_many` does: the
    ``add`` and a ``gets`` of the tombstone are one round trip.
    """
    request = store(b"add", key, value, _expire(ttl_s, url))
    if not stored_version(value):
        return (yield from _one(url, request, {key: value})) == b"STORED"
    tomb = tombstone_key(key)
    stored, found = yield Exchange(request + gets([tomb]), 2)
    if checked(stored, url, {key: value}) != b"STORED":
        return False
    yield from _lift_older(url, {key: value}, {tomb: key}, _cas_all(found, url))
    return True


def delete(url: ServerURL, key: bytes) -> Wire[bool]:
    """Delete `key`; return whether it was there."""
    return (yield from _one(url, b"delete %s\r\n" % key)) == b"DELETED"


def incr(url: ServerURL, key: bytes, delta: int) -> Wire[int | None]:
    """Add `delta` (a negative one decrements, stopping at 0); None when `key` is missing."""
    verb = b"incr" if delta >= 0 else b"decr"
    [reply] = yield Exchange(b"%s %s %d\r\n" % (verb, key, abs(delta)), 1)
    if reply[0].startswith(b"CLIENT_ERROR"):
        raise not_integer(key)  # about the value: the delta is checked before
    line = checked(reply, url)
    return None if line == b"NOT_FOUND" else int(line)


def touch(url: ServerURL, key: bytes, ttl_s: float) -> Wire[bool]:
    """Give `key` a new TTL; return whether it was there."""
    return (yield from _one(url, b"touch %s %d\r\n" % (key, _expire(ttl_s, url)))) == b"TOUCHED"


def ttl_of_meta(line: bytes) -> float | None:
    """Return the seconds memcached's ``mg KEY t`` reply leaves (``HD t59``; -1, or a miss: None).

    memcached counts whole seconds, so up to a second is lost here. A memcached older than 1.6
    answers ``ERROR`` (no meta commands): no TTL known either.

    >>> ttl_of_meta(b"HD t59"), ttl_of_meta(b"HD t-1"), ttl_of_meta(b"EN"), ttl_of_meta(b"ERROR")
    (59.0, None, None, None)
    """
    flags = line.split()
    if not flags or flags[0] not in (b"HD", b"VA"):
        return None  # EN: missing
    left = next((int(flag[1:]) for flag in flags[1:] if flag.startswith(b"t")), -1)
    return None if left < 0 else float(max(left, 1))


def ttl_left(url: ServerURL, key: bytes) -> Wire[float | None]:
    """Return the seconds `key` has left (the meta get's ``t`` flag, memcached >= 1.6)."""
    [reply] = yield Exchange(b"mg %s t\r\n" % key, 1)
    return None if reply[0] == b"ERROR" else ttl_of_meta(checked(reply, url))


def ping(url: ServerURL) -> Wire[None]:
    """Return when the server answers ``version``."""
    yield from _one(url, b"version\r\n")


def flush(url: ServerURL) -> Wire[None]:
    """Delete every item (``flush_all``)."""
    yield from _one(url, b"flush_all\r\n")


def _cas_of(reply: Reply, url: ServerURL, key: bytes) -> tuple[bytes | None, bytes]:
    """Return `key`'s value and cas token in a ``gets`` reply (None and b"": absent)."""
    checked(reply, url)
    return next(((data, token) for found, data, token in reply[1] if found == key), (None, b""))


def _store_unchanged(
    url: ServerURL, key: bytes, value: bytes, token: bytes, expire: int
) -> Wire[bool]:
    """Store `value` if `key` is as the ``gets`` that gave `token` read it (b"": absent)."""
    verb = b"cas" if token else b"add"
    return (yield from _one(url, store(verb, key, value, expire, token), {key: value})) == b"STORED"


def swap(url: ServerURL, key: bytes, update: Update, ttl_s: float | None) -> Wire[Any]:
    """Apply `update` to `key` by ``gets`` / ``cas``; its result, None after MAX_CAS_TRIES."""
    expire = _expire(ttl_s, url)
    for _ in range(MAX_CAS_TRIES):
        [reply] = yield Exchange(gets([key]), 1)
        held, token = _cas_of(reply, url, key)
        new, result = update(held)
        if new is None or new == held:
            return result
        if (yield from _store_unchanged(url, key, new, token, expire)):
            return result
    return None


# What a ``gets`` reply holds for a key it does not carry: no value, no cas token.
_ABSENT: tuple[bytes | None, bytes] = (None, b"")


def _cas_all(reply: Reply, url: ServerURL) -> dict[bytes, tuple[bytes, bytes]]:
    """Return the value and cas token of every key a ``gets`` reply carries."""
    checked(reply, url)
    return {key: (data, token) for key, data, token in reply[1]}


def repair(url: ServerURL, key: bytes, value: bytes, ttl_s: float | None) -> Wire[bool]:
    """Store envelope `value` only where it supersedes what is here (see :func:`repair_many`)."""
    return key in (yield from repair_many(url, {key: value}, ttl_s))


def repair_many(
    url: ServerURL, items: Mapping[bytes, bytes], ttl_s: float | None
) -> Wire[list[bytes]]:
    """Store each envelope only where it supersedes what is here; return the keys that landed.

    ``add`` where a key is absent and ``cas`` where it is older, after one ``gets`` of every
    key and its tombstone; then the keys added are checked for a delete that ran meanwhile
    (:func:`_buried_since`). Each step is one round trip for the whole batch, the commands
    pipelined (memcached answers them in order): at most four, as for one key.
    """
    if not items:
        return []
    tombs = {key: tombstone_key(key) for key in items}
    [reply] = yield Exchange(gets([*items, *tombs.values()]), 1)
    held = _cas_all(reply, url)
    tokens = {  # the keys to write, each with the token it was read at (b"": absent)
        key: held.get(key, _ABSENT)[1]
        for key, value in items.items()
        if supersedes(value, held.get(key, _ABSENT)[0], held.get(tombs[key], _ABSENT)[0])
    }
    if not tokens:
        return []
    expire = _expire(ttl_s, url)
    request = b"".join(
        store(b"cas" if token else b"add", key, items[key], expire, token)
        for key, token in tokens.items()
    )
    replies = yield Exchange(request, len(tokens))
    landed = [
        key
        for key, reply in zip(tokens, replies, strict=True)
        if checked(reply, url, {key: items[key]}) == b"STORED"
    ]
    added = {key: items[key] for key in landed if not tokens[key]}
    buried, since = (yield from _buried_since(url, added, tombs)) if added else (set(), {})
    kept = [key for key in landed if key not in buried]
    # Each tombstone as last read (again after an add), lifted where the value is newer.
    lifted = {
        tombs[key]: read[tombs[key]]
        for key in kept
        for read in [since if key in added else held]
        if tombs[key] in read and lifts(items[key], read[tombs[key]][0])
    }
    if lifted:
        yield from _lift(url, lifted)
    return kept


def _buried_since(
    url: ServerURL, added: Mapping[bytes, bytes], tombs: Mapping[bytes, bytes]
) -> Wire[tuple[set[bytes], dict[bytes, tuple[bytes, bytes]]]]:
    """Return the keys of `added` that a delete ran under, and what was read; take them back.

    A delete may run between the read and an ``add`` (its tombstone first, then the delete of a
    key not yet there): the tombstones are read again, and a copy still ours under a newer one
    is taken back by a conditional delete (:func:`_delete_unchanged`).
    """
    [reply] = yield Exchange(gets([*added, *(tombs[key] for key in added)]), 1)
    now = _cas_all(reply, url)
    buried = {
        key
        for key, value in added.items()
        if tombs[key] in now and not supersedes(value, None, now[tombs[key]][0])
    }
    taken = {key: now[key] for key in buried if now.get(key, _ABSENT)[0] == added[key]}
    if taken:
        yield from _delete_unchanged(url, taken)
    return buried, now


def bury(url: ServerURL, key: bytes, tombstone: bytes, ttl_s: float) -> Wire[bool]:
    """Keep `tombstone` beside `key` for `ttl_s`, then delete `key` unless it is newer.

    :func:`bury_many` of the one key. Returns True if the key went.
    """
    return key in (yield from bury_many(url, {key: tombstone}, ttl_s))


def bury_many(url: ServerURL, tombstones: Mapping[bytes, bytes], ttl_s: float) -> Wire[list[bytes]]:
    """Keep each tombstone beside its key for `ttl_s`, then delete the keys it is newer than.

    Two round trips whatever the number of keys. The tombstones first, so a repair that reads
    in between sees them and stands down; their ``set`` commands and a ``gets`` of the keys are
    one round trip. The deletes are conditional on the cas tokens read
    (:func:`_delete_unchanged`), so a write that lands between the ``gets`` and them survives.
    Returns the keys that went.
    """
    if not tombstones:
        return []
    tombs = {tombstone_key(key): tombstone for key, tombstone in tombstones.items()}
    request = _sets(tombs, _expire(ttl_s, url)) + gets(list(tombstones))
    *stored, found = yield Exchange(request, len(tombs) + 1)
    _all_stored(stored, url, tombs)
    held = _cas_all(found, url)
    doomed = {
        key: held[key]
        for key, tombstone in tombstones.items()
        if key in held and buries(tombstone, held[key][0])
    }
    if not doomed:
        return []
    deleted = yield from _delete_unchanged(url, doomed)
    return [key for key, gone in zip(doomed, deleted, strict=True) if gone]


_PLAIN: dict[str, Callable[..., Wire[Any]]] = {
    "get_many": get_many,
    "set_many": set_many,
    "add": add,
    "delete": delete,
    "repair": repair,
    "repair_many": repair_many,
    "bury": bury,
    "bury_many": bury_many,
    "incr": incr,
    "touch": touch,
    "ttl_left": ttl_left,
    "ping": ping,
    "flush": flush,
}


class MemcachedServer(ItemServer):
    """The operations of one memcached server, fenced by its :class:`EpochGate`."""

    def __init__(self, url: ServerURL) -> None:
        self.url = url
        self.gate = EpochGate()

    def plain(self, method: str, args: Sequence[Any]) -> Wire[Any]:
        return _PLAIN[method](self.url, *args)

    def fenced(self, sent: int, operation: Wire[Any], *, write: bool) -> Wire[Any]:
        # Between two epoch reads the gate decides from what it knows: the call is then
        # `operation` itself, without a generator around it. A gate that is not due lets it
        # through: the epoch read is due whenever the one last read would refuse a call routed
        # by `sent` (a server ahead of it, or one without an epoch), so no check is left to make.
        now = time.monotonic()
        if self.gate.due(sent, now):
            return self._read_epoch_first(sent, operation, now, write=write)
        return operation

    def _read_epoch_first(
        self, sent: int, operation: Wire[Any], now: float, *, write: bool
    ) -> Wire[Any]:
        found = yield from get_many(self.url, [EPOCH_KEY])
        self.gate.learn(found.get(EPOCH_KEY), now)
        self.gate.check(sent, self.url, write=write)
        return (yield from operation)

    def swap(self, key: bytes, update: Update, ttl_s: float | None) -> Wire[Any]:
        return swap(self.url, key, update, ttl_s)

    def write_marked(
        self, sent: int, op: str, args: Sequence[Any], keys: Sequence[bytes]
    ) -> Wire[tuple[Any, dict[bytes, bytes]]]:
        """Run write `op(*args)`, then read the spread markers of `keys`, after it, here.

        A ``set_many`` and the read are pipelined: one round trip.
        """
        if op != "set_many":
            return (yield from super().write_marked(sent, op, args, keys))
        items, ttl_s = args
        markers = {spread_key(key): key for key in keys}
        pipelined = set_many_then_get(self.url, items, ttl_s, list(markers))
        found = yield from self.fenced(sent, pipelined, write=True)
        return None, {markers[marker]: value for marker, value in found.items()}

    def index(self, epoch_of: EpochOf, point_of: Callable[[bytes], int], transport: Any) -> Index:
        raise UnsupportedError(
            f"server {self.url} cannot list its keys (memcached); online rebalancing needs "
            f"redis:// or memory:// servers"
        )
