"""Terminal helpers of the commands: bars, the delayed progress bar, the transfer bar."""

from __future__ import annotations

import io
import sys

import pytest

from ringkit.commands.output import Ticker, TransferBar, bar, percent


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
