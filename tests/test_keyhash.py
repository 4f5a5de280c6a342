"""Vectorised hashing of generated keys equals the scalar hashers, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

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
