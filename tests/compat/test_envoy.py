"""ringkit.compat.envoy_ring against Envoy's published ring_hash_lb_test.cc vectors.

Source: envoyproxy/envoy ``test/common/upstream/ring_hash_lb_test.cc``: the ring tables printed in
the comments of ``Basic``, ``BasicWithHostname``, ``BasicWithMurmur2``, ``UnevenHosts`` and the
``EXPECT_EQ`` lookups of those tests and of ``HostWeightedTinyRing`` / ``HostWeightedLargeRing``,
transcribed in full.
"""

from __future__ import annotations

import bisect
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringkit import ConfigError, Node
from ringkit.compat import envoy_ring
from ringkit.compat.envoy import murmur_hash_2
from ringkit.placement import Placement

MAX = 2**64 - 1
PORTS_90 = [f"127.0.0.1:{port}" for port in range(90, 96)]

# Basic: hosts 127.0.0.1:90..95, minimum ring size 12 (port, position).
BASIC_RING = [
    (94, 833437586790550860),
    (92, 928266305478181108),
    (90, 1033482794131418490),
    (95, 3551244743356806947),
    (93, 3851675632748031481),
    (91, 5583722120771150861),
    (91, 6311230543546372928),
    (93, 7700377290971790572),
    (95, 13144177310400110813),
    (92, 13444792449719432967),
    (94, 15516499411664133160),
    (90, 16117243373044804889),
]
BASIC_LOOKUPS = [
    (0, 94),
    (MAX, 94),
    (3551244743356806947, 95),
    (3551244743356806948, 93),
    (16117243373044804880, 90),
]

# BasicWithHostname: host names "90".."95" are hashed instead of addresses.
HOSTNAME_RING = [
    (95, 1975508444536362413),
    (95, 2376063919839173711),
    (93, 2386806903309390596),
    (94, 6749904478991551885),
    (93, 6803900775736438537),
    (92, 7225015537174310577),
    (90, 8787465352164086522),
    (92, 11282020843382717940),
    (91, 13723418369486627818),
    (90, 13776502110861797421),
    (91, 14338313586354474791),
    (94, 15364271037087512980),
]
HOSTNAME_LOOKUPS = [(0, 95), (MAX, 95), (7225015537174310577, 92), (6803900775736438537, 93)]

# BasicWithMurmur2: hosts 127.0.0.1:80..85, MURMUR_HASH_2, minimum ring size 12.
MURMUR_RING = [
    (85, 1358027074129602068),
    (83, 4361834613929391114),
    (84, 7224494972555149682),
    (81, 7701421856454313576),
    (82, 8649315368077433379),
    (84, 8739448859063030639),
    (81, 9887544217113020895),
    (82, 10150910876324007731),
    (83, 15168472011420622455),
    (80, 15427156902705414897),
    (85, 16375050414328759093),
    (80, 17613279263364193813),
]
MURMUR_LOOKUPS = [
    (0, 85),
    (MAX, 85),
    (1358027074129602068, 85),
    (1358027074129602069, 83),
    (10150910876324007730, 82),
]

# UnevenHosts: 2 hosts, minimum ring size 3 -> 2 hashes each.
UNEVEN_RING = [
    (80, 5454692015285649509),
    (81, 7859399908942313493),
    (80, 13838424394637650569),
    (81, 16064866803292627174),
]
UNEVEN_AFTER = [
    (81, 7859399908942313493),
    (82, 8241336090459785962),
    (82, 12882406409176325258),
    (81, 16064866803292627174),
]

# HostWeightedTinyRing: weights 1, 2, 3 on :90, :91, :92; ring size exactly 6.
TINY_LOOKUPS = [
    (928266305478181108, 92),
    (4443673547860492590, 92),
    (5583722120771150861, 91),
    (6311230543546372928, 91),
    (13444792449719432967, 92),
    (16117243373044804889, 90),
]


def _table(ring: object) -> list[tuple[int, int]]:
    assert hasattr(ring, "points") and hasattr(ring, "owners") and hasattr(ring, "nodes")
    return [
        (int(ring.nodes[int(owner)].name.rsplit(":", 1)[-1]), int(point))
        for point, owner in zip(ring.points, ring.owners, strict=True)
    ]


@pytest.mark.parametrize(
    ("hosts", "options", "table", "lookups", "prefix"),
    [
        (PORTS_90, {}, BASIC_RING, BASIC_LOOKUPS, "127.0.0.1:"),
        ([str(port) for port in range(90, 96)], {}, HOSTNAME_RING, HOSTNAME_LOOKUPS, ""),
        (
            [f"127.0.0.1:{port}" for port in range(80, 86)],
            {"hash": "murmur_hash_2"},
            MURMUR_RING,
            MURMUR_LOOKUPS,
            "127.0.0.1:",
        ),
    ],
    ids=["Basic", "BasicWithHostname", "BasicWithMurmur2"],
)
def test_published_rings(
    hosts: list[str],
    options: dict[str, str],
    table: list[tuple[int, int]],
    lookups: list[tuple[int, int]],
    prefix: str,
) -> None:
    ring = envoy_ring(hosts, min_ring_size=12, **options)  # type: ignore[arg-type]
    assert _table(ring) == table
    for point, port in lookups:
        assert ring.node_for_point(point) == f"{prefix}{port}"
    # ring_hash_lb.min_hashes_per_host / max_hashes_per_host are both 2.
    assert sorted({int((ring.owners == i).sum()) for i in range(6)}) == [2]


def test_uneven_hosts() -> None:
    ring = envoy_ring(["127.0.0.1:80", "127.0.0.1:81"], min_ring_size=3)
    assert _table(ring) == UNEVEN_RING
    assert ring.node_for_point(0) == "127.0.0.1:80"
    after = envoy_ring(["127.0.0.1:81", "127.0.0.1:82"], min_ring_size=3)
    assert _table(after) == UNEVEN_AFTER
    assert after.node_for_point(0) == "127.0.0.1:81"


def test_host_weighted_tiny_ring() -> None:
    weights = {"127.0.0.1:90": 1, "127.0.0.1:91": 2, "127.0.0.1:92": 3}
    ring = envoy_ring(weights, min_ring_size=6, max_ring_size=6)
    assert len(ring.points) == 6
    assert [int((ring.owners == i).sum()) for i in range(3)] == [1, 2, 3]
    for point, port in TINY_LOOKUPS:
        assert ring.node_for_point(point) == f"127.0.0.1:{port}"


def test_host_weighted_large_ring_histogram() -> None:
    weights = {"127.0.0.1:90": 1, "127.0.0.1:91": 2, "127.0.0.1:92": 3}
    ring = envoy_ring(weights, min_ring_size=6144)
    assert len(ring.points) == 6144
    assert [int((ring.owners == i).sum()) for i in range(3)] == [1024, 2048, 3072]
    counts = {name: 0 for name in weights}
    for i in range(6000):
        counts[ring.node_for_point(i * (MAX // 6000))] += 1
    assert list(counts.values()) == [987, 1932, 3081]


def test_murmur_hash_2_is_libstdcxx_hash_bytes() -> None:
    # The first Basic ring entry of BasicWithMurmur2 is std::hash of "127.0.0.1:85_0" or _1.
    assert 1358027074129602068 in {
        murmur_hash_2(b"127.0.0.1:85_0"),
        murmur_hash_2(b"127.0.0.1:85_1"),
    }


def test_placement_protocol_and_keys() -> None:
    ring = envoy_ring(PORTS_90)
    assert isinstance(ring, Placement)
    assert len(ring.points) == 1026  # ceil(1024 / 6) = 171 hashes per host
    bigger = ring.add(Node("127.0.0.1:96", weight=2))
    assert len(bigger) == 7 and bigger.remove("127.0.0.1:96") == ring
    assert sum(ring.shares().values()) == pytest.approx(1.0)
    assert ring.node_for("user-42") == ring.node_for_point(ring.point_for("user-42"))


@given(st.lists(st.integers(0, MAX), max_size=30))
def test_point_lookup_is_first_entry_at_or_after(points: list[int]) -> None:
    ring = envoy_ring(PORTS_90, min_ring_size=12)
    entries = [int(p) for p in ring.points]
    for point in points:
        later = [i for i, entry in enumerate(entries) if entry >= point]
        index = later[0] if later else 0
        assert ring.node_for_point(point) == ring.nodes[int(ring.owners[index])].name


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"min_ring_size": 20, "max_ring_size": 10}, r"min_ring_size \(20\) > max_ring_size"),
        ({"min_ring_size": 0}, r"min_ring_size must be an int in \[1, 8388608\], got 0"),
        ({"max_ring_size": 8388609}, r"max_ring_size must be .*got 8388609"),
        ({"hash": "md5"}, r"unknown envoy hash 'md5'; known: xx_hash, murmur_hash_2"),
    ],
)
def test_bad_options(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        envoy_ring(PORTS_90, **kwargs)  # type: ignore[arg-type]


def test_bad_hosts() -> None:
    with pytest.raises(
        ConfigError, match=r"weight of host 'a:1' must be a whole number >= 1, got 0"
    ):
        envoy_ring({"a:1": 0})
    with pytest.raises(ConfigError, match="at least one host"):
        envoy_ring([])
    with pytest.raises(ConfigError, match="given twice"):
        envoy_ring(["a:1", "a:1"])
    with pytest.raises(ConfigError, match=r"point must be in \[0, 2\*\*64\), got -1"):
        envoy_ring(["a:1"]).node_for_point(-1)


def test_large_rings_search_with_numpy_and_agree_with_small_ring_rule() -> None:
    # Rings past 65,536 entries answer from the numpy array instead of Python lists.
    ring = envoy_ring(PORTS_90, min_ring_size=70_000)
    entries = [int(p) for p in ring.points]
    assert len(entries) > 65_536
    rng = random.Random(3)
    for point in [0, MAX, entries[0], entries[-1] + 1] + [rng.getrandbits(64) for _ in range(300)]:
        index = bisect.bisect_left(entries, point) % len(entries)
        assert ring.node_for_point(point) == ring.nodes[int(ring.owners[index])].name
    keys = [f"k{i}" for i in range(300)]
    assert ring.node_for_many(keys) == [ring.node_for(key) for key in keys]
