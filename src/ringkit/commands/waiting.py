"""Waiting in a command's main thread so that Ctrl-C stops it within a fraction of a second.

Python runs a signal's handler in the main thread only, between bytecodes. Linux hands a
SIGINT sent to the process to its main thread, but may hand it to another when the main one
already has a signal pending (or when it is sent to that thread). A main thread blocked on a
lock without a timeout (a queue's ``get``, an event's ``wait``) is not woken when another
thread took the signal, so the KeyboardInterrupt waits for whatever the main thread waits
for: forever, on a ring where nothing changes (a SIGINT sent to one of ``ringkit ring
watch``'s other threads hung it every time). So commands wait in slices.
"""

from __future__ import annotations

import queue
import time
from typing import TypeVar

__all__ = ["SLICE_S", "next_item", "pause"]

#: The longest a command's main thread waits without looking for a signal.
SLICE_S = 0.2

T = TypeVar("T")


def next_item(items: queue.Queue[T], deadline: float | None) -> T | None:
    """Return the next item of `items`; None once `deadline` (``time.monotonic``) has passed."""
    while True:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return None
        try:
            return items.get(timeout=SLICE_S if left is None else min(left, SLICE_S))
        except queue.Empty:
            continue


def pause(seconds: float | None) -> None:
    """Wait `seconds` (None: until interrupted)."""
    deadline = None if seconds is None else time.monotonic() + seconds
    while True:
        left = SLICE_S if deadline is None else min(SLICE_S, deadline - time.monotonic())
        if left <= 0:
            return
        time.sleep(left)
