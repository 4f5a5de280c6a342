"""``ringkit lookup`` and ``ringkit plan`` with ``--mode haproxy|nginx`` (no proxy running)."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

import pytest

from ringkit.cli import main
from ringkit.compat import haproxy_from_config, nginx_from_config
from ringkit.compat.haproxy_state import read_servers_state
from ringkit.errors import BackendError

HAPROXY = """
backend web
    balance hdr(X-User)
    hash-type consistent
    server a 10.0.0.1:80
    server b 10.0.0.2:80 weight 2
    server c 10.0.0.3:80 id 7
"""
NGINX = """
upstream app {
    hash $http_x_user consistent;
    server 10.0.0.1:8080;
    server 10.0.0.2:8080 weight=2;
}
"""


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "haproxy.cfg").write_text(HAPROXY)
    (tmp_path / "app.conf").write_text(NGINX)
    (tmp_path / "keys.txt").write_text("".join(f"user:{i}\n" for i in range(500)))
    return {name: str(tmp_path / name) for name in ("haproxy.cfg", "app.conf", "keys.txt")}


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict[str, object]:
    assert main([*argv, "--json"]) == 0
    result: dict[str, object] = json.loads(capsys.readouterr().out)
    return result


def test_lookup_names_the_owner_the_layout_names(
    files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    config = ["--config", files["haproxy.cfg"], "--backend", "web"]
    report = _json(capsys, ["lookup", "user:42", "--mode", "haproxy", *config])
    assert report["owner"] == haproxy_from_config(files["haproxy.cfg"], backend="web").node_for(
        "user:42"
    )
    assert report["ids"] == {"a": 1, "b": 2, "c": 7}
    assert main(["lookup", "user:42", "--mode", "haproxy", *config]) == 0
    out = capsys.readouterr().out
    assert "the nearer of next" in out and f"owner    {report['owner']}" in out
    config = ["--config", files["app.conf"], "--upstream", "app"]
    report = _json(capsys, ["lookup", "user:42", "--mode", "nginx", *config])
    assert report["owner"] == nginx_from_config(files["app.conf"], upstream="app").node_for(
        "user:42"
    )


def test_plan_lists_the_moved_keys_and_the_renumbering(
    files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    config = ["--config", files["haproxy.cfg"], "--backend", "web"]
    argv = ["plan", "--mode", "haproxy", *config, "--remove", "a", "--keys-file", files["keys.txt"]]
    report = _json(capsys, argv)
    layout = haproxy_from_config(files["haproxy.cfg"], backend="web")
    old = layout.node_for_many([f"user:{i}" for i in range(500)])
    moved = report["moved_keys"]
    assert isinstance(moved, list)
    # b had automatic id 2 and becomes 1: its keys move too, not only a's
    assert {row["from"] for row in moved} == {"a", "b", "c"}
    assert all(old[int(row["key"].split(":")[1])] == row["from"] for row in moved)
    assert any("renumbers servers without an id: b 2->1" in note for note in report["notes"])  # type: ignore[union-attr]
    nginx = ["plan", "--mode", "nginx", "--config", files["app.conf"], "--upstream", "app"]
    report = _json(
        capsys, [*nginx, "--weight", "10.0.0.1:8080=2", "--keys-file", files["keys.txt"]]
    )
    assert {row["to"] for row in report["moved_keys"]} == {"10.0.0.1:8080"}  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["lookup", "k", "--mode", "haproxy", "--config", "X"], "needs --backend NAME"),
        (["lookup", "k", "--mode", "nginx", "--config", "X"], "needs --config FILE and --upstream"),
        (["lookup", "k", "--mode", "nginx", "--backend", "b"], "--backend is for --mode haproxy"),
        (["lookup", "k", "--mode", "haproxy", "--upstream", "u"], "--upstream is for --mode nginx"),
        (["lookup", "k", "--config", "X"], "--config is for --mode haproxy or nginx"),
        (
            ["lookup", "k", "--mode", "haproxy", "--servers", "a", "--backend", "b"],
            "--servers is not",
        ),
        (["plan", "--add", "D", "--weight", "D=2"], "--weight is for --mode haproxy or nginx"),
        (["plan", "--mode", "haproxy", "--backend", "web", "--config", "{cfg}"], "nothing to plan"),
        (
            ["plan", "--mode", "haproxy", "--backend", "web", "--config", "{cfg}", "--add", "x"],
            "--add takes NAME=ADDR",
        ),
        (
            [
                "plan",
                "--mode",
                "haproxy",
                "--backend",
                "web",
                "--config",
                "{cfg}",
                "--remove",
                "zz",
            ],
            "server 'zz' is not in the pool",
        ),
        (
            [
                "plan",
                "--mode",
                "haproxy",
                "--backend",
                "web",
                "--config",
                "{cfg}",
                "--add",
                "a=1:2",
            ],
            "server 'a' is already there",
        ),
        (
            ["plan", "--mode", "nginx", "--upstream", "app", "--config", "{app}", "--add", "a=b"],
            "--add takes ADDR",
        ),
        (
            [
                "lookup",
                "k",
                "--mode",
                "haproxy",
                "--backend",
                "web",
                "--socket",
                "/nonexistent.sock",
            ],
            "HAProxy admin socket /nonexistent.sock must answer 'show servers state web'",
        ),
    ],
)
def test_bad_proxy_arguments_are_one_line_errors(
    argv: list[str], message: str, files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [a.format(cfg=files["haproxy.cfg"], app=files["app.conf"]) for a in argv]
    assert main(argv) == 1
    assert message in capsys.readouterr().err


def test_a_socket_that_never_answers_is_a_bounded_error(tmp_path: Path) -> None:
    path = str(tmp_path / "silent.sock")
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(path)
        server.listen(1)
        accepted: list[socket.socket] = []
        thread = threading.Thread(target=lambda: accepted.append(server.accept()[0]))
        thread.start()
        with pytest.raises(
            BackendError, match=r"silent\.sock must answer 'show servers state web' within 0\.2 s"
        ):
            read_servers_state(path, "web", timeout_s=0.2)
        thread.join(5)
        for connection in accepted:
            connection.close()
