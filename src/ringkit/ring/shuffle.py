"""Shuffle sharding: a stable sub-ring of a few nodes for each tenant, spread over zones.

Each tenant (an *identifier*) gets its own ``size`` nodes of the ring, so one tenant's bad
traffic reaches only its shard, and two tenants rarely share a whole shard: with N nodes and
shards of k, shards are (close to) uniform k-subsets, so the chance that two tenants have the
*same* shard is 1 / C(N, k), and with Z zones of n nodes each, k/Z per zone, it is
1 / C(n, k/Z)^Z. Overlaps of m nodes follow the hypergeometric law
C(k, m) · C(N - k, k - m) / C(N, k). (AWS, "Shuffle Sharding: massive and magical fault
isolation", 2014; Grafana dskit ``ring.ShuffleShard``.)

The choice is a sequence of draws, as in dskit: draw *i* of zone *z* hashes the label
``"{identifier}#{z}#{i}"`` to a point and walks clockwise over that zone's tokens to the first
node not chosen yet. A walk stops at the first unchosen node, so:

- removing a node outside the shard changes nothing (no walk ever passed it unchosen);
- removing a node of the shard replaces exactly that node;
- adding a node changes at most one node of the shard (the newcomer in, one out),

as long as the set of zones stays the same (a new zone changes every zone's quota).

>>> from ringkit.ring import HashRing
>>> ring = HashRing([f"n{i}" for i in range(10)])
>>> shard = ring.shuffle_shard("tenant-7", 3)
>>> len(shard), set(shard) <= set(ring)
(3, True)
>>> ring.remove(next(n for n in ring if n not in shard)).shuffle_shard("tenant-7", 3) == shard
True
"""

from __future__ import annotations

import math
from bisect import bisect_left
from typing import TypeVar

from ringkit.errors import ConfigError
from ringkit.placement import TokenRing

# Any token ring: HashRing offers this module as HashRing.shuffle_shard, so it is not imported here.
RingT = TypeVar("RingT", bound=TokenRing)

__all__ = ["shard_collision_probability", "shuffle_shard"]


def _check_size(size: object) -> int:
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ConfigError(f"shard size must be an int >= 1, got {size!r}")
    return size


def _quotas(zones: list[str], identifier: str, size: int, ring: TokenRing) -> dict[str, int]:
    """Split `size` over the zones: size // Z each, the remainder to zones the tenant hashes to."""
    base, extra = divmod(size, len(zones))
    order = sorted(zones, key=lambda zone: ring.point_for(f"{identifier}#{zone}"))
    return {zone: base + (1 if zone in order[:extra] else 0) for zone in zones}


def shuffle_shard(ring: RingT, identifier: str, size: int) -> RingT:
    """Return the sub-ring of `size` nodes that tenant `identifier` is assigned.

    Nodes are spread over the zones (one group for nodes without a zone), ``size // Z`` per
    zone and the remainder to zones chosen by the identifier; a zone with fewer nodes than its
    quota gives all it has. `size` >= the node count returns `ring` itself. The sub-ring keeps
    each chosen node's tokens, so a key's owner inside the shard is the ring's rule applied to
    fewer nodes. Runtime: O(size · T) for T tokens.

    >>> from ringkit.ring import HashRing
    >>> ring = HashRing.from_tokens({"a": [10], "b": [40], "c": [70]}, space=100)
    >>> sorted(shuffle_shard(ring, "t", 2)) == sorted(shuffle_shard(ring, "t", 2))
    True

    :raises ConfigError: when `size` < 1
    """
    size = _check_size(size)
    if size >= len(ring):
        return ring
    nodes = ring.nodes
    zone_of = [node.zone if node.zone is not None else "" for node in nodes]
    quotas = _quotas(sorted(set(zone_of)), identifier, size, ring)
    tokens, owners = ring.tokens.tolist(), ring.token_owners.tolist()
    chosen: set[int] = set()
    for zone, quota in quotas.items():
        members = {i for i, z in enumerate(zone_of) if z == zone}
        quota = min(quota, len(members))
        draw = 0
        while len(chosen & members) < quota:
            point = ring.point_for(f"{identifier}#{zone}#{draw}")
            start = bisect_left(tokens, point)
            for step in range(len(tokens)):
                owner = owners[(start + step) % len(tokens)]
                if owner in members and owner not in chosen:
                    chosen.add(owner)
                    break
            draw += 1
    shard = ring
    for index, node in enumerate(nodes):
        if index not in chosen:
            shard = shard.remove(node.name)
    return shard


def shard_collision_probability(nodes: int, size: int, *, zones: int = 1) -> float:
    """Return the chance that two tenants get the very same shard.

    1 / C(nodes / zones, size / zones) ^ zones, shards taken as uniform per zone.

    >>> round(1 / shard_collision_probability(50, 5))
    2118760
    >>> round(1 / shard_collision_probability(60, 6, zones=3))
    6859000

    :raises ConfigError: when the sizes do not divide evenly over the zones, or size > nodes
    """
    if zones < 1 or nodes % zones or size % zones or not 1 <= size <= nodes:
        raise ConfigError(
            f"nodes and size must split evenly over zones with 1 <= size <= nodes, got "
            f"nodes={nodes!r}, size={size!r}, zones={zones!r}"
        )
    combinations: int = math.comb(nodes // zones, size // zones) ** zones
    return 1.0 / combinations
