"""``ringkit compare``: every strategy on the same keys and the same change.

Balance (busiest node × fair share), the fraction of keys the change moves against the least
possible 1/(N+1), lookup speed (one key at a time and in a batch), memory and build time, for
every strategy the registry knows at run time.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from rich.table import Table
from rich.text import Text

from ringkit.commands.common import (
    print_json,
)
from ringkit.commands.output import Ticker, console, fit, percent, pyplot, save_figure
from ringkit.commands.parsers.names import docs_page
from ringkit.sim.compare import Comparison, compare
from ringkit.strategies.registry import StrategyOptions

__all__ = ["run"]

_BUSIEST_CLIP = 3.0  # × fair: the busiest panel's top, above which bars are cut and labelled


# (flag, type, default, help): the valued options, added in one loop.
def _cell(value: float | int | None, spec: str) -> str:
    return "–" if value is None else format(value, spec)


def _table(args: argparse.Namespace, rows: list[Comparison]) -> Table:
    change = "add a node" if args.change == "add" else "remove a node"
    table = Table(
        title=f"{args.keys:,} keys on {args.nodes} nodes, then {change} "
        f"(least possible move {percent(rows[0].optimum)})",
        title_justify="left",
    )
    for column in (
        "strategy",
        "busiest × fair",
        "after",
        "moved",
        "lookup ns/key",
        "batch ns/key",
        "memory bytes",
        "build ms",
    ):
        table.add_column(column, justify="left" if column == "strategy" else "right")
    for row in rows:
        if row.error is not None:
            table.add_row(row.strategy, Text(row.error, style="red"))
            continue
        table.add_row(
            row.strategy,
            _cell(row.busiest_ratio, ".3f"),
            _cell(row.busiest_after, ".3f"),
            percent(row.moved),
            _cell(row.lookup_ns, ",.0f"),
            _cell(row.batch_ns, ",.0f"),
            _cell(row.memory_bytes, ","),
            _cell(row.build_ms, ",.2f"),
        )
    return table


def _plot(args: argparse.Namespace, rows: list[Comparison]) -> None:
    plt = pyplot(args.plot)
    ok = [row for row in rows if row.error is None]
    names = [row.strategy for row in ok]
    figure, axes = plt.subplots(1, 4, figsize=(14, 3.6))
    panels: list[tuple[str, list[Any], float | None]] = [
        ("busiest × fair share", [row.busiest_ratio for row in ok], 1.0),
        ("moved fraction", [row.moved for row in ok], rows[0].optimum),
        ("lookup ns/key (one at a time)", [row.lookup_ns for row in ok], None),
        ("memory (bytes)", [row.memory_bytes for row in ok], None),
    ]
    for ax, (title, values, line) in zip(axes, panels, strict=True):
        ax.bar(range(len(names)), values)
        if line is not None:
            ax.axhline(line, color="black", linestyle="--", linewidth=0.8)
        if title.startswith("busiest"):
            _clip(ax, values, _BUSIEST_CLIP)
        ax.set_title(title, fontsize=9)
        # Before this, labels rotated about their centres overlapped their neighbours
        ax.set_xticks(range(len(names)), names, rotation=45, ha="right", fontsize=8)
    save_figure(plt, figure, args.plot)


def _clip(ax: Any, values: list[float | None], top: float) -> None:
    """Cut the axis at `top` and write the value over each bar it cuts."""
    # Before this, the range placement's 10x busiest squashed every other bar to the floor
    if max((v for v in values if v is not None), default=0.0) <= top:
        return
    ax.set_ylim(0, top)
    for x, value in enumerate(values):
        if value is not None and value > top:
            # Black on a white box: white text on the bar lost every character wider than the
            # bar to the white background, and "10.0×" read "0.0".
            ax.text(
                x,
                top * 0.97,
                f"{value:.1f}×",
                ha="center",
                va="top",
                fontsize=7,
                color="black",
                bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none"},
            )


def _notes(rows: list[Comparison]) -> list[str]:
    """Explain figures that look like errors (the range placement's busiest node)."""
    notes = []
    for row in rows:
        if row.strategy == "ranges" and row.error is None and (row.busiest_ratio or 0) > 2:
            notes.append(
                f"ranges: busiest {row.busiest_ratio:.1f}× fair is not a fault: range "
                "partitions place keys by their order, not a hash, and every key here shares "
                "the prefix 'key-', so one default range holds them all; split_hot() splits it "
                f"({docs_page('strategies.md')})"
            )
    return notes


def run(args: argparse.Namespace) -> int:
    """Compare the strategies and print a table or JSON."""
    if args.plot:
        pyplot(args.plot)
    strategies = args.strategies
    with Ticker("comparing") as ticker:
        rows = compare(
            nodes=args.nodes,
            keys=args.keys,
            change=args.change,
            options=StrategyOptions(vnodes=args.vnodes, hasher=args.hasher),
            strategies=strategies,
            repeats=args.repeats,
            seed=args.seed,
            progress=ticker,
        )
    if args.plot:
        _plot(args, rows)
    if args.json:
        print_json(
            {
                "nodes": args.nodes,
                "keys": args.keys,
                "change": args.change,
                "rows": [asdict(row) for row in rows],
            }
        )
        return 0
    out = console()
    out.print(fit(_table(args, rows), out.width, names=("strategy",)))
    for note in _notes(rows):
        out.print(f"  {note}", soft_wrap=out.width >= 100)
    if args.plot:
        out.print(f"plot written to {args.plot}")
    return 0
