"""``ringkit rebalance``: its arguments."""

from __future__ import annotations

import argparse
from typing import Any

from ringkit.commands.common import positive_int, shown_url
from ringkit.commands.parsers import deferred
from ringkit.commands.parsers.names import (
    DEFAULT_HASH,
    DEFAULT_PAGE_BYTES,
    DEFAULT_VNODES,
    HASH_NAMES,
)

__all__ = ["register"]


def _server(text: str) -> tuple[str, str]:
    name, sep, url = text.partition("=")
    if not sep or not name or not url:
        # A URL may carry a password: the error shows it without one.
        raise argparse.ArgumentTypeError(f"expected NAME=URL, got {shown_url(text)!r}")
    return name, url


def _servers(text: str) -> dict[str, str]:
    return dict(_server(part.strip()) for part in text.split(","))


def register(subparsers: Any) -> None:
    """Add the ``rebalance`` subcommand."""
    parser = subparsers.add_parser(
        "rebalance",
        help="add or remove a server of a live cluster, moving its keys online",
        description="Change membership on live Redis (or memory) servers: publish a "
        "transitional view, stream the moved arcs, publish the final view, clean up.",
    )
    add = parser.add_argument
    add("--servers", type=_servers, help="current servers: NAME=URL,NAME=URL,…")
    add("--view", help="a view file (default: $RINGKIT_VIEW when --servers is not given)")
    add(
        "--view-store",
        metavar="URL",
        help="where the cluster view is kept: servers:// (default), etcd://HOST:PORT/PREFIX "
        "or file://PATH",
    )
    add(
        "--vnodes",
        type=positive_int,
        default=None,
        help=f"vnodes (with --servers; default {DEFAULT_VNODES})",
    )
    add(
        "--hasher",
        choices=HASH_NAMES,
        default=None,
        help=f"hash (with --servers; default {DEFAULT_HASH})",
    )
    add(
        "--replicas",
        type=positive_int,
        default=None,
        help="copies per key (with --servers; default: the view's on the servers)",
    )
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", type=_server, metavar="NAME=URL", help="server to add")
    action.add_argument("--remove", metavar="NAME", help="server to remove")
    action.add_argument("--resume", action="store_true", help="finish an interrupted rebalance")
    action.add_argument("--rollback", action="store_true", help="undo a rebalance in progress")
    action.add_argument("--status", action="store_true", help="print the current view")
    action.add_argument(
        "--import-from-servers",
        action="store_true",
        help="copy the view the servers hold into --view-store (refused if it holds a newer one)",
    )
    action.add_argument(
        "--export-to-servers",
        action="store_true",
        help="give the authority over the view back to the servers (from --view-store)",
    )
    add("--keys-per-s", type=float, default=None, help="throttle: keys moved per second")
    add("--max-streams", type=positive_int, default=2, help="streams per source (default: 2)")
    add("--batch", type=positive_int, default=500, help="keys per range read (default: 500)")
    add(
        "--page-bytes",
        type=positive_int,
        default=DEFAULT_PAGE_BYTES,
        help=f"bytes of keys and values per copied page; a larger value moves alone "
        f"(default: {DEFAULT_PAGE_BYTES})",
    )
    add("--no-scan", action="store_true", help="skip the SCAN for keys written without ringkit")
    add("--audit", help="append every view and plan to this JSON-lines file")
    add("--write-view", help="write the final view to this file")
    add("--no-progress", action="store_true", help="no progress bar")
    add("--json", action="store_true", help="print JSON")
    parser.set_defaults(run=deferred("ringkit.commands.rebalance"))
