"""The lone call: a single-key get or set that is one call to one server, with nothing around it.

With one replica, ``read="first"``, no hot keys, no near-cache, a settled stable view and the
key's server up, a ``get`` is one fenced read of that server and a ``set`` (under a view that
spreads no hot key) one fenced write: the steps of the whole read or write
(:mod:`ringkit.cluster.drivers.steps`: the fenced retry, the reader or writer, the server set)
would make exactly that call and no other. The clients then make it straight, without a
generator, and take the whole steps only when it is refused (a newer view, a server that lost
its epoch) or fails (the server is marked down already): the answer is the one the steps give.

:class:`LoneRoutes` is what that decision needs of one view, computed once per
:class:`~ringkit.cluster.core.routing.Router` (a client adopts a newer view by swapping its
router, which makes a new one): whether the view allows lone reads and writes, its epoch, the
placement's ``node_for`` and the servers by name, so that a call asks one dict and one flag.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ringkit.cluster.core.routing import Router
from ringkit.cluster.core.servers import Server
from ringkit.cluster.values.keys import route_key

__all__ = ["LoneRoutes"]


class LoneRoutes:
    """Under one router: may a single-key call go alone, and to which server (immutable).

    `reads`: a lone get is possible (one replica, a stable view, a client without hot keys,
    near-cache or ``read="all"``); `writes`: a lone set too (the view spreads no hot key, so
    a write reads no spread marker back).
    """

    __slots__ = ("_node_for", "_servers", "epoch", "reads", "router", "writes")

    def __init__(self, router: Router, servers: Mapping[str, Server[Any]], *, alone: bool) -> None:
        view = router.view
        self.router = router
        self.epoch = view.epoch
        self.reads = alone and router.replicas == 1 and not view.transitional
        self.writes = self.reads and not view.hot_copies
        self._node_for = router.placement.node_for
        self._servers = dict(servers)

    def server_for(self, data: bytes) -> Server[Any] | None:
        """Return the server of key `data`, or None when it is down (the steps probe it)."""
        # Most keys have no "{tag}": a bytes scan is cheaper than route_key's call.
        server = self._servers[self._node_for(route_key(data) if b"{" in data else data)]
        return server if server.health.up else None
