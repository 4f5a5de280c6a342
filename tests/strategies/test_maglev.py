"""Maglev: Envoy's maglev_lb_test tables exactly, balance, disruption, bad table sizes."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest
import xxhash
from hypothesis import given
from hypothesis import strategies as st

from ringkit import ConfigError, EmptyRingError, Maglev, UnknownNodeError
from ringkit.compat import envoy_maglev
from ringkit.errors import DuplicateNodeError
from ringkit.strategies.maglev import is_prime, nearest_primes


def ip(port: int) -> str:
    return f"127.0.0.1:{port}"


# Envoy test/extensions/load_balancing_policies/maglev/maglev_lb_test.cc: `expected_assignments`
# index into the host list; chooseHost(hash = i) is table[i % table_size].
ENVOY_TABLES = [
    # Basic, BasicStability, BasicWithRetryHostPredicate: hosts 127.0.0.1:90..95, size 7
    ({ip(p): 1 for p in range(90, 96)}, 7, [2, 4, 0, 1, 5, 0, 3]),
    # BasicWithHostName, BasicWithMetadataHashKey: use_hostname_for_hashing, names "90".."95"
    ({str(p): 1 for p in range(90, 96)}, 7, [2, 5, 0, 3, 4, 1, 0]),
    # Weighted: weights 1 and 2, size 17 (min 6, max 11 entries per host)
    ({ip(90): 1, ip(91): 2}, 17, [1, 0, 0, 1, 0, 1, 1, 0, 1, 1, 1, 1, 1, 0, 1, 0, 1]),
    # LocalityWeightedSameLocalityWeights: locality weights 1:1 give each host 1/2
    ({ip(90): 1, ip(91): 1}, 17, [1, 0, 0, 1, 0, 1, 1, 0, 0, 1, 0, 1, 0, 0, 1, 0, 1]),
    # LocalityWeightedDifferentLocalityWeights: localities 8 / 0 / 2 leave 0.8 and 0.2
    ({ip(90): 8, ip(91): 2}, 17, [1, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0]),
]


@pytest.mark.parametrize(("hosts", "size", "expected"), ENVOY_TABLES)
def test_envoy_maglev_lb_test_tables(hosts: dict[str, int], size: int, expected: list[int]) -> None:
    names = list(hosts)
    maglev = envoy_maglev(hosts, table_size=size)
    maglev._check()
    assert maglev.table == tuple(names[i] for i in expected)


def test_envoy_weighted_entry_counts() -> None:
    counts = Counter(envoy_maglev({ip(90): 1, ip(91): 2}, table_size=17).table)
    assert (min(counts.values()), max(counts.values())) == (6, 11)


def test_envoy_lopsided_locality_weights() -> None:
    # LocalityWeightedLopsided: one host in a locality of weight 127, 1023 in one of weight 1,
    # default table: each light host appears once, the heavy one fills the rest.
    hosts = {ip(i): 127 * 1023 if i == 0 else 1 for i in range(1024)}
    counts = Counter(envoy_maglev(hosts).table)
    assert counts[ip(0)] == 65537 - 1023
    assert all(counts[ip(i)] == 1 for i in range(1, 1024))


def test_envoy_order_of_hosts_does_not_matter() -> None:
    hosts = [ip(p) for p in range(90, 96)]
    shuffled = random.Random(0).sample(hosts, len(hosts))
    assert envoy_maglev(shuffled, table_size=7).table == envoy_maglev(hosts, table_size=7).table


def test_single_host_owns_every_slot() -> None:
    # Envoy keeps one entry for a lone host; every slot of ours names it, so lookups agree.
    assert envoy_maglev({ip(90): 7}, table_size=17).table == (ip(90),) * 17


def test_envoy_keys_hash_with_xxh64_and_maglev_agrees() -> None:
    hosts = [ip(p) for p in range(90, 96)]
    envoy = envoy_maglev(hosts, table_size=7)
    for key in ("user-1", "session=abc", "x"):
        slot = xxhash.xxh64_intdigest(key.encode()) % 7
        assert envoy.slot_for(key) == slot and envoy.node_for(key) == envoy.table[slot]
    assert Maglev(hosts, table_size=7).table == envoy.table


@pytest.mark.parametrize("count", [3, 10, 100, 500])
def test_table_share_within_one_percent_of_fair_at_65537(count: int) -> None:
    maglev = Maglev([f"node-{i}" for i in range(count)])
    fair = 1 / count
    assert all(abs(share - fair) <= 0.01 * fair for share in maglev.shares().values())
    slots = Counter(maglev.table)
    assert max(slots.values()) - min(slots.values()) <= 1  # the paper's near-perfect balance


def test_weighted_shares_track_weights_at_65537() -> None:
    weights = {"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0}
    shares = Maglev(weights).shares()
    assert all(abs(shares[n] - w / 10) <= 0.01 * w / 10 for n, w in weights.items())


def test_disruption_on_removal_is_small_and_measured() -> None:
    # docs/strategies.md quotes these figures: removing 1 of 100 nodes changes its ~655 slots
    # plus ~0.5% of the table between surviving nodes (ring hashing: 0%).
    names = [f"node-{i:04d}" for i in range(100)]
    before = np.array(Maglev(names).table)
    after = np.array(Maglev(names).remove("node-0050").table)
    own = before == "node-0050"
    assert bool(np.all(after[own] != "node-0050"))
    extra = int(np.count_nonzero((before != after) & ~own))
    assert 0 < extra < 0.01 * 65537


@given(
    st.lists(st.text(min_size=1, max_size=5), min_size=1, max_size=12, unique=True),
    st.sampled_from([2, 3, 13, 101, 251]),
)
def test_small_tables_are_full_and_balanced(names: list[str], size: int) -> None:
    maglev = Maglev(names, table_size=size)
    maglev._check()
    counts = Counter(maglev.table)
    assert sum(counts.values()) == size
    if size >= len(names):
        assert set(counts) == set(names)
        assert max(counts.values()) - min(counts.values()) <= 1


def test_lookups_agree_with_the_table() -> None:
    maglev = Maglev([f"n{i}" for i in range(6)], table_size=101)
    keys = [f"key-{i}" for i in range(500)] + [b"\x00", 99]
    owners = maglev.node_for_many(keys)
    for key, owner in zip(keys, owners, strict=True):
        assert maglev.node_for(key) == owner == maglev.table[maglev.slot_for(key)]
        replicas = maglev.nodes_for(key, 3)
        assert replicas[0] == owner and len(set(replicas)) == 3
    assert sorted(maglev.nodes_for("k", 100)) == sorted(maglev)


@pytest.mark.parametrize(
    ("size", "match"),
    [
        (1000, r"maglev table_size must be prime, got 1000; nearest primes: 997, 1009"),
        (65536, r"got 65536; nearest primes: 65521, 65537"),
        (1, r"got 1; nearest primes: 2$"),
        (0, r"got 0; nearest primes: 2$"),
        (-4, r"got -4; nearest primes: 2$"),
    ],
)
def test_non_prime_table_size_names_the_nearest_primes(size: int, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        Maglev(["a"], table_size=size)
    with pytest.raises(ConfigError, match=match):
        envoy_maglev(["a"], table_size=size)


def test_primes() -> None:
    assert [n for n in range(30) if is_prime(n)] == [2, 3, 5, 7, 11, 13, 17, 19, 23, 29]
    assert is_prime(65537) and not is_prime(65535)
    assert nearest_primes(2) == (None, 3)


@pytest.mark.parametrize(
    ("hosts", "error", "match"),
    [
        ({"a": 0}, ConfigError, r"weight of 'a' must be in \[1, 2\*\*32 - 1\], got 0"),
        ({"a": 1.5}, ConfigError, r"weight of 'a' must be int, got float"),
        ({"a": 2**32}, ConfigError, r"got 4294967296"),
        ({"a": 2**31, "b": 2**31}, ConfigError, r"must be <= 2\*\*32 - 1, got 4294967296"),
        (["a", "a"], DuplicateNodeError, r"node 'a' is given twice"),
        ("a", TypeError, r"hosts must be a list of addresses or a mapping, got 'a'"),
    ],
)
def test_envoy_weights_are_checked(hosts: object, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        envoy_maglev(hosts, table_size=7)  # type: ignore[arg-type]


def test_membership_and_value_semantics() -> None:
    maglev = Maglev(["b", "a"], table_size=13)
    assert list(maglev) == ["a", "b"] and len(maglev) == 2 and "a" in maglev
    assert maglev.add("c").remove("c") == maglev and maglev.discard("zz") is maglev
    assert hash(maglev) == hash(Maglev(["a", "b"], table_size=13))
    assert maglev != Maglev(["a", "b"], table_size=17)
    assert repr(maglev) == "Maglev(['a', 'b'], table_size=13, hasher='xxh3_64')"
    assert maglev.table_size == 13 and len(maglev.table) == 13
    with pytest.raises(DuplicateNodeError, match="node 'a' is already in the placement"):
        maglev.add("a")
    with pytest.raises(UnknownNodeError, match="node 'z' is not in the placement"):
        maglev.remove("z")
    with pytest.raises(EmptyRingError, match=r"node_for_many\(\) on an empty placement"):
        Maglev(table_size=7).node_for_many(["k"])
    with pytest.raises(TypeError, match="maglev table_size must be int, got str"):
        Maglev(["a"], table_size="7")  # type: ignore[arg-type]
    assert Maglev(table_size=7).table == ()


def test_more_nodes_than_slots_leaves_the_last_names_out() -> None:
    # Envoy's loop stops when the table is full: nodes late in name order get no slot.
    maglev = Maglev(["a", "b", "c", "d"], table_size=3)
    assert sorted(maglev.table) == ["a", "b", "c"]
    assert sorted(maglev.nodes_for("k", 4)) == ["a", "b", "c"]
    assert maglev.shares()["d"] == 0.0
