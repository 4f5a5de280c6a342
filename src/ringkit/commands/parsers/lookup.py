"""``ringkit lookup``: its arguments."""

from __future__ import annotations

from typing import Any

from ringkit.commands.common import node_list, positive_int, vnodes_per_node
from ringkit.commands.parsers import deferred
from ringkit.commands.parsers.names import (
    COMPAT_MODES,
    DEFAULT_HASH,
    DEFAULT_VNODES,
    HASH_NAMES,
    STRATEGY_NAMES,
)
from ringkit.commands.parsers.proxy import PROXY_MODES, add_proxy_arguments

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add the ``lookup`` subcommand."""
    parser = subparsers.add_parser(
        "lookup",
        help="show a key's point, owning token and owner(s)",
        description="Look up one key on a hash ring (or another placement).",
    )
    parser.add_argument("key", help="the key to look up (hashed as UTF-8 text)")
    parser.add_argument(
        "--nodes",
        type=node_list,
        default=["A", "B", "C"],
        help="comma-separated node names (default: A,B,C)",
    )
    parser.add_argument(
        "--strategy",
        choices=STRATEGY_NAMES,
        default=None,
        help="placement (default: ring)",
    )
    parser.add_argument(
        "--vnodes",
        type=vnodes_per_node,
        default=None,
        help=f"vnodes per node, for strategies that have them (default: {DEFAULT_VNODES})",
    )
    parser.add_argument(
        "--hasher",
        choices=HASH_NAMES,
        default=None,
        help=f"hash function (default: {DEFAULT_HASH})",
    )
    parser.add_argument(
        "--replicas",
        type=positive_int,
        default=None,
        help="length of the preference list to show, also given to the strategy (default: 1)",
    )
    parser.add_argument(
        "--mode",
        choices=("ring", *COMPAT_MODES, *PROXY_MODES),
        default="ring",
        help="place the key as another system does (default: ring); haproxy and nginx read "
        "--config (or --socket)",
    )
    parser.add_argument(
        "--servers",
        metavar="SPEC",
        help='servers of a --mode other than ring, e.g. "10.0.1.1:11211 600,10.0.1.2:11211 300"',
    )
    parser.add_argument(
        "--unweighted",
        action="store_true",
        help="libmemcached / spy: plain ketama (pylibmc behaviors={'ketama': True}), "
        "100 points per server, not ketama_weighted",
    )
    parser.add_argument(
        "--key-hash",
        metavar="NAME",
        help="key hash of libmemcached / twemproxy modes (e.g. fnv1a_64, md5)",
    )
    add_proxy_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(run=deferred("ringkit.commands.lookup"))
