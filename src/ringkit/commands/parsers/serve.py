"""``ringkit serve``: its arguments."""

from __future__ import annotations

import argparse
import math
from typing import Any

from ringkit.commands.common import positive_int, store_password_argument
from ringkit.commands.parsers import deferred
from ringkit.commands.parsers.names import docs_page

__all__ = ["register"]


def _budget(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(
            f"budget must be a finite number of seconds > 0, got {text!r}"
        )
    return value


def _port(text: str) -> int:
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"port must be in [1, 65535], got {text!r}")
    return int(text)


def register(subparsers: Any) -> None:
    """Add the ``serve`` subcommand."""
    parser = subparsers.add_parser(
        "serve",
        help="run the interactive simulator page",
        description="Serve the interactive simulator page and its JSON API "
        f"({docs_page('web.md')}).",
    )
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (default: 127.0.0.1, this machine only)",
    )
    parser.add_argument("--port", type=_port, default=8000, help="TCP port (default: 8000)")
    parser.add_argument(
        "--store",
        metavar="URL",
        help="show this live ring (etcd://HOST:PORT/PREFIX or memory://NAME) and follow it",
    )
    store_password_argument(parser)
    parser.add_argument(
        "--metrics",
        action="store_true",
        help="with --store: answer the live ring's Prometheus metrics at /metrics",
    )
    parser.add_argument(
        "--compute-workers",
        type=positive_int,
        default=None,
        help="API computations run at once (default: the CPU count)",
    )
    parser.add_argument(
        "--budget-s",
        type=_budget,
        default=None,
        help="seconds an API request may wait and compute before a 503 (default: 10)",
    )
    parser.set_defaults(run=deferred("ringkit.commands.serve"))
