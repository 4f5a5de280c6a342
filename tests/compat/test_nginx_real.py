"""nginx's ``hash $http_x_key consistent`` against a real nginx: every owner, and what moves.

A real ``nginx`` (Debian's nginx-light) proxies to small backends that answer with their own
name; 10,000 requests with distinct ``X-Key`` headers must each reach the server
``nginx_from_config`` names for the same file. Then the upstream changes (a server added, one
removed, a weight changed; nginx reloaded with the new file) and the requests that changed
backend must be exactly the keys ``ringkit plan`` listed.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from ringkit.cli import main
from ringkit.compat import nginx, nginx_from_config
from ringkit.compat.nginx_config import read_nginx_upstream
from tests.proxies import ConfigFor, Proxy, backends, proxy, route
from tests.servers import free_port

NAMES = ("n1", "n2", "n3", "n4", "n5")
KEYS = [f"user-{i}-{random.Random(i).getrandbits(40):x}" for i in range(9_900)] + [
    f"ключ-{i}-é" for i in range(100)
]
# A pool change is checked on half of them: two passes of requests per change.
CHANGE_KEYS = KEYS[::2]


@pytest.fixture(scope="module")
def ports() -> Iterator[dict[str, int]]:
    with backends(NAMES) as found:
        yield found


def _config(servers: Sequence[str], ports: dict[str, int]) -> ConfigFor:
    """An nginx http block: upstream ``pool`` over ``NAME [params]`` lines, one proxy server."""
    lines = []
    for line in servers:
        name, *params = line.split()
        lines.append(f"    server 127.0.0.1:{ports[name]} {' '.join(params)};".replace(" ;", ";"))
    upstream = "\n".join(["  upstream pool {", "    hash $http_x_key consistent;", *lines, "  }"])

    def text(port: int, admin: Path) -> str:
        return (
            f"{upstream}\n  server {{\n    listen 127.0.0.1:{port};\n"
            "    location / {\n      proxy_pass http://pool;\n"
            '      proxy_http_version 1.1;\n      proxy_set_header Connection "";\n    }\n  }'
        )

    return text


def _names(addresses: list[str], ports: dict[str, int]) -> list[str]:
    by_address = {f"127.0.0.1:{port}": name for name, port in ports.items()}
    return [by_address[address] for address in addresses]


CASES = {
    "equal": ["n1", "n2", "n3", "n4"],
    "unequal": ["n1 weight=3", "n2", "n3 weight=2 max_fails=3", "n4 weight=5"],
    # n2 keeps its points; keys landing on them walk on to the next points
    "down": ["n1", "n2 down", "n3 weight=2", "n4"],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_owner_is_ringkits(case: str, ports: dict[str, int]) -> None:
    with proxy("nginx", _config(CASES[case], ports)) as running:
        answered = route(running.port, KEYS)
        layout = nginx_from_config(running.config, upstream="pool")
    predicted = _names(layout.node_for_many(KEYS), ports)
    assert sum(a == p for a, p in zip(answered, predicted, strict=True)) == len(KEYS)
    assert _names([layout.node_for(key) for key in KEYS[:2_000]], ports) == predicted[:2_000]


BASE = ["n1 weight=2", "n2", "n3", "n4 weight=3"]
CHANGES: dict[str, tuple[list[str], Callable[[list[str]], list[str]]]] = {
    "add": (["--add", "127.0.0.1:{n5},weight=2"], lambda servers: [*servers, "n5 weight=2"]),
    "remove": (["--remove", "127.0.0.1:{n2}"], lambda servers: [s for s in servers if s != "n2"]),
    "weight": (
        ["--weight", "127.0.0.1:{n4}=1"],
        lambda servers: [s if s != "n4 weight=3" else "n4" for s in servers],
    ),
}


def _plan(
    running: Proxy, arguments: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> dict[str, tuple[str, str]]:
    keys_file = tmp_path / "keys.txt"
    keys_file.write_text("".join(f"{key}\n" for key in CHANGE_KEYS))
    config = ["--config", str(running.config), "--upstream", "pool"]
    status = main(
        ["plan", "--mode", "nginx", *config, *arguments, "--keys-file", str(keys_file), "--json"]
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
    with proxy("nginx", _config(BASE, ports)) as running:
        before = route(running.port, CHANGE_KEYS)
        predicted = _plan(running, arguments, tmp_path, capsys)
        running.reload(_config(edit(BASE), ports))
        after = route(running.port, CHANGE_KEYS)
    moved = {key: (b, a) for key, b, a in zip(CHANGE_KEYS, before, after, strict=True) if b != a}
    named = {key: tuple(_names(list(pair), ports)) for key, pair in predicted.items()}
    assert moved == named
    assert moved


def test_a_server_that_refuses_connections_is_walked_past_like_a_down_one(
    ports: dict[str, int],
) -> None:
    """nginx retries a failed peer on the next points' server: the layout with it ``down``."""
    closed = {**ports, "dead": free_port()}  # nothing listens there
    servers = ["n1", "dead", "n2 weight=2", "n3"]
    with proxy("nginx", _config(servers, closed)) as running:
        answered = route(running.port, KEYS[:3_000])
        upstream = read_nginx_upstream(running.config, upstream="pool")
    dead = f"127.0.0.1:{closed['dead']}"
    walked = nginx([replace(e.server, down=e.server.address == dead) for e in upstream.servers])
    assert answered == _names(walked.node_for_many(KEYS[:3_000]), ports)


def test_an_empty_key_is_round_robin(ports: dict[str, int]) -> None:
    with proxy("nginx", _config(["n1", "n2", "n3"], ports)) as running:
        answered = route(running.port, [None] * 30)
    assert set(answered) == {"n1", "n2", "n3"}  # round robin, not one hashed server


def test_a_single_server_takes_every_key(ports: dict[str, int]) -> None:
    with proxy("nginx", _config(["n3"], ports)) as running:
        answered = route(running.port, KEYS[:200])
        layout = nginx_from_config(running.config, upstream="pool")
    assert set(answered) == {"n3"} == set(_names(layout.node_for_many(KEYS[:200]), ports))
