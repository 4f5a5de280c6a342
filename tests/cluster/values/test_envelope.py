"""The envelope's two forms: the compact one written now, the wide one every earlier ringkit wrote.

A server may hold both at once (values written before an upgrade, or by a client that has not
upgraded yet): every reader decodes both, and every rule that compares versions (read repair,
conditional deletes, moves, hot-key copies) compares a compact version with a wide one by number,
in Python as in the Redis scripts. The wide values here are built by hand, byte by byte, as the
earlier codec wrote them, not by the codec under test.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import redis
from hypothesis import given
from hypothesis import strategies as st

from ringkit.cluster.values.codec import (
    HEAD_BYTES,
    JSON,
    VERSION_LUA,
    Codec,
    buries,
    stamped,
    stored_version,
    supersedes,
    tombstone,
)
from ringkit.cluster.values.keys import tombstone_key
from ringkit.cluster.values.packed import Record, version_of
from ringkit.cluster.wire.backends import open_backend
from ringkit.cluster.wire.handles import fence
from ringkit.cluster.wire.redis.handoff import copy_is_newer, copy_tombstone
from ringkit.cluster.wire.urls import parse_url
from tests.cluster.helpers import memory_urls, one_of_each_backend, server_urls

CODEC = Codec(JSON)
VALUES = st.one_of(
    st.binary(max_size=30),
    st.text(max_size=30),
    st.lists(st.integers(-(2**70), 2**70), max_size=3),
    st.dictionaries(st.text(max_size=5), st.booleans() | st.none(), max_size=3),
)
# Versions and expiries on both sides of what the compact form holds (7 and 6 bytes).
VERSIONS = st.one_of(
    st.integers(0, 2**64 - 1), st.integers(2**56 - 2, 2**56 + 2), st.integers(0, 9)
)
EXPIRIES = st.one_of(st.just(0), st.integers(0, 2**64 - 1), st.integers(2**48 - 2, 2**48 + 2))
COMPACT_MARKS = range(0xF5, 0xFB)


def wide(value: object, version: int, expires_at_ms: int = 0) -> bytes:
    """Return `value` as ringkit wrote it before the compact form (marker 0xfe, 8 + 8, kind)."""
    if isinstance(value, bytes):
        kind, payload = b"b", value
    elif isinstance(value, str):
        kind, payload = b"s", value.encode("utf-8", "surrogatepass")
    else:
        kind, payload = b"j", json.dumps(value, separators=(",", ":")).encode()
    head = b"\xfe" + version.to_bytes(8, "big") + expires_at_ms.to_bytes(8, "big")
    return head + kind + payload


def compact(value: object, version: int, expires_at_ms: int = 0) -> bytes:
    stored = CODEC.encode(value, version=version, expires_at_ms=expires_at_ms)
    assert stored[0] in COMPACT_MARKS
    return stored


FORMS: dict[str, Callable[..., bytes]] = {"wide": wide, "compact": compact}


def _decodes_to(stored: bytes, value: object, version: int, expires_at_ms: int) -> None:
    assert CODEC.decode(stored) == (value, version, expires_at_ms)
    assert CODEC.decode_many([stored, stored]) == [(value, version, expires_at_ms)] * 2
    assert CODEC.decode_value(stored) == value
    assert stored_version(stored) == version.to_bytes(8, "big")


@given(value=VALUES, version=VERSIONS, expires_at_ms=EXPIRIES)
def test_every_value_round_trips_compact_when_its_version_and_expiry_fit(
    value: object, version: int, expires_at_ms: int
) -> None:
    stored = CODEC.encode(value, version=version, expires_at_ms=expires_at_ms)
    _decodes_to(stored, value, version, expires_at_ms)
    fits = version < 2**56 and expires_at_ms < 2**48
    assert (stored[0] in COMPACT_MARKS) is fits
    assert (stored[0] == 0xFE) is not fits


@given(value=st.binary(max_size=30) | st.text(max_size=30))
def test_a_str_or_bytes_value_without_a_ttl_costs_eight_bytes_over_its_payload(
    value: bytes | str,
) -> None:
    payload = value if isinstance(value, bytes) else value.encode("utf-8", "surrogatepass")
    stored = CODEC.encode(value, version=1_764_000_000_000_000, expires_at_ms=0)
    assert len(stored) == len(payload) + 8
    with_ttl = CODEC.encode(value, version=1_764_000_000_000_000, expires_at_ms=1_764_000_000_000)
    assert len(with_ttl) == len(payload) + 14


@given(value=VALUES, version=VERSIONS, expires_at_ms=EXPIRIES)
def test_a_value_in_the_wide_form_of_earlier_releases_still_decodes(
    value: object, version: int, expires_at_ms: int
) -> None:
    _decodes_to(wide(value, version, expires_at_ms), value, version, expires_at_ms)


@given(value=VALUES, version=VERSIONS, expires_at_ms=EXPIRIES, again=VERSIONS)
def test_stamping_either_form_changes_the_version_alone(
    value: object, version: int, expires_at_ms: int, again: int
) -> None:
    for stored in (
        wide(value, version, expires_at_ms),
        CODEC.encode(value, version=version, expires_at_ms=expires_at_ms),
    ):
        _decodes_to(stamped(stored, again), value, again, expires_at_ms)


@given(
    ours=st.tuples(st.sampled_from(sorted(FORMS)), st.integers(1, 2**56 - 1)),
    theirs=st.tuples(st.sampled_from(sorted(FORMS)), st.integers(1, 2**56 - 1)),
)
def test_versions_of_both_forms_compare_by_number(
    ours: tuple[str, int], theirs: tuple[str, int]
) -> None:
    (our_form, our_version), (their_form, their_version) = ours, theirs
    value = FORMS[our_form]("ours", our_version)
    held = FORMS[their_form]("theirs", their_version)
    assert (stored_version(value) < stored_version(held)) is (our_version < their_version)
    assert supersedes(value, held, None) is (our_version > their_version)
    assert supersedes(value, None, tombstone(their_version)) is (our_version > their_version)
    assert buries(tombstone(our_version), held) is (their_version < our_version)
    assert copy_is_newer(held, value) is (our_version > their_version)
    assert copy_is_newer(copy_tombstone(their_version), value) is (our_version > their_version)
    assert (version_of(value[:HEAD_BYTES]) < version_of(held)) is (our_version < their_version)


# Bytes that start like an envelope but are not one (too short for their marker's header), and
# values of every other shape: no version, in Python as in the scripts.
_NOT_ENVELOPES = st.one_of(
    st.builds(
        lambda mark, rest: bytes([mark]) + rest,
        st.sampled_from([*COMPACT_MARKS, 0xFE]),
        st.binary(max_size=20),
    ),
    st.binary(max_size=40),
    st.sampled_from([b"", b"41", b"-7", b"\xfd" + bytes(8)]),
)
_ENV_VERSION = VERSION_LUA + "return env_version(ARGV[1])"
_HEAD_VERSION = (
    VERSION_LUA
    + "redis.call('SET', KEYS[1], ARGV[1])"
    + f" return env_version(redis.call('GETRANGE', KEYS[1], 0, {HEAD_BYTES - 1}))"
)


@pytest.fixture(scope="module")
def plain_redis(redis_trio: list[Any]) -> redis.Redis:
    server = redis_trio[0]
    return redis.Redis(host=server.host, port=server.port)


@given(
    stored=st.one_of(
        _NOT_ENVELOPES,
        st.builds(compact, VALUES, st.integers(0, 2**56 - 1), st.integers(0, 2**48 - 1)),
        st.builds(wide, VALUES, VERSIONS, EXPIRIES),
    )
)
def test_the_scripts_read_the_version_of_any_stored_bytes_as_python_does(
    plain_redis: redis.Redis, stored: bytes
) -> None:
    """``env_version`` of a whole value, and of its head as the scripts read it (GETRANGE)."""
    assert plain_redis.eval(_ENV_VERSION, 0, stored) == stored_version(stored)
    assert plain_redis.eval(_HEAD_VERSION, 1, "envelope:head", stored) == stored_version(stored)


_ONE_OF_EACH_FORM = st.tuples(st.sampled_from(sorted(FORMS)), st.integers(1, 6))


@given(held=_ONE_OF_EACH_FORM, tomb=st.none() | st.integers(1, 6), ours=_ONE_OF_EACH_FORM)
def test_every_backend_repairs_and_buries_across_forms_by_version(
    redis_trio: list[Any],
    memcached_trio: list[Any],
    held: tuple[str, int],
    tomb: int | None,
    ours: tuple[str, int],
) -> None:
    """An old wide value is replaced by a newer compact one, and the other way round; never
    by an older or equal one, on every backend (Redis: the repair and bury scripts)."""
    key = b"fare:form"
    there, value = FORMS[held[0]]("held", held[1]), FORMS[ours[0]]("ours", ours[1])
    dead = None if tomb is None else tombstone(tomb)
    for kind, raw in one_of_each_backend(redis_trio, memcached_trio).items():
        fenced = fence(raw, lambda: 0, lambda key: 0)
        raw.flush()
        raw.set_many({key: there}, None)
        landed = fenced.serve("repair", key, value, None)
        assert landed is (ours[1] > held[1]), kind
        assert raw.get_many([key])[key] == (value if landed else there), kind
        raw.flush()
        if dead is not None:
            raw.set_many({tombstone_key(key): dead}, None)
        assert fenced.serve("repair", key, value, None) is supersedes(value, None, dead), kind
        raw.flush()
        raw.set_many({key: there}, None)
        fenced.serve("bury", key, tombstone(ours[1]), 60.0)
        survived = raw.get_many([key]).get(key) == there
        assert survived is (held[1] >= ours[1]), kind
        fenced.close()


@given(
    held=st.none() | _ONE_OF_EACH_FORM, tomb=st.none() | st.integers(1, 6), ours=_ONE_OF_EACH_FORM
)
def test_a_move_lands_a_record_across_forms_by_version(
    redis_trio: list[Any],
    held: tuple[str, int] | None,
    tomb: int | None,
    ours: tuple[str, int],
) -> None:
    """A moved record (a packed page restored by a script on Redis) lands over an older
    version of the other form, never over a newer or equal one or a newer tombstone."""
    key = b"fare:moved"
    value = FORMS[ours[0]]("ours", ours[1])
    there = None if held is None else FORMS[held[0]]("held", held[1])
    urls = {"memory": memory_urls(1)["s1"], "redis": server_urls("redis", redis_trio)["s1"]}
    expected = supersedes(value, there, None if tomb is None else tombstone(tomb))
    for kind, url in urls.items():
        raw = open_backend(parse_url(url), timeout_s=1.0)
        fenced = fence(raw, lambda: 0, lambda key: 7)
        raw.flush()
        if there is not None:
            raw.set_many({key: there}, None)
        if tomb is not None:
            raw.set_many({tombstone_key(key): tombstone(tomb)}, None)
        record = Record(key, value, -1, version_of(value), kind=1)
        assert fenced.index.restore([record]) == int(expected), kind
        assert raw.get_many([key]).get(key) == (value if expected else there), kind
        fenced.close()


@given(held=_ONE_OF_EACH_FORM, ours=_ONE_OF_EACH_FORM)
def test_a_hot_key_copy_replaces_only_an_older_version_of_either_form(
    redis_trio: list[Any], memcached_trio: list[Any], held: tuple[str, int], ours: tuple[str, int]
) -> None:
    key = b"fare:copy"
    there, copy = FORMS[held[0]]("held", held[1]), FORMS[ours[0]]("ours", ours[1])
    for kind, raw in one_of_each_backend(redis_trio, memcached_trio).items():
        fenced = fence(raw, lambda: 0, lambda key: 0)
        raw.flush()
        raw.set_many({key: there}, None)
        fenced.serve("set_copy", key, copy, None)
        assert raw.get_many([key])[key] == (copy if ours[1] > held[1] else there), kind
        fenced.close()
