"""Configuration at the boundary: URLs, serializers, server maps, options."""

from __future__ import annotations

import pickle
import re
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringkit import HashRing
from ringkit.cluster import (
    PICKLE,
    ClientOptions,
    Serializer,
    ServerURL,
    ShardedClient,
    parse_url,
)
from ringkit.cluster.adapters import RedisRouter
from ringkit.cluster.core.health import ServerHealth
from ringkit.cluster.core.servers import check_server_map
from ringkit.cluster.rebalance.options import RebalanceOptions, Throttle
from ringkit.cluster.values.codec import JSON, Codec
from ringkit.cluster.views.etcd import EtcdViewStore
from ringkit.cluster.views.view import ClusterView
from ringkit.cluster.wire.credentials import Credentials
from ringkit.errors import ConfigError, UnknownNodeError
from tests.cluster.helpers import memory_urls


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("redis://127.0.0.1:6379/0", ServerURL("redis", "127.0.0.1", 6379, 0)),
        ("redis://localhost:6380", ServerURL("redis", "localhost", 6380, 0)),
        (
            "rediss://:pw@cache.example:6380/3",
            ServerURL("rediss", "cache.example", 6380, 3, password="pw"),
        ),
        ("redis://user:pw@h:1/2", ServerURL("redis", "h", 1, 2, username="user", password="pw")),
        ("memcached://10.1.2.3:11211", ServerURL("memcached", "10.1.2.3", 11211)),
        ("memcached://[::1]:11211", ServerURL("memcached", "::1", 11211)),
        ("memory://sessions", ServerURL("memory", name="sessions")),
    ],
)
def test_parse_url_reads_the_fixed_forms(text: str, expected: ServerURL) -> None:
    assert parse_url(text) == expected
    assert parse_url(text).tls == text.startswith("rediss")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("http://h:1", "got 'http://h:1'"),
        ("redis://h", "got 'redis://h'"),
        ("redis://h:99999/0", "port must be in 1..65535, got 99999"),
        ("memcached://h:11211/0", "memcached URLs take no password or /db"),
        ("memory://", "got 'memory://'"),
        ("redis://:secret@h:x/0", r"got 'redis://\*\*\*@h:x/0'"),
    ],
)
def test_parse_url_refuses_anything_else_without_leaking_passwords(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        parse_url(text)
    assert "secret" not in str(caught.value)


def test_server_url_repr_hides_the_password() -> None:
    url = parse_url("rediss://admin:topsecret@h:6380/1")
    assert "topsecret" not in repr(url) and "topsecret" not in str(url)
    assert str(url) == "rediss://admin:***@h:6380/1"


values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.text()
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=10,
)


@given(value=values | st.binary() | st.integers(-(2**80), 2**80), version=st.integers(0, 2**64 - 1))
def test_codec_round_trips_every_json_value(value: object, version: int) -> None:
    codec = Codec(JSON)
    decoded = codec.decode(codec.encode(value, version=version, expires_at_ms=0))
    assert decoded.value == value and type(decoded.value) is type(value)
    if type(value) is not int:
        assert decoded.version == version


def test_json_refuses_what_it_cannot_carry_exactly() -> None:
    codec = Codec(JSON)
    with pytest.raises(TypeError, match="value of type float cannot be stored with the json"):
        codec.encode(float("inf"), version=1, expires_at_ms=0)
    with pytest.raises(TypeError, match="value of type list cannot be stored with the json"):
        codec.encode([float("nan")], version=1, expires_at_ms=0)


def test_pickle_only_when_asked_and_never_across_serializers() -> None:
    urls = memory_urls()
    ring = HashRing(list(urls))
    pickling = ShardedClient(ring, urls, serializer="pickle")
    pickling.set("obj", {1, 2, 3})
    assert pickling.get("obj") == {1, 2, 3}
    plain = ShardedClient(ring, urls)
    with pytest.raises(TypeError, match="value of type set cannot be stored with the json"):
        plain.set("obj2", {1, 2})
    with pytest.raises(ConfigError, match="configured 'json', published 'pickle'"):
        plain.get("obj")  # the view the pickling client published says pickle: refused first
    [stored] = [v for n in urls for v in pickling.server(n).backend.get_many([b"obj"]).values()]
    with pytest.raises(ConfigError, match="stored with serializer tag b'p'; this client uses"):
        Codec(JSON).decode(stored)  # and a value is never guessed at either
    custom = Serializer("repr", b"r", lambda v: repr(v).encode(), lambda b: b.decode())
    assert custom.tag == b"r" and PICKLE.loads(pickle.dumps(5)) == 5
    with pytest.raises(ConfigError, match="serializer tag must be one byte other than b or s"):
        Serializer("bad", b"s", repr, repr)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="unknown serializer 'yaml'; known: json, pickle"):
        ShardedClient(ring, urls, serializer="yaml")


def test_server_map_must_match_the_placement() -> None:
    ring = HashRing(["a", "b"])
    with pytest.raises(UnknownNodeError, match="server 'z' is not a node of the placement"):
        ShardedClient(ring, {"a": "memory://a", "b": "memory://b", "z": "memory://z"})
    with pytest.raises(ConfigError, match="node 'b' has no server URL"):
        ShardedClient(ring, {"a": "memory://a"})
    with pytest.raises(ConfigError, match="got 'memcache://h:1'"):
        ShardedClient(ring, {"a": "memory://a", "b": "memcache://h:1"})


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"replicas": 0}, "replicas must be an int >= 1, got 0"),
        ({"replicas": 2, "write_quorum": 3}, "write_quorum must be <= replicas \\(2\\), got 3"),
        ({"read": "any"}, "read must be one of first, all, got 'any'"),
        ({"timeout_s": 0}, "timeout_s must be a number > 0, got 0"),
        ({"dead_timeout_s": -1}, "dead_timeout_s must be a number >= 0, got -1"),
        ({"max_value_bytes": 0}, "max_value_bytes must be an int >= 1, got 0"),
    ],
)
def test_bad_options_are_refused(options: dict[str, object], message: str) -> None:
    urls = memory_urls()
    with pytest.raises(ConfigError, match=message):
        ShardedClient(HashRing(list(urls)), urls, **options)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        # A value of the wrong type and a value out of range are one mistake, "this value
        # cannot be used": each fails as a ConfigError naming it, never as a bare TypeError
        # from a comparison deep inside, and True is no count or duration.
        ("replicas", "2", "replicas must be an int >= 1, got '2'"),
        ("replicas", True, "replicas must be an int >= 1, got True"),
        ("write_quorum", 1.0, "write_quorum must be an int >= 1, got 1.0"),
        ("max_connections", None, "max_connections must be an int >= 1, got None"),
        ("max_hints", "10", "max_hints must be an int >= 0, got '10'"),
        ("timeout_s", "1", "timeout_s must be a number > 0, got '1'"),
        ("timeout_s", float("nan"), "timeout_s must be a number > 0, got nan"),
        ("connect_timeout_s", float("inf"), "connect_timeout_s must be a number > 0 or None"),
        ("dead_timeout_s", None, "dead_timeout_s must be a number >= 0, got None"),
        ("read_repair", 1, "read_repair must be True or False, got 1"),
        ("read", None, "read must be one of first, all, got None"),
        ("hooks", [print, "log"], "each of hooks must be callable, got 'log'"),
        ("hot_keys", 10, "hot_keys must be a HotKeys or None, got 10"),
    ],
)
def test_one_mistake_in_an_option_is_one_config_error_naming_the_value(
    option: str, value: object, message: str
) -> None:
    urls = memory_urls()
    with pytest.raises(ConfigError, match=re.escape(message)):
        ShardedClient(HashRing(list(urls)), urls, **{option: value})  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=re.escape(message)):
        ClientOptions(**{option: value})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        # The parts a client is built from check their own options the same way, for
        # callers that build them alone (the coordinator, the CLI, a test).
        (
            lambda: ServerHealth("a", dead_timeout_s="5", max_hints=10),
            "dead_timeout_s must be a number >= 0, got '5'",
        ),
        (
            lambda: ServerHealth("a", dead_timeout_s=float("nan"), max_hints=10),
            "dead_timeout_s must be a number >= 0, got nan",
        ),
        (
            lambda: ServerHealth("a", dead_timeout_s=5.0, max_hints=-1),
            "max_hints must be an int >= 0, got -1",
        ),
        (
            lambda: ServerHealth("a", dead_timeout_s=5.0, max_hints=2.5),
            "max_hints must be an int >= 0, got 2.5",
        ),
        (
            lambda: check_server_map(HashRing(["a"]), ["memory://a"]),
            "servers must be a mapping of node name to URL, got list",
        ),
        (
            lambda: check_server_map(HashRing(["a"]), {"a": 11211}),
            "server URL must be a str, got int",
        ),
        (lambda: parse_url(b"redis://h:1/0"), "server URL must be a str, got bytes"),
        (
            lambda: Credentials([("a", "hunter2")]),
            "credentials must be a mapping of server name or host:port to a secret, got list",
        ),
        (
            lambda: Credentials(()),  # empty, and still not a mapping
            "credentials must be a mapping of server name or host:port to a secret, got tuple",
        ),
    ],
)
def test_a_bad_option_of_a_part_is_one_config_error_naming_it(
    make: Callable[[], object], message: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)) as raised:
        make()
    assert "hunter2" not in str(raised.value)  # a mapping's contents are never shown


def test_a_client_given_servers_of_the_wrong_type_names_them() -> None:
    with pytest.raises(ConfigError, match="servers must be a mapping of node name to URL, got"):
        ShardedClient(HashRing(["a"]), "memory://a")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="server URL must be a str, got NoneType"):
        ShardedClient(HashRing(["a"]), {"a": None})  # type: ignore[dict-item]


def test_the_client_keeps_its_validated_options() -> None:
    urls = memory_urls()
    hooks = [print]
    with ShardedClient(HashRing(list(urls)), urls, replicas=2, hooks=hooks) as client:
        assert client.options == ClientOptions(replicas=2, hooks=(print,))
        assert client.options.hooks == (print,)  # a tuple: the options are frozen


def test_counters_are_refused_in_reconcile_mode() -> None:
    urls = memory_urls()
    client = ShardedClient(HashRing(list(urls)), urls, replicas=2, read="all")
    with pytest.raises(NotImplementedError, match="incr/decr cannot be reconciled"):
        client.incr("hits")


SERVERS = {"a": "memory://checks-a"}


def _view(**fields: object) -> ClusterView:
    given: dict[str, object] = {"epoch": 1, "placement": HashRing(["a"]), "servers": SERVERS}
    return ClusterView(**{**given, **fields})  # type: ignore[arg-type]


def _view_from_dict(**fields: object) -> ClusterView:
    return ClusterView.from_dict({**_view().to_dict(), **fields})


def _rebalance(**fields: object) -> RebalanceOptions:
    return RebalanceOptions(**fields)  # type: ignore[arg-type]


def _router(**options: object) -> RedisRouter:
    return RedisRouter.from_urls(HashRing(["a"]), {"a": "redis://h:1"}, **options)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("build", "message"),
    [
        # The same rule as the client's options, wherever else cluster/ takes a number or a
        # flag: a view, a view's JSON, a rebalance's options, the etcd store, the Redis router.
        (lambda: _view(epoch="1"), "epoch must be an int >= 0, got '1'"),
        (lambda: _view(epoch=-1), "epoch must be an int >= 0, got -1"),
        (lambda: _view(replicas=True), "replicas must be an int >= 1, got True"),
        (lambda: _view(hot_copies=1), "hot_copies must be True or False, got 1"),
        (lambda: _view(state=None), "view state must be one of stable, moving, rolling_back"),
        (lambda: _view_from_dict(epoch=1.5), "field 'epoch' must be an int >= 0, got 1.5"),
        (lambda: _view_from_dict(replicas=None), "field 'replicas' must be an int >= 1, got None"),
        (lambda: _rebalance(batch=1.5), "batch must be an int >= 1, got 1.5"),
        (lambda: _rebalance(page_bytes=True), "page_bytes must be an int >= 1 or None"),
        (lambda: _rebalance(page_bytes=0), "page_bytes must be an int >= 1 or None, got 0"),
        (lambda: _rebalance(keys_per_s="fast"), "keys_per_s must be a number > 0 or None"),
        (lambda: _rebalance(keys_per_s=float("nan")), "keys_per_s must be a number > 0"),
        (lambda: _rebalance(timeout_s="2"), "timeout_s must be a number > 0, got '2'"),
        (lambda: _rebalance(timeout_s=float("inf")), "timeout_s must be a number > 0"),
        (lambda: _rebalance(checkpoint_s=None), "checkpoint_s must be a number >= 0"),
        (
            lambda: _rebalance(max_streams_per_source=0),
            "max_streams_per_source must be an int >= 1, got 0",
        ),
        (lambda: Throttle(True), "keys_per_s must be a number > 0 or None, got True"),
        (
            lambda: EtcdViewStore("etcd://127.0.0.1:1/v", lock_ttl_s=0),
            "lock_ttl_s must be a number > 0, got 0",
        ),
        (
            lambda: _router(timeout_s="1"),
            "timeout_s must be a number > 0, got '1'",
        ),
    ],
)
def test_one_mistake_outside_the_client_options_is_one_config_error_naming_the_value(
    build: Callable[[], object], message: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        build()


def test_refresh_view_refuses_an_epoch_that_is_no_count() -> None:
    with ShardedClient(HashRing(["a"]), SERVERS) as client:
        for bad in (-1, "3", True):
            with pytest.raises(ConfigError, match="at_least must be an int >= 0"):
                client.refresh_view(at_least=bad)  # type: ignore[arg-type]
        assert client.refresh_view(at_least=0).epoch >= 0
