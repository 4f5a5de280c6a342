"""Terminal output shared by the commands: bars, progress, plots.

The library reports progress through callbacks and draws nothing; the commands draw them here.
:class:`Ticker` draws a ``(done, total)`` callback (simulate, sweep, advise, compare) only on a
terminal and only once a job has run for a second, so short runs and piped or captured output
stay clean. :class:`TransferBar` draws a rebalance's ``(title, keys, planned, bytes)`` callback.
Plots need matplotlib (the ``plot`` extra); without it ``--plot`` fails with a one-line install
hint.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from collections.abc import Collection
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any

from rich import box
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    Task,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

from ringkit.errors import ConfigError

__all__ = [
    "PLOT_HINT",
    "Ticker",
    "TransferBar",
    "bar",
    "bar_cells",
    "console",
    "fit",
    "percent",
    "pyplot",
    "save_figure",
    "unicode_stdout",
]

PLOT_HINT = "--plot needs matplotlib; install it with: pip install 'ringkit[plot]'"
_PLOT_SUFFIXES = (".png", ".svg")
_BAR_FAIR = 10  # characters for a fair share; the bar is twice that wide
_WIDE = 100  # narrower consoles get compact tables and half-length bars


def console() -> Console:
    """Return a console on the current stdout (tests swap stdout; read it each time).

    A terminal's own width; piped output 120 columns (rich's default is 80), unless
    ``COLUMNS`` says otherwise. Every table fits 80 columns without cutting a name.
    """
    width = None if sys.stdout.isatty() else _columns(120)
    # Node, zone and scenario names are the user's: ``[/]`` read as rich markup was a crash
    # (MarkupError), ``[b]`` a style and ``:cat:`` an emoji. Nothing ringkit prints is markup.
    return Console(file=sys.stdout, highlight=False, width=width, markup=False, emoji=False)


def _columns(default: int) -> int:
    text = os.environ.get("COLUMNS", "")
    return int(text) if text.isdigit() and int(text) > 0 else default


def fit(table: Table, width: int, *, names: Collection[str] = ()) -> Table:
    """Return `table` made to fit `width` columns without cutting the columns `names`.

    Below 100 columns the table drops its edge and vertical rules (a space between columns),
    which saves three characters a column; no header word is cut, and the columns whose headers
    are in `names` (node and strategy names) keep their longest cell whole, so rich wraps the
    others.
    """
    # Before this, tables 95-120 wide cut names to "cache…" on an 80-column terminal
    if width < _WIDE:
        table.box = box.SIMPLE_HEAD
        table.show_edge = False
        table.pad_edge = False
        table.collapse_padding = True
    for column in table.columns:
        # A header may wrap between words, never inside one ("reque…").
        column.min_width = max((len(word) for word in str(column.header).split()), default=0)
        if column.header in names:
            longest = max((len(str(cell)) for cell in column.cells), default=0)
            column.min_width = max(column.min_width, longest)
            column.no_wrap = True
    return table


def bar_cells(width: int) -> int:
    """Return the cells of a fair share in a bar for a console `width` (half below 100).

    >>> bar_cells(120), bar_cells(80)
    (10, 5)
    """
    return _BAR_FAIR if width >= _WIDE else _BAR_FAIR // 2


def bar(ratio: float, *, fair: int = _BAR_FAIR) -> str:
    """Return a bar for load / fair share `ratio`; ``┆`` marks the fair share when short of it.

    A fair share is `fair` cells; the bar is at most twice that, then ``▶``.

    >>> bar(0.5)
    '█████    ┆'
    >>> bar(2.5)
    '████████████████████▶'
    """
    block, mark, more = "█┆▶" if unicode_stdout() else "#|>"
    cells = round(ratio * fair)
    if cells > 2 * fair:
        return block * (2 * fair) + more
    if cells >= fair:
        return block * cells
    return block * cells + " " * (fair - cells - 1) + mark


def unicode_stdout() -> bool:
    """Return whether stdout can show the bars' block characters (not ``PYTHONIOENCODING=ascii``).

    A stream with no encoding (``io.StringIO``, captured output) takes any character.
    """
    encoding = getattr(sys.stdout, "encoding", None)
    if not encoding:
        return True
    try:
        "█┆▶".encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


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
                TextColumn("{task.description}", markup=False),
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


class _Rate(TextColumn):
    """Keys per second and megabytes moved so far."""

    def __init__(self) -> None:
        super().__init__("")

    def render(self, task: Task) -> Text:
        moved_mb = task.fields.get("moved_bytes", 0) / 1e6
        return Text(f"{task.speed or 0.0:,.0f} keys/s  {moved_mb:.1f} MB")


class TransferBar:
    """A rebalance progress callback ``(title, keys, planned, bytes)`` drawn as a bar on stderr.

    Each new title (a rebalance step: the copy of one epoch) starts a new line; the bars stay on
    screen when done. Use it as a context manager around the rebalance.
    """

    def __init__(self) -> None:
        self._progress = Progress(
            TextColumn("{task.description}", style="bold", markup=False),  # server names
            BarColumn(),
            MofNCompleteColumn(),
            _Rate(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
        )
        self._tasks: dict[str, TaskID] = {}

    def __call__(self, title: str, keys: int, planned: int, size_bytes: int) -> None:
        task = self._tasks.get(title)
        if task is None:
            task = self._tasks[title] = self._progress.add_task(title, total=max(planned, 1))
        self._progress.update(task, completed=keys, total=max(planned, 1), moved_bytes=size_bytes)

    def __enter__(self) -> TransferBar:
        self._progress.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
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
