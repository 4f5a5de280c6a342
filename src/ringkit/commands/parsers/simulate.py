"""``ringkit simulate``: its arguments."""

from __future__ import annotations

from typing import Any

from ringkit.commands.common import positive_int, seed_int, vnode_counts
from ringkit.commands.parsers import deferred
from ringkit.commands.parsers.names import HASH_NAMES

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add the ``simulate`` subcommand."""
    parser = subparsers.add_parser(
        "simulate",
        help="replay the Gatepass lesson (no file) or a TOML scenario, step by step",
        description="Simulate membership changes and measure balance and movement.",
    )
    parser.add_argument(
        "scenario",
        nargs="*",
        help="scenario files (TOML) or bundled scenario names, run in turn; default: Gatepass",
    )
    parser.add_argument("--list", action="store_true", help="list the bundled scenarios")
    parser.add_argument(
        "--vnodes",
        type=vnode_counts,
        default=None,
        help="comma-separated vnode counts (default: 1,8,32,128 or the file's)",
    )
    parser.add_argument(
        "--keys",
        type=positive_int,
        default=None,
        help="number of booking keys in the default run (default: 300)",
    )
    parser.add_argument(
        "--hasher",
        choices=HASH_NAMES,
        default=None,
        help="hash function of the default run (default: fnv1a_32_mix)",
    )
    parser.add_argument("--trace", default=None, help="key whose lookup ends the default run")
    parser.add_argument("--seed", type=seed_int, default=None, help="override the scenario's seed")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--plot", metavar="FILE", help="draw the loads per step (PNG or SVG)")
    parser.set_defaults(run=deferred("ringkit.commands.simulate"))
