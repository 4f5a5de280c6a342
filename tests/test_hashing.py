"""Golden vectors for every named hasher, key encoding, the registry and the widening rule."""

from __future__ import annotations

import hashlib

import mmh3
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringkit import ConfigError, hashing
from ringkit.hashing import (
    HASHERS,
    Hasher,
    encode_key,
    fmix32,
    fnv1a_32,
    fnv1a_32_mix,
    fnv1a_64,
    get_hasher,
    hash_many,
    md5,
    murmur3_32,
    murmur3_64,
    points_many,
    sha1,
    widen,
    xxh3_64,
)

# Published vectors. FNV: the reference test suite (isthe.com/chongo/src/fnv/test_fnv.c).
FNV1A_32 = {b"": 0x811C9DC5, b"a": 0xE40C292C, b"foobar": 0xBF9CF968}
FNV1A_64 = {b"": 0xCBF29CE484222325, b"a": 0xAF63DC4C8601EC8C, b"foobar": 0x85944171F73967E8}


@pytest.mark.parametrize(("data", "expected"), FNV1A_32.items())
def test_fnv1a_32_published_vectors(data: bytes, expected: int) -> None:
    assert fnv1a_32(data) == expected


@pytest.mark.parametrize(("data", "expected"), FNV1A_64.items())
def test_fnv1a_64_published_vectors(data: bytes, expected: int) -> None:
    assert fnv1a_64(data) == expected


def test_digests_are_their_first_eight_bytes_big_endian() -> None:
    # RFC 1321 / FIPS 180 test digests: md5("") = d41d8cd9 8f00b204 …, sha1("abc") = a9993e36 …
    assert md5(b"") == 0xD41D8CD98F00B204
    assert md5(b"abc") == 0x900150983CD24FB0
    assert sha1(b"abc") == 0xA9993E364706816A
    assert sha1(b"") == 0xDA39A3EE5E6B4B0D


def test_xxh3_64_published_vector() -> None:
    # xxHash's sanity test: XXH3_64bits("" , seed 0) = 0x2D06800538D394C2.
    assert xxh3_64(b"") == 0x2D06800538D394C2


def test_murmur3_published_vectors() -> None:
    # smhasher / Wikipedia vectors for MurmurHash3_x86_32.
    assert murmur3_32(b"") == 0
    assert murmur3_32(b"", seed=1) == 0x514E28B7
    assert murmur3_32(b"The quick brown fox jumps over the lazy dog") == 0x2E4FF723
    assert murmur3_32(b"hello") == 0x248BFA47


@given(st.binary(max_size=64))
def test_murmur3_matches_the_mmh3_c_extension(data: bytes) -> None:
    assert murmur3_32(data) == mmh3.hash(data, signed=False)
    assert murmur3_64(data) == mmh3.hash64(data, signed=False)[0]
    assert hashing.murmur3_x64_128(data) == mmh3.hash64(data, signed=False)


def test_fnv1a_32_mix_is_fnv_then_fmix32_pinned() -> None:
    assert fnv1a_32_mix(b"booking-0001") == fmix32(fnv1a_32(b"booking-0001")) == 0xF93F2E70


def test_every_registered_hasher_is_importable_by_name_with_its_width() -> None:
    assert sorted(HASHERS) == [
        "fnv1a_32", "fnv1a_32_mix", "fnv1a_64", "md5", "murmur3_32", "murmur3_64", "sha1",
        "xxh3_64",
    ]  # fmt: skip
    for name, hasher in HASHERS.items():
        assert getattr(hashing, name) is hasher.function
        assert hasher.function(b"some key") < 2**hasher.bits
    assert HASHERS["fnv1a_32"].bits == HASHERS["murmur3_32"].bits == 32


def test_get_hasher_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"unknown hasher 'xxh64'; known: fnv1a_32, .*xxh3_64"):
        get_hasher("xxh64")


def test_get_hasher_wraps_a_callable_as_64_bits_and_refuses_other_things() -> None:
    assert get_hasher(len).bits == 64
    with pytest.raises(ConfigError, match="hasher must be a name, a Hasher or a callable, got int"):
        get_hasher(42)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="hasher bits must be 32 or 64, got 16"):
        Hasher("h", len, bits=16)


def test_encode_key_encodes_str_bytes_and_int_and_refuses_the_rest() -> None:
    assert encode_key("é") == "é".encode()
    assert encode_key(b"\xff") == b"\xff"
    assert encode_key(bytearray(b"ab")) == b"ab"
    assert encode_key(-12) == b"-12"
    for bad, name in ((1.5, "float"), (None, "NoneType"), (True, "bool"), (["k"], "list")):
        with pytest.raises(TypeError, match=f"key must be str, bytes or int, got {name}"):
            encode_key(bad)  # type: ignore[arg-type]


def test_an_int_key_hashes_as_its_decimal_text() -> None:
    assert (
        hash_many([42], "md5")[0]
        == md5(b"42")
        == int.from_bytes(hashlib.md5(b"42").digest()[:8], "big")
    )


def test_widen_preserves_order_and_places_32_bit_hashes_in_the_top_bits() -> None:
    assert widen(0xE40C292C, 32) == 0xE40C292C00000000
    assert widen(5, 64) == 5
    values = [0, 1, 2**31, 2**32 - 1]
    assert sorted(widen(v, 32) for v in values) == [widen(v, 32) for v in sorted(values)]


@given(st.lists(st.one_of(st.text(max_size=8), st.binary(max_size=8)), max_size=20))
def test_vectorised_forms_equal_the_scalar_ones(keys: list[str | bytes]) -> None:
    for name, hasher in HASHERS.items():
        expected = [hasher.function(encode_key(k)) for k in keys]
        assert hash_many(keys, name).tolist() == expected
        assert points_many(keys, name).tolist() == [widen(h, hasher.bits) for h in expected]
        assert hash_many(keys, name).dtype == np.uint64
