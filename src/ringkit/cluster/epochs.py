"""Epochs on the client side: the view a client routes by, and how it converges.

Every call of a cache client binds the client's current view for its whole duration: routing
and the epoch sent to the servers come from the same :class:`~ringkit.cluster.routing.Router`,
one reference that a refresh replaces whole (even when another thread or task refreshes
meanwhile). A server that has moved to a newer epoch refuses the call
(:class:`~ringkit.errors.StaleViewError`); the client then reads the newest view from its
:class:`~ringkit.cluster.viewstore.ViewStore`, adopts it (opening the servers it brings) and
retries the call, at most ``MAX_VIEW_RETRIES`` times. A write routed by a stale view is
therefore refused and redirected, never acknowledged and lost. With ``view_check_s`` the client
also reads the store at most that often, so a client that only reads converges as well. A store
that pushes views (:class:`~ringkit.cluster.viewstore.FollowedViewStore`, etcd's watch) is
followed from construction to ``close``: each new epoch is adopted as it is published.

The tracker is part of the one decision core (:mod:`ringkit.cluster.steps`): the sync and the
async client run the same refresh and retry.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from ringkit.cluster.hotkeys import HotKeys
from ringkit.cluster.routing import Router
from ringkit.cluster.servers import ServerSet
from ringkit.cluster.steps import Steps
from ringkit.cluster.view import ClusterView
from ringkit.cluster.viewstore import FollowedViewStore, Following, ViewStore
from ringkit.errors import StaleViewError

__all__ = ["MAX_VIEW_RETRIES", "ViewTracker"]

MAX_VIEW_RETRIES = 5
T = TypeVar("T")


class ViewTracker:
    """The view a client routes by: adopt a newer one, refresh from the store, retry refused calls.

    Reading: ``view``, ``router``. Converging: ``adopt``, ``refresh``. Calling: ``fenced``.
    ``close`` stops following the store (and closes it when `owns_store`).
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
            if view.epoch < self.router.view.epoch:
                return
            self.servers.join(view.servers)
            self.router = Router(view, hot_keys=self._hot_keys)

    def refresh(self, at_least: int = 0) -> Steps[ClusterView]:
        """Read the newest view from the store and adopt it if it is newer; return the view.

        :raises BackendError: when the store cannot be reached
        """
        found = yield from self.store.read(self.servers.names, at_least)
        if found is not None and found.epoch > self.view.epoch:
            self.adopt(found)
        return self.view

    def fenced(self, op: Callable[[Router], Steps[T]], check_s: float | None) -> Steps[T]:
        """Run `op` under the current router; on a refusal, refresh and run it again.

        With `check_s`, first refresh when the last check is that many seconds old.

        :raises StaleViewError: when servers still refuse after ``MAX_VIEW_RETRIES`` refreshes
        """
        if check_s is not None:
            now = time.monotonic()
            if now - self._checked_at >= check_s:
                self._checked_at = now
                yield from self.refresh()
        for attempt in range(MAX_VIEW_RETRIES + 1):
            try:
                return (yield from op(self.router))
            except StaleViewError as error:
                if attempt == MAX_VIEW_RETRIES:
                    raise
                yield from self.refresh(at_least=error.epoch)
        raise AssertionError("unreachable")  # the loop returns or raises
