"""``ringkit ring status``, ``watch`` and ``restore``: their arguments."""

from __future__ import annotations

import argparse
import math
from typing import Any

from ringkit.commands.common import positive_int, store_arguments
from ringkit.commands.parsers import deferred
from ringkit.commands.parsers.names import docs_page

__all__ = ["register"]


def _epoch(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected an epoch (an integer >= 0), got {text!r}")
    return int(text)


def _seconds(text: str) -> float | None:
    """Parse a number of seconds > 0; ``inf`` means never (the default), so it is None."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
    return None if math.isinf(value) else value


def register(subparsers: Any) -> None:
    """Add the ``ring`` subcommand and its ``status``, ``watch`` and ``restore`` actions."""
    parser = subparsers.add_parser(
        "ring",
        help="show or follow a live ring (ringkit.live)",
        description=f"Show or follow a live ring kept in etcd or memory ({docs_page('live.md')}).",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    status = actions.add_parser(
        "status",
        help="members, states, shares and leases at the current epoch",
        description="Show the members of a live ring at its current epoch (like nodetool ring).",
    )
    store_arguments(status)
    status.add_argument("--json", action="store_true", help="print JSON")
    status.set_defaults(run=deferred("ringkit.commands.ring", "run_status"))
    watch = actions.add_parser(
        "watch",
        help="print one line per change of a live ring",
        description="Print one line per new epoch: who joined, left or changed state, and "
        "the share of the keyspace that moved against the least possible.",
    )
    store_arguments(watch)
    watch.add_argument("--count", type=positive_int, help="stop after this many changes")
    watch.add_argument(
        "--timeout-s",
        type=_seconds,
        help="stop after this many seconds (default: never; inf is never too)",
    )
    watch.add_argument(
        "--json", action="store_true", help="print one JSON object per line (JSON Lines)"
    )
    watch.set_defaults(run=deferred("ringkit.commands.ring", "run_watch"))
    restore = actions.add_parser(
        "restore",
        help="raise the epoch base after restoring etcd while no ringkit process ran",
        description="Raise the ring's epoch base so that every epoch from now on is above "
        "--epoch-above (the highest epoch any process may have seen before the restore).",
    )
    store_arguments(restore)
    restore.add_argument(
        "--epoch-above",
        type=_epoch,
        required=True,
        metavar="N",
        help="every epoch from now on will be above N",
    )
    restore.set_defaults(run=deferred("ringkit.commands.ring", "run_restore"))
