"""HAProxy's layout without a proxy: hashes, ids, the nearer-point rule, the config reader."""

from __future__ import annotations

import itertools
import socket
import threading
from bisect import bisect_left
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ringkit.compat import HAProxyServer, haproxy, haproxy_from_config
from ringkit.compat.haproxy import assign_ids, server_points
from ringkit.compat.haproxy_config import read_haproxy_backend
from ringkit.compat.haproxy_hash import (
    crc32,
    djb2,
    full_hash,
    hash_many_haproxy,
    sdbm,
    source,
    wt6,
)
from ringkit.compat.haproxy_state import parse_servers_state, read_servers_state
from ringkit.errors import BackendError, ConfigError, DuplicateNodeError
from ringkit.lb import HAProxyRuntime
from tests.hypothesis_profiles import examples


def test_hashes_equal_haproxys_hash_c() -> None:
    # Pinned from HAProxy 2.6's src/hash.c and intops.h compiled from source.
    data = b"user:42"
    assert (sdbm(data), djb2(data), wt6(data), crc32(data)) == (
        0x789CB0ED,
        0x45C1CDA4,
        0x2E68DC4F,
        0x646F0D86,
    )
    assert full_hash(4096) == 0x49C2008B
    assert sdbm(b"") == 0 and djb2(b"") == 5381 and crc32(b"") == 0


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.binary(max_size=40), min_size=1, max_size=30), st.booleans())
def test_vectorised_hashes_equal_the_scalar_ones(keys: list[bytes], avalanche: bool) -> None:
    for name, function in (("sdbm", sdbm), ("djb2", djb2), ("wt6", wt6), ("crc32", crc32)):
        expected = [full_hash(function(k)) if avalanche else function(k) for k in keys]
        assert hash_many_haproxy(keys, name, avalanche=avalanche).tolist() == expected


def test_automatic_ids_skip_explicit_ones_as_haproxy_numbers_them() -> None:
    servers = [
        HAProxyServer("a", id=2),
        HAProxyServer("b"),
        HAProxyServer("c"),
        HAProxyServer("d", id=4),
        HAProxyServer("e"),
    ]
    # The counter passes every server, numbered or not: a (2) leaves it at 2, so b takes 3
    # (2 is used), c takes 5 (4 is used), d (4) leaves it at 7, e takes 7. Id 1 stays free.
    assert assign_ids(servers) == (2, 3, 5, 4, 7)
    with pytest.raises(ConfigError, match="servers 'a' and 'b' both have id 2"):
        assign_ids([HAProxyServer("a", id=2), HAProxyServer("b", id=2)])


def _chash_get_server_hash(points: list[tuple[int, str]], h: int) -> str:
    """HAProxy's lookup, literally: next >= h (or first), prev before it; nearer, ties prev."""
    values = [p for p, _ in points]
    index = bisect_left(values, h)
    nxt = index if index < len(points) else 0
    prev = nxt - 1 if nxt > 0 else len(points) - 1
    dp = (h - points[prev][0]) % 2**32
    dn = (points[nxt][0] - h) % 2**32
    return points[prev][1] if dp <= dn else points[nxt][1]


@settings(max_examples=examples(40), deadline=None)
@given(
    st.lists(st.integers(1, 300), min_size=1, max_size=5, unique=True),
    st.lists(st.integers(1, 4), min_size=5, max_size=5),
    st.lists(st.integers(0, 2**32 - 1), min_size=20, max_size=20),
)
def test_the_owner_is_the_nearer_point_ties_to_the_previous(
    ids: list[int], weights: list[int], hashes: list[int]
) -> None:
    servers = [HAProxyServer(f"s{i}", id=i, weight=w) for i, w in zip(ids, weights, strict=False)]
    layout = haproxy(servers, hash_function="crc32")
    points = sorted(
        ((p, s.name) for s in servers for p in server_points(s.id or 0, s.weight)),
        key=lambda item: item[0],
    )
    # the key hashes, every point, and every midpoint and its neighbours (the tie edges)
    values = [p for p, _ in points]
    edges = [(a + b) // 2 + d for a, b in itertools.pairwise(values) for d in (0, 1)]
    probes = [h for h in hashes + values + edges if 0 <= h < 2**32]
    owners = layout.owner_indices_for_hashes(np.array(probes, dtype=np.uint64))
    names = [layout.nodes[i].name for i in owners.tolist()]
    assert names == [_chash_get_server_hash(points, h) for h in probes]
    assert [layout.node_for_point(h) for h in probes] == names


def test_a_server_has_16_points_per_weight_unit_at_full_hash_of_id_4096_j() -> None:
    layout = haproxy([HAProxyServer("a", id=3, weight=2)])
    assert sorted(layout.server_points.tolist()) == sorted(
        full_hash(3 * 4096 + j) for j in range(32)
    )


def test_defaults_follow_hash_type() -> None:
    assert haproxy(["a"]).hash_function == "sdbm" and haproxy(["a"]).avalanche
    assert not haproxy(["a"], hash_function="sdbm").avalanche
    assert haproxy(["a"], hash_function="djb2", avalanche=True).avalanche


def test_bad_servers_are_refused_with_the_value() -> None:
    with pytest.raises(
        ConfigError, match="weight of server 'a' must be an int in \\[1, 256\\], got 0"
    ):
        HAProxyServer("a", weight=0)
    with pytest.raises(ConfigError, match="id of server 'a' must be an int"):
        HAProxyServer("a", id=0)
    with pytest.raises(ConfigError, match="unknown haproxy hash function 'md5'"):
        haproxy(["a"], hash_function="md5")
    with pytest.raises(ConfigError, match="unique"):
        haproxy(["a", "a"])
    with pytest.raises(ConfigError, match="at least one"):
        haproxy([])


def test_membership_changes_keep_explicit_ids_and_renumber_automatic_ones() -> None:
    layout = haproxy([HAProxyServer("a"), HAProxyServer("b"), HAProxyServer("c", id=9)])
    assert layout.ids == {"a": 1, "b": 2, "c": 9}
    assert layout.remove("a").ids == {"b": 1, "c": 9}  # as a reload of the edited file
    assert layout.add(HAProxyServer("d", id=40, weight=3)).ids["d"] == 40
    assert layout.reweight("c", 4).ids["c"] == 9
    with pytest.raises(DuplicateNodeError):
        layout.add(HAProxyServer("a"))


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "haproxy.cfg"
    path.write_text(text)
    return path


BACKEND = """
defaults
    mode http
    hash-type consistent crc32
    default-server weight 2
backend web
    balance hdr(X-User)
    server a 10.0.0.1:80 check inter 2s
    server b 10.0.0.2:80 disabled
    server c 10.0.0.3:80 weight 5 id 8
    server d 10.0.0.4:80 backup
    server-template t 2 app.example:80
"""


def test_config_reads_defaults_ids_disabled_backup_and_templates(tmp_path: Path) -> None:
    backend = read_haproxy_backend(_write(tmp_path, BACKEND), backend="web")
    assert backend.ids() == {"a": 1, "b": 2, "c": 8, "d": 4, "t1": 5, "t2": 6}
    layout = backend.layout()
    assert list(layout) == ["a", "c", "t1", "t2"]
    assert [node.weight for node in layout.nodes] == [2, 5, 2, 2]
    assert (layout.hash_function, layout.avalanche) == ("crc32", False)
    # with no active server up, HAProxy sends everything to the first backup
    assert list(backend.layout(down=["a", "c", "t1", "t2"])) == ["d"]


def test_hdr_hashes_the_first_comma_separated_value(tmp_path: Path) -> None:
    layout = haproxy_from_config(_write(tmp_path, BACKEND), backend="web")
    assert layout.point_for("  team-7 , extra") == crc32(b"team-7")
    assert layout.node_for_many(["team-7, x"]) == [layout.node_for("team-7")]


@pytest.mark.parametrize(
    ("options", "uri", "hashed"),
    [
        ("", "/a/b/c?x=1", b"/a/b/c"),
        ("whole", "/a/b?x=1", b"/a/b?x=1"),
        ("depth 2", "/a/b/c/d", b"/a/b"),
        ("len 4", "/abcdef", b"/abc"),
        ("path-only", "http://host:80/p/q?x", b"/p/q"),
    ],
)
def test_uri_hashes_the_part_haproxy_hashes(
    tmp_path: Path, options: str, uri: str, hashed: bytes
) -> None:
    text = (
        f"backend u\n  balance uri {options}\n  hash-type consistent sdbm\n  server a 1.1.1.1:80\n"
    )
    layout = haproxy_from_config(_write(tmp_path, text), backend="u")
    assert layout.point_for(uri) == sdbm(hashed)


def test_source_hashes_the_client_address(tmp_path: Path) -> None:
    text = "backend s\n  balance source\n  hash-type consistent\n  server a 1.1.1.1:80\n"
    layout = haproxy_from_config(_write(tmp_path, text), backend="s")
    assert layout.point_for("10.1.2.3") == full_hash(0x0A010203)
    assert source(b"::1") == 1
    with pytest.raises(ConfigError, match="client IP address"):
        layout.point_for("not-an-ip")


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (
            "balance hdr(X)\n  hash-type consistent\n  hash-balance-factor 150",
            ":4: hash-balance-factor",
        ),
        ("balance random\n  hash-type consistent", ":2: balance random is not a hash"),
        ("balance roundrobin", ":2: balance roundrobin is not a hash"),
        ("balance hdr(X)", ":2: balance hdr\\(X\\) without 'hash-type consistent'"),
        ("balance hdr(X)\n  hash-type map-based", ":2: balance hdr\\(X\\) without"),
        ("balance hdr(X)\n  hash-type consistent md5", ":3: unknown hash function 'md5'"),
        (
            "balance hdr(X)\n  hash-type consistent\n  server a 1:1 slowstart 10s",
            ":4: server keyword 'slowstart'",
        ),
        (
            "balance hdr(X)\n  hash-type consistent\n  server a 1:1 frobnicate",
            ":4: cannot read server keyword 'frobnicate'",
        ),
        ("balance hdr(X)\n  hash-type consistent\n  use-server a if TRUE", ":4: use-server"),
        ("balance uri depth x\n  hash-type consistent", ":2: balance uri depth needs an integer"),
        (
            "balance hdr(X)\n  hash-type consistent\n  server a 1:1 id 3\n  server b 1:2 id 3",
            "both have id 3",
        ),
    ],
)
def test_unmodelled_constructs_are_refused_with_file_and_line(
    tmp_path: Path, lines: str, message: str
) -> None:
    path = _write(tmp_path, f"backend b\n  {lines}\n")
    with pytest.raises(ConfigError, match=message) as raised:
        haproxy_from_config(path, backend="b")
    assert str(path) in str(raised.value)


def test_a_missing_backend_or_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no backend or listen section named 'nope'"):
        haproxy_from_config(_write(tmp_path, BACKEND), backend="nope")
    with pytest.raises(ConfigError, match=r"cannot read .*missing\.cfg"):
        haproxy_from_config(tmp_path / "missing.cfg", backend="web")


def test_runtime_state_marks_down_maint_and_drain_servers_unusable() -> None:
    text = (
        "1\n# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight "
        "srv_iweight\n"
        "3 web 1 up 10.0.0.1 2 0 1 1\n3 web 2 down 10.0.0.2 0 0 1 1\n"
        "3 web 3 maint 10.0.0.3 2 1 1 1\n3 web 4 drain 10.0.0.4 2 8 1 1\n"
        "3 web 5 zero 10.0.0.5 2 0 0 1\n4 other 1 x 10.0.0.9 2 0 1 1\n"
    )
    state = parse_servers_state(text, "web")
    assert [(s.name, s.usable) for s in state] == [
        ("up", True),
        ("down", False),
        ("maint", False),
        ("drain", False),
        ("zero", False),
    ]
    with pytest.raises(ConfigError, match="no servers for backend 'nope'"):
        parse_servers_state(text, "nope")


# HAProxy 2.6's ``show servers state be`` header (format 1), cut after the columns ringkit reads.
_STATE_HEADER = (
    "1\n# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight "
    "srv_iweight srv_time_since_last_change srv_check_status srv_check_result "
    "srv_check_health srv_check_state srv_agent_state bk_f_forced_id srv_f_forced_id "
    "srv_fqdn srv_port\n"
)


def test_runtime_state_reads_address_port_forced_id_and_an_empty_backend() -> None:
    text = _STATE_HEADER + (
        "3 be 7 b ::1 2 8 3 3 5 6 3 4 6 0 0 1 - 8081\n"
        "3 be 2 a 10.0.0.1 2 0 1 1 5 6 3 4 6 0 0 0 - 80\n"
    )
    a, b = parse_servers_state(text, "be")
    assert (a.name, a.id, a.host, a.port, a.address, a.forced_id) == (
        "a",
        2,
        "10.0.0.1",
        80,
        "10.0.0.1:80",
        False,
    )
    assert (b.address, b.forced_id, b.weight, b.draining, b.serving, b.usable) == (
        "[::1]:8081",
        True,
        3,
        True,
        False,
        False,
    )
    # A backend without servers answers the header alone: a controller starts from there.
    assert parse_servers_state(_STATE_HEADER, "be") == []


def _answering(path: Path, answer: str) -> threading.Thread:
    """Serve `answer` to each of two connections on the UNIX socket `path` (HAProxy's way)."""
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen(2)

    def serve() -> None:
        with listener:
            for _ in range(2):
                connection, _ = listener.accept()
                with connection:
                    connection.recv(4096)
                    connection.sendall(answer.encode())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


def test_the_load_balancer_and_the_layout_read_the_same_servers(tmp_path: Path) -> None:
    # ringkit.lb drives the pool and ringkit.compat predicts its layout from one reading.
    path = tmp_path / "admin.sock"
    thread = _answering(path, _STATE_HEADER + "3 be 1 a 10.0.0.1 2 0 1 1 5 6 3 4 6 0 0 1 - 80\n")
    compat_reading = read_servers_state(str(path), "be", timeout_s=10)
    lb_reading = HAProxyRuntime(str(path), timeout_s=10).servers("be")
    thread.join(10)
    assert lb_reading == compat_reading and [s.address for s in lb_reading] == ["10.0.0.1:80"]


def test_an_unknown_backend_is_a_backend_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "admin.sock"
    thread = _answering(path, "Can't find backend.\n")
    with pytest.raises(BackendError, match="has no backend 'nope'"):
        read_servers_state(str(path), "nope", timeout_s=10)
    with pytest.raises(BackendError, match="has no backend 'nope'"):
        HAProxyRuntime(str(path), timeout_s=10).servers("nope")
    thread.join(10)
