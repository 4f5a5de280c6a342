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
from ringkit.cluster.backends import Backend, MemoryStore, memory_store, open_backend
from ringkit.cluster.client import DEFAULT_MAX_VALUE_BYTES, QuorumError, ShardedClient
from ringkit.cluster.health import OpEvent, StatsSnapshot
from ringkit.cluster.hotkeys import HotKeys, SpaceSaving
from ringkit.cluster.serializers import JSON, PICKLE, Serializer
from ringkit.cluster.urls import ServerURL, parse_url

__all__ = [
    "DEFAULT_MAX_VALUE_BYTES",
    "JSON",
    "PICKLE",
    "AsyncShardedClient",
    "Backend",
    "HotKeys",
    "MemoryStore",
    "OpEvent",
    "QuorumError",
    "Serializer",
    "ServerURL",
    "ShardedClient",
    "SpaceSaving",
    "StatsSnapshot",
    "memory_store",
    "open_backend",
    "parse_url",
]
