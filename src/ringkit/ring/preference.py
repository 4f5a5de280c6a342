"""Preference lists: the distinct nodes clockwise from a key, zone-diverse first.

Replication sits on top of the ring (DeCandia et al. 2007, Dynamo's preference list): walk the
circle clockwise from the key's token and take the first R *distinct* nodes, skipping repeats
where one node holds adjacent tokens.
When nodes have zones (failure domains), a node whose zone already holds a replica is held back
until every zone has one, so R replicas land in min(R, zones) zones; then the held-back nodes
follow in ring order. This is the rule of Cassandra's NetworkTopologyStrategy for racks.

>>> owners = [0, 0, 1, 2, 1]                  # token owners, clockwise
>>> list(walk_distinct(owners, 1, (0, 0, 1)))  # nodes 0 and 1 share zone 0
[0, 2, 1]
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

__all__ = ["walk_distinct"]


def walk_distinct(owners: Sequence[int], start: int, zone_ids: Sequence[int]) -> Iterator[int]:
    """Yield distinct owner indices clockwise from token `start`, one per zone first.

    `zone_ids[i]` is the zone of owner `i` (an owner without a zone has a zone of its own).
    Stops once every owner has been yielded. Runtime: O(tokens walked), usually a few per owner.
    """
    zones_left = len(set(zone_ids))
    seen: set[int] = set()
    seen_zones: set[int] = set()
    held_back: list[int] = []
    count = len(owners)
    for step in range(count):
        owner = owners[(start + step) % count]
        if owner in seen:
            continue
        seen.add(owner)
        if zones_left and zone_ids[owner] in seen_zones:
            held_back.append(owner)  # its zone already has a replica
            continue
        yield owner
        if zones_left:
            seen_zones.add(zone_ids[owner])
            zones_left -= 1
            if not zones_left:  # every zone has one: release the held-back nodes, in order
                yield from held_back
        if len(seen) == len(zone_ids):
            return
