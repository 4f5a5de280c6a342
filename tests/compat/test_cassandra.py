"""Cassandra tokens and replicas: DataStax driver vectors and the driver as an independent check.

Token vectors: datastax/python-driver ``tests/unit/test_metadata.py`` (``_verify_hash``), which the
Ruby and Elixir drivers repeat; all five are here.
"""

from __future__ import annotations

import random
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringkit import ConfigError, EmptyRingError
from ringkit.compat import TokenRange, cassandra_ring
from ringkit.hashing import (
    CASSANDRA_MAX_TOKEN,
    CASSANDRA_MIN_TOKEN,
    cassandra_partition_key,
    cassandra_token,
)
from tests.compat._deps import require

DRIVER_VECTORS = [
    (b"123", -7468325962851647638),
    (b"\x00\xff\x10\xfa\x99" * 10, 5837342703291459765),
    (b"\xfe" * 8, -8927430733708461935),
    (b"\x10" * 8, 1446172840243228796),
    (str(CASSANDRA_MAX_TOKEN).encode(), 7162290910810015547),
]


@pytest.mark.parametrize(("key", "token"), DRIVER_VECTORS)
def test_driver_vectors(key: bytes, token: int) -> None:
    assert cassandra_token(key) == token


def test_empty_key_is_the_minimum_token() -> None:
    assert cassandra_token(b"") == CASSANDRA_MIN_TOKEN


def test_agrees_with_the_datastax_driver_on_10000_keys() -> None:
    murmur3 = require("cassandra.murmur3", "pip install cassandra-driver")
    rng = random.Random(6)
    keys = [bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 40))) for _ in range(10_000)]
    # The driver's murmur3 returns the raw long; Murmur3Token.hash_fn normalises MIN to MAX.
    theirs = [murmur3.murmur3(key) for key in keys]
    theirs = [CASSANDRA_MAX_TOKEN if t == CASSANDRA_MIN_TOKEN else t for t in theirs]
    assert [cassandra_token(key) for key in keys] == theirs


def test_composite_key_matches_the_driver_routing_key() -> None:
    query = require("cassandra.query", "pip install cassandra-driver")
    parts = [b"user-1", struct.pack(">q", 42), b""]
    statement = query.SimpleStatement("SELECT 1")
    statement.routing_key = parts
    assert cassandra_partition_key(parts) == statement.routing_key
    assert cassandra_partition_key([b"only"]) == b"only"


def test_tokens_of_text_and_composite_keys() -> None:
    ring = cassandra_ring({"a": [0]})
    assert ring.token_for("123") == ring.token_for(b"123") == -7468325962851647638
    composite = cassandra_partition_key([b"a", b"b"])
    assert ring.token_for(("a", b"b")) == cassandra_token(composite)


# -- replicas -------------------------------------------------------------------------------

# A ring as `nodetool ring` prints it: three nodes, two tokens each.
RING = {
    "10.0.0.1": ["-9000000000000000000", "0"],
    "10.0.0.2": [-6000000000000000000, 3 * 10**18],
    "10.0.0.3": [-3000000000000000000, 6 * 10**18],
}


def test_simple_strategy_walks_clockwise_from_the_first_token_at_or_after() -> None:
    ring = cassandra_ring(RING, replication_factor=2)
    assert ring.replicas_for_token(0) == ["10.0.0.1", "10.0.0.2"]
    assert ring.replicas_for_token(1) == ["10.0.0.2", "10.0.0.3"]
    # Past the last token (6e18) the walk wraps to the first (-9e18).
    assert ring.replicas_for_token(CASSANDRA_MAX_TOKEN) == ["10.0.0.1", "10.0.0.2"]
    assert ring.replicas(b"123") == ring.replicas_for_token(-7468325962851647638)
    assert ring.replicas_for_token(-7468325962851647638) == ["10.0.0.2", "10.0.0.3"]
    assert cassandra_ring(RING, replication_factor=5).replicas_for_token(0) == [
        "10.0.0.1",
        "10.0.0.2",
        "10.0.0.3",
    ]


def test_network_topology_prefers_new_racks_then_allows_repeats() -> None:
    tokens = {"a1": [10], "a2": [20], "b1": [30], "a3": [40], "c1": [50]}
    racks = {"a1": "r1", "a2": "r1", "b1": "r2", "a3": "r1", "c1": "r3"}
    # Three racks, rf 3: a2 and a3 repeat rack r1, skipped until r2 and r3 are used.
    ring = cassandra_ring(tokens, replication_factor={"datacenter1": 3}, racks=racks)
    assert ring.replicas_for_token(0) == ["a1", "b1", "c1"]
    # Two racks in the datacenter, rf 3: one repeat is allowed and taken as soon as it comes.
    two = cassandra_ring(
        {"a1": [10], "a2": [20], "b1": [30]},
        replication_factor={"dc": 3},
        racks={"a1": "r1", "a2": "r1", "b1": "r2"},
        datacenters=dict.fromkeys(["a1", "a2", "b1"], "dc"),
    )
    assert two.replicas_for_token(0) == ["a1", "a2", "b1"]


def test_network_topology_fills_each_datacenter() -> None:
    tokens = {"e1": [1], "w1": [2], "e2": [3], "w2": [4], "e3": [5]}
    dcs = {"e1": "east", "e2": "east", "e3": "east", "w1": "west", "w2": "west"}
    ring = cassandra_ring(
        tokens, replication_factor={"east": 2, "west": 1, "mars": 3}, datacenters=dcs
    )
    assert ring.replicas_for_token(2) == ["w1", "e2", "e3"]
    assert ring.replicas_for_token(0) == ["e1", "w1", "e2"]


def _driver_replicas(
    ring_tokens: dict[str, list[int]],
    rf: dict[str, int],
    dcs: dict[str, str],
    racks: dict[str, str],
) -> dict[int, list[str]]:
    metadata = require("cassandra.metadata", "pip install cassandra-driver")
    from cassandra.connection import DefaultEndPoint
    from cassandra.policies import SimpleConvictionPolicy
    from cassandra.pool import Host

    hosts = {
        name: Host(
            DefaultEndPoint(name), SimpleConvictionPolicy, datacenter=dcs[name], rack=racks[name]
        )
        for name in ring_tokens
    }
    owners = {
        metadata.Murmur3Token(token): hosts[name]
        for name, tokens in ring_tokens.items()
        for token in tokens
    }
    strategy = metadata.NetworkTopologyStrategy({dc: str(f) for dc, f in rf.items()})
    table = strategy.make_token_replica_map(owners, sorted(owners))
    return {
        token.value: [host.endpoint.address for host in hosts_] for token, hosts_ in table.items()
    }


def test_network_topology_agrees_with_the_datastax_driver() -> None:
    # The driver lists a rack repeat after the new racks (Cassandra: as the walk accepts it), so
    # replica *sets* are compared. Its fill-in can list a node twice when the node has several
    # tokens or its datacenter fewer nodes than the factor (docs/compatibility.md), so here each
    # node has one token and factors fit the datacenters.
    rng = random.Random(8)
    checked = 0
    for _ in range(400):
        names = [f"n{i}" for i in range(rng.randint(2, 12))]
        dcs = {name: rng.choice(["dc1", "dc2"]) for name in names}
        racks = {name: rng.choice(["r1", "r2", "r3"]) for name in names}
        tokens = {
            name: [rng.randint(CASSANDRA_MIN_TOKEN + 1, CASSANDRA_MAX_TOKEN)] for name in names
        }
        sizes = {dc: list(dcs.values()).count(dc) for dc in ("dc1", "dc2")}
        rf = {dc: rng.randint(1, size) for dc, size in sizes.items() if size}
        ring = cassandra_ring(tokens, replication_factor=rf, racks=racks, datacenters=dcs)
        for token, replicas in _driver_replicas(tokens, rf, dcs, racks).items():
            assert sorted(ring.replicas_for_token(token)) == sorted(replicas)
            checked += 1
    assert checked > 2000


def test_describering_ranges() -> None:
    ring = cassandra_ring(RING, replication_factor=2)
    ranges = ring.ranges()
    assert ranges[0] == TokenRange(6 * 10**18, -9 * 10**18, ("10.0.0.1", "10.0.0.2"))
    assert ranges[1] == TokenRange(-9 * 10**18, -6 * 10**18, ("10.0.0.2", "10.0.0.3"))
    assert [r.end for r in ranges] == sorted(t for t, _ in ring.tokens)
    assert str(ranges[1]) == (
        "TokenRange(start_token:-9000000000000000000, "
        "end_token:-6000000000000000000, endpoints:[10.0.0.2, 10.0.0.3])"
    )
    assert len(ring.ranges_for("10.0.0.1")) == 4  # rf 2 of 6 ranges: 2 primary + 2 replica
    single = cassandra_ring({"a": [5]}).ranges()
    assert single == [TokenRange(5, 5, ("a",))]


@given(st.binary(max_size=40), st.integers(1, 3))
def test_replicas_are_distinct_and_start_with_the_owner(key: bytes, n: int) -> None:
    ring = cassandra_ring(RING, replication_factor=3)
    replicas = ring.nodes_for(key, n)
    assert len(replicas) == len(set(replicas)) == n
    assert replicas[0] == ring.node_for(key)


@pytest.mark.parametrize(
    ("tokens", "options", "message"),
    [
        ({"a": [2**63]}, {}, r"token 9223372036854775808 of node 'a' is outside the Murmur3"),
        ({"a": ["x1"]}, {}, r"token 'x1' of node 'a' is not an integer"),
        ({"a": [1], "b": [1]}, {}, r"token 1 is owned by both 'a' and 'b'"),
        ({"a": []}, {}, r"node 'a' has no tokens"),
        ({"a": [1]}, {"replication_factor": 0}, r"replication_factor must be an int >= 1"),
        ({"a": [1]}, {"replication_factor": {"dc9": 1}}, r"names no datacenter.*'dc9'"),
        ({"a": [1]}, {"replication_factor": {"datacenter1": -1}}, r"must be an int >= 0, got -1"),
        ({"a": [1]}, {"racks": {"b": "r1"}}, r"racks must name every node.*\['b'\].*\['a'\]"),
    ],
)
def test_bad_rings(
    tokens: dict[str, list[object]], options: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        cassandra_ring(tokens, **options)  # type: ignore[arg-type]


def test_bad_keys() -> None:
    with pytest.raises(EmptyRingError):
        cassandra_ring({})
    with pytest.raises(TypeError, match="serialize numbers first"):
        cassandra_ring({"a": [1]}).replicas(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="key must be bytes"):
        cassandra_token("text")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="at least one component"):
        cassandra_partition_key([])
    with pytest.raises(ConfigError, match="<= 65535 bytes, got 65536"):
        cassandra_partition_key([b"x" * 65536, b"y"])
