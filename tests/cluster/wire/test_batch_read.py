"""The batch forms a multi-key read uses answer exactly what their one-key forms answer.

``get_many`` checks its keys as a batch (:func:`~ringkit.cluster.values.keys.user_keys`), decodes
each server's values as a batch (``ValueCodec.decode_many``) and routes small batches with one
``searchsorted`` (the per-key Python cost of the multi-key read). Each must agree with the
per-key form, errors included: the same exception naming the same first bad key.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringkit import HashRing
from ringkit.cluster import ShardedClient
from ringkit.cluster.values.codec import JSON, PICKLE, Codec, RawCodec
from ringkit.cluster.values.keys import user_key, user_keys
from ringkit.cluster.wire.backends import open_backend
from ringkit.cluster.wire.handles import fence
from ringkit.cluster.wire.urls import parse_url
from ringkit.errors import ConfigError, StaleViewError
from tests.cluster.helpers import memory_urls
from tests.servers import redis_server

_KEY_TEXT = st.lists(
    st.sampled_from(["a", "b", "{", "}", ":", " ", "\n", "\x00", "é", "ringkit:"]), max_size=6
).map("".join)
_KEYS = st.lists(
    st.one_of(
        _KEY_TEXT,
        _KEY_TEXT.map(str.encode),
        st.just("x" * 251),
        st.just(b"y" * 250),
        st.just(""),
        st.integers(),
    ),
    max_size=8,
)


def _one_by_one(keys: list[Any]) -> list[bytes] | tuple[type[BaseException], str]:
    try:
        return [user_key(key) for key in keys]
    except (TypeError, ConfigError) as error:
        return type(error), str(error)


@given(_KEYS)
def test_user_keys_checks_a_batch_as_user_key_checks_each_key(keys: list[Any]) -> None:
    expected = _one_by_one(keys)
    try:
        assert user_keys(keys) == expected
    except (TypeError, ConfigError) as error:
        assert (type(error), str(error)) == expected


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        ("ringkit:epoch", "reserved prefix"),
        ("two words", "whitespace"),
        ("", "1..250 bytes"),
        ("z" * 251, "1..250 bytes"),
        (b"tab\there", "whitespace"),
        (42, "str or bytes"),
    ],
)
def test_get_many_names_the_bad_key_of_a_batch(bad: object, words: str) -> None:
    urls = memory_urls(2)
    client = ShardedClient(HashRing(list(urls)), urls)
    with pytest.raises((TypeError, ConfigError), match=words):
        client.get_many(["fine:1", bad, "fine:2"])  # type: ignore[list-item]


_VALUES = st.one_of(
    st.text(), st.binary(), st.integers(-(2**63), 2**63 - 1), st.lists(st.integers()), st.none()
)


@given(st.lists(_VALUES, max_size=6), st.integers(0, 2**64 - 1), st.integers(0, 2**40))
def test_decode_many_decodes_each_value_as_decode_does(
    values: list[Any], version: int, expires_at_ms: int
) -> None:
    codec = Codec(JSON)
    stored = [codec.encode(v, version=version, expires_at_ms=expires_at_ms) for v in values]
    stored += [b"41 ", b"foreign bytes", b""]  # a memcached decr's padding, a foreign value
    assert codec.decode_many(stored) == [codec.decode(data) for data in stored]
    assert RawCodec().decode_many(stored) == [RawCodec().decode(data) for data in stored]


def test_decode_many_refuses_a_value_of_another_serializer() -> None:
    pickled = Codec(PICKLE).encode({"a": 1}, version=1, expires_at_ms=0)
    fine = Codec(JSON).encode("fine", version=1, expires_at_ms=0)
    with pytest.raises(ConfigError, match="serializer tag b'p'"):
        Codec(JSON).decode_many([fine, pickled])


@pytest.mark.parametrize("count", [0, 1, 100, 1024, 1025, 5000])
def test_node_for_many_agrees_with_node_for_below_and_above_the_searchsorted_size(
    count: int,
) -> None:
    ring = HashRing([f"n{i}" for i in range(7)])
    keys = [f"seat:{i}".encode() for i in range(count)]
    assert ring.node_for_many(keys) == [ring.node_for(key) for key in keys]
    assert ring.node_for_many([*keys[:3], "str", 7]) == [
        ring.node_for(key) for key in [*keys[:3], "str", 7]
    ]


def test_a_redis_read_is_refused_by_a_newer_epoch_then_refreshes(new: Callable[..., Any]) -> None:
    """A read is one MGET of the epoch and the keys; a newer epoch there refuses it."""
    with redis_server() as one, redis_server() as two:
        urls = {"a": f"redis://{one.address}/0", "b": f"redis://{two.address}/0"}
        first = {"a": urls["a"]}
        client = new(HashRing(["a"]), first)
        stale = new(HashRing(["a"]), first)
        values = {f"k{i}": i for i in range(60)}
        client.set_many(values)
        assert stale.get_many(list(values)) == values  # settled at the first view
        client.add_server("b", urls["b"])
        assert stale.get_many(list(values)) == values  # refused, refreshed, read again
        assert stale.epoch == client.epoch
        inner = open_backend(parse_url(urls["a"]), timeout_s=5.0)
        behind = fence(inner, lambda: 1, lambda key: 0)
        with pytest.raises(
            StaleViewError, match=r"is at epoch \d+, the call was routed by epoch 1"
        ):
            behind.get_many([b"k1", b"k2"])
        inner.close()
