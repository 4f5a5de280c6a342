"""``ringkit lb haproxy`` and ``ringkit lb nginx``: keep a proxy's pool in step with a live ring.

``haproxy`` drives one HAProxy backend through its admin socket (``stats socket … level
admin``): members whose record's data holds ``{"address": "host:port"}`` are added with their
ids from etcd and enabled, leaving members are drained, then removed. ``nginx`` renders the
servers of an upstream into a file the upstream block includes and runs the reload command.
Both reconcile at start and on every change (and every ``--resync-s``), log what they do to
stderr, and run until Ctrl-C (exit status 130) or ``--timeout-s``; ``--once`` runs one pass,
prints what it changed and exits. The etcd password goes in the store URL, as for
``ringkit ring`` (``etcd://user:password@host:2379/PREFIX``); it is never printed.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
import threading
from collections.abc import Iterator
from typing import Any

from ringkit.commands.common import shown_url
from ringkit.errors import BackendError
from ringkit.lb import DEFAULT_DRAIN_TIMEOUT_S, HAProxyController, NginxController
from ringkit.live import Store, connect, parse_store_url

__all__ = ["register", "run_haproxy", "run_nginx"]


def register(subparsers: Any) -> None:
    """Add the ``lb`` subcommand and its ``haproxy`` and ``nginx`` actions."""
    parser = subparsers.add_parser(
        "lb",
        help="keep an HAProxy backend or nginx upstream in step with a live ring",
        description="Keep a load balancer's pool equal to a live ring's members that carry "
        "an address (docs/load-balancers.md).",
    )
    actions = parser.add_subparsers(dest="action", metavar="PROXY", required=True)
    _haproxy_parser(actions)
    _nginx_parser(actions)


def _haproxy_parser(actions: Any) -> None:
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
    haproxy.set_defaults(run=run_haproxy)


def _nginx_parser(actions: Any) -> None:
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
    nginx.set_defaults(run=run_nginx)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store",
        required=True,
        metavar="URL",
        help="etcd://[user:password@]HOST:PORT[,…]/PREFIX, etcds://… or memory://NAME",
    )
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


def _open(url: str) -> Store:
    parse_store_url(url)  # a malformed URL: ConfigError naming it (never its password)
    try:
        return connect(url)
    except BackendError as error:
        raise BackendError(f"cannot read the live ring: {error}") from error


@contextlib.contextmanager
def _logging_to_stderr(enabled: bool) -> Iterator[None]:
    """Show the controller's log (what it did, what it refused) on stderr while following."""
    logger = logging.getLogger("ringkit.lb")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    level = logger.level
    if enabled:
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _follow(controller: HAProxyController | NginxController, args: argparse.Namespace) -> int:
    """Run `controller` in the background until --timeout-s or Ctrl-C."""
    print(f"following {shown_url(args.store)}", file=sys.stderr, flush=True)
    try:
        with controller:
            threading.Event().wait(args.timeout_s)
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
        return 130
    return 0


def run_haproxy(args: argparse.Namespace) -> int:
    """Keep HAProxy's ``args.backend`` in step with ``args.store``."""
    store = _open(args.store)
    with contextlib.closing(store), _logging_to_stderr(not args.once):
        controller = HAProxyController(
            store,
            args.socket,
            args.backend,
            weight_scale=args.weight_scale,
            drain_timeout_s=args.drain_timeout_s,
            slots=args.slots,
            resync_s=args.resync_s,
        )
        sent = controller.reconcile()  # a socket or pool that is wrong fails here, exit 1
        if args.once:
            for command in sent:
                print(command)
            servers = ", ".join(f"{s.name}=id {s.id}" for s in controller.servers())
            print(f"backend {args.backend}: {servers or 'no servers'}")
            return 0
        return _follow(controller, args)


def run_nginx(args: argparse.Namespace) -> int:
    """Keep the upstream file ``args.upstream_file`` in step with ``args.store``."""
    store = _open(args.store)
    with contextlib.closing(store), _logging_to_stderr(not args.once):
        controller = NginxController(
            store,
            args.upstream_file,
            args.reload_command,
            weight_scale=args.weight_scale,
            resync_s=args.resync_s,
        )
        reloaded = controller.reconcile()
        if args.once:
            servers = ", ".join(f"{s.member}={s.address}" for s in controller.servers())
            print(f"{'reloaded' if reloaded else 'unchanged'}: {servers or 'no servers'}")
            return 0
        return _follow(controller, args)
