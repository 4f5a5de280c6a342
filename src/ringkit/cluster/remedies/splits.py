"""Split counters: a write-hot counter kept as parts on distinct nodes, summed when read.

Spreading copies (:mod:`ringkit.cluster.core.hotcopies`) relieves a key's *reads*; every write still
lands on its replicas. A counter that everyone increments (a like count, a rate limit) is hot
by its writes, and the remedy is to split the key deliberately, which changes the data
model: keep it as `parts` sub-counters on different nodes, send each ``incr`` / ``decr`` to one
part at random and sum the parts on ``get``. This is the sharded counter of Google App Engine's
datastore guidance ("Sharding counters") and of Twitter's and Facebook's like counts.

Naming (all ordinary keys, so rebalancing moves them like any other):

- part 0 is the key itself, so switching a key into split mode *folds nothing*: its existing
  count stays where it is, and a process that has not learnt of the split yet still counts into
  a part. Two processes switching at once, or one switching while others count, lose nothing;
- part ``n >= 1`` is ``{split.<n>}<key>`` (``{split.<n>}#<digest>`` when that would exceed 250
  bytes): the hash tag ``split.<n>`` routes it, the same node for every key, so the suffixes
  ``n`` can be chosen once per view for owners distinct from each other and from the key's;
- the *split marker* ``{<route>}~split`` holds the chosen suffixes, where ``<route>`` is what
  routes the key (its hash tag, else the whole key): the marker lives on the key's own servers.
  It is written with ``add`` (only where absent), so when two processes switch the same key at
  once the first marker wins and the other adopts it; a key stays split until it is deleted. A
  key whose marker cannot be named so (its route holds ``}``, or the name would pass 250 bytes)
  is never split.

A counter with a TTL (a rate limit's window) keeps it whole: the switch reads the TTL the key
has left and gives it to the marker and the parts it creates, and ``touch`` of a split counter
refreshes all of them, so the counter ends as one and the next window starts from nothing.

A client with ``HotKeys(remedy="split")`` reads a key's marker *with* the key, in the same
batch to the same server (no extra round trip), unless it already knows the key is split, so
it sums the parts from the first read after another process's switch. Clients that do not use
``remedy="split"`` read and delete part 0 only: every process that reads a split counter must
use it.
"""

from __future__ import annotations

import hashlib
import random
import threading
from collections.abc import Callable
from typing import Any

from ringkit.cluster.core.hotkeys import HotKeys
from ringkit.cluster.core.reader import Reader
from ringkit.cluster.core.routing import Router
from ringkit.cluster.core.writer import Writer
from ringkit.cluster.drivers.steps import Call, Failed, Steps
from ringkit.cluster.values.codec import Decoded
from ringkit.cluster.values.keys import MAX_KEY_BYTES, route_key
from ringkit.errors import BackendError

__all__ = ["Each", "Fenced", "SplitCounters", "marker_key", "part_key", "suffixes_of"]

# The client's fenced write of one key on all its targets: (key, method, args) -> answers.
Each = Callable[[bytes, str, tuple[Any, ...]], Steps[list[Any]]]
# The client's fenced retry: runs an operation under the view, refreshing on a refusal.
Fenced = Callable[[Callable[[Router], Steps[Any]]], Steps[Any]]

# Candidate suffixes tried per part when looking for owners distinct from the others'.
_TRIES_PER_PART = 64
#: A split counter's marker outlives its parts by this much: memcached keeps TTLs in whole
#: seconds, and a part that outlived its marker would be counted again by the next window's
#: switch (its ``add`` keeps a part that exists). While only the marker is left, reads sum
#: nothing from the parts and a count into a missing part goes to the key.
MARKER_GRACE_S = 2.0


def _digest(key: bytes) -> bytes:
    return hashlib.blake2b(key, digest_size=16).hexdigest().encode()


def part_key(key: bytes, suffix: int) -> bytes:
    """Return the key of part `suffix` (>= 1) of split counter `key`.

    >>> part_key(b"likes:42", 3)
    b'{split.3}likes:42'
    """
    named = b"{split.%d}" % suffix + key
    return named if len(named) <= MAX_KEY_BYTES else b"{split.%d}#" % suffix + _digest(key)


def marker_key(key: bytes) -> bytes | None:
    """Return the key of `key`'s split marker, routed like `key`; None if it has none.

    >>> marker_key(b"likes:42"), marker_key(b"user:{7}:likes")
    (b'{likes:42}~split', b'{7}~split:user:{7}:likes')
    """
    route = route_key(key)
    named = b"{" + route + b"}~split" + (b"" if route == key else b":" + key)
    if b"}" in route or len(named) > MAX_KEY_BYTES or route_key(named) != route:
        return None
    return named


def choose_suffixes(router: Router, key: bytes, parts: int) -> tuple[int, ...]:
    """Return `parts` - 1 suffixes whose parts' first owners differ from each other and the key's.

    Owners repeat only once every node holds a part (more parts than nodes).
    """
    taken = [router.replica_names(key)[0]]
    nodes = len(router.placement)
    chosen: list[int] = []
    for suffix in range(1, _TRIES_PER_PART * parts):
        if len(chosen) == parts - 1:
            break
        owner = router.replica_names(part_key(key, suffix))[0]
        if owner not in taken or len(set(taken)) >= nodes:
            taken.append(owner)
            chosen.append(suffix)
    return tuple(chosen)


def suffixes_of(found: Decoded | None) -> tuple[int, ...] | None:
    """Return the suffixes a stored marker lists (None when it is absent or no marker)."""
    value = None if found is None else found.value
    if not isinstance(value, str):
        return None
    try:
        return tuple(int(part) for part in value.split(","))
    except ValueError:
        return None


def _is_int(decoded: Decoded) -> bool:
    return isinstance(decoded.value, int) and not isinstance(decoded.value, bool)


class SplitCounters:
    """The split-counter steps of one client: learn, switch, count, sum and delete parts.

    Knowing: ``parts_of``, ``forget``. Switching: ``switch``. Counting: ``target``, ``incr``.
    Reading: ``total``, ``read``. Deleting: ``all_keys``, ``delete``.
    """

    def __init__(self, hot: HotKeys, reader: Reader, writer: Writer) -> None:
        self.hot = hot
        self.reader = reader
        self.writer = writer
        self._known: dict[bytes, tuple[int, ...]] = {}
        self._lock = threading.Lock()

    def known(self, key: bytes) -> tuple[int, ...] | None:
        """Return the suffixes of `key`'s parts if this client knows it is split."""
        return self._known.get(key)

    def forget(self, key: bytes) -> None:
        """Forget what this client knew of `key` (it was deleted, or a part was missing)."""
        with self._lock:
            self._known.pop(key, None)

    def learn(self, key: bytes, suffixes: tuple[int, ...] | None) -> tuple[int, ...] | None:
        """Remember that `key` is split into `suffixes` (if any); return them."""
        if suffixes:
            with self._lock:
                self._known[key] = suffixes
        return suffixes

    def parts_of(self, router: Router, key: bytes) -> Steps[tuple[int, ...] | None]:
        """Return the suffixes of `key`'s parts, reading its marker unless known."""
        suffixes = self._known.get(key)
        marker = marker_key(key)
        if suffixes is not None or marker is None:
            return suffixes
        self.hot.count_split("marker_reads")
        return self.learn(key, suffixes_of((yield from self.reader.get(router, marker))))

    def switch(self, router: Router, key: bytes) -> Steps[tuple[int, ...]]:
        """Split `key`: publish its marker (the first one wins), then create its parts at 0."""
        marker = marker_key(key)
        if marker is None:
            return ()
        suffixes = choose_suffixes(router, key, self.hot.parts)
        value = ",".join(str(suffix) for suffix in suffixes)
        # The key's TTL goes to its marker and parts: without it they outlived the key, and the
        # next window of a rate limit summed the old window's parts into its count.
        ttl_s = yield from self._ttl_left(router, key)
        marker_ttl_s = None if ttl_s is None else ttl_s + MARKER_GRACE_S
        stored = self.writer.encode_many({marker: value}, marker_ttl_s)[marker]
        added = yield from self.writer.each(router, marker, "add", (marker, stored, marker_ttl_s))
        if not (added and added[0]):  # another process split it first: use its parts
            suffixes = suffixes_of((yield from self.reader.get(router, marker))) or suffixes
            if marker_ttl_s is not None:  # a marker left from the key's last window: extend it
                yield from self.writer.each(router, marker, "touch", (marker, marker_ttl_s))
        else:
            self.hot.count_split("keys_split")
        zeros = self.writer.encode_many({part_key(key, n): 0 for n in suffixes}, ttl_s)
        for part, zero in zeros.items():  # add: a part another process made keeps its count
            yield from self.writer.each(router, part, "add", (part, zero, ttl_s))
        self.learn(key, suffixes)
        return suffixes

    def _ttl_left(self, router: Router, key: bytes) -> Steps[float | None]:
        """Return the seconds `key` has left on its first replica that is up (None: no TTL)."""
        servers = self.reader.servers
        for name in router.read_order(key):
            if servers.server(name).health.up:
                [left] = yield (Call(name, "ttl_left", (key,), router.view.epoch, "ttl"),)
                if not isinstance(left, Failed):
                    found: float | None = left
                    return found
        return None

    def target(self, key: bytes, suffixes: tuple[int, ...]) -> bytes:
        """Return the part an ``incr`` of split `key` goes to, at random (part 0: the key)."""
        pick = random.randrange(len(suffixes) + 1)
        if pick == 0:
            return key
        self.hot.count_split("increments")
        return part_key(key, suffixes[pick - 1])

    def total(self, router: Router, key: bytes, suffixes: tuple[int, ...]) -> Steps[Any]:
        """Return the sum of `key`'s parts (None when none of them exists).

        The marker is read with the parts (one more key in a batch to servers the parts take
        anyway): when it is gone the key was deleted since this client learnt of the split,
        and the key's own value is the answer.
        """
        parts = [part_key(key, n) for n in suffixes]
        marker = marker_key(key) or key  # known split: it has a marker
        found = yield from self.reader.get_many(router, [key, marker, *parts])
        own = found.get(key)
        if marker not in found:
            self.forget(key)
            return None if own is None else own.value
        self.hot.count_split("sums")
        counts = [
            found[data].value for data in (key, *parts) if data in found and _is_int(found[data])
        ]
        return sum(counts) if counts else None

    def all_keys(self, key: bytes, suffixes: tuple[int, ...]) -> list[bytes]:
        """Return what a delete of split `key` removes: marker first, then parts, then key."""
        return [marker_key(key) or key, *(part_key(key, n) for n in suffixes), key]

    # -- the client's verbs on split counters --------------------------------------------------

    def read(
        self, router: Router, keys: list[bytes], *, partial: bool = False
    ) -> Steps[dict[bytes, Any]]:
        """Read `keys`, each with its split marker (same servers, same batch); sum split ones.

        With `partial`, a key no server of which answered is left out, and so is a split
        counter one of whose parts could not be read (no sum rather than a low one).
        """
        split = {data: suffixes for data in keys if (suffixes := self.known(data))}
        plain = {data: marker_key(data) for data in keys if data not in split}
        asked = list(dict.fromkeys([*plain, *(m for m in plain.values() if m is not None)]))
        found = (yield from self.reader.get_many(router, asked, partial=partial)) if asked else {}
        read = {data: found[data].value for data in plain if data in found}
        for data, marker in plain.items():
            if marker is not None and (
                suffixes := self.learn(data, suffixes_of(found.get(marker)))
            ):
                split[data] = suffixes
                read.pop(data, None)
        for data, suffixes in split.items():
            try:
                total = yield from self.total(router, data, suffixes)
            except BackendError:
                if not partial:
                    raise
                continue
            if total is not None:
                read[data] = total
        return read

    def touch(self, key: bytes, ttl_s: float, each: Each, fenced: Fenced) -> Steps[None]:
        """Give split `key`'s parts `ttl_s` and its marker that and the grace (after the key)."""
        suffixes = yield from fenced(lambda router: self.parts_of(router, key))
        if suffixes:
            marker, *parts = self.all_keys(key, suffixes)[:-1]
            for part in parts:
                yield from each(part, "touch", (part, ttl_s))
            yield from each(marker, "touch", (marker, ttl_s + MARKER_GRACE_S))

    def incr(self, key: bytes, delta: int, each: Each, fenced: Fenced) -> Steps[int | None]:
        """Count `delta` into one part of `key` if split; else into it, then split it if due.

        Returns the new value of the part counted into: the total is a ``get``.
        """
        self.hot.record(key)  # remedy="split" finds write-hot counters
        suffixes = self.known(key)
        if suffixes is None:
            # The key itself counts first: a missing counter stays missing (None), unsplit.
            answer: int | None = (yield from each(key, "incr", (key, delta)))[0]
            if answer is not None and self.hot.wants_split(key):
                yield from fenced(lambda router: self.switch(router, key))
            return answer
        target = self.target(key, suffixes)
        answers = yield from each(target, "incr", (target, delta))
        # A part is gone only when no replica had it (the key was deleted): a replica that
        # restarted empty answers None while the other one counted, and counting into the key
        # as well would count the increment twice.
        answer = next((count for count in answers if count is not None), None)
        if answer is None and target != key:
            self.forget(key)
            self.hot.count_split("parts_missing")
            answer = (yield from each(key, "incr", (key, delta)))[0]
        return answer

    def delete(
        self, key: bytes, fenced: Fenced, delete_one: Callable[[bytes], Steps[list[Any]]]
    ) -> Steps[bool]:
        """Delete `key`: its marker first, then its parts, then the key itself.

        Returns whether the key or one of its parts existed (not the marker).
        """
        suffixes = yield from fenced(lambda router: self.parts_of(router, key))
        keys = self.all_keys(key, suffixes) if suffixes else [key]
        existed = False
        try:
            for each in keys:
                answers = yield from delete_one(each)
                existed = existed or (any(answers) and (each == key or each != keys[0]))
        finally:
            self.forget(key)
        return existed
