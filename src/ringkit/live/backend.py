"""The key-value surface a live store needs from its coordination service.

Five things, the ones etcd's v3 API offers and that dskit's ring, tooz and etcd's own election
recipe build on: a revisioned key space (every change gets the next *revision*), *leases*
(keys that vanish when their holder stops renewing), *compare-and-swap* on a key's revision,
reads of a prefix at a past revision, and a *watch* that replays every change to a prefix from
a revision on, in order. ``memory://`` implements it in-process (:mod:`ringkit.live.memory`),
``etcd://`` over gRPC (:mod:`ringkit.live.etcd`); the store above never knows which.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ringkit.errors import BackendError

__all__ = ["Backend", "Event", "Record", "SwapAnswer", "WatchHandle"]


@dataclass(frozen=True, slots=True)
class Record:
    """A key's value at a revision: ``mod_revision`` is that of its last write."""

    key: str
    value: bytes
    mod_revision: int
    create_revision: int
    lease: int


#: What ``start_swap`` hands its callback: ``swap``'s answer, or the error that replaced it.
SwapAnswer = tuple[bool, Record] | BackendError


@dataclass(frozen=True, slots=True)
class Event:
    """One change to one key: a ``put`` (with the new value and lease) or a ``delete``."""

    kind: str
    key: str
    value: bytes
    revision: int
    lease: int = 0


class WatchHandle(Protocol):
    """What ``Backend.watch`` returns: call ``cancel()`` to stop the callbacks."""

    def cancel(self) -> None: ...


class Backend(Protocol):
    """The coordination service under a live store (see the module docstring)."""

    def describe(self) -> str:
        """Return where the service is, for error messages (``etcd at h1:2379, h2:2379``)."""
        ...

    def get_prefix(self, prefix: str, revision: int = 0) -> tuple[int, list[Record]]:
        """Return (the store's revision, the records under `prefix`) now or at `revision`."""
        ...

    def read_revisions(self, prefix: str, *, timeout_s: float) -> tuple[int, dict[str, int]]:
        """Return (the store's revision, key → ``mod_revision`` under `prefix`), linearizably.

        One attempt, answered within `timeout_s` or failed: a store confirming that it is
        current must not wait on a member that does not answer. After a failure the next call
        goes to the next endpoint.

        :raises BackendError: when the endpoint did not answer in time or refused
        """
        ...

    def cluster_id(self) -> int:
        """Return the id of the cluster that answered the last read (0 when unknown)."""
        ...

    def grant(self, ttl_s: float) -> tuple[int, float]:
        """Grant a lease of at least `ttl_s` seconds; return (its id, the TTL granted)."""
        ...

    def keepalive(self, lease: int) -> float:
        """Renew `lease`; return the TTL it now has, 0 when it had already expired."""
        ...

    def time_to_live(self, lease: int) -> float:
        """Return the seconds `lease` has left, 0 when it has expired."""
        ...

    def revoke(self, lease: int) -> None:
        """End `lease` now, deleting its keys."""
        ...

    def create(
        self, key: str, value: bytes, lease: int, *, also: tuple[str, bytes] | None = None
    ) -> tuple[bool, Record]:
        """Write `key` under `lease` if it does not exist.

        `also`, a (key, value) pair, is written with it, under the same lease and at the same
        revision (one transaction), and only if it is.
        Return (True, the record written) or (False, the record that holds the key).
        """
        ...

    def create_unless_changed(
        self,
        key: str,
        value: bytes,
        lease: int,
        *,
        prefix: str,
        revision: int,
        also: tuple[str, bytes] | None = None,
    ) -> tuple[bool, Record]:
        """Write `key` if it does not exist and no key under `prefix` was written after `revision`.

        `also` as for ``create``.

        Return (True, the record written) or (False, the record that holds the key:
        ``mod_revision`` 0 when the key is absent and a key under `prefix` changed instead).
        """
        ...

    def swap(self, key: str, value: bytes, lease: int, mod_revision: int) -> tuple[bool, Record]:
        """Write `key` if its ``mod_revision`` is still `mod_revision` (0: absent).

        Return (True, the record written) or (False, the record there: ``mod_revision`` 0 when
        the key is absent).
        """
        ...

    def start_swap(
        self,
        key: str,
        value: bytes,
        lease: int,
        mod_revision: int,
        done: Callable[[SwapAnswer], None],
    ) -> None:
        """Send ``swap`` and return without waiting: `done` gets its answer, or the error.

        One attempt at the endpoint in use, no failover (for a thread that must not wait out
        an election). `done` may run on another thread, or on this one before this returns.

        :raises BackendError: when the call cannot be sent (`done` is then never called)
        """
        ...

    def put_unless_newer(self, key: str, value: bytes, revision: int) -> tuple[bool, Record]:
        """Write `key` (no lease) unless it was written after `revision`.

        Return (True, the record written) or (False, the newer record).
        """
        ...

    def delete(self, key: str) -> None:
        """Delete `key` (nothing happens when it is absent)."""
        ...

    def watch(
        self,
        prefix: str,
        start_revision: int,
        on_events: Callable[[Sequence[Event]], None],
        on_error: Callable[[Exception], None],
        *,
        replacing: WatchHandle | None = None,
        range_end: str | None = None,
    ) -> WatchHandle:
        """Call `on_events` with every change under `prefix` from `start_revision` on, in order.

        `start_revision` 0 means from now: every change after the watch was created, which it
        is when this returns. (etcd serves a watch that starts in the past from its unsynced
        group, caught up every 100 ms: a change made between a read and a watch from the read's
        revision may reach the watch 100 ms late; a watch from now is synced at once.)

        With `range_end`, the changes to the keys from `prefix` up to `range_end` (excluded)
        instead, as etcd's watch of a key range.

        Events of one revision arrive in one call. `on_error` is called once if the watch
        breaks (the service went away, the revision was compacted); no more calls follow.
        `replacing` is a watch that went silent: the new one is opened on another endpoint
        when there is one, and the old one is let go.
        """
        ...

    def close(self) -> None:
        """Release connections and threads."""
        ...
