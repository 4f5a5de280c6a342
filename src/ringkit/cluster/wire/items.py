"""The server kinds that store plain items (memory, memcached): their bookkeeping, written once.

Such a kind gives four things, as :mod:`~ringkit.cluster.wire.drive` operations: its plain calls
(``get_many``, ``set_many``, ``add``, ``delete``, ``repair``, ``repair_many``, ``bury``, ``incr``,
``touch``, ``ttl_left``, ``ping``, ``flush``), its fence around them, an atomic read-modify-write of
one item (:meth:`ItemServer.swap`: memcached's ``gets`` / ``cas`` loop, the memory store's lock) and
its key index for moves. Everything else the client and the coordinator keep on a server is built
here from those, the same for both kinds: the hints for a down server and its re-admission stamp,
hot-key copies and their spread markers (:mod:`ringkit.cluster.wire.redis.handoff` holds the rules),
the view and its epoch, the audit log and the rebalance checkpoint. Redis does all of it in Lua
instead (:mod:`ringkit.cluster.wire.redis`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ringkit.cluster.values.keys import (
    AUDIT_KEY,
    CHECKPOINT_KEY,
    EPOCH_KEY,
    VIEW_KEY,
    hints_key,
    readmitted_key,
    spread_key,
)
from ringkit.cluster.wire.drive import Wire
from ringkit.cluster.wire.fence import EpochOf, epoch_value
from ringkit.cluster.wire.redis.handoff import (
    copy_is_newer,
    decode_hints,
    with_hints,
    without_hints,
)
from ringkit.cluster.wire.urls import ServerURL
from ringkit.errors import ViewConflictError

if TYPE_CHECKING:
    from ringkit.cluster.wire.index import Index

__all__ = ["FENCED_CALLS", "READS", "Hinted", "ItemServer", "Update"]

# An atomic read-modify-write of one key: the new value (None: unchanged) and the result.
Update = Callable[[bytes | None], tuple[bytes | None, Any]]
# What add_hints answers: how many keys did not fit, and the server's re-admission stamp (ms).
Hinted = tuple[int, int]
# The calls that carry the routed epoch; the others are bookkeeping, no data of the view.
FENCED_CALLS = frozenset(
    {"get_many", "set_many", "add", "delete", "repair", "repair_many", "bury", "bury_many"}
    | {"incr", "touch", "ttl_left"}
)
# Calls that change nothing: a server that lost its epoch still answers them (it misses).
READS = frozenset({"get_many", "ttl_left"})


class ItemServer(ABC):
    """One server of an item-storing kind: every call it takes, as an operation."""

    url: ServerURL
    index_keys = True  # only Redis keeps an index; kept for the client's one setting

    @abstractmethod
    def plain(self, method: str, args: Sequence[Any]) -> Wire[Any]:
        """Return the unfenced operation of backend call `method(*args)`."""

    @abstractmethod
    def fenced(self, sent: int, operation: Wire[Any], *, write: bool) -> Wire[Any]:
        """Return `operation` behind the fence, for a call routed by epoch `sent`."""

    @abstractmethod
    def swap(self, key: bytes, update: Update, ttl_s: float | None) -> Wire[Any]:
        """Apply `update` to `key` atomically; return its result (None: contended)."""

    @abstractmethod
    def index(self, epoch_of: EpochOf, point_of: Callable[[bytes], int], transport: Any) -> Index:
        """Return this server's key index (UnsupportedError where it cannot list keys)."""

    def steps(
        self, method: str, args: Sequence[Any], sent: int, point_of: Callable[[bytes], int]
    ) -> Wire[Any]:
        """Return the operation of call `method(*args)`, routed by epoch `sent`."""
        if method in FENCED_CALLS:
            return self.fenced(sent, self.plain(method, args), write=method not in READS)
        if method == "write_marked":
            return self.write_marked(sent, *args)
        if method in ("ping", "flush"):
            return self.plain(method, args)
        operation: Wire[Any] = getattr(self, method)(*args)
        return operation

    def _get(self, key: bytes) -> Wire[bytes | None]:
        found: dict[bytes, bytes] = yield from self.plain("get_many", ([key],))
        return found.get(key)

    def _put(self, items: Mapping[bytes, bytes], ttl_s: float | None) -> Wire[None]:
        yield from self.plain("set_many", (items, ttl_s))

    # -- hints and copies (the rules: ringkit.cluster.wire.redis.handoff) ------------------------

    def add_hints(self, server: str, keys: Sequence[bytes], max_hints: int) -> Wire[Hinted | None]:
        """Keep hints for down `server` here, then read its re-admission stamp.

        Return (keys that did not fit, stamp in Unix ms, 0 if none); None: not kept.
        """
        update: Update = lambda held: with_hints(held, keys, max_hints=max_hints)  # noqa: E731
        dropped = yield from self.swap(hints_key(server), update, None)
        if dropped is None:
            return None
        stamp = yield from self._get(readmitted_key(server))
        return int(dropped), int(stamp or 0)

    def mark_readmitted(self, server: str, at_ms: int) -> Wire[None]:
        """Stamp here that a process begins re-admitting `server` at `at_ms` (Unix ms)."""
        yield from self._put({readmitted_key(server): str(at_ms).encode()}, None)

    def read_hints(self, server: str) -> Wire[list[bytes]]:
        """Return the keys hinted here for `server`."""
        return decode_hints((yield from self._get(hints_key(server))))

    def drop_hints(self, server: str, keys: Sequence[bytes]) -> Wire[None]:
        """Remove exactly `keys` from the hints kept here for `server` (they were applied)."""
        yield from self.swap(
            hints_key(server), lambda held: (without_hints(held, keys), None), None
        )

    def set_copy(self, key: bytes, copy: bytes, ttl_s: float | None) -> Wire[bool | None]:
        """Store hot-key `copy` unless this server holds a version as new; None: contended."""

        def update(held: bytes | None) -> tuple[bytes | None, bool]:
            return (copy, True) if copy_is_newer(held, copy) else (None, False)

        stored: bool | None = yield from self.swap(key, update, ttl_s)
        return stored

    def read_markers(self, keys: Sequence[bytes]) -> Wire[dict[bytes, bytes]]:
        """Return the spread markers held here for `keys` (see :func:`spread_key`)."""
        markers = {spread_key(key): key for key in keys}
        found: dict[bytes, bytes] = yield from self.plain("get_many", (list(markers),))
        return {markers[marker]: value for marker, value in found.items()}

    def write_marked(
        self, sent: int, op: str, args: Sequence[Any], keys: Sequence[bytes]
    ) -> Wire[tuple[Any, dict[bytes, bytes]]]:
        """Run write `op(*args)`, then read the spread markers of `keys`, after it, here."""
        answer = yield from self.fenced(sent, self.plain(op, args), write=True)
        return answer, (yield from self.read_markers(keys))

    def write_markers(self, markers: Mapping[bytes, bytes], ttl_s: float) -> Wire[None]:
        """Store spread markers ``{key: spread}`` here, expiring after `ttl_s`."""
        yield from self._put({spread_key(key): value for key, value in markers.items()}, ttl_s)

    def sweep_index(self, cursor: bytes, batch: int) -> Wire[tuple[int, bytes]]:
        """Nothing to sweep: these kinds keep no index. Returns (0, b"")."""
        return 0, b""
        yield  # a generator that completes without a request

    # -- coordinating ----------------------------------------------------------------------------

    def server_epoch(self) -> Wire[int]:
        """Return the epoch of the newest view this server was given (0 if none)."""
        return epoch_value((yield from self._get(EPOCH_KEY)))

    def read_view(self) -> Wire[bytes | None]:
        """Return the JSON of the newest view this server holds, or None."""
        return (yield from self._get(VIEW_KEY))

    def publish(self, epoch: int, view_json: bytes, replace: bool = False) -> Wire[int]:
        """Give the server view `epoch` unless it holds a newer one; return its epoch after.

        A different view at the same epoch is kept unless `replace` (a resume settles it).
        Best effort on memcached (a read, then a write); atomic on the memory store.

        :raises ViewConflictError: when the server holds another view at `epoch`
        """
        found: dict[bytes, bytes] = yield from self.plain("get_many", ([EPOCH_KEY, VIEW_KEY],))
        current = epoch_value(found.get(EPOCH_KEY))
        if epoch == current and not replace and found.get(VIEW_KEY) != view_json:
            raise ViewConflictError.on_server(str(self.url), epoch)
        if epoch < current:
            return current
        yield from self._put({EPOCH_KEY: str(epoch).encode(), VIEW_KEY: view_json}, None)
        return epoch

    def append_audit(self, line: bytes) -> Wire[None]:
        """Append one line (a JSON record) to the server's audit log."""
        yield from self.swap(AUDIT_KEY, lambda held: ((held or b"") + line + b"\n", None), None)

    def read_audit(self) -> Wire[list[bytes]]:
        """Return the audit log's lines, oldest first."""
        return ((yield from self._get(AUDIT_KEY)) or b"").splitlines()

    def read_checkpoint(self) -> Wire[bytes | None]:
        """Return the rebalance checkpoint stored on this server, or None."""
        return (yield from self._get(CHECKPOINT_KEY))

    def write_checkpoint(self, data: bytes | None) -> Wire[None]:
        """Store (or, with None, drop) the rebalance checkpoint on this server."""
        if data is None:
            yield from self.plain("delete", (CHECKPOINT_KEY,))
        else:
            yield from self._put({CHECKPOINT_KEY: data}, None)
