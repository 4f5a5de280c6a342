"""Store URLs: every accepted form, and each malformed one refused with the value named."""

from __future__ import annotations

import time

import pytest

import ringkit.live
from ringkit.errors import BackendError, ConfigError
from ringkit.live import parse_store_url


def test_several_hosts_credentials_and_tls() -> None:
    url = parse_store_url("etcds://u%40x:p%3Aw@h1:1,h2/a/b")
    assert url.tls and url.user == "u@x" and url.password == "p:w"
    assert url.endpoints == (("h1", 1), ("h2", 2379)) and url.prefix == "/a/b/"


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("redis://h:1/x", "scheme must be one of"),
        ("etcd:///x", "needs at least one HOST:PORT"),
        ("etcd://h:0/x", "port in"),
        ("etcd://h:abc/x", "port in"),
        ("etcd://user@h:1/x", "credentials must be user:password"),
        ("memory://", "memory:// needs a NAME"),
        ("memory://a/b", "memory:// needs a NAME"),
        ("h:2379", "scheme must be one of"),
    ],
)
def test_malformed_urls_are_refused(url: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        ringkit.live.connect(url)


def test_a_password_is_never_echoed() -> None:
    with pytest.raises(ConfigError) as raised:
        parse_store_url("etcd://user:hunter2@h:0/x")
    assert "hunter2" not in str(raised.value)


def test_unreachable_etcd_is_a_backend_error_naming_the_host_in_bounded_time() -> None:
    started = time.monotonic()
    with pytest.raises(BackendError, match=r"etcd at 127\.0\.0\.1:9 is unreachable"):
        ringkit.live.connect("etcd://127.0.0.1:9/x")
    assert time.monotonic() - started < 10


def test_tls_files_are_query_parameters_of_etcds() -> None:
    url = parse_store_url("etcds://h:1/p?ca=/c/ca.pem&cert=/c/me.pem&key=/c/me.key")
    assert (url.ca_file, url.cert_file, url.key_file) == ("/c/ca.pem", "/c/me.pem", "/c/me.key")
    assert url.prefix == "/p/"


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("etcd://h:1/p?ca=/ca.pem", "only with etcds://"),
        ("etcds://h:1/p?cacert=/ca.pem", "must be one of ca, cert, key \\('cacert'\\)"),
        ("etcds://h:1/p?ca=", "'ca' needs one file path"),
        ("etcds://h:1/p?cert=/me.pem", "cert= and key= together"),
    ],
)
def test_bad_tls_parameters_are_refused(url: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        parse_store_url(url)
