"""Exact layouts of other systems: ketama, uhashring, Envoy, HAProxy, nginx, Cassandra, Redis.

Each function reproduces one system's placement bit for bit and cites its
source; docs/compatibility.md says what was checked against what.

>>> from ringkit.compat import ketama, redis_slot
>>> ketama("10.0.1.1:11211 600,10.0.1.3:11211 200").node_for("D[HE+cFXDK")
'10.0.1.3:11211'
>>> redis_slot("id:{key}")
12539
"""

from __future__ import annotations

from ringkit.compat._continuum import Continuum
from ringkit.compat.cassandra import CassandraRing, TokenRange, cassandra_ring
from ringkit.compat.envoy import envoy_ring
from ringkit.compat.guava import guava_consistent_hash
from ringkit.compat.haproxy import HAProxyRing, HAProxyServer, haproxy
from ringkit.compat.haproxy_config import haproxy_from_config
from ringkit.compat.ketama import KETAMA_VARIANTS, ketama
from ringkit.compat.maglev import envoy_maglev
from ringkit.compat.nginx import NginxServer, nginx
from ringkit.compat.nginx_config import nginx_from_config
from ringkit.compat.pylibmc_behaviors import from_pylibmc_behaviors
from ringkit.compat.redis_cluster import RedisCluster, redis_cluster, redis_slot
from ringkit.compat.uhashring import UhashringRing, uhashring

__all__ = [
    "KETAMA_VARIANTS",
    "CassandraRing",
    "Continuum",
    "HAProxyRing",
    "HAProxyServer",
    "NginxServer",
    "RedisCluster",
    "TokenRange",
    "UhashringRing",
    "cassandra_ring",
    "envoy_maglev",
    "envoy_ring",
    "from_pylibmc_behaviors",
    "guava_consistent_hash",
    "haproxy",
    "haproxy_from_config",
    "ketama",
    "nginx",
    "nginx_from_config",
    "redis_cluster",
    "redis_slot",
    "uhashring",
]
