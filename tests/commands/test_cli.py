"""The ringkit command, called in-process: output, JSON and exit codes."""

from __future__ import annotations

import importlib.util
import json
import socket

import pytest

from ringkit import HashRing, Modulo
from ringkit.cli import HASHER_WARNINGS, main
from tests.servers import unavailable


def test_lookup_prints_point_token_and_owner(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lookup", "booking:42", "--nodes", "a,b,c", "--replicas", "3"]) == 0
    out = capsys.readouterr().out
    ring = HashRing(["a", "b", "c"])
    assert f"owner    {ring.node_for('booking:42')}" in out
    assert f"replicas {', '.join(ring.nodes_for('booking:42', 3))}" in out
    assert f"point    {ring.point_for('booking:42'):#018x}" in out


def test_lookup_json_matches_the_library(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["lookup", "booking-0001", "--nodes", "A,B,C", "--vnodes", "8", "--hasher",
            "fnv1a_32_mix", "--replicas", "2", "--json"]  # fmt: skip
    assert main(args) == 0
    report = json.loads(capsys.readouterr().out)
    ring = HashRing(["A", "B", "C"], vnodes=8, hasher="fnv1a_32_mix")
    assert report["hash"] == "0xf93f2e70"
    assert report["point"] == ring.point_for("booking-0001")
    assert report["owner"] == ring.node_for("booking-0001")
    assert report["preference_list"] == ring.nodes_for("booking-0001", 2)
    assert report["token"] >= report["point"] or report["wrapped"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["lookup", "k", "--nodes", "a,,b"], "expected comma-separated node names, got 'a,,b'"),
        (["lookup", "k", "--vnodes", "0"], "must be >= 1, got 0"),
        (["lookup", "k", "--hasher", "xxh64"], "invalid choice: 'xxh64'"),
        (["lookup", "k", "--replicas", "x"], "expected an integer, got 'x'"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
    ],
)
def test_usage_errors_exit_2_naming_the_value(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_library_errors_exit_1_without_a_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lookup", "k", "--nodes", "a,a"]) == 1
    err = capsys.readouterr().err
    assert err.strip() == "ringkit: error: node 'a' is given twice; node names must be unique"


def test_no_command_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "usage: ringkit" in capsys.readouterr().out


def test_lookup_json_renders_the_rings_trace(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["lookup", "booking-0042", "--nodes", "A,B,C,D", "--vnodes", "8", "--replicas", "3"]
    assert main([*args, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    trace = HashRing(["A", "B", "C", "D"], vnodes=8).trace("booking-0042", 3)
    assert (report["hash"], report["point"]) == (trace.hash_hex, trace.point)
    assert (report["token"], report["token_index"]) == (trace.token, trace.token_index)
    assert (report["owner"], report["wrapped"]) == (trace.owner, trace.wrapped)
    assert report["preference_list"] == list(trace.preference_list)
    assert report["walk"] == [
        {
            "token": step.token,
            "node": step.node,
            "first": step.first,
            "rank": step.rank,
            "held_back": step.held_back,
            "wrapped": step.wrapped,
        }
        for step in trace.steps
    ]


def test_lookup_with_another_strategy_asks_that_placement(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["lookup", "booking-0042", "--strategy", "modulo", "--replicas", "2"]) == 0
    out = capsys.readouterr().out
    modulo = Modulo(["A", "B", "C"])
    assert f"owner    {modulo.node_for('booking-0042')}" in out
    assert f"replicas {', '.join(modulo.nodes_for('booking-0042', 2))}" in out


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--strategy", "modulo", "--vnodes", "8"], "vnodes"),
        (["--strategy", "ranges", "--hasher", "sha1"], "hasher"),
    ],
)
def test_an_option_the_strategy_does_not_use_is_refused(
    args: list[str], option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["lookup", "k", *args]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ringkit: error: ") and option in err
    assert len(err.strip().splitlines()) == 1


def test_placement_options_are_refused_in_a_compatibility_mode(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["lookup", "k", "--mode", "libketama", "--servers", "a:1 1", "--vnodes", "8"]
    assert main(args) == 1
    assert "--vnodes is for --mode ring" in capsys.readouterr().err


def test_vnodes_help_shows_the_librarys_default(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["lookup", "--help"])
    assert "(default: 160)" in " ".join(capsys.readouterr().out.split())


def test_serve_on_a_busy_port_fails_before_printing_its_url(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Regression: a busy port printed the URL, then uvicorn's [Errno 98], exit 3."""
    if importlib.util.find_spec("uvicorn") is None:
        unavailable("ringkit serve needs uvicorn (the web extra)")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["serve", "--port", str(port)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"ringkit: error: port {port} on 127.0.0.1 is in use; choose another with --port\n"
    )


def test_plain_fnv1a_32_prints_a_warning_line(capsys: pytest.CaptureFixture[str]) -> None:
    """Regression: fnv1a_32 gave four nodes 44.7/18.3/24.9/12.1% with no warning."""
    shares = HashRing(["A", "B", "C", "D"], vnodes=160, hasher="fnv1a_32").shares()
    assert max(shares.values()) > 0.4  # the clustering the warning is about
    assert main(["lookup", "k", "--nodes", "A,B,C,D", "--hasher", "fnv1a_32"]) == 0
    err = capsys.readouterr().err
    assert err == f"ringkit: warning: {HASHER_WARNINGS['fnv1a_32']}\n"
    assert "use fnv1a_32_mix or xxh3_64" in err
    assert main(["lookup", "k", "--nodes", "A,B,C,D", "--hasher", "fnv1a_32_mix"]) == 0
    assert capsys.readouterr().err == ""
