"""``ringkit compare``: its arguments."""

from __future__ import annotations

from typing import Any

from ringkit.commands.common import positive_int, seed_int, strategy_list, vnodes_per_node
from ringkit.commands.parsers import deferred
from ringkit.commands.parsers.names import (
    CHANGES,
    DEFAULT_HASH,
    DEFAULT_VNODES,
    HASH_NAMES,
    STRATEGY_NAMES,
)

__all__ = ["register"]

_OPTIONS: tuple[tuple[str, Any, Any, str], ...] = (
    ("--nodes", positive_int, 10, "node count (default 10)"),
    ("--keys", positive_int, 100_000, "number of keys (default 100000)"),
    (
        "--vnodes",
        vnodes_per_node,
        None,
        f"vnodes, for strategies that have them; the others refuse it (default {DEFAULT_VNODES})",
    ),
    (
        "--strategies",
        strategy_list,
        list(STRATEGY_NAMES),
        "comma-separated (default: all registered)",
    ),
    ("--repeats", positive_int, 5, "timing repeats; the median is shown (default 5)"),
    ("--seed", seed_int, 0, "seed for the key names (default 0)"),
)


def register(subparsers: Any) -> None:
    """Add the ``compare`` subcommand."""
    parser = subparsers.add_parser(
        "compare",
        help="every strategy on the same keys and change: balance, movement, speed, memory",
        description="Compare every placement strategy on the same keys and the same change.",
    )
    for flag, kind, default, text in _OPTIONS:
        parser.add_argument(flag, type=kind, default=default, help=text)
    parser.add_argument(
        "--change",
        choices=CHANGES,
        default="add",
        help="add a node or remove the last one (default add)",
    )
    parser.add_argument(
        "--hasher",
        choices=HASH_NAMES,
        default=None,
        help=f"hash function (default {DEFAULT_HASH})",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--plot", metavar="FILE", help="draw the comparison (PNG or SVG)")
    parser.set_defaults(run=deferred("ringkit.commands.compare"))
