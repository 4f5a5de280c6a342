"""The client's side of membership changes: one view per call, fenced calls, refresh and retry.

Every public call of a :class:`~ringkit.cluster.client.ShardedClient` binds the client's current
:class:`~ringkit.cluster.view.ClusterView` for its whole duration (routing and the epoch sent
to the servers come from the same view, even if another thread refreshes meanwhile). A server
that has moved to a newer epoch refuses the call (:class:`StaleViewError`); the client then reads
the newest view from the servers, adopts it and retries the call, at most
``MAX_VIEW_RETRIES`` times. A write routed by a stale view is therefore refused and redirected,
never acknowledged and lost. With ``view_check_s`` the client also asks one server for its epoch
at most that often, so a client that only reads converges as well.

``add_server`` / ``remove_server`` run a whole rebalance (:mod:`ringkit.cluster.rebalance`)
from this client while other clients, and other threads of this one, keep serving.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Concatenate, ParamSpec, TypeVar, cast

from ringkit.cluster.fencing import StaleViewError, fence
from ringkit.cluster.servers import Server, route_key
from ringkit.cluster.view import ClusterView
from ringkit.errors import BackendError, ConfigError, UnsupportedError
from ringkit.placement import Placement
from ringkit.ring import HashRing

if TYPE_CHECKING:
    from ringkit.cluster.rebalance import RebalanceOptions, RebalanceReport

__all__ = ["MAX_VIEW_RETRIES", "Membership", "fenced_call"]

MAX_VIEW_RETRIES = 5
P = ParamSpec("P")
R = TypeVar("R")
M = TypeVar("M", bound="Membership")


def fenced_call(method: Callable[Concatenate[M, P], R]) -> Callable[Concatenate[M, P], R]:
    """Run `method` under one bound view; on a refusal, refresh the view and retry."""

    @functools.wraps(method)
    def wrapper(self: M, *args: P.args, **kwargs: P.kwargs) -> R:
        local = self._local
        if getattr(local, "view", None) is not None:
            return method(self, *args, **kwargs)  # nested call: keep the outer binding
        self._maybe_check()
        for attempt in range(MAX_VIEW_RETRIES + 1):
            local.view = self._view
            try:
                return method(self, *args, **kwargs)
            except StaleViewError as error:
                if attempt == MAX_VIEW_RETRIES:
                    raise
                self.refresh_view(at_least=error.epoch)
            finally:
                local.view = None
        raise AssertionError("unreachable")  # the loop returns or raises

    return cast(Callable[Concatenate[M, P], R], wrapper)


class Membership:
    """Views, epochs and membership changes of a ShardedClient (a mixin).

    Reading the view: ``view``, ``epoch``. Converging: ``refresh_view``. Changing membership:
    ``add_server``, ``remove_server``.
    """

    _servers: dict[str, Server]
    _placement: Placement
    _replicas: int
    _open_server: Callable[[str, str], Server]

    def _init_membership(
        self,
        placement: Placement,
        servers: Mapping[str, str],
        view: ClusterView | None,
        view_check_s: float | None,
    ) -> None:
        if view_check_s is not None and not view_check_s > 0:
            raise ConfigError(f"view_check_s must be > 0 or None, got {view_check_s!r}")
        self._local = threading.local()
        self._view_lock = threading.Lock()
        self._view = view or ClusterView(0, placement, dict(servers), self._replicas)
        self._view_check_s = view_check_s
        self._checked_at = time.monotonic()
        for server in self._servers.values():
            self._fence(server)
        if view is not None:
            self._adopt(view)

    # -- the bound view ------------------------------------------------------------------------

    def _route(self) -> ClusterView:
        bound: ClusterView | None = getattr(self._local, "view", None)
        return bound if bound is not None else self._view

    def _point_of(self, key: bytes) -> int:
        placement = self._route().placement
        point_for = getattr(placement, "point_for", None)
        return int(point_for(route_key(key))) if point_for is not None else 0

    def _fence(self, server: Server) -> None:
        server.backend = fence(server.backend, lambda: self._route().epoch, self._point_of)

    @property
    def view(self) -> ClusterView:
        """The cluster view this client routes by."""
        return self._view

    @property
    def epoch(self) -> int:
        """The epoch of the client's view."""
        return self._view.epoch

    # -- converging ----------------------------------------------------------------------------

    def _maybe_check(self) -> None:
        if self._view_check_s is None:
            return
        now = time.monotonic()
        if now - self._checked_at >= self._view_check_s:
            self._checked_at = now
            self.refresh_view()

    def refresh_view(self, *, at_least: int = 0) -> ClusterView:
        """Read the newest view from the servers and adopt it if it is newer; return the view.

        `at_least` is an epoch some server announced: servers are asked until one has it.

        :raises BackendError: when no server could be asked
        """
        from ringkit.cluster.rebalance import read_views

        found = read_views({name: s.backend for name, s in self._servers.items()}, at_least)
        if found is not None and found.epoch > self._view.epoch:
            self._adopt(found)
        return self._view

    def _adopt(self, view: ClusterView) -> None:
        with self._view_lock:
            if view.epoch < self._view.epoch:
                return
            for name, url in view.servers.items():
                if name not in self._servers:
                    server = self._open_server(name, url)
                    self._fence(server)
                    self._servers[name] = server
            self._view = view
            self._placement = view.placement

    # -- changing membership -------------------------------------------------------------------

    def _ring(self) -> HashRing:
        self.refresh_view()
        placement = self._view.placement
        if not isinstance(placement, HashRing):
            raise UnsupportedError(
                f"membership changes need a HashRing placement, got {type(placement).__name__}"
            )
        return placement

    def add_server(
        self, name: str, url: str, *, options: RebalanceOptions | None = None
    ) -> RebalanceReport:
        """Add server `name` at `url` and move its keys to it while traffic goes on.

        Publishes a transitional view, streams exactly the moved arcs, publishes the final view,
        then deletes the moved copies from their old owners. Returns what was moved.

        :raises DuplicateNodeError: when `name` is already a node
        :raises ConfigError: when a rebalance is already in progress (resume or roll it back)
        :raises BackendError: when a server the change needs cannot be reached
        """
        from ringkit.cluster.rebalance import Rebalancer

        ring = self._ring()
        new = ring.add(name)
        rebalancer = Rebalancer(self._view, options=options, on_view=self._adopt)
        return rebalancer.change(new, {**self._view.servers, name: url}, {"add": name})

    def remove_server(
        self, name: str, *, options: RebalanceOptions | None = None
    ) -> RebalanceReport:
        """Remove server `name`, moving its keys to their new owners while traffic goes on.

        If the server is down and ``replicas >= 2``, its copies are rebuilt from the surviving
        replicas.

        :raises UnknownNodeError: when `name` is not a node
        :raises BackendError: when the server is down and its keys have no other copy
        """
        from ringkit.cluster.rebalance import Rebalancer

        ring = self._ring()
        new = ring.remove(name)
        rebalancer = Rebalancer(self._view, options=options, on_view=self._adopt)
        return rebalancer.change(new, dict(self._view.servers), {"remove": name})


def unreachable(names: list[str]) -> BackendError:
    """Return the error for a view that no server could give."""
    return BackendError(f"no server answered for the cluster view (asked {', '.join(names)})")
