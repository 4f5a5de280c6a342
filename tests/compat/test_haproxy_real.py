"""HAProxy's consistent hashing against a real HAProxy: every owner, and exactly what moves.

A real ``haproxy`` (Debian's) listens on loopback in front of small backends that answer with
their own name; 10,000 requests with distinct ``X-Key`` headers go through it, and every answer
must be the server ``haproxy_from_config`` names for the same file. Then the pool changes (a
server added, one removed, a weight changed; HAProxy reloaded with the new file) and the
requests that changed backend must be exactly the keys ``ringkit plan`` listed.
"""

from __future__ import annotations

import json
import random
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from ringkit.cli import main
from ringkit.compat import haproxy_from_config
from ringkit.compat.haproxy_config import read_haproxy_backend
from ringkit.compat.haproxy_state import read_servers_state
from tests.proxies import ConfigFor, Proxy, backends, proxy, route
from tests.servers import free_port

NAMES = ("s1", "s2", "s3", "s4", "s5")


def _keys(count: int) -> list[str]:
    rng = random.Random(24)
    keys = [f"user-{i}-{rng.getrandbits(40):x}" for i in range(count - 150)]
    # UTF-8 bytes >= 0x80, and header values HAProxy cuts: it hashes the first of
    # comma-separated values, without the spaces around it.
    keys += [f"ключ-{i}-é" for i in range(100)]
    return keys + [f"team-{i}, extra-{i}" for i in range(50)]


KEYS = _keys(10_000)
# A pool change is checked on half of them: two passes of requests per change.
CHANGE_KEYS = KEYS[::2]


@pytest.fixture(scope="module")
def ports() -> Iterator[dict[str, int]]:
    with backends(NAMES) as found:
        yield found


def _config(
    servers: Sequence[str], hash_type: str, ports: dict[str, int], balance: str = "hdr(X-Key)"
) -> ConfigFor:
    """HAProxy's file: backend ``be`` hashing ``X-Key``; each server line ``NAME [params]``."""
    lines = []
    for line in servers:
        name, *params = line.split()
        lines.append(f"    server {name} 127.0.0.1:{ports[name]} {' '.join(params)}".rstrip())

    def text(port: int, admin: Path) -> str:
        return (
            f"global\n    stats socket {admin} mode 600 level admin\n"
            "defaults\n    mode http\n    timeout connect 5s\n    timeout client 30s\n"
            "    timeout server 30s\n"
            f"frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\n"
            f"backend be\n    balance {balance}\n    hash-type {hash_type}\n"
            + "\n".join(lines)
            + "\n"
        )

    return text


CASES = {
    # consistent with no function: sdbm and the avalanche modifier; automatic ids 1-4
    "sdbm-avalanche-equal-automatic": ("consistent", ["s1", "s2", "s3", "s4"]),
    # explicit ids mixed with automatic ones around a disabled server, which still takes an id
    "crc32-unequal-explicit": (
        "consistent crc32",
        ["s1 weight 3", "s2 id 7", "s5 disabled", "s3 weight 2", "s4 id 3 weight 5"],
    ),
    "djb2-avalanche-unequal": (
        "consistent djb2 avalanche",
        ["s1 weight 10", "s2 weight 25", "s3 weight 1", "s4 weight 7"],
    ),
    "wt6-equal-explicit": ("consistent wt6", ["s1 id 11", "s2 id 12", "s3 id 13"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_owner_is_ringkits(case: str, ports: dict[str, int]) -> None:
    hash_type, servers = CASES[case]
    with proxy("haproxy", _config(servers, hash_type, ports)) as running:
        answered = route(running.port, KEYS)
        layout = haproxy_from_config(running.config, backend="be")
    predicted = layout.node_for_many(KEYS)
    assert sum(a == p for a, p in zip(answered, predicted, strict=True)) == len(KEYS)
    # The scalar path answers the same as the vectorised one.
    assert [layout.node_for(key) for key in KEYS[:2_000]] == predicted[:2_000]


BASE = ["s1 weight 2", "s2", "s3 id 9", "s4 weight 3"]
CHANGES: dict[str, tuple[list[str], Callable[[list[str], dict[str, int]], list[str]]]] = {
    "add": (
        ["--add", "s5=127.0.0.1:{s5},weight=2"],
        lambda servers, ports: [*servers, "s5 weight 2"],
    ),
    # s2 has no id: removing it renumbers s4 (4 -> 3), which moves s4's keys too
    "remove-renumbers": (
        ["--remove", "s2"],
        lambda servers, ports: [s for s in servers if s != "s2"],
    ),
    "weight": (
        ["--weight", "s4=1"],
        lambda servers, ports: [s if s != "s4 weight 3" else "s4 weight 1" for s in servers],
    ),
}


def _plan(
    running: Proxy, arguments: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> dict[str, tuple[str, str]]:
    keys_file = tmp_path / "keys.txt"
    keys_file.write_text("".join(f"{key}\n" for key in CHANGE_KEYS))
    status = main(
        [
            "plan",
            "--mode",
            "haproxy",
            "--config",
            str(running.config),
            "--backend",
            "be",
            *arguments,
            "--keys-file",
            str(keys_file),
            "--json",
        ]
    )
    assert status == 0
    report = json.loads(capsys.readouterr().out)
    return {row["key"]: (row["from"], row["to"]) for row in report["moved_keys"]}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_plan_predicts_exactly_the_requests_that_move(
    change: str, ports: dict[str, int], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    arguments, edit = CHANGES[change]
    arguments = [argument.format(**ports) for argument in arguments]
    hash_type = "consistent crc32"
    with proxy("haproxy", _config(BASE, hash_type, ports)) as running:
        before = route(running.port, CHANGE_KEYS)
        predicted = _plan(running, arguments, tmp_path, capsys)
        running.reload(_config(edit(BASE, ports), hash_type, ports))
        after = route(running.port, CHANGE_KEYS)
    moved = {key: (b, a) for key, b, a in zip(CHANGE_KEYS, before, after, strict=True) if b != a}
    assert moved == predicted
    assert moved  # the change moved something, so the equality says something


@pytest.mark.parametrize(
    ("balance", "request_for"),
    [
        # HAProxy hashes the path up to its 2nd-level directory, the query left out
        ("uri depth 2", lambda key: f"/api/{key}/profile?session={len(key)}"),
        ("uri whole", lambda key: f"/items/{key}?page=2"),
        # the key is the parameter's value
        ("url_param uid", lambda key: f"/search?q=x&uid={key}"),
    ],
)
def test_uri_and_url_param_keys_are_cut_as_haproxy_cuts_them(
    balance: str, request_for: Callable[[str], str], ports: dict[str, int]
) -> None:
    keys = [f"user-{i}" for i in range(3_000)]
    requests = [request_for(key) for key in keys]
    servers = ["s1", "s2 weight 2", "s3"]
    with proxy("haproxy", _config(servers, "consistent", ports, balance)) as running:
        answered = route(running.port, requests, header=None)
        layout = haproxy_from_config(running.config, backend="be")
    wanted = keys if balance.startswith("url_param") else requests
    assert answered == layout.node_for_many(wanted)


def test_runtime_state_drives_the_layout(ports: dict[str, int]) -> None:
    """A server put in maintenance leaves the tree; the socket's view predicts the routing."""
    servers = ["s1", "s2 id 5", "s3 weight 2", "s4"]
    with proxy("haproxy", _config(servers, "consistent", ports)) as running:
        _admin(running.socket, "set server be/s2 state maint")
        state = read_servers_state(str(running.socket), "be")
        backend = read_haproxy_backend(running.config, backend="be").with_runtime(state)
        answered = route(running.port, KEYS[:3_000])
        full = haproxy_from_config(running.config, backend="be")
    assert {s.name: (s.id, s.usable) for s in state} == {
        "s1": (1, True),
        "s2": (5, False),
        "s3": (3, True),
        "s4": (4, True),
    }
    layout = backend.layout()
    assert "s2" not in layout
    assert answered == layout.node_for_many(KEYS[:3_000])
    # The same as removing the server's points from the file's layout (ids kept).
    assert layout.node_for_many(KEYS[:3_000]) == full.remove("s2").node_for_many(KEYS[:3_000])


def test_a_server_down_by_health_check_leaves_the_tree(ports: dict[str, int]) -> None:
    """A server whose checks fail is DOWN: its points leave, the other keys stay put."""
    closed = {**ports, "dead": free_port()}  # nothing listens there
    servers = ["s1", "dead check inter 100ms fall 1 rise 1", "s2 weight 2", "s3"]
    with proxy("haproxy", _config(servers, "consistent", closed)) as running:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            state = read_servers_state(str(running.socket), "be")
            if not next(s for s in state if s.name == "dead").usable:
                break
            time.sleep(0.1)
        else:
            pytest.fail("HAProxy never marked the closed server DOWN")
        answered = route(running.port, KEYS[:3_000])
        backend = read_haproxy_backend(running.config, backend="be")
    assert answered == backend.layout(down=["dead"]).node_for_many(KEYS[:3_000])
    assert answered == backend.with_runtime(state).layout().node_for_many(KEYS[:3_000])
    full = backend.layout().node_for_many(KEYS[:3_000])
    assert all(a == f for a, f in zip(answered, full, strict=True) if f != "dead")


def test_a_request_without_the_header_is_round_robin(ports: dict[str, int]) -> None:
    servers = ["s1", "s2", "s3", "s4"]
    with proxy("haproxy", _config(servers, "consistent", ports)) as running:
        answered = route(running.port, [None] * 40)
    assert len(set(answered)) > 1  # hashing no key would send all 40 to one server


def _admin(socket_path: Path, command: str) -> str:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(10)
        sock.connect(str(socket_path))
        sock.sendall(command.encode() + b"\n")
        chunks = []
        while chunk := sock.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode()


def test_a_runtime_add_server_moves_what_plan_predicted_from_the_socket(
    ports: dict[str, int], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``plan --socket`` then the runtime API's ``add server`` (explicit id), no reload."""
    keys = KEYS[:4_000]
    keys_file = tmp_path / "keys.txt"
    keys_file.write_text("".join(f"{key}\n" for key in keys))
    servers = ["s1 id 1", "s2 id 2 weight 2", "s3 id 3"]
    with proxy("haproxy", _config(servers, "consistent", ports)) as running:
        before = route(running.port, keys)
        socket_args = ["--socket", str(running.socket), "--backend", "be"]
        add = ["--add", f"s5=127.0.0.1:{ports['s5']},weight=3"]
        assert main(["plan", "--mode", "haproxy", *socket_args, *add]) == 1
        assert "needs id=N with --socket" in capsys.readouterr().err
        add[1] += ",id=40"
        plan = ["plan", "--mode", "haproxy", *socket_args, "--hash-type", "consistent", *add]
        assert main([*plan, "--keys-file", str(keys_file), "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        predicted = {row["key"]: (row["from"], row["to"]) for row in report["moved_keys"]}
        answer = _admin(running.socket, f"add server be/s5 127.0.0.1:{ports['s5']} id 40 weight 3")
        assert "New server registered" in answer, answer
        _admin(running.socket, "enable server be/s5")
        after = route(running.port, keys)
    moved = {key: (b, a) for key, b, a in zip(keys, before, after, strict=True) if b != a}
    assert moved == predicted
    assert {destination for _, destination in moved.values()} == {"s5"}


def test_a_server_added_at_runtime_without_an_id_is_refused_by_name(
    ports: dict[str, int], capsys: pytest.CaptureFixture[str]
) -> None:
    """HAProxy 2.6 reports such a server's id (3 here) but places its points as for id 0."""
    with proxy("haproxy", _config(["s1", "s2"], "consistent", ports)) as running:
        _admin(running.socket, f"add server be/s5 127.0.0.1:{ports['s5']}")
        _admin(running.socket, "enable server be/s5")
        argv = [
            "lookup",
            "k",
            "--mode",
            "haproxy",
            "--config",
            str(running.config),
            "--backend",
            "be",
            "--socket",
            str(running.socket),
        ]
        assert main(argv) == 1
    assert "server 's5' was added at runtime without an id" in capsys.readouterr().err


def test_a_runtime_weight_change_routes_as_the_socket_state_says(ports: dict[str, int]) -> None:
    """``set server ... weight`` adds or drops points j >= 16 × weight; the socket sees it."""
    keys = KEYS[:3_000]
    with proxy("haproxy", _config(["s1", "s2 weight 4", "s3"], "consistent", ports)) as running:
        _admin(running.socket, "set server be/s2 weight 1")
        _admin(running.socket, "set server be/s3 weight 6")
        state = read_servers_state(str(running.socket), "be")
        answered = route(running.port, keys)
        backend = read_haproxy_backend(running.config, backend="be").with_runtime(state)
    assert {s.name: s.weight for s in state} == {"s1": 1, "s2": 1, "s3": 6}
    assert answered == backend.layout().node_for_many(keys)
