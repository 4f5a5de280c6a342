"""``ringkit lb haproxy`` and ``ringkit lb nginx``: their arguments."""

from __future__ import annotations

import argparse
from typing import Any

from ringkit.commands.common import store_arguments
from ringkit.commands.parsers import deferred
from ringkit.commands.parsers.names import DEFAULT_DRAIN_TIMEOUT_S, docs_page

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add the ``lb`` subcommand and its ``haproxy`` and ``nginx`` actions."""
    parser = subparsers.add_parser(
        "lb",
        help="keep an HAProxy backend or nginx upstream in step with a live ring",
        description="Keep a load balancer's pool equal to a live ring's members that carry "
        f"an address ({docs_page('load-balancers.md')}).",
    )
    actions = parser.add_subparsers(dest="action", metavar="PROXY", required=True)
    haproxy = actions.add_parser(
        "haproxy",
        help="drive an HAProxy backend through its runtime API",
        description="Add, drain and remove the servers of an HAProxy backend as members join "
        "and leave, with server ids kept in etcd.",
    )
    _common(haproxy)
    haproxy.add_argument(
        "--socket", required=True, metavar="PATH", help="HAProxy's admin socket (level admin)"
    )
    haproxy.add_argument("--backend", required=True, metavar="NAME", help="the backend to drive")
    haproxy.add_argument(
        "--drain-timeout-s",
        type=_seconds,
        default=DEFAULT_DRAIN_TIMEOUT_S,
        help="longest wait for a leaving member's sessions to end (default: %(default)g)",
    )
    haproxy.add_argument(
        "--slots",
        action="store_true",
        help="fill the backend's pre-declared disabled servers instead of adding servers",
    )
    haproxy.set_defaults(run=deferred("ringkit.commands.lb", "run_haproxy"))
    nginx = actions.add_parser(
        "nginx",
        help="render an nginx upstream's servers into a file and reload",
        description="Write the members' server lines into a file the upstream includes, "
        "and run the reload command when they change.",
    )
    _common(nginx)
    nginx.add_argument("--upstream-file", required=True, metavar="FILE")
    nginx.add_argument(
        "--reload-command", required=True, metavar="COMMAND", help='e.g. "nginx -s reload"'
    )
    nginx.set_defaults(run=deferred("ringkit.commands.lb", "run_nginx"))


def _common(parser: argparse.ArgumentParser) -> None:
    store_arguments(parser)
    parser.add_argument(
        "--weight-scale",
        type=_positive,
        metavar="K",
        help="send round(weight × K) when members' weights are not the proxy's integers",
    )
    parser.add_argument(
        "--resync-s",
        type=_positive,
        default=5.0,
        help="also reconcile this often, to catch proxy reloads (default: %(default)g)",
    )
    parser.add_argument("--once", action="store_true", help="run one pass, print it, exit")
    parser.add_argument("--timeout-s", type=_positive, help="stop after this many seconds")


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def _positive(text: str) -> float:
    value = _number(text)
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")
    return value


def _seconds(text: str) -> float:
    value = _number(text)
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0, got {text!r}")
    return value
