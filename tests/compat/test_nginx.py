"""nginx's layout without a proxy: the chained points, the address split, down servers, config."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest

from ringkit.compat import NginxServer, nginx, nginx_from_config
from ringkit.compat.nginx import nginx_host_port, nginx_points
from ringkit.errors import ConfigError


def _chained(host: bytes, port: bytes, count: int) -> list[int]:
    """Cache::Memcached::Fast's points, written out: crc32(HOST \\0 PORT PREV_HASH)."""
    points, previous = [], 0
    for _ in range(count):
        previous = zlib.crc32(host + b"\0" + port + struct.pack("<I", previous))
        points.append(previous)
    return points


@pytest.mark.parametrize(
    ("address", "host", "port"),
    [
        ("10.0.0.1:8080", b"10.0.0.1", b"8080"),
        ("backend.local", b"backend.local", b""),  # no default port
        ("[::1]:80", b"[::1]", b"80"),
        ("unix:/run/app.sock", b"/run/app.sock", b""),
        ("UNIX:/run/app.sock", b"/run/app.sock", b""),
        ("host:", b"host", b""),  # the last ':' followed only by digits (none)
        ("a:b:99", b"a:b", b"99"),
    ],
)
def test_the_address_splits_as_written(address: str, host: bytes, port: bytes) -> None:
    assert nginx_host_port(address) == (host, port)
    assert nginx_points(address, 2) == _chained(host, port, 320)


def test_a_key_goes_to_the_first_point_at_or_after_its_crc32_wrapping() -> None:
    servers = [NginxServer("127.0.0.1:81"), NginxServer("127.0.0.1:82", weight=3)]
    layout = nginx(servers)
    owners = {p: s.address for s in servers for p in nginx_points(s.address, s.weight)}
    points = sorted(owners)
    assert layout.points.tolist() == points and len(points) == 640
    for key in ("user:1", "user:2", "x" * 50, ""):
        h = zlib.crc32(key.encode())
        after = [p for p in points if p >= h]
        assert layout.node_for(key) == owners[after[0] if after else points[0]]
    assert layout.node_for_point(points[-1] + 1) == owners[points[0]]  # past the last: wrap


def test_duplicate_points_keep_the_first_server_line() -> None:
    # The same host and port written twice would give identical points: refused as nginx
    # upstreams are read here (one node per address).
    with pytest.raises(ConfigError, match="unique"):
        nginx(["10.0.0.1:80", "10.0.0.1:80"])


def test_a_down_server_keeps_its_points_and_keys_walk_to_the_next() -> None:
    up = ["10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80"]
    layout = nginx([NginxServer(up[0]), NginxServer(up[1], down=True), NginxServer(up[2])])
    assert list(layout) == [up[0], up[2]]
    everything = nginx(up)
    keys = [f"k{i}" for i in range(3_000)]
    for before, after in zip(
        everything.node_for_many(keys), layout.node_for_many(keys), strict=True
    ):
        if before != up[1]:
            assert after == before  # only the down server's keys go elsewhere


def test_too_many_down_points_in_a_row_are_refused() -> None:
    servers = [NginxServer(f"10.0.0.{i}:80", down=i > 1) for i in range(1, 40)]
    with pytest.raises(ConfigError, match=r"consecutive points .* down servers"):
        nginx(servers)
    with pytest.raises(ConfigError, match=r"every server .* is down"):
        nginx([NginxServer("10.0.0.1:80", down=True)])


def test_bad_servers_are_refused_with_the_value() -> None:
    with pytest.raises(
        ConfigError, match=r"weight of server '10\.0\.0\.1:80' must be an int >= 1, got 0"
    ):
        NginxServer("10.0.0.1:80", weight=0)
    with pytest.raises(ConfigError, match="at least one"):
        nginx([])


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "nginx.conf"
    path.write_text(text)
    return path


def test_config_reads_the_upstream_at_any_depth(tmp_path: Path) -> None:
    text = """
    # a comment { with braces }
    http {
        upstream other { server 10.9.9.9:80; }
        upstream pool {
            zone pool 64k;
            hash "$http_x_user" consistent;   # the key
            server 10.0.0.1:80 weight=2 max_fails=3 fail_timeout=10s;
            server 10.0.0.2:80 down;
            server unix:/run/app.sock;
            keepalive 16;
        }
    }
    """
    layout = nginx_from_config(_write(tmp_path, text), upstream="pool")
    assert list(layout) == ["10.0.0.1:80", "unix:/run/app.sock"]
    assert [node.weight for node in layout.nodes] == [2, 1]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("hash $uri;", ":3: 'hash' without 'consistent'"),
        ("hash $uri consistent;\n server 1.1.1.1 backup;", ":4: 'backup' is not allowed"),
        ("hash $uri consistent;\n least_conn;", ":4: cannot read 'least_conn'"),
        ("hash $uri consistent;\n server 1.1.1.1 slow=1;", ":4: cannot read server parameter"),
        ("hash $uri consistent;\n server a.example resolve;", ":4: server 'resolve'"),
        ("server 1.1.1.1;", ":2: upstream 'pool' has no 'hash KEY consistent'"),
        ("hash $uri consistent;\n server 1.1.1.1", ":4: directive 'server' has no ';'"),
    ],
)
def test_unmodelled_constructs_are_refused_with_file_and_line(
    tmp_path: Path, body: str, message: str
) -> None:
    path = _write(tmp_path, "\nupstream pool {\n " + body + "\n}\n")
    with pytest.raises(ConfigError, match=message) as raised:
        nginx_from_config(path, upstream="pool")
    assert str(path) in str(raised.value)
    with pytest.raises(ConfigError, match="no upstream named 'nope'"):
        nginx_from_config(_write(tmp_path, "upstream x { hash $a consistent; }"), upstream="nope")
