"""``serializer="raw"``: values other languages' clients share, and what raw refuses.

Placement was shared with PHP / Go / C clients (``KetamaHasher``) but values were not: every
value carried ringkit's binary envelope (``b'\\xfe\\x00…'``). A raw client stores bytes and str
as is, and reads whatever bare clients wrote.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ringkit import HashRing
from ringkit.cluster import HotKeys
from ringkit.cluster.wire.urls import parse_url
from ringkit.errors import ConfigError, UnsupportedError
from tests.cluster.helpers import memory_urls

# Values that the envelope used to hide from other clients: a marker byte, NUL, UTF-8.
VALUES: dict[str, bytes | str] = {
    "raw:bytes": b"\xfe\x00 not an envelope \xff",
    "raw:str": "café ☕",
    "raw:digits": "1234",
}


def _stored(value: bytes | str) -> bytes:
    return value.encode() if isinstance(value, str) else value


class _Bare:
    """A bare redis-py or pymemcache client on the server that owns a key."""

    def __init__(self, backend: str, url: str) -> None:
        parsed = parse_url(url)
        self._backend = backend
        if backend == "redis":
            import redis

            self._client: Any = redis.Redis(host=parsed.host, port=parsed.port, db=parsed.db)
        else:
            from pymemcache.client.base import Client

            self._client = Client((parsed.host, parsed.port))

    def get(self, key: str) -> bytes | None:
        value: bytes | None = self._client.get(key)
        return value

    def set(self, key: str, value: bytes) -> None:
        if self._backend == "redis":
            self._client.set(key, value)
        else:
            # pymemcache sends set with noreply by default: the next read, on another
            # connection, could then reach the server first (seen under load).
            self._client.set(key, value, noreply=False)

    def close(self) -> None:
        self._client.close()


def _bare_for(client: Any, urls: dict[str, str], backend: str, key: str) -> _Bare:
    return _Bare(backend, urls[client.replicas_for(key)[0]])


@pytest.mark.parametrize("backend", ["redis", "memcached"])
def test_values_written_raw_are_read_byte_for_byte_by_bare_clients_not_as_envelopes(
    make_client: Callable[..., Any], urls: dict[str, str], backend: str
) -> None:
    client = make_client(serializer="raw")
    client.set_many(VALUES)
    for key, value in VALUES.items():
        bare = _bare_for(client, urls, backend, key)
        assert bare.get(key) == _stored(value)
        bare.close()
    assert client.get_many(list(VALUES)) == {k: _stored(v) for k, v in VALUES.items()}


@pytest.mark.parametrize("backend", ["redis", "memcached"])
def test_values_written_by_bare_clients_are_read_by_a_raw_client_as_bytes(
    make_client: Callable[..., Any], urls: dict[str, str], backend: str
) -> None:
    client = make_client(serializer="raw")
    for key, value in VALUES.items():
        bare = _bare_for(client, urls, backend, key)
        bare.set(key, _stored(value))
        bare.close()
        assert client.get(key) == _stored(value)


@pytest.mark.parametrize("backend", ["redis", "memcached"])
def test_counters_work_on_a_raw_client_and_bare_clients_see_the_digits(
    make_client: Callable[..., Any], urls: dict[str, str], backend: str
) -> None:
    client = make_client(serializer="raw")
    client.set("raw:count", 5)
    assert client.incr("raw:count", 3) == 8
    assert client.decr("raw:count") == 7
    bare = _bare_for(client, urls, backend, "raw:count")
    assert bare.get("raw:count") == b"7"
    bare.close()
    assert client.get("raw:count") == b"7"


def test_a_raw_client_returns_bytes_for_a_str_it_stored(make_client: Callable[..., Any]) -> None:
    client = make_client(serializer="raw")
    client.set("raw:str", "café")
    assert client.get("raw:str") == "café".encode()


@pytest.mark.parametrize("value", [1.5, {"seat": "12A"}, True, None, 1 << 64])
def test_a_raw_client_refuses_values_it_cannot_store_as_is_naming_the_type(
    new: Callable[..., Any], value: object
) -> None:
    urls = memory_urls()
    client = new(HashRing(list(urls)), urls, serializer="raw")
    with pytest.raises(TypeError, match=f"with serializer='raw', got {type(value).__name__};"):
        client.set("raw:bad", value)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"replicas": 2}, "replicas must be 1 with serializer='raw', got 2"),
        ({"read": "all"}, "read must be 'first' with serializer='raw', got 'all'"),
        ({"hot_keys": HotKeys()}, "hot_keys must be None with serializer='raw'"),
    ],
)
def test_a_raw_client_refuses_options_that_need_versions(
    new: Callable[..., Any], options: dict[str, Any], named: str
) -> None:
    urls = memory_urls()
    with pytest.raises(ConfigError, match=rf"{named}.*no version.*serializer='json'"):
        new(HashRing(list(urls)), urls, serializer="raw", **options)


def test_a_raw_client_refuses_online_rebalancing(new: Callable[..., Any]) -> None:
    urls = memory_urls(4)
    spare = urls.pop("s4")
    client = new(HashRing(list(urls)), urls, serializer="raw")
    with pytest.raises(UnsupportedError, match=r"add_server .*serializer='raw'.*no version"):
        client.add_server("s4", spare)
    with pytest.raises(UnsupportedError, match=r"remove_server .*serializer='raw'.*offline"):
        client.remove_server("s1")
    assert client.view.placement.nodes == HashRing(list(urls)).nodes
