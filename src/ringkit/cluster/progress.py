"""Throttling and progress for a rebalance: a keys-per-second limit and a rich progress bar.

:class:`Throttle` is a token bucket shared by every stream: a stream asks for the keys of its
next page and sleeps until the rate allows them. :class:`Progress` counts keys and bytes and
draws a bar (keys done / planned, bytes, keys/s, ETA) on stderr when asked to.

>>> throttle = Throttle(None)
>>> throttle.take(1_000_000)  # no limit: returns at once
0.0
"""

from __future__ import annotations

import threading
import time
from types import TracebackType
from typing import Any

from ringkit.errors import ConfigError

__all__ = ["Progress", "Throttle"]


class Throttle:
    """A token bucket: at most `keys_per_s` keys per second on average (None: no limit)."""

    def __init__(self, keys_per_s: float | None) -> None:
        if keys_per_s is not None and not keys_per_s > 0:
            raise ConfigError(f"keys_per_s must be > 0 or None, got {keys_per_s!r}")
        self.keys_per_s = keys_per_s
        self._lock = threading.Lock()
        self._next = time.monotonic()

    def take(self, keys: int) -> float:
        """Wait until `keys` more keys may move; return the seconds waited."""
        if self.keys_per_s is None:
            return 0.0
        with self._lock:
            now = time.monotonic()
            start = max(self._next, now)
            self._next = start + keys / self.keys_per_s
        wait = start - now
        if wait > 0:
            time.sleep(wait)
        return max(wait, 0.0)


class Progress:
    """Counters of a rebalance (keys and bytes moved), drawn as a rich bar when `show`."""

    def __init__(self, total_keys: int, *, show: bool, title: str) -> None:
        self.total_keys = total_keys
        self.keys = 0
        self.bytes = 0
        self._lock = threading.Lock()
        self._bar: Any = None
        self._task: Any = None
        if show:
            self._bar, self._task = _make_bar(total_keys, title)

    def advance(self, keys: int, size_bytes: int) -> None:
        """Count `keys` more keys and `size_bytes` more bytes."""
        with self._lock:
            self.keys += keys
            self.bytes += size_bytes
            if self._bar is not None:
                self._bar.update(self._task, advance=keys, moved_bytes=self.bytes)

    def __enter__(self) -> Progress:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._bar is not None:
            self._bar.stop()


def _make_bar(total_keys: int, title: str) -> tuple[Any, Any]:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        TextColumn,
        TimeRemainingColumn,
    )
    from rich.progress import (
        Progress as RichProgress,
    )

    def size(task: Any) -> str:
        return f"{task.fields.get('moved_bytes', 0) / 1e6:.1f} MB"

    class Rate(TextColumn):
        def render(self, task: Any) -> Any:
            from rich.text import Text

            speed = task.speed or 0.0
            return Text(f"{speed:,.0f} keys/s  {size(task)}")

    bar = RichProgress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        Rate(""),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=False,
    )
    task = bar.add_task(title, total=max(total_keys, 1), moved_bytes=0)
    return bar, task
