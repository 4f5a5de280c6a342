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
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Concatenate, ParamSpec, TypeVar, cast

from ringkit.cluster.fencing import FencedBackend, StaleViewError, fence
from ringkit.cluster.health import Hook, ServerHealth
from ringkit.cluster.routing import Router
from ringkit.cluster.servers import Server, route_key
from ringkit.cluster.urls import ServerURL, parse_url
from ringkit.cluster.view import ClusterView
from ringkit.placement import Placement

if TYPE_CHECKING:
    from ringkit.cluster.rebalance import RebalanceOptions, RebalanceReport

__all__ = [
    "MAX_VIEW_RETRIES",
    "Membership",
    "ServerOptions",
    "ViewRouter",
    "fenced_call",
    "url_text",
]

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


@dataclass(frozen=True, slots=True)
class ServerOptions:
    """How a client opens its servers; a server that joins through a new view opens alike."""

    timeout_s: float
    connect_timeout_s: float | None
    max_connections: int
    hooks: tuple[Hook, ...]
    dead_timeout_s: float
    max_hints: int


class ViewRouter(Router):
    """A router that follows the client's bound view, old and new placements both while moving.

    While data moves, reads try the new owners and then the old ones (while rolling back: the
    abandoned owners first, who took every write) and writes go to both sides, the copy's source
    side first, so that a delete or a counter update also reaches the copy that a fallback read
    may find. Stable views route as the plain :class:`~ringkit.cluster.routing.Router`.
    """

    def __init__(self, base: Router, owner: Membership) -> None:
        self._owner = owner
        super().__init__(base.placement, replicas=base.replicas, hot_keys=base.hot_keys)

    @property
    def placement(self) -> Placement:
        """The placement of the bound view."""
        return self._owner._route().placement

    @placement.setter
    def placement(self, value: Placement) -> None:
        """Placements change only through views (``ShardedClient.refresh_view``)."""

    def _names(self, key: bytes, rings: tuple[Placement, ...]) -> list[str]:
        found: dict[str, None] = {}
        for ring in rings:
            route = route_key(key)
            names = (
                ring.nodes_for(route, self.replicas)
                if self.replicas > 1
                else [ring.node_for(route)]
            )
            found.update(dict.fromkeys(names))
        return list(found)

    def read_order(self, key: bytes) -> list[str]:
        view = self._owner._route()
        if view.transitional:
            return self._names(key, view.read_placements)
        return super().read_order(key)

    def write_names(self, key: bytes) -> list[str]:
        view = self._owner._route()
        if view.transitional:
            assert view.previous is not None
            names = self._names(key, (view.previous, view.placement))
            # A hot key's spread copies (under the new placement) must not fall behind either.
            spread = self.hot_keys.spread_for(key) if self.hot_keys is not None else 0
            if spread > self.replicas:
                names += [name for name in self._copies(key, spread) if name not in names]
            return names
        return super().write_names(key)


class Membership:
    """Views, epochs and membership changes of a ShardedClient (a mixin).

    Reading the view: ``view``, ``epoch``. Converging: ``refresh_view``, ``view_check_s``,
    ``adopt_view``. Indexing: ``index_keys``.
    Changing membership: ``add_server``, ``remove_server``.
    """

    _servers: dict[str, Server]
    _replicas: int
    _server_options: ServerOptions
    _open_server: Callable[..., Server]

    # ClientCore assigns ``self._router`` once, at the end of its constructor, and
    # ``self._read_repair`` before it: intercepting the two assignments installs the view
    # machinery without a second constructor to keep in step with the core's options.
    @property
    def _router(self) -> Router:
        router: Router = self.__dict__["_view_router"]
        return router

    @_router.setter
    def _router(self, router: Router) -> None:
        self._local = threading.local()
        self._view_lock = threading.Lock()
        urls = {name: url_text(server.url) for name, server in self._servers.items()}
        self._view = ClusterView(0, router.placement, urls, self._replicas)
        self.view_check_s: float | None = None
        self._checked_at = time.monotonic()
        self.__dict__["_view_router"] = ViewRouter(router, self)

    @property
    def _read_repair(self) -> bool:
        # No repair while data moves: a repair is a plain write and could overwrite a newer copy.
        return bool(self.__dict__["_repair_setting"]) and not self._route().transitional

    @_read_repair.setter
    def _read_repair(self, value: bool) -> None:
        self.__dict__["_repair_setting"] = value

    def _joined(self, server: Server) -> Server:
        """Return `server` with its backend fenced by this client's bound view."""
        fenced = fence(server.backend, lambda: self._route().epoch, self._point_of)
        fenced.index_keys = self.__dict__.get("_index_keys", True)
        server.backend = fenced
        return server

    @property
    def index_keys(self) -> bool:
        """Whether Redis writes also record the key in the server's index (default True).

        The index makes a rebalance a range read per arc; it costs about 127 bytes per key on
        Redis 7 (measured with 20-byte keys). Off, writes skip it and a rebalance finds the keys
        with one SCAN of each source (``RebalanceOptions(scan=True)``, the default).
        """
        return bool(self.__dict__.get("_index_keys", True))

    @index_keys.setter
    def index_keys(self, value: bool) -> None:
        self.__dict__["_index_keys"] = bool(value)
        for server in self._servers.values():
            if isinstance(server.backend, FencedBackend):
                server.backend.index_keys = bool(value)

    # -- the bound view ------------------------------------------------------------------------

    def _route(self) -> ClusterView:
        bound: ClusterView | None = getattr(self._local, "view", None)
        return bound if bound is not None else self._view

    def _point_of(self, key: bytes) -> int:
        placement = self._route().placement
        point_for = getattr(placement, "point_for", None)
        return int(point_for(route_key(key))) if point_for is not None else 0

    @property
    def view(self) -> ClusterView:
        """The cluster view this client routes by."""
        return self._view

    @property
    def epoch(self) -> int:
        """The epoch of the client's view."""
        return self._view.epoch

    # -- converging ----------------------------------------------------------------------------

    def _open_joining(self, name: str, url: str) -> Server:
        options = self._server_options
        health = ServerHealth(
            name, dead_timeout_s=options.dead_timeout_s, max_hints=options.max_hints
        )
        return self._open_server(
            name,
            parse_url(url),
            health,
            timeout_s=options.timeout_s,
            connect_timeout_s=options.connect_timeout_s,
            max_connections=options.max_connections,
            hooks=options.hooks,
        )

    def adopt_view(self, view: ClusterView) -> None:
        """Route by `view` from now on, unless the client already has a newer one."""
        self._adopt(view)

    def _maybe_check(self) -> None:
        if self.view_check_s is None:
            return
        now = time.monotonic()
        if now - self._checked_at >= self.view_check_s:
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
            joining = {
                name: self._open_joining(name, url)
                for name, url in view.servers.items()
                if name not in self._servers
            }
            if joining:
                # A new dict, not an update: other threads may be iterating the old one.
                self._servers = {**self._servers, **joining}
            self._view = view

    # -- changing membership -------------------------------------------------------------------

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

        rebalancer = Rebalancer(self.refresh_view(), options=options, on_view=self._adopt)
        try:
            return rebalancer.add(name, url)
        finally:
            rebalancer.close()

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

        rebalancer = Rebalancer(self.refresh_view(), options=options, on_view=self._adopt)
        try:
            return rebalancer.remove(name)
        finally:
            rebalancer.close()


def url_text(url: ServerURL) -> str:
    """Return `url` as text again, password included (the view must let clients connect).

    >>> url_text(parse_url("redis://:pw@127.0.0.1:6379/2"))
    'redis://:pw@127.0.0.1:6379/2'
    """
    if url.scheme == "memory":
        return f"memory://{url.name}"
    auth = f"{url.username or ''}:{url.password}@" if url.password is not None else ""
    host = f"[{url.host}]" if ":" in url.host else url.host
    path = "" if url.scheme == "memcached" else f"/{url.db}"
    return f"{url.scheme}://{auth}{host}:{url.port}{path}"
