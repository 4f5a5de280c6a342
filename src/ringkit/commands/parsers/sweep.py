"""``ringkit sweep``: its arguments."""

from __future__ import annotations

from typing import Any

from ringkit.commands.common import positive_int, seed_int, vnode_counts
from ringkit.commands.parsers import deferred
from ringkit.commands.parsers.names import SWEEP_VNODES

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add the ``sweep`` subcommand."""
    parser = subparsers.add_parser(
        "sweep",
        help="balance against vnodes over many seeded rings, beside the theory",
        description="Measure how vnodes even out a ring, over many seeded ring draws.",
    )
    parser.add_argument("--nodes", type=positive_int, default=10, help="node count (default 10)")
    parser.add_argument(
        "--vnodes",
        type=vnode_counts,
        default=list(SWEEP_VNODES),
        help="vnode counts: 1,8,32 or LOW-HIGH powers of two (default 1-1024)",
    )
    parser.add_argument(
        "--draws", type=positive_int, default=200, help="seeded rings per vnode count (default 200)"
    )
    parser.add_argument(
        "--replicas",
        type=positive_int,
        default=1,
        help="count a node's load over R-replica preference lists (default 1)",
    )
    parser.add_argument("--seed", type=seed_int, default=0, help="random seed (default 0)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--plot", metavar="FILE", help="draw busiest × fair and CV (PNG or SVG)")
    parser.set_defaults(run=deferred("ringkit.commands.sweep"))
