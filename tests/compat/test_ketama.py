"""ringkit.compat.ketama: published vectors, real libmemcached, uhashring, protocol, errors."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringkit import ConfigError, DuplicateNodeError, EmptyRingError, Node, UnknownNodeError
from ringkit.compat import Continuum, ketama
from ringkit.compat.ketama import parse_servers
from ringkit.placement import Placement
from tests.compat import _libmemcached as lm
from tests.compat._deps import require
from tests.compat.ketama_vectors import KETAMA, SERVERS, SPY_SERVERS

# Points per server that libmemcached's test asserts for SERVERS.
POINTS_PER_SERVER = [176, 88, 56, 104, 296, 236, 280, 28]


def _keys(count: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    keys = [f"key:{i}:{rng.getrandbits(40):x}".encode() for i in range(count - 100)]
    # UTF-8 keys: bytes >= 0x80, which C code reads through a signed char.
    return keys + [f"ключ-{i}-é".encode() for i in range(100)]


def _addresses(layout: Continuum, keys: list[bytes]) -> list[str]:
    """Return each key's server as ``host:port`` (libmemcached's answer), port filled in."""
    address = {node.name: node.address for node in layout.nodes}
    return [str(address[name]) for name in layout.node_for_many(keys)]


# -- published vectors (libmemcached test/fixtures/ketama.hpp, all 99 rows) -------------------


@pytest.mark.parametrize(("key", "key_hash", "point", "server"), KETAMA)
def test_libmemcached_vectors(key: str, key_hash: int, point: int, server: str) -> None:
    layout = ketama(SERVERS, variant="libmemcached")
    assert layout.point_for(key) == key_hash
    assert int(layout.points[layout.index_for_point(key_hash)]) == point
    assert layout.node_for(key) == f"{server}:11211"


@pytest.mark.parametrize(("row", "server"), list(zip(KETAMA, SPY_SERVERS, strict=True)))
def test_spy_vectors(row: tuple[str, int, int, str], server: str) -> None:
    assert ketama(SERVERS, variant="spy").node_for(row[0]) == f"{server}:11211"


def test_points_per_server_match_libmemcached() -> None:
    layout = ketama(SERVERS)
    counts = [int((layout.owners == i).sum()) for i in range(len(layout))]
    assert counts == POINTS_PER_SERVER


def test_wraparound_vector_vdeaaaaa() -> None:
    # "VDEAAAAA hashes to fffcd1b5, after the last continuum point" (libmemcached's test).
    layout = ketama(SERVERS)
    assert layout.point_for("VDEAAAAA") == 0xFFFCD1B5 > int(layout.points[-1])
    assert layout.node_for("VDEAAAAA") == layout.nodes[int(layout.owners[0])].name


# -- libmemcached itself (ctypes: memcached_generate_hash), 10,000+ keys per layout -----------

_SPECS = [
    SERVERS,
    "127.0.0.1:11211 3,127.0.0.1:11212 7,127.0.0.2,cache-x:9999 13,h:1 2",
    "cache-a:11211 1,cache-b:11212 1,cache-c:22122 1",
]


@pytest.mark.parametrize("spec", _SPECS)
@pytest.mark.parametrize("variant", ["libmemcached", "spy"])
def test_weighted_matches_real_libmemcached(spec: str, variant: str) -> None:
    behaviors = [(lm.BEHAVIOR_KETAMA_WEIGHTED, 1)]
    if variant == "spy":
        behaviors.append((lm.BEHAVIOR_DISTRIBUTION, lm.DISTRIBUTION_CONSISTENT_KETAMA_SPY))
    keys = _keys(10_000, seed=len(spec))
    with lm.client(spec, behaviors) as real:
        expected = real.servers_for(keys)
    assert _addresses(ketama(spec, variant=variant), keys) == expected


@pytest.mark.parametrize(
    "key_hash", [None, "md5", "crc32", "fnv1_64", "fnv1a_32", "murmur", "jenkins"]
)
@pytest.mark.parametrize("variant", ["libmemcached", "spy"])
def test_unweighted_matches_real_libmemcached(key_hash: str | None, variant: str) -> None:
    spec = _SPECS[2]
    distribution = (
        lm.DISTRIBUTION_CONSISTENT_KETAMA
        if variant == "libmemcached"
        else lm.DISTRIBUTION_CONSISTENT_KETAMA_SPY
    )
    behaviors = [(lm.BEHAVIOR_DISTRIBUTION, distribution)]
    if key_hash is not None:
        behaviors.append((lm.BEHAVIOR_HASH, lm.HASHES[key_hash]))
    keys = _keys(3_000, seed=7)
    with lm.client(spec, behaviors) as real:
        expected = real.servers_for(keys)
    layout = ketama(spec, variant=variant, weighted=False, hash=key_hash)
    assert layout.node_for_many(keys) == expected


# -- uhashring: right about libketama's labels and MD5 points, wrong in the documented ways ---


def test_libketama_agrees_with_uhashring_on_10000_keys() -> None:
    uhashring = require("uhashring", "pip install uhashring")
    weights = {
        f"10.0.1.{i + 1}:11211": w for i, w in enumerate([600, 300, 200, 350, 1000, 800, 950, 100])
    }
    theirs = uhashring.HashRing(nodes=weights, hash_fn="ketama")
    ours = ketama(weights, variant="libketama")
    keys = [key.decode() for key in _keys(10_000, seed=11)]
    assert ours.node_for_many(keys) == [theirs.get_node(key) for key in keys]


def test_uhashring_rounds_weights_as_integers_libketama_does_not() -> None:
    # docs/compatibility.md: 21/80 * 240 is 63 exactly, but libketama computes it in single
    # precision (62.99999...) and floorf gives 62 digests; uhashring's integer maths gives 63.
    uhashring = require("uhashring", "pip install uhashring")
    weights = {f"cache-{i}": w for i, w in enumerate([21, 6, 36, 2, 4, 11])}
    ours = ketama(weights, variant="libketama")
    assert int((ours.owners == 0).sum()) == 62 * 4
    theirs = uhashring.HashRing(nodes=weights, hash_fn="ketama")
    assert ours.node_for("user:131") == "cache-5"
    assert theirs.get_node("user:131") == "cache-0"


def test_uhashring_hashes_bytes_keys_as_their_repr() -> None:
    uhashring = require("uhashring", "pip install uhashring")
    weights = {f"10.0.1.{i + 1}:11211": 1 for i in range(8)}
    theirs = uhashring.HashRing(nodes=weights, hash_fn="ketama")
    ours = ketama(weights, variant="libketama")
    assert ours.node_for(b"abc") == ours.node_for("abc")
    assert theirs.get_node(b"abc") == ours.node_for("b'abc'")


# -- variants: labels ----------------------------------------------------------------------


def test_libmemcached_label_drops_default_port_only() -> None:
    with_port = ketama({"cache:11212": 1}, variant="libmemcached")
    libketama = ketama({"cache:11212": 1}, variant="libketama")
    assert with_port == ketama({"cache:11212": 1}, variant="libmemcached")
    # libketama hashes the label as given, so the two agree when the port is not 11211 ...
    assert list(with_port.points) == list(libketama.points)
    # ... and differ when it is: libmemcached hashes "cache-0", libketama "cache:11211-0".
    default = ketama({"cache:11211": 1}, variant="libmemcached")
    assert list(default.points) == list(ketama({"cache": 1}, variant="libketama").points)


def test_twemproxy_alias_replaces_the_label() -> None:
    aliased = ketama("127.0.0.1:22121:1 server1,127.0.0.1:22122:1 server2", variant="twemproxy")
    named = ketama({"server1": 1, "server2": 1}, variant="libketama")
    assert list(aliased.points) == list(named.points)
    assert list(aliased) == ["127.0.0.1:22121", "127.0.0.1:22122"]


def test_port_defaults_to_11211() -> None:
    assert parse_servers("cache-a")[0].port == 11211
    assert ketama("cache-a:11211 2,cache-b").node_for("k") in {"cache-a:11211", "cache-b"}


# -- the Placement protocol -----------------------------------------------------------------


def test_is_a_placement_with_immutable_membership() -> None:
    layout = ketama(SERVERS)
    assert isinstance(layout, Placement)
    assert len(layout) == 8 and "10.0.1.1:11211" in layout
    assert next(iter(layout)) == "10.0.1.1:11211"
    bigger = layout.add(Node("10.0.1.9:11211", weight=500))
    assert len(layout) == 8 and len(bigger) == 9
    assert bigger.remove("10.0.1.9:11211") == layout
    assert layout.discard("nope") is layout
    with pytest.raises(UnknownNodeError, match="'nope'"):
        layout.remove("nope")
    with pytest.raises(DuplicateNodeError, match=r"10\.0\.1\.1:11211"):
        layout.add("10.0.1.1:11211")


def test_shares_sum_to_one_and_track_weights() -> None:
    shares = ketama(SERVERS).shares()
    assert sum(shares.values()) == pytest.approx(1.0)
    assert shares["10.0.1.5:11211"] > shares["10.0.1.8:11211"]


@given(st.lists(st.binary(max_size=20), min_size=1, max_size=30), st.integers(1, 4))
def test_nodes_for_is_distinct_and_starts_with_the_owner(keys: list[bytes], n: int) -> None:
    layout = ketama("a:1 1,b:2 2,c:3 3")
    for key in keys:
        replicas = layout.nodes_for(key, n)
        assert replicas[0] == layout.node_for(key)
        assert len(replicas) == len(set(replicas)) == min(n, 3)


@given(st.lists(st.text(max_size=10), max_size=50))
def test_batch_equals_scalar(keys: list[str]) -> None:
    layout = ketama(SERVERS, variant="twemproxy", hash="murmur")
    assert layout.node_for_many(keys) == [layout.node_for(key) for key in keys]


def test_removal_moves_only_the_removed_servers_keys_in_twemproxy_eject() -> None:
    # Auto-eject rebuilds over the live servers: weights are relative, so other servers' digest
    # counts change too and some keys move between survivors (as in twemproxy).
    layout = ketama(SERVERS, variant="twemproxy")
    ejected = layout.remove("10.0.1.8:11211")
    assert "10.0.1.8:11211" not in ejected and len(ejected) == 7
    assert sum(int((ejected.owners == i).sum()) for i in range(7)) == len(ejected.points)


def test_point_lookup_rejects_out_of_range_points() -> None:
    layout = ketama(SERVERS)
    with pytest.raises(ConfigError, match="4294967296"):
        layout.node_for_point(1 << 32)
    assert layout.node_for_point(0) == layout.nodes[int(layout.owners[0])].name


# -- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("servers", "message"),
    [
        (
            "10.0.1.1:11211 0",
            r"weight of server '10.0.1.1:11211' must be a whole number >= 1, got 0",
        ),
        ("10.0.1.1:11211 -3", r"must be a whole number >= 1, got -3"),
        ("10.0.1.1:11211 heavy", r"must be a whole number, got 'heavy'"),
        ({"a:1": 1.5}, r"got 1.5"),
        ("10.0.1.1:http 1", r"unparsable server '10.0.1.1:http'; expected host\[:port\]"),
        ("a b c", r"unparsable server spec 'a b c'; expected 'host\[:port\] weight'"),
        ("a:1 1,,b:2 1", r"unparsable server spec ''"),
        ("a:1 1,a:1 2", r"server 'a:1' is given twice"),
        ("a:1:1 alias", r"a name after 'host:port:weight' is twemproxy's"),
        ("cache 2", r"unparsable server spec 'cache 2'; a weight needs a port: 'cache:11211 2'"),
    ],
)
def test_bad_server_specs(servers: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ketama(servers)


def test_unknown_variant_and_key_hash_are_named() -> None:
    with pytest.raises(ConfigError, match="unknown ketama variant 'memcache'; known: libketama"):
        ketama(SERVERS, variant="memcache")
    with pytest.raises(ConfigError, match="unknown key hash 'sha1'; known: crc16, crc32"):
        ketama(SERVERS, variant="twemproxy", hash="sha1")
    with pytest.raises(ConfigError, match="libketama hashes keys with md5 only, got hash='crc32'"):
        ketama(SERVERS, variant="libketama", hash="crc32")


def test_unweighted_refuses_weights() -> None:
    with pytest.raises(ConfigError, match=r"weighted=False needs every weight to be 1"):
        ketama("a:1 2,b:1 1", weighted=False)
    with pytest.raises(ConfigError, match="weighted=False is libmemcached's and spy's"):
        ketama("a:1 1", variant="twemproxy", weighted=False)


def test_empty_layout() -> None:
    with pytest.raises(ConfigError, match="at least one server"):
        ketama({})
    layout = ketama("a:1 1").remove("a:1")
    with pytest.raises(EmptyRingError, match="node_for"):
        layout.node_for("k")
