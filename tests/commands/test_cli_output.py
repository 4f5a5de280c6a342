"""Terminal helpers of the commands: bars, the delayed progress bar, the transfer bar."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ringkit.cli import main
from ringkit.commands.output import Ticker, TransferBar, bar, percent

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"


def test_bar_marks_the_fair_share() -> None:
    assert bar(1.0) == "█" * 10
    assert bar(0.0) == " " * 9 + "┆"
    assert bar(0.5).endswith("┆")
    assert bar(3.0).endswith("▶")
    assert percent(0.123) == "12.3%"


def test_ticker_shows_progress_on_a_terminal_after_the_delay(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stream = io.StringIO()
    monkeypatch.setattr(stream, "isatty", lambda: True)
    monkeypatch.setattr(sys, "stderr", stream)
    with Ticker("simulating", delay_s=0.0) as ticker:
        ticker(5, 10)
        ticker(10, 10)
    assert "simulating" in stream.getvalue()


def test_ticker_stays_quiet_off_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    with Ticker("simulating", delay_s=0.0) as ticker:
        ticker(10, 10)
    assert stream.getvalue() == ""


def test_transfer_bar_draws_the_rebalance_callback_on_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with TransferBar() as draw:
        draw("epoch 2: 3 transfers", 0, 40, 0)
        draw("epoch 2: 3 transfers", 40, 40, 4_000_000)
    captured = capsys.readouterr()
    assert "epoch 2: 3 transfers" in captured.err and "40/40" in captured.err
    assert "4.0 MB" in captured.err and captured.out == ""


def _ringkit(*args: str, **env: str) -> subprocess.Popen[bytes]:
    """Start ``python -m ringkit`` in a subprocess with stdout and stderr piped."""
    environ = {**os.environ, "PYTHONPATH": str(SRC), **env}
    command = [sys.executable, "-m", "ringkit", *args]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environ)


def test_json_into_a_closed_pipe_exits_quietly_without_broken_pipe_traceback() -> None:
    """Regression: ``ringkit lookup k --json | head -1`` ended in a BrokenPipeError."""
    # Closing the read end before the child writes is ``head -1`` without the race: the
    # child's first write always meets a closed pipe, however small its output.
    process = _ringkit("lookup", "k", "--json")
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    err = process.stderr.read().decode()
    assert process.wait(timeout=60) == 1
    assert "Traceback" not in err and "BrokenPipeError" not in err
    assert err == ""


def test_simulate_on_an_ascii_only_stdout_prints_ascii_bars_not_unicode_error() -> None:
    """Regression: with ``PYTHONIOENCODING=ascii`` simulate crashed on UnicodeError."""
    scenario = str(ROOT / "examples" / "gatepass.toml")
    out, err = _ringkit("simulate", scenario, PYTHONIOENCODING="ascii").communicate(timeout=120)
    assert err.decode() == ""
    text = out.decode("ascii")  # every byte is ASCII
    assert "#####" in text and "x fair" in text


_NARROW_COMMANDS = {
    "simulate": (["simulate"], ["A", "B", "C", "D"]),
    "simulate-hot-keys": (["simulate", "hot-keys"], ["cache-a", "cache-g"]),
    "plan": (
        ["plan", "--nodes", "cache-east-1,cache-east-2,cache-east-3", "--add", "cache-east-4"],
        ["cache-east-1", "cache-east-4"],
    ),
    "compare": (
        ["compare", "--keys", "2000", "--repeats", "1"],
        ["allocated", "multiprobe", "rendezvous"],
    ),
    "sweep": (["sweep", "--draws", "20"], ["1/sqrt(V)"]),
    "advise": (["advise", "--draws", "20"], ["partitions"]),
    "lookup": (["lookup", "k", "--nodes", "cache-east-1,cache-east-2", "--replicas", "2"], []),
}


@pytest.mark.parametrize("command", sorted(_NARROW_COMMANDS))
def test_tables_fit_80_columns_without_cutting_names(
    command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: tables were 95-120 wide, and names were cut to ``cache…`` at 80."""
    argv, names = _NARROW_COMMANDS[command]
    monkeypatch.setenv("COLUMNS", "80")
    assert main(argv) == 0
    out = capsys.readouterr().out
    too_wide = [line for line in out.splitlines() if len(line) > 80]
    assert too_wide == []
    assert "…" not in out  # nothing cut short, header or cell
    for name in names:
        assert name in out
