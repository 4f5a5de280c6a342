"""``ringkit sweep``: balance against vnodes for N nodes, measured over seeded rings, with theory.

For each vnode count (1, 2, 4, … 1024 by default) it draws ``--draws`` random rings and reports
the busiest node × fair share (mean, p99, max) and the coefficient of variation of node shares,
beside the theory: CV ≈ 1/sqrt(V), the expected worst share, and H_N/N for one token (the
largest of N arcs cut by N random points).
"""

from __future__ import annotations

import argparse
from dataclasses import asdict

from rich.table import Table

from ringkit.advice import SweepRow, sweep
from ringkit.commands.common import (
    check_draw_size,
    print_json,
)
from ringkit.commands.output import Ticker, console, fit, pyplot, save_figure

__all__ = ["run"]


def _table(args: argparse.Namespace, rows: list[SweepRow]) -> Table:
    replicas = f", {args.replicas} replicas" if args.replicas > 1 else ""
    table = Table(
        title=f"{args.nodes} nodes{replicas}, {args.draws} seeded rings per row: "
        "busiest node × fair share and CV of shares",
        title_justify="left",
    )
    for column in (
        "vnodes",
        "busiest mean",
        "p99",
        "max",
        "worst (theory)",
        "CV",
        "1/sqrt(V)",
        "CV exact",
    ):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(
            f"{row.vnodes:,}",
            f"{row.busiest_mean:.3f}",
            f"{row.busiest_p99:.3f}",
            f"{row.busiest_max:.3f}",
            f"{row.worst_theory:.3f}",
            f"{row.cv:.4f}",
            f"{row.cv_theory:.4f}",
            f"{row.cv_exact:.4f}",
        )
    return table


def _plot(args: argparse.Namespace, rows: list[SweepRow]) -> None:
    plt = pyplot(args.plot)
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    v = [row.vnodes for row in rows]
    left.plot(v, [r.busiest_mean for r in rows], "o-", label="measured mean")
    left.plot(v, [r.busiest_p99 for r in rows], "^--", label="measured p99")
    left.plot(v, [r.worst_theory for r in rows], "k:", label="theory: worst_share × N")
    left.axhline(
        rows[0].largest_theory,
        color="grey",
        linewidth=0.8,
        label=f"H_N for V = 1 ({rows[0].largest_theory:.2f})",
    )
    left.axhline(1.0, color="black", linewidth=0.6)
    left.set(
        xscale="log",
        xlabel="vnodes per node",
        ylabel="busiest node × fair share",
        title=f"{args.nodes} nodes, {args.draws} rings per point",
    )
    left.legend(fontsize=8)
    right.plot(v, [r.cv for r in rows], "o-", label="measured CV of shares")
    right.plot(v, [r.cv_theory for r in rows], "k:", label="1/sqrt(V)")
    right.set(
        xscale="log",
        yscale="log",
        xlabel="vnodes per node",
        ylabel="CV",
        title="spread of node shares",
    )
    right.legend(fontsize=8)
    save_figure(plt, figure, args.plot)


def run(args: argparse.Namespace) -> int:
    """Sweep the vnode counts and print a table or JSON."""
    check_draw_size(args.draws, args.nodes, max(args.vnodes), args.replicas)
    if args.plot:
        pyplot(args.plot)
    with Ticker("sweeping") as ticker:
        rows = sweep(
            args.nodes,
            args.vnodes,
            draws=args.draws,
            seed=args.seed,
            replicas=args.replicas,
            progress=ticker,
        )
    if args.plot:
        _plot(args, rows)
    if args.json:
        print_json(
            {
                "nodes": args.nodes,
                "replicas": args.replicas,
                "draws": args.draws,
                "seed": args.seed,
                "rows": [asdict(row) for row in rows],
            }
        )
        return 0
    out = console()
    out.print(fit(_table(args, rows), out.width))
    out.print(
        f"With one token per node the expected busiest node is H_N = "
        f"{rows[0].largest_theory:.3f} × fair (H_N / N of the circle)."
    )
    if args.plot:
        out.print(f"plot written to {args.plot}")
    return 0
