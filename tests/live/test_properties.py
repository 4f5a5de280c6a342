"""Properties: the live ring is HashRing of its members; shuffle shards are stable and minimal."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ringkit.live
from ringkit.errors import ConfigError
from ringkit.nodes import Node
from ringkit.ring import HashRing
from ringkit.ring.shuffle import shard_collision_probability, shuffle_shard
from tests.hypothesis_strategies import node_name_sets, small_vnodes, weights

_stores = itertools.count()
zones = st.sampled_from([None, "z1", "z2", "z3"])


@settings(max_examples=25, deadline=None)
@given(
    names=node_name_sets,
    data=st.data(),
    vnodes=small_vnodes,
)
def test_the_snapshot_ring_is_hashring_of_the_members(
    names: list[str], data: st.DataObject, vnodes: int
) -> None:
    nodes = [Node(n, data.draw(weights), data.draw(zones)) for n in names]
    with ringkit.live.connect(f"memory://props-{next(_stores)}") as store:
        members = [
            store.join(n.name, weight=n.weight, zone=n.zone, vnodes=vnodes, ttl_s=30) for n in nodes
        ]
        snap = store.wait_for(lambda s: len(s.ring) == len(nodes))
        assert snap.ring == HashRing(nodes, vnodes=vnodes)
        snap.ring._check()
        for member in members:
            member.close()


def zoned_ring(count: int, zone_count: int) -> HashRing:
    return HashRing(
        [Node(f"n{i}", zone=f"z{i % zone_count}" if zone_count else None) for i in range(count)],
        vnodes=16,
    )


rings = st.builds(zoned_ring, st.integers(4, 24), st.integers(0, 3))
tenants = st.text(min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(ring=rings, tenant=tenants, size=st.integers(1, 8))
def test_a_shard_is_stable_sized_and_spread_over_zones(
    ring: HashRing, tenant: str, size: int
) -> None:
    shard = shuffle_shard(ring, tenant, size)
    assert shard == shuffle_shard(ring, tenant, size)
    assert len(shard) == min(size, len(ring)) and set(shard) <= set(ring)
    per_zone: dict[str | None, int] = {}
    for node in shard.nodes:
        per_zone[node.zone] = per_zone.get(node.zone, 0) + 1
    zones_in_ring = {node.zone for node in ring.nodes}
    if len(shard) < len(ring):
        assert max(per_zone.values()) - min(per_zone.get(z, 0) for z in zones_in_ring) <= 1
    for node in shard.nodes:  # a shard node keeps its tokens
        assert set(ring.tokens[ring.token_owners == ring.nodes.index(node)].tolist()) == set(
            shard.tokens[shard.token_owners == shard.nodes.index(node)].tolist()
        )


@settings(max_examples=60, deadline=None)
@given(ring=rings, tenant=tenants, size=st.integers(1, 6), data=st.data())
def test_membership_changes_move_a_shard_minimally(
    ring: HashRing, tenant: str, size: int, data: st.DataObject
) -> None:
    shard = set(shuffle_shard(ring, tenant, size))
    victim = data.draw(st.sampled_from(list(ring)))
    after = set(shuffle_shard(ring.remove(victim), tenant, size))
    if victim not in shard:
        assert after == shard  # nobody's walk passed the victim unchosen
    elif len(ring) - 1 >= size:
        assert len(after - shard) <= 1 and shard - after == {victim}
    zone = ring.nodes[0].zone
    added = set(shuffle_shard(ring.add(Node("newcomer", zone=zone)), tenant, size))
    if size < len(ring):  # else the shard is the whole ring and simply grows
        assert added == shard or (len(added - shard) == 1 and len(shard - added) == 1)
        assert added - shard <= {"newcomer"}


def test_shard_size_and_collision_errors() -> None:
    with pytest.raises(ConfigError, match="shard size must be an int >= 1, got 0"):
        shuffle_shard(HashRing(["a"]), "t", 0)
    with pytest.raises(ConfigError, match="split evenly over zones"):
        shard_collision_probability(10, 3, zones=2)
    assert shard_collision_probability(4, 4) == 1.0
