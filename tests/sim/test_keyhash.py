"""Vectorised hashing of generated keys equals the scalar hashers, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringkit import HashRing
from ringkit.hashing import HASHERS
from ringkit.sim import Population
from ringkit.sim.keyhash import VECTORISED_HASHERS, hash_generated


def _scalar(prefix: bytes, width: int, begin: int, end: int, hasher: str) -> list[int]:
    form = prefix.replace(b"%", b"%%") + (b"%%0%dd" % width if width else b"%d")
    return [HASHERS[hasher].function(form % i) for i in range(begin, end)]


@given(
    prefix=st.text(max_size=10).map(str.encode),
    width=st.integers(0, 12),
    begin=st.integers(0, 10**12),
    count=st.integers(1, 40),
    hasher=st.sampled_from(VECTORISED_HASHERS),
)
def test_matches_the_scalar_hasher(
    prefix: bytes, width: int, begin: int, count: int, hasher: str
) -> None:
    got = hash_generated(prefix, width, begin, begin + count, hasher)
    assert got is not None
    assert got.tolist() == _scalar(prefix, width, begin, begin + count, hasher)


@pytest.mark.parametrize("hasher", VECTORISED_HASHERS)
def test_across_digit_boundaries_and_xxh3_length_classes(hasher: str) -> None:
    # "k-" + 1..7 digits spans XXH3's 1-3, 4-8 and 9-16 byte classes; 9995..10005 adds a digit.
    for begin, end in ((0, 30), (9995, 10_005), (9_999_990, 10_000_010)):
        got = hash_generated(b"k-", 0, begin, end, hasher)
        assert got is not None
        assert got.tolist() == _scalar(b"k-", 0, begin, end, hasher)


def test_unsupported_cases_return_none() -> None:
    assert hash_generated(b"k", 0, 0, 5, "md5") is None
    assert hash_generated(b"k", 0, -5, 5, "xxh3_64") is None
    assert hash_generated(b"k", 0, 5, 5, "xxh3_64") is None


@pytest.mark.parametrize("hasher", ["xxh3_64", "fnv1a_32_mix", "sha1"])
def test_population_hashes_match_its_keys(hasher: str) -> None:
    for population in (Population(count=50, prefix="p%", start=-3, width=2),
                       Population(count=2000, prefix="key-", width=0)):  # fmt: skip
        chunk = next(population.chunks())
        expected = [HASHERS[hasher].function(k.encode()) for k in population.names()]
        assert chunk.hashes(hasher).tolist() == expected
        assert chunk.hashes(hasher).dtype == np.uint64


@given(
    prefix=st.text(max_size=6).map(str.encode),
    width=st.integers(0, 22),
    # Around 2**63 (where int64 indices wrapped), up to and past 2**64 - 1.
    begin=st.one_of(
        st.integers(2**63 - 60, 2**63 + 60),
        st.integers(2**64 - 60, 2**64 + 60),
        st.integers(0, 2**66),
    ),
    count=st.integers(1, 40),
    hasher=st.sampled_from(VECTORISED_HASHERS),
)
def test_key_numbers_past_2_63_hash_exactly(
    prefix: bytes, width: int, begin: int, count: int, hasher: str
) -> None:
    # Regression: keys.start near 2**63 gave 208 / 0 / 92 keys per node, exit 0
    got = hash_generated(prefix, width, begin, begin + count, hasher)
    expected = _scalar(prefix, width, begin, begin + count, hasher)
    if begin + count <= 2**64:
        assert got is not None
    if got is not None:
        assert got.tolist() == expected
    population = Population(count=count, prefix=prefix.decode(), start=begin, width=width)
    hashed = population.hashes(HASHERS[hasher], 0, count)
    assert hashed.tolist() == expected


def test_scenario_near_2_63_counts_keys_as_the_scalar_path_does() -> None:
    start = 2**63 - 150
    population = Population(count=300, prefix="", start=start, width=0)
    ring = HashRing(["a", "b", "c"], hasher="fnv1a_64")
    truth = ring.node_for_many([str(i) for i in range(start, start + 300)])
    owners = ring.owner_indices_for_hashes(population.hashes(ring.hasher, 0, 300))
    assert [ring.nodes[i].name for i in owners.tolist()] == truth
