"""Bad input to the cache client: TTLs, oversized values, counters, key lists, JSON types.

What a caller gets wrong is a typed error for that call (``ConfigError``, or ``TypeError`` for a
value of the wrong type), raised before anything is written where the client can know, and never a
server marked down; what a backend cannot store (a memcached expiry past 2038) is refused rather
than acknowledged and lost. Run against real memcached and Redis servers, with the sync and the
async client.
"""

from __future__ import annotations

import asyncio
import collections
import enum
import math
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis
from hypothesis import given
from hypothesis import strategies as st
from pymemcache.client.base import Client as MemcacheClient

from ringkit import HashRing
from ringkit.cluster import AsyncShardedClient, ShardedClient
from ringkit.cluster.values.expiry import MEMCACHED_MAX_EXPTIME, max_ttl_s
from ringkit.cluster.wire.backends import open_backend
from ringkit.cluster.wire.urls import parse_url
from ringkit.errors import ConfigError
from tests.cluster.helpers import memory_urls, server_urls
from tests.servers import Server

DAY_S = 24 * 3600
YEAR_S = 365.25 * DAY_S


def _flushed(kind: str, trio: list[Server]) -> dict[str, str]:
    urls = server_urls(kind, trio)
    with ShardedClient(HashRing(list(urls)), urls) as flusher:
        flusher.flush()
    return urls


# -- memcached TTLs past 30 days ------------------------------------------------------------------


def test_memcached_ttl_past_30_days_and_up_to_2038_is_kept(
    memcached_trio: list[Server], new: Callable[..., Any]
) -> None:
    urls = _flushed("memcached", memcached_trio)
    client = new(HashRing(list(urls)), urls, replicas=2)
    client.set("forty-days", "kept", ttl_s=40 * DAY_S)
    client.set("touched", "kept")
    assert client.touch("touched", 40 * DAY_S) is True
    # The longest TTL memcached can keep (its expiry is a signed 32-bit Unix time), less a
    # minute of slack for the time this test takes.
    longest = MEMCACHED_MAX_EXPTIME - time.time() - 60
    client.set("ten-years", "kept", ttl_s=longest)
    assert client.get_many(["forty-days", "touched", "ten-years"]) == {
        "forty-days": "kept",
        "touched": "kept",
        "ten-years": "kept",
    }
    # Every replica holds each copy (not only the first one read).
    for name in client.replicas_for("ten-years"):
        bare = MemcacheClient((client.server(name).url.host, client.server(name).url.port))
        assert bare.get(b"ten-years") is not None
        bare.close()


def test_ttl_memcached_cannot_keep_is_refused_before_writing(
    memcached_trio: list[Server], new: Callable[..., Any]
) -> None:
    urls = _flushed("memcached", memcached_trio)
    client = new(HashRing(list(urls)), urls, replicas=2)
    client.set("k", "old")
    eleven_years = 11.2 * YEAR_S  # past 2038-01-19 from 2026 on: once acknowledged, then gone
    with pytest.raises(ConfigError, match=r"ttl_s=.* memcached server .* at most \d+ s"):
        client.set("k", "new", ttl_s=eleven_years)
    with pytest.raises(ConfigError, match=r"ttl_s=.* memcached server .*2038"):
        client.set_many({"k": "new", "k2": "new"}, ttl_s=eleven_years)
    with pytest.raises(ConfigError, match=r"ttl_s=.* memcached server"):
        client.add("k3", "new", ttl_s=eleven_years)
    with pytest.raises(ConfigError, match=r"ttl_s=.* memcached server"):
        client.touch("k", eleven_years)
    assert client.get_many(["k", "k2", "k3"]) == {"k": "old"}
    assert client.down_servers == []


def test_the_limit_is_the_tightest_of_the_client_servers(
    memcached_trio: list[Server],
) -> None:
    now = 1_800_000_000.0
    assert max_ttl_s("memcached", now) == MEMCACHED_MAX_EXPTIME - 1_800_000_000
    assert max_ttl_s("redis", now) > 1e15  # Redis keeps milliseconds up to 2**63 - 1
    # One TTL means the same for every key: a memcached server in the pool bounds them all.
    urls = {**memory_urls(1), **{"s2": _flushed("memcached", memcached_trio)["s2"]}}
    with ShardedClient(HashRing(list(urls)), urls) as client:
        on_memory = next(f"k{i}" for i in range(100) if client.replicas_for(f"k{i}") == ["s1"])
        with pytest.raises(ConfigError, match="memcached server s2 can keep"):
            client.set(on_memory, "v", ttl_s=20 * YEAR_S)
        client.set(on_memory, "v", ttl_s=5 * YEAR_S)
        assert client.get(on_memory) == "v"
    backend = open_backend(parse_url("memcached://127.0.0.1:1"), timeout_s=0.1)
    # The backend refuses on its own too (a TTL checked a second before it is sent).
    with pytest.raises(ConfigError, match="2038"):
        backend.set_many({b"k": b"v"}, MEMCACHED_MAX_EXPTIME)


# -- bad input is not a server failure ------------------------------------------------------------


@pytest.mark.parametrize("ttl", [1e300, float("nan"), float("inf"), -1, 0, 2**70])
def test_bad_ttl_is_a_config_error_and_no_server_goes_down(
    make_client: Callable[..., Any], ttl: float
) -> None:
    client = make_client(replicas=2)
    client.set_many({"k": "v", "other": "o"})
    for call in (
        lambda: client.touch("k", ttl),
        lambda: client.set("k", "w", ttl_s=ttl),
        lambda: client.set_many({"k": "w", "k2": "w"}, ttl_s=ttl),
        lambda: client.add("k3", "w", ttl_s=ttl),
    ):
        with pytest.raises(ConfigError, match="ttl_s"):
            call()
    assert client.down_servers == []
    assert client.get_many(["k", "other", "k2", "k3"]) == {"k": "v", "other": "o"}


def test_value_memcached_refuses_as_too_large_is_a_config_error(
    memcached_trio: list[Server], new: Callable[..., Any]
) -> None:
    urls = _flushed("memcached", memcached_trio)
    # max_value_bytes raised past memcached's default 1 MiB item size: the server refuses.
    client = new(HashRing(list(urls)), urls, replicas=2, max_value_bytes=3_000_000)
    client.set("other", "o")
    big = b"x" * 2_000_000
    with pytest.raises(ConfigError, match="too large"):
        client.set("big", big)
    with pytest.raises(ConfigError, match="too large"):
        client.set_many({"small": "s", "big": big})
    with pytest.raises(ConfigError, match="too large"):
        client.add("big2", big)
    assert client.down_servers == []
    assert client.get("other") == "o"
    client.set("after", "fine")
    assert client.get_many(["after", "other", "big"]) == {"after": "fine", "other": "o"}


# -- one meaning for counters, key lists and values -----------------------------------------------


def test_incr_on_a_negative_number_is_refused_on_every_backend(
    make_client: Callable[..., Any],
) -> None:
    client = make_client()
    client.set_many({"neg": -5, "text": "12", "n": 5})
    for call in (lambda: client.incr("neg"), lambda: client.decr("neg", 2)):
        with pytest.raises(ConfigError, match=r"b'neg' is not a decimal integer in \[0, 2\*\*64"):
            call()
    with pytest.raises(ConfigError, match="b'text' is not a decimal integer"):
        client.incr("text")  # a str is stored in an envelope, never counted
    assert client.get_many(["neg", "text"]) == {"neg": -5, "text": "12"}
    assert (client.incr("n", 2), client.decr("n", 10), client.incr("absent")) == (7, 0, None)
    assert client.down_servers == []


@pytest.mark.parametrize("delta", ["2", 2.0, True, None])
def test_a_delta_that_is_no_int_is_the_same_config_error_as_one_out_of_range(delta: object) -> None:
    # One mistake, one exception: a delta of the wrong type used to be a TypeError while a
    # delta out of range was a ConfigError.
    urls = memory_urls()
    with ShardedClient(HashRing(list(urls)), urls) as client:
        for call in (client.incr, client.decr):
            with pytest.raises(ConfigError, match=f"delta must be an int in .*, got {delta!r}"):
                call("n", delta)  # type: ignore[arg-type]


def test_counters_past_the_top_and_huge_deltas(
    make_client: Callable[..., Any], backend: str
) -> None:
    client = make_client()
    for delta in (2**63, -(2**63), 2**64):
        with pytest.raises(ConfigError, match="delta must be an int in"):
            client.incr("n", delta)
    client.set("top", 2**63 - 1)
    if backend == "redis":  # Redis counts in a signed 64-bit integer and refuses to overflow
        with pytest.raises(ConfigError, match="b'top' is not a decimal integer"):
            client.incr("top")
    else:  # memcached's counters are unsigned 64-bit and wrap (protocol.txt); memory agrees
        assert client.incr("top") == 2**63
        client.set("top", 2**64 - 1)
        assert client.incr("top", 2) == 1
    assert client.down_servers == []


def test_incr_on_a_redis_value_of_another_type_is_a_config_error(
    redis_trio: list[Server], new: Callable[..., Any]
) -> None:
    urls = _flushed("redis", redis_trio)
    client = new(HashRing(list(urls)), urls)
    [name] = client.replicas_for("list")
    bare = redis.Redis.from_url(urls[name])
    bare.rpush("list", "a")  # written by another program
    bare.close()
    client.set("other", "o")
    with pytest.raises(ConfigError, match="b'list' is not a decimal integer"):
        client.incr("list")
    assert client.down_servers == []
    assert client.get("other") == "o"


def test_get_many_answers_each_form_of_a_key_as_asked(new: Callable[..., Any]) -> None:
    urls = memory_urls()
    client = new(HashRing(list(urls)), urls)
    client.set("x1", "v")
    assert client.get_many(["x1", b"x1", "x1"]) == {"x1": "v", b"x1": "v"}
    assert client.get_many(iter(["x1"])) == {"x1": "v"}  # any iterable of keys
    for single in ("x1", b"x1", bytearray(b"x1")):
        with pytest.raises(TypeError, match=r"one key .*x1.*; pass a list of keys"):
            client.get_many(single)
    with pytest.raises(ConfigError, match="key b'x1' is given twice"):
        client.set_many({"x1": 1, b"x1": 2})
    with pytest.raises(TypeError, match="items must be a mapping of key to value, got list"):
        client.set_many([("x1", 1)])
    assert client.get("x1") == "v"


class Colour(enum.IntEnum):
    RED = 1


class Label(str):
    pass


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ((1, 2), "tuple"),
        ({"a": (1,)}, "tuple"),
        ({1: "a"}, "dict key of type int"),
        ([{None: 1}], "dict key of type NoneType"),
        (bytearray(b"ab"), "bytearray"),
        (Colour.RED, "Colour"),
        (Label("x"), "Label"),
        (collections.OrderedDict(a=1), "OrderedDict"),
        ([collections.namedtuple("Point", "x y")(1, 2)], "Point"),
        ({1, 2}, "set"),
    ],
)
def test_json_refuses_values_that_would_change_type(
    new: Callable[..., Any], value: object, named: str
) -> None:
    urls = memory_urls()
    client = new(HashRing(list(urls)), urls)
    with pytest.raises(TypeError, match=f"cannot be stored with the json serializer.*{named}"):
        client.set("v", value)
    assert client.get("v") is None


def _same(got: object, want: object) -> bool:
    """Equal, and of the same type all the way down."""
    if type(got) is not type(want):
        return False
    if isinstance(want, dict):
        assert isinstance(got, dict)
        return list(got) == list(want) and all(_same(got[k], want[k]) for k in want)
    if isinstance(want, (list, tuple)):
        assert isinstance(got, (list, tuple))
        return len(got) == len(want) and all(map(_same, got, want))
    if isinstance(want, float) and math.isnan(want):
        return math.isnan(got)  # type: ignore[arg-type]
    return got == want


_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats()
    | st.text(max_size=8)
    | st.binary(max_size=8)
    | st.sampled_from([Colour.RED, Label("x"), bytearray(b"x")])
)
_anything = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=4) | st.integers(-3, 3), inner, max_size=3)
        | st.frozensets(st.integers(), max_size=2)
    ),
    max_leaves=8,
)


@given(value=_anything)
def test_any_value_set_accepts_comes_back_equal_and_of_the_same_type(
    value: object,
) -> None:
    urls = memory_urls()
    with ShardedClient(HashRing(list(urls)), urls) as client:
        try:
            client.set("v", value)
        except TypeError:
            assert client.get("v") is None  # refused, and nothing written
            return
        assert _same(client.get("v"), value)


# -- huge TTLs, and the async memcached touch ----------------------------------------------------


def test_huge_ttls_are_config_errors_not_struct_errors(
    make_client: Callable[..., Any], backend: str
) -> None:
    client = make_client()
    client.set("k", "v")
    if backend != "memcached":  # Redis and memory keep a millennium
        client.set("millennium", "kept", ttl_s=1000 * YEAR_S)
        assert client.touch("millennium", 1000 * YEAR_S) is True
        assert client.get("millennium") == "kept"
    for ttl in (1e20, 10**30, 1e300):
        with pytest.raises(ConfigError, match=r"ttl_s=.* server .* at most \d+ s"):
            client.set("k", "w", ttl_s=ttl)
        with pytest.raises(ConfigError, match=r"ttl_s=.* server .* at most \d+ s"):
            client.touch("k", ttl)
    assert client.get("k") == "v"


def test_async_memcached_touch_behaves_as_the_sync_one(
    memcached_trio: list[Server],
) -> None:
    urls = _flushed("memcached", memcached_trio)
    ring = HashRing(list(urls))
    sync = ShardedClient(ring, urls, replicas=2)
    sync.set("k", "v")

    async def answers() -> list[object]:
        client = AsyncShardedClient(ring, urls, replicas=2)
        try:
            got: list[object] = [await client.touch("k", 60), await client.touch("absent", 60)]
            for ttl in (1e300, 40 * DAY_S, 20 * YEAR_S):
                try:
                    got.append(await client.touch("k", ttl))
                except ConfigError as error:
                    got.append(type(error))
            got.append(client.down_servers)
            return got
        finally:
            await client.close()

    expected: list[object] = [sync.touch("k", 60), sync.touch("absent", 60)]
    for ttl in (1e300, 40 * DAY_S, 20 * YEAR_S):
        try:
            expected.append(sync.touch("k", ttl))
        except ConfigError as error:
            expected.append(type(error))
    expected.append(sync.down_servers)
    assert expected == [True, False, ConfigError, True, ConfigError, []]
    assert asyncio.run(answers()) == expected
    sync.close()
