"""The load-balancer control plane: keep a proxy's pool in step with the live ring.

A proxy routes by its own layout (HAProxy's ``hash-type consistent``, nginx's ``hash …
consistent``), computed from its servers' ids, addresses and weights, which
``ringkit.compat`` reproduces exactly; this package keeps those servers equal to the live
ring's members whose data holds an ``address``. :class:`HAProxyController` drives an HAProxy
backend through its runtime API (add, drain, remove; ids kept in etcd so every proxy and every
prediction agree); :class:`NginxController` renders an nginx upstream's servers into a file
and reloads nginx. See docs/load-balancers.md.
"""

from __future__ import annotations

from ringkit.lb.haproxy import DEFAULT_DRAIN_TIMEOUT_S, HAProxyController
from ringkit.lb.ids import MAX_SERVER_ID, IdAssignment, assign_ids, ids_key, read_ids
from ringkit.lb.nginx import NginxController, render_upstream
from ringkit.lb.pool import (
    HAPROXY_WEIGHTS,
    NGINX_WEIGHTS,
    Pool,
    PoolServer,
    ProxyServer,
    WeightRange,
    member_address,
    proxied,
)
from ringkit.lb.runtime import HAProxyRuntime, ServerState

__all__ = [
    "DEFAULT_DRAIN_TIMEOUT_S",
    "HAPROXY_WEIGHTS",
    "MAX_SERVER_ID",
    "NGINX_WEIGHTS",
    "HAProxyController",
    "HAProxyRuntime",
    "IdAssignment",
    "NginxController",
    "Pool",
    "PoolServer",
    "ProxyServer",
    "ServerState",
    "WeightRange",
    "assign_ids",
    "ids_key",
    "member_address",
    "proxied",
    "read_ids",
    "render_upstream",
]
