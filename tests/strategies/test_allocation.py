"""Allocated tokens: a planner that balances ownership (keyspace or measured load)."""

from __future__ import annotations

import pytest

from ringkit import (
    AllocatedRing,
    ConfigError,
    DuplicateNodeError,
    HashRing,
    UnknownNodeError,
    allocate_tokens,
)
from ringkit.hashing import points_many


def largest_over_fair(shares: dict[str, float]) -> float:
    return max(shares.values()) * len(shares)


def test_sixteen_allocated_tokens_beat_random_vnodes() -> None:
    # 16 allocated tokens per node within 5% of fair share, better than 256 random vnodes; N = 40
    # to stay fast here (N = 100 is in benchmarks/bench_controller.py).
    names = [f"node-{i}" for i in range(40)]
    allocated = AllocatedRing(names, tokens=16)
    allocated.ring._check()
    assert largest_over_fair(allocated.shares()) <= 1.05
    random = HashRing(names, vnodes=256)
    assert largest_over_fair(allocated.shares()) < largest_over_fair(random.shares())


def test_new_node_gets_its_fair_share_by_weight() -> None:
    ring = AllocatedRing(["a", "b", "c"], tokens=8)
    from ringkit import Node

    bigger = ring.add(Node("d", weight=3.0))
    assert bigger.shares()["d"] == pytest.approx(0.5, rel=1e-6)
    assert len(bigger.ring.arcs("d")) == 24  # tokens scale with weight, as vnodes do


def test_only_keys_on_the_new_tokens_move() -> None:
    ring = AllocatedRing(["a", "b", "c"], tokens=8)
    bigger = ring.add("d")
    keys = [f"k{i}" for i in range(2000)]
    for before, after in zip(ring.node_for_many(keys), bigger.node_for_many(keys), strict=True):
        assert after in (before, "d")


def test_balances_measured_load_instead_of_keyspace() -> None:
    # Requests pile on the lower half of the circle: balancing keyspace leaves them unbalanced.
    keys = [f"user:{i}" for i in range(4000)]
    points = points_many(keys).tolist()
    load = [(p, 10.0 if p < 2**63 else 1.0) for p in points]
    by_load = AllocatedRing([f"n{i}" for i in range(8)], tokens=8, load=load)
    by_space = AllocatedRing([f"n{i}" for i in range(8)], tokens=8)

    def worst(ring: AllocatedRing) -> float:
        per: dict[str, float] = {}
        for (_, amount), owner in zip(load, ring.ring.owner_indices(points).tolist(), strict=True):
            name = ring.ring.nodes[owner].name
            per[name] = per.get(name, 0.0) + amount
        return max(per.values()) / (sum(per.values()) / len(per))

    assert worst(by_load) < 1.1 < worst(by_space)


def test_protocol_and_errors() -> None:
    ring = AllocatedRing(["a", "b"], tokens=4)
    assert len(ring) == 2 and "a" in ring and list(ring) == ["a", "b"]
    assert ring.remove("a").shares() == {"b": 1.0}
    assert ring.discard("zz") is ring
    assert ring == AllocatedRing(["b", "a"], tokens=4)
    assert ring.nodes_for("k", 2) in (["a", "b"], ["b", "a"])
    with pytest.raises(ConfigError, match="tokens must be >= 1, got 0"):
        AllocatedRing(["a"], tokens=0)
    with pytest.raises(DuplicateNodeError, match="'a' is already"):
        allocate_tokens(ring.ring, "a")
    with pytest.raises(UnknownNodeError, match="node 'x' is not in the ring"):
        ring.remove("x")
    with pytest.raises(ConfigError, match="needs the 64-bit space, got space=360"):
        allocate_tokens(HashRing.from_tokens({"a": [1]}, space=360), "b")
    with pytest.raises(ConfigError, match="positive total amount"):
        AllocatedRing(["a", "b"], load=[(1, 0.0)])


def replicated_over_fair(ring: HashRing, replicas: int, keys: int = 30_000) -> float:
    """Largest replicated ownership / fair, counted on keys through the ring's own nodes_for."""
    counts = dict.fromkeys(ring, 0)
    for i in range(keys):
        for name in ring.nodes_for(f"k{i}", replicas):
            counts[name] += 1
    return max(counts.values()) / (replicas * keys / len(counts))


def test_replication_aware_allocation_balances_replicated_ownership() -> None:
    names = [f"node-{i}" for i in range(12)]
    aware = AllocatedRing(names, tokens=8, replicas=3)
    primary_only = AllocatedRing(names, tokens=8)
    aware.ring._check()
    assert aware.replicas == 3 and "replicas=3" in repr(aware)
    # 30,000 keys × 3 replicas over 12 nodes: 7,500 per node, sd ~ 80 (1%); the exact replicated
    # ownership of this ring is 1.039 × fair (exact, from arcs).
    assert replicated_over_fair(aware.ring, 3) <= 1.06
    assert replicated_over_fair(aware.ring, 3) < replicated_over_fair(primary_only.ring, 3)
    with pytest.raises(ConfigError, match="replicas must be an int >= 1, got 0"):
        allocate_tokens(aware.ring, "x", replicas=0)


def test_replicated_shares_match_preference_lists() -> None:
    from ringkit import replicated_shares

    ring = HashRing(["a", "b", "c", "d", "e"], vnodes=8)
    exact = replicated_shares(ring, 3)
    assert sum(exact.values()) == pytest.approx(3.0)
    counts = dict.fromkeys(ring, 0)
    keys = 60_000
    for i in range(keys):
        for name in ring.nodes_for(f"k{i}", 3):
            counts[name] += 1
    for name in ring:
        # Binomial counts: sd <= sqrt(keys / 4) ≈ 122 keys; 5 sd.
        assert abs(counts[name] / keys - exact[name]) < 5 * 122 / keys
    assert replicated_shares(ring, 9) == pytest.approx(dict.fromkeys(ring, 1.0))
    with pytest.raises(ConfigError, match="replicas must be an int >= 1, got 0"):
        replicated_shares(ring, 0)
