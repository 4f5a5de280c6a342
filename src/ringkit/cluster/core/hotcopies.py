"""Hot-key copies kept coherent with every client's writes: markers, versioned copies, tombstones.

A client that finds a key hot (:mod:`ringkit.cluster.core.hotkeys`) spreads its reads over copies
on the next nodes of its preference list. Any other client may update the key meanwhile, so
the copies cannot be one client's business. The protocol, in the spirit of
the invalidations of Facebook's memcache (Nishtala et al., NSDI 2013, section 3.2) but driven
by the writer:

1. *Mark.* The spreading client writes a *spread marker* on every replica of the key
   (:func:`~ringkit.cluster.values.keys.spread_key`, holding the spread, expiring after
   :data:`~ringkit.cluster.core.hotkeys.SPREAD_MARKER_TTL_S`).
2. *Writers follow.* Every write reads the markers of its keys back from a replica it wrote,
   after its write there (``write_marked``: one round trip on Redis, a pipeline). For a marked
   key the writer then updates the copies before it acknowledges: a ``set`` stores its value, any
   other write (delete, incr, add, touch) a *copy tombstone* carrying a fresh version, which reads
   treat as a miss. Both are *version-checked*
   (:func:`~ringkit.cluster.wire.redis.handoff.copy_is_newer`: Lua on Redis, ``gets`` / ``cas`` on
   memcached), so an old copy never overwrites a newer one.
3. *Copy, check, activate.* Only after marking does the spreading client read the replicas,
   copy the newest value (version-checked too), read the replicas again, and, if nothing changed,
   rotate its reads over the copies, for half the marker's lifetime.

A write that lands on a replica before the marker is seen by step 3's reads; one that lands
after it follows the marker in step 2. A copy server that fails a writer's update is hinted
like any missed write (:meth:`~ringkit.cluster.core.servers.ServerSet.hand_over`). Copies live at
most :data:`~ringkit.cluster.core.hotkeys.COPY_TTL_S`, so one that nobody refreshes goes away.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from ringkit.cluster.core.hotkeys import COPY_TTL_S, SPREAD_MARKER_TTL_S, HotKeys
from ringkit.cluster.core.routing import Router
from ringkit.cluster.core.servers import ServerSet
from ringkit.cluster.drivers.steps import Call, Failed, Steps, failed_any
from ringkit.cluster.values.codec import ValueCodec
from ringkit.cluster.wire.redis.handoff import copy_version, is_copy_tombstone

__all__ = ["HotCopies", "copy_ttl", "spread_of"]


def spread_of(marker: bytes) -> int:
    """Return the spread a stored marker announces (0 when it does not parse)."""
    try:
        return max(0, int(marker))
    except ValueError:
        return 0


def copy_ttl(ttl_s: float | None) -> float:
    """Return the TTL of a copy of a value that has `ttl_s` left (None: no expiry)."""
    return COPY_TTL_S if ttl_s is None else min(ttl_s, COPY_TTL_S)


class HotCopies:
    """The spreading client's steps (``spread``) and every writer's (``follow``)."""

    def __init__(self, servers: ServerSet[Any], codec: ValueCodec) -> None:
        self.servers = servers
        self.codec = codec

    def follow(
        self,
        router: Router,
        markers: Mapping[bytes, int],
        copies: Mapping[bytes, bytes],
        ttl_s: float | None,
        holders: Mapping[bytes, list[str]],
    ) -> Steps[None]:
        """Store `copies` (a value or a tombstone per key) on the copies `markers` announce.

        One round; a copy server that fails or stays contended is hinted on the `holders`.
        """
        epoch = router.view.epoch
        calls = [
            (name, data)
            for data, spread in markers.items()
            for name in router.copy_names(data, spread)
        ]
        if not calls:
            return
        ttl = copy_ttl(ttl_s)
        outcomes = yield tuple(
            Call(name, "set_copy", (data, copies[data], ttl), epoch, "copy") for name, data in calls
        )
        missed: dict[str, list[bytes]] = {}
        for (name, data), outcome in zip(calls, outcomes, strict=True):
            if outcome is None or isinstance(outcome, Failed):
                missed.setdefault(name, []).append(data)
        if missed:
            yield from self.servers.hand_over(missed, holders, router)

    def _newest(self, router: Router, key: bytes, replicas: list[str]) -> Steps[bytes | None]:
        """Return the newest stored value of `key` on its replicas; None if absent or failed."""
        epoch = router.view.epoch
        outcomes = yield tuple(
            Call(name, "get_many", ([key],), epoch, "spread") for name in replicas
        )
        if failed_any(outcomes):
            return None
        found = [stored for outcome in outcomes if (stored := outcome.get(key)) is not None]
        found = [stored for stored in found if not is_copy_tombstone(stored)]
        return max(found, key=copy_version, default=None)

    def spread(self, router: Router, key: bytes, hot: HotKeys) -> Steps[None]:
        """Mark `key` on its replicas, copy its newest value, check, then activate it."""
        copies = router.copy_names(key, hot.spread)
        if not copies or router.view.transitional:
            return
        replicas = router.replica_names(key)
        if not all(self.servers.server(name).health.up for name in [*replicas, *copies]):
            return  # every replica must hold the marker, every copy take its value: later
        marked_at = time.monotonic()
        epoch = router.view.epoch
        marker = {key: str(hot.spread).encode()}
        outcomes = yield tuple(
            Call(name, "write_markers", (marker, SPREAD_MARKER_TTL_S), epoch, "spread")
            for name in replicas
        )
        if failed_any(outcomes):
            return
        newest = yield from self._newest(router, key, replicas)
        if newest is None:
            return
        expires_at_ms = self.codec.decode(newest).expires_at_ms
        ttl_s = expires_at_ms / 1000 - time.time() if expires_at_ms else None
        if ttl_s is not None and ttl_s <= 0:
            return
        outcomes = yield tuple(
            Call(name, "set_copy", (key, newest, copy_ttl(ttl_s)), epoch, "spread")
            for name in copies
        )
        if any(outcome is None or isinstance(outcome, Failed) for outcome in outcomes):
            return
        again = yield from self._newest(router, key, replicas)
        if again is not None and copy_version(again) == copy_version(newest):
            hot.activate(key, marked_at)
