"""Bad command-line input is one error line and exit 2 (a usage error) or 1, never a traceback.

Usage errors (a flag's value) exit 2, as argparse does; a refusal by the library or a bad
scenario file exits 1 (``ringkit.cli``). Each input that once ended in a traceback is here, then
a fuzz of the commands' flags with hypothesis.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ringkit.advice import formula_vnodes
from ringkit.cli import main
from ringkit.errors import ConfigError
from ringkit.sim import Population
from ringkit.sim.compare import compare
from tests.hypothesis_profiles import examples

SRC = Path(__file__).resolve().parents[2] / "src"


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        status = main(argv)
    except SystemExit as exit_info:
        status = exit_info.code if isinstance(exit_info.code, int) else 2
    return status, capsys.readouterr().err


def _error_line(err: str) -> str:
    """The one error line of `err` (argparse prints the usage before it)."""
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if "error: " in line]
    assert len(errors) == 1, err
    return errors[0]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["lookup", "\udcff\udcfe"], r"argument b'\xff\xfe' is not UTF-8 text"),
        (["lookup", "k", "--nodes", "a,\udcc3"], r"argument b'a,\xc3' is not UTF-8 text"),
        (["sweep", "--seed", "-3"], "argument --seed: seed must be >= 0, got -3"),
        (["advise", "--seed", "-3"], "argument --seed: seed must be >= 0, got -3"),
        (["plan", "--add", "D", "--seed", "-1"], "argument --seed: seed must be >= 0, got -1"),
        (["simulate", "--seed", "-1"], "argument --seed: seed must be >= 0, got -1"),
        (["compare", "--seed", "-1"], "argument --seed: seed must be >= 0, got -1"),
        (["advise", "--target", "inf"], "argument --target: expected a finite number, got 'inf'"),
        (["advise", "--confidence", "nan"], "expected a finite number, got 'nan'"),
        (["compare", "--strategies", ""], "expected comma-separated strategy names, got ''"),
        (["compare", "--strategies", "ring,,jump"], "got 'ring,,jump'"),
        (["sweep", "--vnodes", "1-99999999999"], "vnodes must be at most 16,777,216"),
        (["plan", "--add", "D", "--keys", "1000000000"], "keys must be at most 4,194,304"),
    ],
)
def test_cli_usage_errors_exit_2_naming_the_value(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Regression: each of these ended in a traceback
    status, err = _run(argv, capsys)
    assert status == 2
    assert message in _error_line(err)


def test_undecodable_argv_bytes_from_the_shell_exit_2() -> None:
    command = [os.fsencode(sys.executable), b"-m", b"ringkit", b"lookup", b"\xff\xfe"]
    environ = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run(command, capture_output=True, env=environ, timeout=60, check=False)
    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode == 2
    assert "argument b'\\xff\\xfe' is not UTF-8 text" in _error_line(err)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("seed = -1\n", "bad.toml: seed must be an integer >= 0; got -1"),
        ("nodes = " + "[" * 2000 + "]" * 2000 + "\n", "nested too deeply"),
        ("nodes = " + "[" * 300 + "]" * 300 + "\n", "got [[[[...]]]]"),
    ],
)
def test_bad_scenario_files_are_one_error_line(
    text: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Regression: TOML seed = -1 and deep nesting ended in tracebacks
    path = tmp_path / "bad.toml"
    path.write_text(text)
    status, err = _run(["simulate", str(path)], capsys)
    assert status == 1
    line = _error_line(err)
    assert line.startswith("ringkit: error: ") and message in line
    assert len(line) < 300


def test_the_library_refuses_what_the_cli_refuses() -> None:
    with pytest.raises(ConfigError, match=r"strategies must name at least one strategy, got \[\]"):
        compare(strategies=[])
    with pytest.raises(ConfigError, match="target must be finite, got inf"):
        formula_vnodes(10, float("inf"))
    with pytest.raises(ConfigError, match="seed must be an int >= 0, got -1"):
        Population(seed=-1)


# -- fuzz: random values for each command's flags -----------------------------------------------

_VALUES = st.one_of(
    st.text(max_size=12),
    st.integers(-3, 12).map(str),
    st.sampled_from(["inf", "-inf", "nan", "1e9", "", " ", ",", "1-4", "0x10", "१", "\udcff"]),
)
_COMMANDS: dict[str, tuple[list[str], list[str]]] = {
    "lookup": (["lookup", "k"], ["--nodes", "--vnodes", "--replicas", "--strategy", "--hasher"]),
    "sweep": (
        ["sweep", "--nodes", "3", "--draws", "2", "--vnodes", "1,2"],
        ["--seed", "--nodes", "--draws", "--vnodes", "--replicas"],
    ),
    "advise": (
        ["advise", "--nodes", "3", "--draws", "5"],
        ["--target", "--confidence", "--seed", "--replicas", "--max-nodes", "--nodes"],
    ),
    "compare": (
        ["compare", "--nodes", "3", "--keys", "50", "--repeats", "1"],
        ["--strategies", "--seed", "--vnodes", "--keys", "--nodes", "--change"],
    ),
    "simulate": (["simulate", "--keys", "50"], ["--seed", "--vnodes", "--keys", "--hasher"]),
    "plan": (
        ["plan", "--add", "D", "--keys", "50"],
        [
            "--nodes",
            "--add",
            "--remove",
            "--strategy",
            "--vnodes",
            "--replicas",
            "--keys",
            "--seed",
            "--value-bytes",
            "--max-streams",
            "--setup-s",
            "--bandwidth",
            "--top",
        ],
    ),
    "compat": (
        ["lookup", "k", "--mode", "libketama", "--servers", "a:1 b:2"],
        ["--mode", "--servers", "--replicas"],
    ),
}


@pytest.mark.parametrize("command", sorted(_COMMANDS))
@settings(
    max_examples=examples(25),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_fuzzed_flags_never_end_in_a_traceback(
    command: str, data: st.DataObject, capsys: pytest.CaptureFixture[str]
) -> None:
    base, flags = _COMMANDS[command]
    chosen = data.draw(st.lists(st.tuples(st.sampled_from(flags), _VALUES), max_size=3))
    argv = [*base, *(part for flag, value in chosen for part in (flag, value))]
    capsys.readouterr()
    status, err = _run([*argv, "--json"], capsys)
    assert status in (0, 1, 2), (argv, err)
    if status:
        _error_line(err)
