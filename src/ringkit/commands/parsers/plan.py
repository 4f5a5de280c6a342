"""``ringkit plan``: its arguments."""

from __future__ import annotations

import argparse
from typing import Any

from ringkit.commands.common import (
    finite_number,
    node_list,
    positive_int,
    seed_int,
    vnodes_per_node,
)
from ringkit.commands.parsers import deferred
from ringkit.commands.parsers.names import (
    DEFAULT_BANDWIDTH_BYTES_PER_S,
    DEFAULT_HASH,
    DEFAULT_MAX_STREAMS,
    DEFAULT_SETUP_S,
    DEFAULT_VNODES,
    HASH_NAMES,
    MAX_SAMPLE_KEYS,
    STRATEGY_NAMES,
)
from ringkit.commands.parsers.proxy import PROXY_MODES, add_proxy_arguments

__all__ = ["register"]


def _sample_size(text: str) -> int:
    value = positive_int(text)
    if value > MAX_SAMPLE_KEYS:
        raise argparse.ArgumentTypeError(
            f"keys must be at most {MAX_SAMPLE_KEYS:,} (a sample), got {value}"
        )
    return value


def register(subparsers: Any) -> None:
    """Add the ``plan`` subcommand."""
    parser = subparsers.add_parser(
        "plan",
        help="show what adding/removing nodes moves, and a migration plan",
        description="Diff a placement before and after a membership change and plan the "
        "transfers (range reads) that rebuild every copy.",
    )
    add = parser.add_argument
    add("--nodes", type=node_list, default=["A", "B", "C"], help="nodes before (default: A,B,C)")
    add(
        "--add",
        action="append",
        default=[],
        help="comma-separated nodes to add; --mode haproxy: NAME=ADDR[,id=N][,weight=W], "
        "nginx: ADDR[,weight=W] (repeat for more servers)",
    )
    add(
        "--remove",
        action="append",
        default=[],
        help="comma-separated nodes to remove (--mode haproxy|nginx: a server, repeatable)",
    )
    add(
        "--weight",
        action="append",
        default=[],
        metavar="NAME=W",
        help="--mode haproxy|nginx: change a server's weight (repeatable)",
    )
    add(
        "--mode",
        choices=PROXY_MODES,
        default=None,
        help="plan a change to an HAProxy backend or nginx upstream read from --config/--socket",
    )
    add_proxy_arguments(parser)
    add(
        "--keys-file",
        metavar="FILE",
        help="the keys to place, one per line (instead of a seeded --keys sample); the keys "
        "that move are listed",
    )
    add("--strategy", choices=STRATEGY_NAMES, default="ring", help="placement (default: ring)")
    add(
        "--vnodes",
        type=vnodes_per_node,
        default=None,
        help=f"vnodes per node, for strategies that have them (default: {DEFAULT_VNODES})",
    )
    add(
        "--hasher",
        choices=HASH_NAMES,
        default=None,
        help=f"hash function (default: {DEFAULT_HASH})",
    )
    add(
        "--replicas",
        type=positive_int,
        default=None,
        help="copies of every key, also given to the strategy (default: 1)",
    )
    add("--keys", type=_sample_size, default=100_000, help="keys in the sample (default: 100000)")
    add("--seed", type=seed_int, default=0, help="seed of the key sample (default: 0)")
    add("--value-bytes", type=positive_int, default=1024, help="bytes per key (default: 1024)")
    add(
        "--max-streams",
        type=positive_int,
        default=DEFAULT_MAX_STREAMS,
        help=f"streams one source serves at once (default: {DEFAULT_MAX_STREAMS})",
    )
    add("--setup-s", type=finite_number, default=DEFAULT_SETUP_S, help="setup time per transfer, s")
    add(
        "--bandwidth",
        type=finite_number,
        default=DEFAULT_BANDWIDTH_BYTES_PER_S,
        help="bytes per second per stream",
    )
    add("--top", type=positive_int, default=10, help="largest transfers to list (default: 10)")
    add("--json", action="store_true", help="print JSON")
    parser.set_defaults(run=deferred("ringkit.commands.plan"))
