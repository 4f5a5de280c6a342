"""A command's main thread waits in slices, so a Ctrl-C taken by another thread still stops it."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ringkit.commands.waiting import SLICE_S, next_item, pause
from tests.commands.interrupting import INTERRUPTIBLE


def test_next_item_returns_what_comes_and_none_after_the_deadline() -> None:
    items: queue.Queue[int] = queue.Queue()
    items.put(7)
    assert next_item(items, None) == 7
    started = time.monotonic()
    assert next_item(items, time.monotonic() + 2.5 * SLICE_S) is None  # several slices
    assert time.monotonic() - started >= 2.5 * SLICE_S
    assert next_item(items, time.monotonic() - 1) is None  # already past


def test_pause_waits_its_time() -> None:
    started = time.monotonic()
    pause(1.5 * SLICE_S)
    assert time.monotonic() - started >= 1.5 * SLICE_S
    pause(0)


PAUSE_UNTIL_INTERRUPTED = (
    INTERRUPTIBLE
    + """
import threading, time
from ringkit.commands.waiting import pause

def interrupt():
    time.sleep(0.5)
    signal.pthread_kill(threading.get_ident(), signal.SIGINT)  # to this thread, not the main one

threading.Thread(target=interrupt, daemon=True).start()
try:
    pause(None)
except KeyboardInterrupt:
    print("stopped")
"""
)


@pytest.mark.timeout(120)
def test_a_pause_without_end_stops_on_a_signal_another_thread_took() -> None:
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", PAUSE_UNTIL_INTERRUPTED],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(root / "src")},
        timeout=60,
        check=False,
    )
    assert done.stdout == "stopped\n", done.stderr
