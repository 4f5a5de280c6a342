"""``ringkit advise``: its arguments."""

from __future__ import annotations

from typing import Any

from ringkit.commands.common import finite_number, positive_int, seed_int
from ringkit.commands.parsers import deferred

__all__ = ["register"]

_OPTIONS: tuple[tuple[str, Any, Any, str], ...] = (
    ("--nodes", positive_int, 10, "node count (default 10)"),
    ("--replicas", positive_int, 1, "replicas per key (default 1)"),
    ("--target", finite_number, 1.10, "busiest node at most TARGET × fair share (default 1.10)"),
    (
        "--confidence",
        finite_number,
        0.99,
        "share of seeded rings meeting the target (default 0.99)",
    ),
    ("--draws", positive_int, 200, "seeded rings per candidate vnode count (default 200)"),
    ("--max-nodes", positive_int, None, "node count to plan fixed partitions for (default 2N)"),
    ("--zones", positive_int, None, "zones the nodes are spread over: count one zone's failure"),
    ("--seed", seed_int, 0, "random seed (default 0)"),
)


def register(subparsers: Any) -> None:
    """Add the ``advise`` subcommand."""
    parser = subparsers.add_parser(
        "advise",
        help="the vnode count that reaches a target balance, its costs and the alternatives",
        description="Advise a vnode count for N nodes (balance against table size).",
    )
    for flag, kind, default, text in _OPTIONS:
        parser.add_argument(flag, type=kind, default=default, help=text)
    parser.add_argument(
        "--static", action="store_true", help="the node count never changes (a ring is overhead)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(run=deferred("ringkit.commands.advise"))
