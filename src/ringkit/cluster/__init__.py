"""ringkit.cluster: a sharded, replicated cache client over memory, Redis and memcached servers.

``ShardedClient(placement, servers, replicas=R)`` routes each key through any ringkit placement
to its servers, given as ``{node name: URL}`` with URLs ``redis://[:password@]host:port/db``,
``rediss://…``, ``memcached://host:port`` or ``memory://NAME``. See docs/cluster.md.

>>> from ringkit import HashRing
>>> from ringkit.cluster import ShardedClient
>>> servers = {"a": "memory://pkg-a", "b": "memory://pkg-b"}
>>> with ShardedClient(HashRing(list(servers)), servers) as client:
...     client.set("greeting", "hello")
...     client.get("greeting")
'hello'
"""

from __future__ import annotations

from ringkit.cluster.aio import AsyncShardedClient
from ringkit.cluster.client import ShardedClient
from ringkit.cluster.core.health import OpEvent, StatsSnapshot
from ringkit.cluster.core.hotkeys import HotKeys, SpaceSaving, SplitStats
from ringkit.cluster.options import DEFAULT_MAX_VALUE_BYTES, ClientOptions
from ringkit.cluster.rebalance.coordination import register_coordinator
from ringkit.cluster.rebalance.coordinator import RebalanceOptions, Rebalancer, RebalanceReport
from ringkit.cluster.remedies.nearcache import NearCache, NearCacheStats
from ringkit.cluster.values.codec import JSON, PICKLE, Serializer
from ringkit.cluster.views.etcd import EtcdViewStore
from ringkit.cluster.views.stores import ViewStore, open_view_store, register_view_store
from ringkit.cluster.views.view import ClusterView, load_view
from ringkit.cluster.wire.backends import Backend, open_backend
from ringkit.cluster.wire.memory import MemoryStore, memory_store
from ringkit.cluster.wire.urls import ServerURL, parse_url
from ringkit.errors import EpochLostError, QuorumError, StaleViewError, ViewConflictError

# The client calls the coordinator of membership changes; it is wired here, once, so that the
# client never imports it (see ringkit.cluster.rebalance.coordination).
register_coordinator(
    lambda view, options, on_view, store, credentials: Rebalancer(
        view, options=options, on_view=on_view, view_store=store, credentials=credentials
    )
)
# The cluster view in etcd (through ringkit.live's etcd client): see ringkit.cluster.views.etcd.
for _scheme in ("etcd", "etcds"):
    register_view_store(_scheme, EtcdViewStore)

__all__ = [
    "DEFAULT_MAX_VALUE_BYTES",
    "JSON",
    "PICKLE",
    "AsyncShardedClient",
    "Backend",
    "ClientOptions",
    "ClusterView",
    "EpochLostError",
    "EtcdViewStore",
    "HotKeys",
    "MemoryStore",
    "NearCache",
    "NearCacheStats",
    "OpEvent",
    "QuorumError",
    "RebalanceOptions",
    "RebalanceReport",
    "Rebalancer",
    "Serializer",
    "ServerURL",
    "ShardedClient",
    "SpaceSaving",
    "SplitStats",
    "StaleViewError",
    "StatsSnapshot",
    "ViewConflictError",
    "ViewStore",
    "load_view",
    "memory_store",
    "open_backend",
    "open_view_store",
    "parse_url",
    "register_view_store",
]
