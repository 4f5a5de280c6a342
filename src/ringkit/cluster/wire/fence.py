"""The fence, whatever the server kind: the epoch a call was routed by, and when it is refused.

Each server keeps the epoch of the newest cluster view it was given under the reserved key
``ringkit:epoch`` (and the view itself under ``ringkit:view``). Every call carries the epoch its
client routed it with; when the server's epoch is newer, the server refuses the call and the
client gets :class:`~ringkit.errors.StaleViewError`, refreshes its view and retries. Where the
check runs differs by kind, and only there: on Redis inside the write's own Lua script (atomic:
no write routed by an old view lands after the coordinator moved the server on); on the memory
backend under a process-wide lock (atomic for every client of the process); on memcached, which
has no scripts, as a read of the epoch before the write, at most every
:data:`MEMCACHED_FENCE_CHECK_S` (:class:`EpochGate`: best effort, see docs/rebalance.md). The
decision itself is :func:`check_epoch`, for all three.

The client's drivers hand each call's epoch to the fenced handle with the call itself
(``serve_at``). A call made through the plain backend interface (``get_many``, ``serve``: the
coordinator's reads, :func:`~ringkit.cluster.drivers.steps.run_plain`) finds the epoch it was
routed by in a context variable (:func:`routed_by`), per thread and per asyncio task, so that
interface stays the same.

>>> with routed_by(7):
...     routed_epoch(lambda: 0)()
7
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar

from ringkit.cluster.wire.urls import ServerURL
from ringkit.errors import EpochLostError, StaleViewError

__all__ = [
    "MEMCACHED_FENCE_CHECK_S",
    "EpochGate",
    "EpochOf",
    "check_epoch",
    "epoch_value",
    "routed_by",
    "routed_epoch",
]

# memcached has no scripts: its fence is a read of the epoch, done at most this often.
MEMCACHED_FENCE_CHECK_S = 0.5
EpochOf = Callable[[], int]
_ROUTED: ContextVar[int | None] = ContextVar("ringkit_routed_epoch", default=None)


class routed_by:  # used as a function: ``with routed_by(epoch):``
    """Send the backend calls made inside the block with `epoch` (this thread or task only).

    A class rather than ``@contextmanager``: it runs around every backend call.
    """

    __slots__ = ("_epoch", "_token")

    def __init__(self, epoch: int) -> None:
        self._epoch = epoch

    def __enter__(self) -> None:
        self._token = _ROUTED.set(self._epoch)

    def __exit__(self, *exc_info: object) -> None:
        _ROUTED.reset(self._token)


def routed_epoch(fallback: EpochOf) -> EpochOf:
    """Return an `epoch_of` that reads :func:`routed_by`'s epoch, else calls `fallback`."""

    def epoch_of() -> int:
        epoch = _ROUTED.get()
        return fallback() if epoch is None else epoch

    return epoch_of


def epoch_value(found: bytes | None) -> int:
    """Return the epoch a server stores (its bytes under ``ringkit:epoch``; None: 0)."""
    return int(found) if found else 0


def check_epoch(current: int, sent: int, url: ServerURL, *, write: bool) -> None:
    """Refuse a call routed by epoch `sent` on a server at epoch `current` (0: none).

    :raises StaleViewError: when the server is past `sent`
    :raises EpochLostError: on a `write` when the server has no epoch and `sent` >= 1 (it
        restarted empty: it would take writes that up-to-date clients never read)
    """
    if current > sent:
        raise StaleViewError(str(url), current, sent)
    if write and current == 0 and sent >= 1:
        raise EpochLostError(str(url), sent)


class EpochGate:
    """memcached's best-effort fence: the server's epoch, read again at most every 0.5 s.

    A server seen ahead of the sent epoch is asked again at once, so a refresh is not refused
    from a stale cache; so is one seen without an epoch, so a re-stamped server is let in.
    """

    __slots__ = ("checked_at", "known")

    def __init__(self) -> None:
        self.known = 0
        self.checked_at = -MEMCACHED_FENCE_CHECK_S

    def due(self, sent: int, now: float) -> bool:
        """Return True when the server's epoch should be read before a call sent at `sent`.

        False only when :meth:`check` would let that call through: the fence's hot path
        (:meth:`MemcachedServer.fenced <ringkit.cluster.wire.memcached.ops.MemcachedServer.fenced>`)
        relies on it to skip the check between reads.
        """
        stale = now - self.checked_at >= MEMCACHED_FENCE_CHECK_S
        return stale or self.known > sent or (self.known == 0 and sent >= 1)

    def learn(self, found: bytes | None, now: float) -> None:
        """Remember the epoch the server holds (its stored bytes, or None)."""
        self.known, self.checked_at = epoch_value(found), now

    def check(self, sent: int, url: ServerURL, *, write: bool = True) -> None:
        """Raise as :func:`check_epoch` does for the epoch last read."""
        check_epoch(self.known, sent, url, write=write)
