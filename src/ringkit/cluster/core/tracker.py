"""Epochs on the client side: the view a client routes by, and how it converges.

Every call of a cache client binds the client's current view for its whole duration: routing
and the epoch sent to the servers come from the same :class:`~ringkit.cluster.core.routing.Router`,
one reference that a refresh replaces whole (even when another thread or task refreshes
meanwhile). A server that has moved to a newer epoch refuses the call
(:class:`~ringkit.errors.StaleViewError`); the client then reads the newest view from its
:class:`~ringkit.cluster.views.stores.ViewStore`, adopts it (opening the servers it brings) and
retries the call, at most ``MAX_VIEW_RETRIES`` times. A write routed by a stale view is
therefore refused and redirected, never acknowledged and lost. With ``view_check_s`` the client
also reads the store at most that often, so a client that only reads converges as well. A store
that pushes views (:class:`~ringkit.cluster.views.stores.FollowedViewStore`, etcd's watch) is
followed from construction to ``close``: each new epoch is adopted as it is published.

The view is also the cluster's one source of configuration. On its first call a client
*settles*: it adopts the view the store holds, refusing it (:class:`~ringkit.errors.ConfigError`)
when its replicas, serializer or placement (kind, hash, vnodes) differ from the client's own
(:func:`~ringkit.cluster.views.view.refuse_mismatch`); on servers that hold no view at all
(``servers://``), it publishes its own as epoch 1, compare-and-set, so the clients that come
later adopt it, and the tools (``ringkit rebalance``) take the replica count from it. A server
that lost its epoch (restarted empty) refuses writes routed by a published view
(:class:`~ringkit.errors.EpochLostError`): the client gives it the newest view it can read on
the other servers (at least its own) and retries, so the server never takes a write that
up-to-date clients would not read.

The tracker is part of the one decision core (:mod:`ringkit.cluster.drivers.steps`): the sync and
the async client run the same refresh and retry.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from ringkit.cluster.core.hotkeys import HotKeys
from ringkit.cluster.core.routing import Router
from ringkit.cluster.core.servers import ServerSet
from ringkit.cluster.drivers.steps import Steps
from ringkit.cluster.views.stores import (
    FollowedViewStore,
    Following,
    ServersViewStore,
    ViewStore,
    authority_of,
    check_authority,
    stamp,
)
from ringkit.cluster.views.view import ClusterView, refuse_mismatch
from ringkit.cluster.wire.fence import MEMCACHED_FENCE_CHECK_S
from ringkit.errors import (
    BackendError,
    ConfigError,
    EpochLostError,
    StaleViewError,
    UnsupportedError,
)

__all__ = ["FIRST_EPOCH", "MAX_VIEW_RETRIES", "ViewTracker"]

MAX_VIEW_RETRIES = 5
# The epoch of the view the first client of an empty pool publishes.
FIRST_EPOCH = 1
T = TypeVar("T")
_log = logging.getLogger("ringkit.cluster")


class ViewTracker:
    """The view a client routes by: adopt a newer one, refresh from the store, retry refused calls.

    Reading: ``view``, ``router``. Converging: ``settle``, ``adopt``, ``refresh``,
    ``restamp``. Calling: ``fenced``. ``close`` stops following the store (and closes it when
    `owns_store`). `view` is the client's configuration (epoch 0) until it settles.
    """

    def __init__(
        self,
        view: ClusterView,
        servers: ServerSet[Any],
        store: ViewStore,
        *,
        hot_keys: HotKeys | None = None,
        owns_store: bool = False,
    ) -> None:
        self.servers = servers
        self.store = store
        self._owns_store = owns_store
        self._hot_keys = hot_keys
        self._lock = threading.Lock()
        self._checked_at = time.monotonic()
        self._configured = view
        self._settled = False
        self._hot_copies_since: float | None = None  # when a view allowing copies was adopted
        servers.join(view.servers)
        # One reference, read once per call: adopting a view is one assignment.
        self.router = Router(view, hot_keys=hot_keys)
        self._following: Following | None = None
        if isinstance(store, FollowedViewStore):
            self._following = store.follow(self.adopt)

    def close(self) -> None:
        """Stop following the view store; close it if this tracker opened it."""
        if self._following is not None:
            self._following.cancel()
            self._following = None
        if self._owns_store and isinstance(self.store, FollowedViewStore):
            self.store.close()

    @property
    def view(self) -> ClusterView:
        """The view the client routes by."""
        return self.router.view

    def adopt(self, view: ClusterView) -> None:
        """Route by `view` from now on, unless the client already has a newer one."""
        with self._lock:
            before = self.router.view.epoch
            if view.epoch < before:
                return
            self.servers.join(view.servers)
            if view.hot_copies and not self.router.view.hot_copies:
                self._hot_copies_since = time.monotonic()
            self.router = Router(view, hot_keys=self._hot_keys)
        if view.epoch > before:  # views hold no secret; the URLs are left out all the same
            _log.info(
                "cluster view epoch %d adopted (%s, %d servers, from epoch %d)",
                view.epoch,
                view.state,
                len(view.servers),
                before,
            )

    @property
    def settled(self) -> bool:
        """Whether :meth:`settle` has run to its end (the view store was read once)."""
        return self._settled

    def settle(self) -> Steps[None]:
        """Once: adopt the view the store holds, or publish the first one on empty servers.

        :raises ConfigError: when the published view's configuration differs from the client's,
            or the servers record another view store than the client's as the authority
        """
        if self._settled:
            return
        names = self.servers.names
        if not isinstance(self.store, ServersViewStore):
            # The servers record which store decides the view: a client following another
            # one would route by views nobody publishes any more, and fail every call.
            try:
                recorded = yield from ServersViewStore().read(names, 0)
            except BackendError:
                recorded = None  # no server answered: the call fails on its own
            check_authority(recorded, authority_of(self.store), who="the client")
        try:
            found = yield from self.store.read(names, 0)
        except BackendError:
            return  # no server answered: the call fails on its own, naming each cause
        first = self._first_view() if found is None else None
        if first is not None:
            yield from stamp(first, names)
            # Read back: another first client may have won the compare-and-set.
            found = yield from self.store.read(names, FIRST_EPOCH)
        if found is not None:
            if self.view.epoch == 0:  # routing by its configuration, not by a view it was given
                refuse_mismatch(found, self._configured)
            self.adopt(found)
        self._settled = True

    def _first_view(self) -> ClusterView | None:
        """The view to publish as epoch 1 on servers that hold none (None: do not publish)."""
        if not isinstance(self.store, ServersViewStore) or self.view.epoch != 0:
            return None  # another store is the authority; or a view was adopted already
        first = dataclasses.replace(self._configured, epoch=FIRST_EPOCH)
        try:
            first.to_json()
        except (ConfigError, UnsupportedError):
            return None  # a placement a view cannot hold: the client routes unfenced, as before
        return first

    def spread_hot_keys(self) -> Steps[None]:
        """Publish the client's view with hot-key copies allowed, as the next epoch.

        Writers read a key's spread marker only under such a view (a write under any other
        sends no marker read), so turning spreading on is a view change like a membership
        change: every server refuses the writes routed by the older view (memcached: within
        the fence's check interval), and their clients refresh and learn it. Only where the
        servers are the view's authority (``servers://``, a stable view): elsewhere the view's
        own authority publishes it (``hot_copies`` in the view).
        """
        view = self.view
        if (
            view.hot_copies
            or view.transitional
            or view.epoch == 0
            or not isinstance(self.store, ServersViewStore)
        ):
            return
        spread = dataclasses.replace(view, epoch=view.epoch + 1, hot_copies=True)
        if (yield from stamp(spread, self.servers.names)):
            self.adopt(spread)
        else:  # another client published this epoch first: take what the servers hold
            yield from self.refresh()

    def hot_copies_learnt(self, now: float) -> bool:
        """Return True once every writer must route by a view that allows hot-key copies.

        Redis and the memory store refuse an older view's write atomically from the moment
        they hold the new epoch; a memcached writer may trust its last read of the epoch for
        :data:`~ringkit.cluster.fencing.MEMCACHED_FENCE_CHECK_S`, so where the view has a
        memcached server, copies wait that long after this client adopted the view (which the
        servers held before).
        """
        since = self._hot_copies_since
        if since is None:
            return False
        servers = self.view.servers.values()
        if not any(url.startswith("memcached:") for url in servers):
            return True
        return now >= since + MEMCACHED_FENCE_CHECK_S

    def restamp(self, server: str) -> Steps[None]:
        """Give `server` (its URL text), which lost its epoch, the newest view of the others.

        The newest view any other server (or the store) holds, at least the client's own: a
        stale client re-stamps the server with the newer view and is then refused as stale.
        """
        own = self.view
        lost = [name for name, held in self.servers.items() if str(held.url) == server]
        others = [name for name in self.servers.names if name not in lost]
        try:
            found = yield from self.store.read(others, own.epoch)
        except BackendError:
            found = None
        newest = found if found is not None and found.epoch >= own.epoch else own
        yield from stamp(newest, lost or self.servers.names)

    def refresh(self, at_least: int = 0) -> Steps[ClusterView]:
        """Read the newest view from the store and adopt it if it is newer; return the view.

        :raises BackendError: when the store cannot be reached
        """
        yield from self.settle()
        found = yield from self.store.read(self.servers.names, at_least)
        if found is not None and found.epoch > self.view.epoch:
            self.adopt(found)
        return self.view

    def check_due(self, check_s: float) -> bool:
        """Return True when :meth:`fenced` with `check_s` would refresh the view first."""
        return time.monotonic() - self._checked_at >= check_s

    def fenced(self, op: Callable[[Router], Steps[T]], check_s: float | None) -> Steps[T]:
        """Run `op` under the current router; on a refusal, refresh and run it again.

        With `check_s`, first refresh when the last check is that many seconds old.

        :raises StaleViewError: when servers still refuse after ``MAX_VIEW_RETRIES`` refreshes
        """
        yield from self.settle()
        if check_s is not None and self.check_due(check_s):
            self._checked_at = time.monotonic()
            yield from self.refresh()
        for attempt in range(MAX_VIEW_RETRIES + 1):
            try:
                return (yield from op(self.router))
            except StaleViewError as error:
                if attempt == MAX_VIEW_RETRIES:
                    raise
                yield from self.refresh(at_least=error.epoch)
            except EpochLostError as lost:
                if attempt == MAX_VIEW_RETRIES:
                    raise
                yield from self.restamp(lost.server)
        raise AssertionError("unreachable")  # the loop returns or raises
