"""Every placement answers the same protocol: the registry's strategies and the compat layouts.

One conformance test per protocol promise, parametrized over every placement, so that a new
strategy (one file and its registry entry) is checked without writing a test for it first.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from ringkit import BoundedLoad, HashRing, Node, Placement, UnknownNodeError, UnsupportedError
from ringkit.compat import (
    cassandra_ring,
    envoy_maglev,
    envoy_ring,
    haproxy,
    ketama,
    nginx,
    redis_cluster,
)
from ringkit.hashing import Hasher, hash_many
from ringkit.placement import PlacementBase, Segmentation
from ringkit.strategies.registry import STRATEGY_NAMES, StrategyOptions, build_placement

NAMES = ["a", "b", "c"]
KEYS = [f"key-{i}" for i in range(300)]
_SMALL = {"maglev": StrategyOptions(table_size=251), "fixed": StrategyOptions(partitions=64)}

BUILDERS: dict[str, Callable[[], Placement]] = {
    **{
        name: (lambda name=name: build_placement(name, NAMES, _SMALL.get(name)))  # type: ignore[misc]
        for name in STRATEGY_NAMES
    },
    "compat.ketama": lambda: ketama([f"{name}:11211" for name in NAMES]),
    "compat.envoy_ring": lambda: envoy_ring(NAMES),
    "compat.envoy_maglev": lambda: envoy_maglev(NAMES, table_size=251),
    "compat.haproxy": lambda: haproxy(NAMES),
    "compat.haproxy_crc32": lambda: haproxy(NAMES, hash_function="crc32"),
    "compat.nginx": lambda: nginx([f"{name}:80" for name in NAMES]),
    "compat.cassandra_ring": lambda: cassandra_ring({"a": [-6e18], "b": [0], "c": [6e18]}),
    "compat.redis_cluster": lambda: redis_cluster(
        {"a": ["0-5000"], "b": ["5001-10000"], "c": ["10001-16383"]}
    ),
}
ALL = sorted(BUILDERS)
STATEFUL = {"bounded"}  # assign_many counts load; every other placement is a pure function


@pytest.fixture(params=ALL)
def placement(request: pytest.FixtureRequest) -> Placement:
    built = BUILDERS[request.param]()
    assert isinstance(built, Placement) and isinstance(built, PlacementBase)
    return built


def test_discard_of_a_missing_node_returns_the_same_placement(placement: Placement) -> None:
    assert placement.discard("not-there") is placement
    with pytest.raises(UnknownNodeError, match="node 'not-there' is not in the"):
        placement.remove("not-there")


def test_membership_and_nodes_agree(placement: Placement) -> None:
    names = [node.name for node in placement.nodes]
    assert sorted(placement) == sorted(names) and len(placement) == len(names)
    assert all(isinstance(node, Node) for node in placement.nodes)
    assert names[0] in placement and "not-there" not in placement and 7 not in placement


@pytest.mark.parametrize("name", ALL)
def test_equal_placements_are_equal_and_hash_alike(name: str) -> None:
    first, second = BUILDERS[name](), BUILDERS[name]()
    assert first == second and hash(first) == hash(second)
    assert first != "not a placement"
    assert type(first).__name__ in repr(first) or "redis_cluster(" in repr(first)


def test_reweight_works_or_names_an_alternative(placement: Placement) -> None:
    name = placement.nodes[0].name
    try:
        heavier = placement.reweight(name, 2.0)
    except UnsupportedError as error:
        assert "cannot weight nodes, got weight 2.0 for node" in str(error)
        assert "; use " in str(error)  # the way to weight nodes, or a placement that can
    else:
        assert {node.name: node.weight for node in heavier.nodes}[name] == 2.0
        assert heavier != placement
    with pytest.raises((UnknownNodeError, UnsupportedError)):
        placement.reweight("not-there", 2.0)


def test_ring_and_hasher_say_what_the_placement_is_built_on(placement: Placement) -> None:
    ring = placement.ring
    assert ring is None or isinstance(ring, HashRing)
    if isinstance(placement, HashRing):
        assert ring is placement
    if ring is not None:
        assert ring.nodes == placement.nodes and placement.hasher == ring.hasher
    assert placement.hasher is None or isinstance(placement.hasher, Hasher)


def test_assign_many_is_node_for_many_for_stateless_placements(placement: Placement) -> None:
    if isinstance(placement, BoundedLoad):
        hot = ["hot"] * 6
        assert len(set(placement.assign_many(hot))) == 2  # the caps spill a hot key
        assert set(placement.loads().values()) == {0}  # on a fresh table, not this one
    else:
        assert placement.assign_many(KEYS) == placement.node_for_many(KEYS)


def test_owner_indices_for_hashes_equals_node_for_many(placement: Placement) -> None:
    hasher = placement.hasher
    if not placement.routes_by_hash or hasher is None:
        with pytest.raises(UnsupportedError, match="use node_for_many"):
            placement.owner_indices_for_hashes(np.zeros(3, dtype=np.uint64))
        return
    indices = placement.owner_indices_for_hashes(hash_many(KEYS, hasher))
    names = [placement.nodes[i].name for i in indices.tolist()]
    assert names == placement.node_for_many(KEYS)


def test_segmentation_is_exact_units_or_none(placement: Placement) -> None:
    units = placement.segmentation(1)
    assert units is None or isinstance(units, Segmentation)
    if units is not None and units.basis == "points":
        assert placement.ring is not None and units.size == placement.ring.space
    elif units is not None:
        assert units.rows is not None and units.unit_for is not None
        rows = units.rows()
        assert len(rows) == units.size
        assert [rows[units.unit_for(key)][0] for key in KEYS[:50]] == placement.node_for_many(
            KEYS[:50]
        )


def test_bounded_assign_many_acquires_in_turn() -> None:
    bounded = BoundedLoad(HashRing(NAMES, vnodes=8), balance_factor=1.25)
    fresh = BoundedLoad(HashRing(NAMES, vnodes=8), balance_factor=1.25)
    assert bounded.assign_many(KEYS) == [fresh.acquire(key) for key in KEYS]
