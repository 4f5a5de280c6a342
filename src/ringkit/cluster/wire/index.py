"""The per-server index of keys by ring point: moving an arc is range reads, not a scan.

A migration on a ring is expressible as "fetch the arc between these two hash values", which is a
range read (Cassandra streams token ranges this way). On Redis every key ringkit writes is also
recorded in the index, small hashes bucketed by the top bits of the key's point and split as the
keys grow (linear hashing, :mod:`ringkit.cluster.values.buckets`); the writer sends the entry as
``point (8 bytes, big-endian) + key`` (:func:`member`), and the script keeps the key and its
point's top 24 bits. The keys of the arc (start, end] are the buckets that meet it, read in point
order a page per script; the points of the two windows of 2**40 where the arc ends are checked
exactly by the coordinator (:func:`top_range`), which alone knows the hash.

Keys written without ringkit have no entry; :meth:`RedisIndex.backfill` SCANs the server once
and indexes those of them that lie on the arcs about to move (an :class:`ArcSet`). On the
memory backend the "index" is a scan of the store, which is in-process and small.

The index stays bounded by the live keys. Redis expires and
evicts keys without telling anyone, so the entries of such keys are removed three ways, each
by a script that checks the key is really gone (:data:`SWEEP_SCRIPT`): a range read of the
coordinator drops the dead entries it meets; every write sweeps a bounded step of the index as
it goes (:class:`IndexSweep`: :data:`SWEEP_ENTRIES_PER_KEY` entries per key written, in steps
of at least :data:`SWEEP_BATCH`, resuming where the last step stopped); and ``client.sweep_index()``
sweeps the whole index of every server. Under steady writes a whole pass of the index takes as
long as writing a quarter of its entries, and only keys that died within one pass can have an
entry left, so the index holds at most about 4/3 entries per live key (``r / (r - 1)`` for
``r = SWEEP_ENTRIES_PER_KEY``), whatever expires or is evicted.

Copies are moved a page at a time, read and packed by one script on the source and restored by
one on the destination (:mod:`ringkit.cluster.values.packed`: strings as themselves, other types
with ``DUMP`` / ``RESTORE``, each with the TTL left), and a copy never overwrites a newer value: it
lands only where the key is absent, or where both copies are ringkit values and the one landing has
the higher version. Nor does it undo a delete made while data moves: where the key is absent but its
tombstone (:func:`~ringkit.cluster.values.keys.tombstone_key`) is there, only a copy of a higher
version than the delete lands.

>>> member(5, b"k").hex()
'00000000000000056b'
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt

from ringkit.cluster.values.buckets import INDEX_LUA, top_of, window
from ringkit.cluster.values.codec import HEAD_BYTES
from ringkit.cluster.values.keys import (
    EPOCH_KEY,
    INDEX_KEY,
    LEGACY_INDEX_KEY,
    RESERVED_PREFIX,
    route_key,
    tombstone_key,
)
from ringkit.cluster.values.packed import (
    DELETE_PAGE,
    DUMP_PAGE,
    RESTORE_PAGE,
    PackedRecords,
    Record,
    long_key_tombstones,
    pack_records,
    version_of,
)
from ringkit.errors import StaleViewError

if TYPE_CHECKING:
    import threading

    from ringkit.ring import HashRing

__all__ = [
    "INDEX_SCRIPTS",
    "SWEEP_BATCH",
    "SWEEP_ENTRIES_PER_KEY",
    "SWEEP_SCRIPT",
    "ArcSet",
    "Index",
    "IndexSweep",
    "Record",
    "RedisIndex",
    "ScanIndex",
    "member",
    "point_ranges",
    "top_range",
]


def member(point: int, key: bytes) -> bytes:
    """Return the index member of `key` at `point`: 8 big-endian bytes, then the key."""
    return point.to_bytes(8, "big") + key


def _in_arc(point: int, start: int, end: int) -> bool:
    if start < end:
        return start < point <= end
    return point > start or point <= end  # wraps (start == end: the whole circle)


class ArcSet:
    """Some arcs (start, end] of `ring`, and which of many keys they hold, a page at once.

    The arcs' ends cut the circle into elementary intervals, each inside every arc or outside
    it; a point's interval is a binary search (numpy ``searchsorted``), so testing a page of
    points costs O(p log a) in C, not a Python test per point and arc. Keys are hashed with the
    ring's batch :meth:`~ringkit.ring.HashRing.points_for` (routed by their ``{tag}`` only
    when the page holds one).

    >>> from ringkit import HashRing
    >>> arcs = ArcSet([(10, 20), (40, 5)], HashRing(["a"]))
    >>> arcs.holds(np.array([3, 5, 6, 10, 11, 20, 21, 41], dtype=np.uint64)).tolist()
    [True, True, False, False, True, True, False, True]
    """

    def __init__(self, arcs: Sequence[tuple[int, int]], ring: HashRing) -> None:
        ends = sorted({point for arc in arcs for point in arc})
        at = {point: i for i, point in enumerate(ends)}
        # Interval i is (ends[i - 1], ends[i]] (i = 0 wraps past the last end); an arc covers
        # the intervals after its start up to its end: a difference array over the intervals.
        steps = [0] * (len(ends) + 1)
        for start, end in arcs:
            first, last = at[start] + 1, at[end]
            if start < end:
                steps[first] += 1
                steps[last + 1] -= 1
            else:  # wraps (start == end: the whole circle)
                steps[first] += 1
                steps[0] += 1
                steps[last + 1] -= 1
        covered, depth = [], 0
        for step in steps[:-1]:
            depth += step
            covered.append(depth > 0)
        self.arcs, self.ring = list(arcs), ring
        self._ends = np.array(ends, dtype=np.uint64)
        self._covered = np.array(covered, dtype=bool)

    def holds(self, points: npt.NDArray[np.uint64]) -> npt.NDArray[np.bool_]:
        """Return, for each point, whether some arc holds it. Runtime: O(p log a)."""
        if not len(self._ends):
            return np.zeros(len(points), dtype=bool)
        slot = np.searchsorted(self._ends, points, side="left")
        slot[slot == len(self._ends)] = 0  # past the last end: the wrapping interval
        held: npt.NDArray[np.bool_] = self._covered[slot]
        return held

    def select(self, keys: list[bytes]) -> tuple[list[bytes], npt.NDArray[np.uint64]]:
        """Return the keys on these arcs and their points. Runtime: O(k log a) for k keys."""
        routed = [route_key(key) for key in keys] if b"{" in b"".join(keys) else keys
        points = self.ring.points_for(routed)
        chosen = np.flatnonzero(self.holds(points))
        return [keys[i] for i in chosen.tolist()], points[chosen]


class Index(Protocol):
    """What the coordinator needs from a server to move arcs."""

    def backfill(
        self, batch: int = 1000, pace: Pace | None = None, arcs: ArcSet | None = None
    ) -> int: ...
    def count(self, start: int, end: int, space: int) -> int: ...
    def pages(self, start: int, end: int, space: int, batch: int) -> Iterator[list[bytes]]: ...
    def dump(self, keys: Sequence[bytes]) -> list[Record]: ...
    def dump_arc(
        self, start: int, end: int, space: int, batch: int, page_bytes: int | None = None
    ) -> Iterator[Sequence[Record]]: ...
    def restore(self, records: Sequence[Record], *, replace_unversioned: bool = False) -> int: ...
    def delete(self, keys: Sequence[bytes]) -> int: ...
    def delete_arc(
        self, start: int, end: int, space: int, batch: int, pace: Pace | None = None
    ) -> int: ...


# KEYS: keys. Returns payload, pttl, the head of a string (its version's bytes), per key.
_DUMP = f"""
local out = {{}}
for _, key in ipairs(KEYS) do
  local payload = redis.call('DUMP', key)
  if payload then
    out[#out + 1] = payload
    out[#out + 1] = redis.call('PTTL', key)
    local head = ''
    if redis.call('TYPE', key).ok == 'string' then
      head = redis.call('GETRANGE', key, 0, {HEAD_BYTES - 1})
    end
    out[#out + 1] = head
  else
    out[#out + 1] = ''; out[#out + 1] = -2; out[#out + 1] = ''
  end
end
return out
"""
# KEYS: index; ARGV: members. Drops the entries whose key does not exist, checked here, in the
# script, so that a key written again since a range read found it gone keeps its entry.
_FORGET = (
    INDEX_LUA
    + """
local vanished = {}
for _, entry in ipairs(ARGV) do
  if redis.call('EXISTS', string.sub(entry, 9)) == 0 then
    vanished[#vanished + 1] = {ix_top(entry), string.sub(entry, 9)}
  end
end
return ix_rem_many(KEYS[1], vanished)
"""
)
# KEYS: epoch, index, k1..kn; ARGV: epoch, member per key.
_DELETE = (
    INDEX_LUA
    + """
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if current > tonumber(ARGV[1]) then return redis.error_reply('STALEVIEW ' .. current) end
local gone = 0
for i = 3, #KEYS do
  ix_rem(KEYS[2], ARGV[i - 1])
  gone = gone + redis.call('DEL', KEYS[i])
end
return gone
"""
)
# KEYS: index; ARGV: members. Indexes keys found by a SCAN (or in the old sorted set).
_ADD = INDEX_LUA + "ix_add_many(KEYS[1], ARGV) return #ARGV"
# KEYS: index; ARGV: tops. The keys whose points have one of these tops (an arc's ends are there).
_EDGES = (
    INDEX_LUA
    + """
local keys = {}
for i = 1, #ARGV do
  for _, key in ipairs(ix_at(KEYS[1], tonumber(ARGV[i]))) do keys[#keys + 1] = key end
end
return keys
"""
)
# KEYS: index, the old sorted set; ARGV: count. Moves up to `count` entries of the sorted set
# the index used to be into the buckets (those of keys still there); returns how many it read.
_MIGRATE = (
    INDEX_LUA
    + """
local found = redis.call('ZRANGE', KEYS[2], 0, tonumber(ARGV[1]) - 1)
local kept = {}
for _, entry in ipairs(found) do
  if redis.call('EXISTS', string.sub(entry, 9)) == 1 then kept[#kept + 1] = entry end
end
ix_add_many(KEYS[1], kept)
if #found > 0 then redis.call('ZREM', KEYS[2], unpack(found)) end
return #found
"""
)
# The entries of `found` ({top, key} pairs) whose keys no longer exist (EXISTS also expires a key
# that is due). One EXISTS of many keys counts those that exist: a group where all do is cleared
# by one command, and a group with a few gone is cut in two and asked again (group testing,
# Dorfman 1943), so n entries with d gone cost about n / 1000 + 2 d log2(1000 / d) commands
# where one EXISTS per entry cost n. A group with many gone (over an eighth) is asked key by key,
# as every key was before: never much more than n.
_GONE_LUA = """
local function sweep_gone(found)
  local gone = {}
  local function check(first, last)
    local keys = {}
    for i = first, last do keys[#keys + 1] = found[i][2] end
    local missing = #keys - redis.call('EXISTS', unpack(keys))
    if missing == 0 then return end
    if missing == #keys then
      for i = first, last do gone[#gone + 1] = found[i] end
    elseif missing * 8 > #keys then
      for i = first, last do
        if redis.call('EXISTS', found[i][2]) == 0 then gone[#gone + 1] = found[i] end
      end
    else
      local middle = math.floor((first + last) / 2)
      check(first, middle)
      check(middle + 1, last)
    end
  end
  for i = 1, #found, 1000 do check(i, math.min(i + 999, #found)) end
  return gone
end
"""
# KEYS: index; ARGV: cursor (``-``, or as DUMP_PAGE's), count. Removes the entries of keys that no
# longer exist; returns the entries removed and the next cursor ('' once the end of the index is
# reached).
SWEEP_SCRIPT = (
    INDEX_LUA
    + _GONE_LUA
    + """
local count, first, after = tonumber(ARGV[2]), 0, ''
if ARGV[1] ~= '-' then first, after = ix_top(ARGV[1]), string.sub(ARGV[1], 4) end
local found = ix_page(KEYS[1], first, after, 2 ^ IX_BITS - 1, count)
local removed = ix_rem_many(KEYS[1], sweep_gone(found))
if #found < count then return {removed, ''} end
return {removed, ix_cursor(found[#found])}
"""
)
# The smallest sweep step: one script run over this many entries, well under a millisecond.
SWEEP_BATCH = 500
# Entries swept per key written: the sweep outpaces the writes, so dead entries cannot pile up.
SWEEP_ENTRIES_PER_KEY = 4
# The largest step, which bounds how long one sweep script holds the server (tens of ms).
_MAX_SWEEP_STEP = 50_000
# Write calls by the keys they index (a delete removes its own entry).
_INDEXED_WRITES: dict[str, Callable[[Sequence[Any]], int]] = {
    "set_many": lambda args: len(args[0]),
    "add": lambda args: 1,
    "repair": lambda args: 1,
    "repair_many": lambda args: len(args[0]),
}


class IndexSweep:
    """Where one server's bounded index sweep stands: its cursor and the entries it owes.

    Each write indexed on the server adds :data:`SWEEP_ENTRIES_PER_KEY` entries per key to the
    debt; once it reaches :data:`SWEEP_BATCH`, the write is followed by one sweep step over what
    is owed (at most 50,000 entries), so that a bulk write pays for itself in one round trip
    and a single-key write pays one step in 125. A step that reaches the end of the index wraps
    to the start and clears the debt (a whole pass was made).
    """

    def __init__(self) -> None:
        self.cursor = b"-"
        self.owed = 0

    def due(self, op: str, args: Sequence[Any]) -> int:
        """Return how many entries to sweep after write `op(*args)` (0: none, not yet)."""
        written = _INDEXED_WRITES.get(op)
        if written is None:
            return 0
        self.owed += written(args) * SWEEP_ENTRIES_PER_KEY
        if self.owed < SWEEP_BATCH:
            return 0
        count = min(self.owed, _MAX_SWEEP_STEP)
        self.owed -= count
        return count

    def advance(self, answer: Sequence[Any]) -> int:
        """Move on after a step answered `answer` (removed, next cursor); return removed."""
        removed, cursor = int(answer[0]), bytes(answer[1])
        self.cursor = cursor or b"-"
        if not cursor:
            self.owed = 0
        return removed


# Told the keys of each page just handled; sleeps as a throttle requires (progress.Throttle.take).
Pace = Callable[[int], object]
# Runs a script of INDEX_SCRIPTS (or a plain command) by name with its keys and arguments, as
# every other Redis call runs (``wire.redis.ops.run_scripts``); maps its errors, StaleViewError
# included.
Runner = Callable[[str, Sequence[bytes], Sequence[object]], Any]


# KEYS: index; ARGV: first top, last top, then edge tops. Returns how many entries have their
# tops from the first to the last, then the keys at the edge tops (as _EDGES).
_COUNT = (
    INDEX_LUA
    + """
local top, last, n = tonumber(ARGV[1]), tonumber(ARGV[2]), 0
while top <= last do
  local bucket, level, prefix = ix_bucket(KEYS[1], top)
  local width = 2 ^ (IX_BITS - level)
  local ends = (prefix + 1) * width - 1
  if prefix * width >= top and ends <= last then
    n = n + redis.call('HLEN', bucket) + redis.call('LLEN', bucket .. '+')
  else
    for _, entry in ipairs(ix_entries(bucket)) do
      if entry[1] >= top and entry[1] <= last then n = n + 1 end
    end
  end
  top = ends + 1
end
local out = {n}
for i = 3, #ARGV do
  for _, key in ipairs(ix_at(KEYS[1], tonumber(ARGV[i]))) do out[#out + 1] = key end
end
return out
"""
)
# KEYS: index; ARGV: cursor (as DUMP_PAGE's), last top, count. Returns the next cursor ('' at
# the end), then the keys of the page.
_PAGE = (
    INDEX_LUA
    + """
local count = tonumber(ARGV[3])
local found = ix_page(KEYS[1], ix_top(ARGV[1]), string.sub(ARGV[1], 4), tonumber(ARGV[2]), count)
local out = {''}
for i, entry in ipairs(found) do out[i + 1] = entry[2] end
if #found == count then out[1] = ix_cursor(found[#found]) end
return out
"""
)


# The index's scripts by the name its runner is given: what the coordinator runs on a server.
INDEX_SCRIPTS: Mapping[str, str] = {
    "index_dump": _DUMP,
    "index_forget": _FORGET,
    "index_restore": RESTORE_PAGE,
    "index_delete": _DELETE,
    "index_delete_page": DELETE_PAGE,
    "index_dump_page": DUMP_PAGE,
    "index_add": _ADD,
    "index_edges": _EDGES,
    "index_migrate": _MIGRATE,
    "index_count": _COUNT,
    "index_page": _PAGE,
}


def point_ranges(start: int, end: int, space: int) -> list[tuple[int, int]]:
    """Return the inclusive ranges [low, high] of the points of the arc (start, end].

    >>> point_ranges(10, 20, 2**64), point_ranges(20, 10, 2**64) == [(21, 2**64 - 1), (0, 10)]
    ([(11, 20)], True)

    Runtime: O(1).
    """
    if start < end:
        return [(start + 1, end)]
    ranges = [(0, end)]  # wraps (start == end: the whole circle)
    if start + 1 < space:
        ranges.insert(0, (start + 1, space - 1))
    return ranges


def _cursor(first: int, last: int) -> bytes:
    """Return the cursor of a read of the tops from `first` to `last` (b"": nothing to read)."""
    return first.to_bytes(3, "big") if first <= last else b""


def top_range(low: int, high: int) -> tuple[int, int, list[int]]:
    """Split the points [low, high] into whole windows of equal tops and the ends' windows.

    Return (first top, last top, edge tops): every point whose top is from the first to the last
    lies in [low, high]; a point whose top is an edge top may or may not, and only its exact
    point tells (an end of the range inside that window).

    >>> top_range(0, 2**64 - 1)
    (0, 16777215, [])
    >>> top_range(5, 2**41)
    (1, 1, [0, 2])
    """
    first, last = top_of(low), top_of(high)
    edges = []
    if low != window(first)[0]:
        edges.append(first)
        first += 1
    if high != window(last)[1]:
        if last not in edges:
            edges.append(last)
        last -= 1
    return first, last, edges


class RedisIndex:
    """The bucketed index of one Redis server and its moves (:mod:`ringkit.cluster.values.buckets`).

    A range of points is read as its whole windows of equal tops, inside Redis, page by page,
    and its ends' windows, whose few keys the coordinator checks by their exact points.
    """

    def __init__(
        self, point_of: Callable[[bytes], int], epoch_of: Callable[[], int], run: Runner
    ) -> None:
        self._point_of, self._epoch_of, self._run = point_of, epoch_of, run
        self._migrated = False

    def _migrate(self) -> None:
        """Move the entries of the sorted set the index used to be into the buckets, once.

        A server written by an older ringkit holds its index as one sorted set
        (:data:`~ringkit.cluster.values.keys.LEGACY_INDEX_KEY`); the first read of this handle
        moves it, a thousand entries per script, and deletes it.
        """
        if self._migrated:
            return
        while int(self._run("index_migrate", [INDEX_KEY, LEGACY_INDEX_KEY], [1000])):
            pass
        self._migrated = True

    def _exact(self, found: Sequence[bytes], low: int, high: int) -> list[bytes]:
        """Return the keys of `found` whose exact points lie in [low, high]."""
        return [key for key in map(bytes, found) if low <= self._point_of(key) <= high]

    def _ranges(self, start: int, end: int, space: int) -> Iterator[tuple[int, int, list[bytes]]]:
        """Yield, per range of the arc, its first and last whole tops and its ends' keys."""
        self._migrate()
        for low, high in point_ranges(start, end, space):
            first, last, edges = top_range(low, high)
            found = self._run("index_edges", [INDEX_KEY], edges) if edges else []
            yield first, last, self._exact(found, low, high)

    def backfill(
        self, batch: int = 1000, pace: Pace | None = None, arcs: ArcSet | None = None
    ) -> int:
        """Index the keys of the server (those on `arcs`, or all); return how many were.

        A key ringkit wrote has its entry already, and adding it again changes nothing; this
        is for keys written without ringkit, which only a SCAN finds.
        Runtime: O(n) for n keys on the server, in plain ``SCAN`` pages of about `batch` (each
        `pace`d): the coordinator hashes each page's keys at once, keeps those on `arcs` and
        adds their entries with one script. Only the arcs about to move are read from the
        index, so a rebalance indexes a quarter of the keys when a fourth server joins, and no
        script holds the server for a page.
        """
        self._migrate()
        indexed, cursor = 0, 0
        while True:
            cursor, found = self._run("SCAN", [], [cursor, "COUNT", batch])
            keys = [key for key in found if not key.startswith(RESERVED_PREFIX)]
            if keys:
                if arcs is None:
                    points = np.fromiter(map(self._point_of, keys), np.uint64, len(keys))
                else:
                    keys, points = arcs.select(keys)
                if keys:
                    members = [member(p, k) for p, k in zip(points.tolist(), keys, strict=True)]
                    self._run("index_add", [INDEX_KEY], members)
                    indexed += len(keys)
                if pace is not None:
                    pace(len(found))
            if int(cursor) == 0:
                return indexed

    def count(self, start: int, end: int, space: int) -> int:
        """Return how many indexed keys lie on the arc (start, end]. Runtime: O(buckets).

        One script per range of the arc: the entries of its whole windows, counted in Redis, and
        the keys of its ends' windows, whose exact points are checked here.
        """
        self._migrate()
        counted = 0
        for low, high in point_ranges(start, end, space):
            first, last, edges = top_range(low, high)
            whole, *found = self._run("index_count", [INDEX_KEY], [first, last, *edges])
            counted += int(whole) + len(self._exact(found, low, high))
        return counted

    def pages(self, start: int, end: int, space: int, batch: int) -> Iterator[list[bytes]]:
        """Yield the keys on the arc (start, end] in pages of at most `batch`.

        Each page resumes after the last entry read (by top, then key): O(batch + a bucket).
        """
        for first, last, exact in self._ranges(start, end, space):
            for at in range(0, len(exact), batch):
                yield exact[at : at + batch]
            cursor = _cursor(first, last)
            while cursor:
                after, *keys = self._run("index_page", [INDEX_KEY], [cursor, last, batch])
                cursor = bytes(after)
                if keys:
                    yield [bytes(key) for key in keys]

    def dump(self, keys: Sequence[bytes]) -> list[Record]:
        """Return the records of the keys still there; drop index entries of vanished ones."""
        if not keys:
            return []
        flat = self._run("index_dump", list(keys), [])
        records, gone = [], []
        for i, key in enumerate(keys):
            payload, pttl, head = flat[3 * i : 3 * i + 3]
            if payload == b"" or int(pttl) == -2:
                gone.append(member(self._point_of(key), key))
            else:
                records.append(Record(key, payload, int(pttl), version_of(head)))
        if gone:
            self._run("index_forget", [INDEX_KEY], gone)
        return records

    def dump_arc(
        self, start: int, end: int, space: int, batch: int, page_bytes: int | None = None
    ) -> Iterator[Sequence[Record]]:
        """Yield the records of the keys on the arc (start, end], a page per script.

        A page holds at most `batch` keys and, with `page_bytes`, at most that many bytes of
        keys and values, but one key at least (a larger value moves alone). Each page is read,
        dumped and packed by one script on the server
        (:data:`~ringkit.cluster.values.packed.DUMP_PAGE`), which also drops the entries of keys
        found gone; the coordinator passes the packed page on without decoding it, unless the
        page holds keys of the windows at the arc's ends (it says how many): then it keeps only
        those whose exact points are on the arc.
        """
        self._migrate()
        for low, high in point_ranges(start, end, space):
            edges = top_range(low, high)[2]
            cursor = top_of(low).to_bytes(3, "big")
            while cursor:
                args = [cursor, top_of(high), batch, page_bytes or 0, *edges]
                blob, count, size, after, at_edges, *long_keys = self._run(
                    "index_dump_page", [INDEX_KEY], args
                )
                cursor = bytes(after)
                page: Sequence[Record] = PackedRecords(
                    bytes(blob), int(count), int(size), long_keys
                )
                if int(at_edges):
                    page = [r for r in page if self._on(r, edges, low, high)]
                if page:
                    yield page

    def _on(self, record: Record, edges: Sequence[int], low: int, high: int) -> bool:
        """Tell whether `record`, read from [low, high] and its ends' windows, is in [low, high]."""
        if top_of(int.from_bytes(record.point, "big")) not in edges:
            return True
        return low <= self._point_of(record.key) <= high

    def restore(self, records: Sequence[Record], *, replace_unversioned: bool = False) -> int:
        """Copy `records` here where absent or older; return how many landed.

        With `replace_unversioned`, a copy without a version comparison replaces what is here.
        One script lands the whole page and indexes it
        (:data:`~ringkit.cluster.values.packed.RESTORE_PAGE`).

        :raises StaleViewError: when this server has moved past the coordinator's epoch
        """
        if not records:
            return 0
        self._migrate()
        page = pack_records(records, self._point_of)
        args = [self._epoch_of(), "1" if replace_unversioned else "0", page.blob]
        args += long_key_tombstones(page)
        return int(self._run("index_restore", [EPOCH_KEY, INDEX_KEY], args))

    def delete(self, keys: Sequence[bytes]) -> int:
        """Delete `keys` and their index entries; return how many existed.

        :raises StaleViewError: when this server has moved past the coordinator's epoch
        """
        if not keys:
            return 0
        args: list[object] = [self._epoch_of()]
        args += [member(self._point_of(key), key) for key in keys]
        return int(self._run("index_delete", [EPOCH_KEY, INDEX_KEY, *keys], args))

    def delete_arc(
        self, start: int, end: int, space: int, batch: int, pace: Pace | None = None
    ) -> int:
        """Delete the keys on the arc (start, end] and their entries; return how many existed.

        One script per page of `batch` (:data:`~ringkit.cluster.values.packed.DELETE_PAGE`), each
        `pace`d; the first also returns the keys of the arc's ends' windows, which are deleted
        by name when their exact points are on the arc.

        :raises StaleViewError: when this server has moved past the coordinator's epoch
        """
        self._migrate()
        deleted = 0
        for low, high in point_ranges(start, end, space):
            first, last, edges = top_range(low, high)
            # No whole window (first > last): one call still reads the ends' windows.
            cursor, last = (_cursor(first, last), last) if first <= last else (bytes(3), -1)
            while cursor:
                args = [self._epoch_of(), cursor, last, batch, *edges]
                gone, after, *found = self._run("index_delete_page", [EPOCH_KEY, INDEX_KEY], args)
                edges, cursor = [], bytes(after)  # the ends' windows: read with the first page
                exact = self._exact(found, low, high)
                gone = int(gone) + sum(
                    self.delete(exact[at : at + batch]) for at in range(0, len(exact), batch)
                )
                deleted += gone
                if pace is not None and gone:
                    pace(gone)
        return deleted


class ScannedStore(Protocol):
    """What :class:`ScanIndex` reads of a memory store (``wire.memory.MemoryStore``)."""

    name: str
    data: dict[bytes, tuple[bytes, float]]
    lock: threading.Lock

    def live(self, key: bytes, now: float) -> bytes | None: ...


class ScanIndex:
    """The memory backend's stand-in for an index: a scan of the store, under its lock."""

    def __init__(
        self, store: ScannedStore, point_of: Callable[[bytes], int], epoch_of: Callable[[], int]
    ) -> None:
        self._store, self._point_of, self._epoch_of = store, point_of, epoch_of

    def backfill(
        self, batch: int = 1000, pace: Pace | None = None, arcs: ArcSet | None = None
    ) -> int:
        """Nothing to do: every scan sees every key. Returns 0."""
        return 0

    def _keys(self, start: int, end: int) -> list[bytes]:
        with self._store.lock:
            keys = [key for key in self._store.data if not key.startswith(RESERVED_PREFIX)]
        points = {key: self._point_of(key) for key in keys}
        chosen = [key for key in keys if _in_arc(points[key], start, end)]
        return sorted(chosen, key=lambda key: (points[key], key))

    def count(self, start: int, end: int, space: int) -> int:
        """Return how many keys lie on the arc (start, end]. Runtime: O(n) for n keys."""
        return len(self._keys(start, end))

    def pages(self, start: int, end: int, space: int, batch: int) -> Iterator[list[bytes]]:
        """Yield the keys on the arc (start, end] in pages of at most `batch`."""
        keys = self._keys(start, end)
        for at in range(0, len(keys), batch):
            yield keys[at : at + batch]

    def dump(self, keys: Sequence[bytes]) -> list[Record]:
        """Return the records of the keys still there (value, TTL left, version)."""
        records = []
        now = time.monotonic()
        with self._store.lock:
            for key in keys:
                value = self._store.live(key, now)
                if value is not None:
                    expiry = self._store.data[key][1]
                    pttl = max(1, int((expiry - now) * 1000)) if expiry else -1
                    records.append(Record(key, value, pttl, version_of(value[:HEAD_BYTES])))
        return records

    def dump_arc(
        self, start: int, end: int, space: int, batch: int, page_bytes: int | None = None
    ) -> Iterator[list[Record]]:
        """Yield the records of the keys on the arc (start, end], as the Redis index pages them."""
        for keys in self.pages(start, end, space, batch):
            page: list[Record] = []
            size = 0
            for record in self.dump(keys):
                size += record.size_bytes
                if page and page_bytes and size > page_bytes:
                    yield page
                    page, size = [], record.size_bytes
                page.append(record)
            if page:
                yield page

    def delete_arc(
        self, start: int, end: int, space: int, batch: int, pace: Pace | None = None
    ) -> int:
        """Delete the keys on the arc (start, end]; return how many existed."""
        deleted = 0
        for keys in self.pages(start, end, space, batch):
            deleted += self.delete(keys)
            if pace is not None:
                pace(len(keys))
        return deleted

    def _check(self) -> None:
        found = self._store.data.get(EPOCH_KEY)
        current = int(found[0]) if found else 0
        if current > self._epoch_of():
            raise StaleViewError(f"memory://{self._store.name}", current, self._epoch_of())

    def restore(self, records: Sequence[Record], *, replace_unversioned: bool = False) -> int:
        """Copy `records` here where absent or older; return how many landed."""
        landed = 0
        now = time.monotonic()
        with self._store.lock:
            self._check()
            for record in records:
                there = self._store.live(record.key, now)
                theirs = version_of(there or b"")
                tomb = self._store.live(tombstone_key(record.key), now)
                if there is None and tomb is not None:
                    go = bool(record.version) and version_of(tomb) < record.version
                elif record.version and theirs:
                    go = theirs < record.version
                else:
                    go = there is None or replace_unversioned
                if go:
                    expiry = now + record.pttl_ms / 1000 if record.pttl_ms > 0 else 0.0
                    self._store.data[record.key] = (record.payload, expiry)
                    landed += 1
        return landed

    def delete(self, keys: Sequence[bytes]) -> int:
        """Delete `keys`; return how many existed."""
        with self._store.lock:
            self._check()
            return sum(self._store.data.pop(key, None) is not None for key in keys)
