"""Terminal output shared by simulate, sweep, advise and compare: bars, progress, plots.

A progress bar appears only on a terminal and only once a job has run for a second, so short
runs and piped or captured output stay clean. Plots need matplotlib (the ``plot`` extra); without
it ``--plot`` fails with a one-line install hint.
"""

from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeRemainingColumn

from ringkit.errors import ConfigError

__all__ = ["PLOT_HINT", "Ticker", "bar", "console", "percent", "pyplot", "save_figure"]

PLOT_HINT = "--plot needs matplotlib; install it with: pip install 'ringkit[plot]'"
_PLOT_SUFFIXES = (".png", ".svg")
_BAR_FAIR = 10  # characters for a fair share; the bar is twice that wide


def console() -> Console:
    """Return a console on the current stdout (tests swap stdout; read it each time)."""
    # Piped output gets 120 columns, not rich's 80, so the tables keep their bars.
    width = None if sys.stdout.isatty() else 120
    return Console(file=sys.stdout, highlight=False, width=width)


def bar(ratio: float) -> str:
    """Return a bar for load / fair share `ratio`; ``┆`` marks the fair share when short of it.

    >>> bar(0.5)
    '█████    ┆'
    >>> bar(2.5)
    '████████████████████▶'
    """
    cells = round(ratio * _BAR_FAIR)
    if cells > 2 * _BAR_FAIR:
        return "█" * (2 * _BAR_FAIR) + "▶"
    if cells >= _BAR_FAIR:
        return "█" * cells
    return "█" * cells + " " * (_BAR_FAIR - cells - 1) + "┆"


def percent(fraction: float | None) -> str:
    """Return a fraction as a percentage with one decimal (``–`` for None).

    >>> percent(0.25), percent(None)
    ('25.0%', '–')
    """
    return "–" if fraction is None else f"{fraction * 100:.1f}%"


class Ticker:
    """A progress callback ``(done, total)`` that shows a rich bar after one second on a tty."""

    def __init__(self, description: str, *, delay_s: float = 1.0) -> None:
        self._description = description
        self._start = time.perf_counter()
        self._delay_s = delay_s
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._enabled = sys.stderr.isatty()

    def __call__(self, done: int, total: int) -> None:
        if not self._enabled:
            return
        if self._progress is None:
            if time.perf_counter() - self._start < self._delay_s:
                return
            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.completed:,}/{task.total:,}"),
                TimeRemainingColumn(),
                console=Console(file=sys.stderr),
                transient=True,
            )
            self._progress.start()
            self._task = self._progress.add_task(self._description, total=total)
        assert self._task is not None
        self._progress.update(self._task, completed=done, total=total)

    def __enter__(self) -> Ticker:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._progress is not None:
            self._progress.stop()


def pyplot(path: str) -> ModuleType:
    """Return ``matplotlib.pyplot`` (Agg backend) after checking the plot file name.

    :raises ConfigError: when `path` is not .png or .svg, or matplotlib is not installed
    """
    if Path(path).suffix.lower() not in _PLOT_SUFFIXES:
        raise ConfigError(f"--plot file must end in .png or .svg, got {path!r}")
    try:
        matplotlib = importlib.import_module("matplotlib")
    except ImportError:
        raise ConfigError(PLOT_HINT) from None
    matplotlib.use("Agg")
    return importlib.import_module("matplotlib.pyplot")


def save_figure(plt: ModuleType, figure: Any, path: str) -> None:
    """Save `figure` to `path` (PNG at 120 dpi, or SVG) and close it.

    :raises ConfigError: when the file cannot be written
    """
    figure.tight_layout()
    try:
        figure.savefig(path, dpi=120)
    except OSError as error:
        raise ConfigError(f"cannot write plot {path!r}: {error.strerror}") from None
    finally:
        plt.close(figure)
