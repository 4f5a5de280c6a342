"""``ringkit lb haproxy`` and ``ringkit lb nginx``: one pass with --once, and bad input."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

import ringkit.live
from ringkit.cli import main
from tests.lb.proxies import haproxy, name_servers

pytestmark = pytest.mark.timeout(60)
_names = itertools.count()


@pytest.fixture
def store_url() -> Iterator[str]:
    url = f"memory://cli-lb-{next(_names)}"
    with ringkit.live.connect(url) as members:
        members.join("a", data={"address": "127.0.0.1:9"}, weight=2)
        members.join("b", data={"note": "no address"})
        yield url


def test_haproxy_once_prints_the_commands_and_the_servers(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with name_servers(["a"]), haproxy() as proxy:
        args = ["lb", "haproxy", "--store", store_url, "--socket", str(proxy.socket)]
        assert main([*args, "--backend", "be", "--once"]) == 0
        assert capsys.readouterr().out.splitlines() == [
            "add server be/a 127.0.0.1:9 id 1 weight 2",
            "enable server be/a",
            "backend be: a=id 1",
        ]
        assert main([*args, "--backend", "be", "--once"]) == 0
        assert capsys.readouterr().out.splitlines() == ["backend be: a=id 1"]


def test_a_socket_that_is_not_there_exits_1_naming_it(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.sock"
    status = main(
        ["lb", "haproxy", "--store", store_url, "--socket", str(missing), "--backend", "be"]
    )
    assert status == 1
    assert f"HAProxy admin socket {missing} must answer" in capsys.readouterr().err


def test_a_weight_out_of_range_exits_1_naming_the_member_unless_scaled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"memory://cli-lb-{next(_names)}"
    upstream = tmp_path / "upstream.conf"
    with ringkit.live.connect(url) as members:
        members.join("a", data={"address": "127.0.0.1:9"}, weight=0.25)
        args = ["lb", "nginx", "--store", url, "--upstream-file", str(upstream)]
        assert main([*args, "--reload-command", "true", "--once"]) == 1
        assert "member 'a' weight must be an integer in >= 1" in capsys.readouterr().err
        assert main([*args, "--reload-command", "true", "--weight-scale", "4", "--once"]) == 0
        assert capsys.readouterr().out == "reloaded: a=127.0.0.1:9\n"
        assert "server 127.0.0.1:9 weight=1;" in upstream.read_text()


def test_a_failing_reload_command_exits_1_with_its_words(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    upstream = tmp_path / "upstream.conf"
    command = ["--reload-command", "sh -c 'echo no nginx >&2; exit 3'", "--once"]
    assert (
        main(["lb", "nginx", "--store", store_url, "--upstream-file", str(upstream), *command]) == 1
    )
    assert "must exit 0, got 3: no nginx" in capsys.readouterr().err


@pytest.mark.parametrize("flag", [["--weight-scale", "0"], ["--drain-timeout-s", "-1"]])
def test_bad_numbers_are_usage_errors(flag: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["lb", "haproxy", "--store", "memory://x", "--socket", "s", "--backend", "b", *flag])
    assert exit_info.value.code == 2


def test_haproxy_follows_until_the_timeout_and_logs_what_it_did(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with haproxy() as proxy:
        args = ["lb", "haproxy", "--store", store_url, "--socket", str(proxy.socket)]
        assert main([*args, "--backend", "be", "--timeout-s", "0.5"]) == 0
        err = capsys.readouterr().err
        assert f"following {store_url}" in err
        assert "backend be: add server be/a 127.0.0.1:9 id 1 weight 2 (member a joined)" in err
        assert "not proxying member 'b' must have data" in err
