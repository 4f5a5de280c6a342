"""The live view: a ``ringkit.live`` store as the page's JSON, answered by long poll.

``ringkit serve --store URL`` gives the app a :class:`LiveView`. ``GET /api/live`` answers the
latest snapshot at once, or, with ``after_epoch=E``, as soon as the store holds a later epoch
(the store's watch wakes it: nothing polls), or after ``wait_s`` with the snapshot as it is.
The answer is ``ringkit.live.snapshot.snapshot_dict`` plus what the page draws with: token
positions (token / space, floats in [0, 1)), each member's lease time left, and the colour
order of the ring's nodes. A long poll is one thread of Starlette's pool blocked on the
store's condition; ``close`` wakes them all, so the server stops promptly.

>>> import ringkit.live
>>> view = LiveView(ringkit.live.connect("memory://web-live-doctest"))
>>> view.report(view.wait_after(None, 0.0))["epoch"]
0
>>> view.close()
"""

from __future__ import annotations

from typing import Any

from ringkit.errors import BackendError, UnknownNodeError
from ringkit.live import Snapshot, Store
from ringkit.live.snapshot import snapshot_dict

__all__ = ["LiveView"]

_POSITION_DIGITS = 6


class LiveView:
    """A store shown by the page. ``wait_after``, ``report``; ``close`` ends the store."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._closed = False

    @property
    def store(self) -> Store:
        """The store this view shows."""
        return self._store

    def wait_after(self, after_epoch: int | None, wait_s: float) -> Snapshot:
        """Return the first snapshot past `after_epoch` (None: the latest), waiting ≤ `wait_s`.

        On timeout, or when the view closes, the latest snapshot (maybe still `after_epoch`).
        """
        if after_epoch is None:
            return self._store.snapshot()
        try:
            return self._store.wait_for(
                lambda s: s.epoch > after_epoch or self._closed, timeout_s=wait_s
            )
        except TimeoutError:
            return self._store.snapshot()

    def report(self, snapshot: Snapshot) -> dict[str, Any]:
        """Return `snapshot` as the page's JSON (see the module docstring)."""
        report = snapshot_dict(snapshot)
        ring = report["ring"]
        if ring["tokens"] is not None:
            space = ring["space"]
            ring["positions"] = [round(t / space, _POSITION_DIGITS) for t in ring["tokens"]]
            ring["tokens"] = [f"{t:#018x}" for t in ring["tokens"]]  # exact, and safe in JS
        reachable = True
        for member in report["members"]:
            left, reachable = self._lease_left(member["name"], reachable)
            member["lease_remaining_s"] = left
        return report

    def _lease_left(self, name: str, reachable: bool) -> tuple[float | None, bool]:
        """Return the lease time left of `name` (None if unknown) and whether the store answered.

        Once the store has not answered, the other members' leases are not asked for: each
        read waits out the client's timeout, and with etcd unreachable one /api/live took that
        timeout once per member (37 s for 5).
        """
        if self._closed or not reachable:  # closed: the store may be gone already
            return None, reachable
        try:
            return round(self._store.lease_remaining_s(name), 3), True
        except UnknownNodeError:
            return None, True
        except BackendError:
            return None, False

    def close(self) -> None:
        """Wake every waiting request and close the store."""
        self._closed = True
        self._store.close()
