"""``ringkit lb haproxy`` and ``ringkit lb nginx``: keep a proxy's pool in step with a live ring.

``haproxy`` drives one HAProxy backend through its admin socket (``stats socket … level
admin``): members whose record's data holds ``{"address": "host:port"}`` are added with their
ids from etcd and enabled, leaving members are drained, then removed. ``nginx`` renders the
servers of an upstream into a file the upstream block includes and runs the reload command.
Both reconcile at start and on every change (and every ``--resync-s``), log what they do to
stderr, and run until Ctrl-C (exit status 130) or ``--timeout-s``; ``--once`` runs one pass,
prints what it changed and exits. The etcd password is read as ``ringkit ring`` reads it: for
``etcd://USER@host:2379/PREFIX``, from ``--etcd-password-file`` or ``$RINGKIT_ETCD_PASSWORD``
(a password in the URL works too, but every user of ``ps`` sees it); it is never printed.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from collections.abc import Iterator

from ringkit.commands.common import shown_url, store_url_with_password
from ringkit.commands.waiting import pause
from ringkit.errors import BackendError
from ringkit.lb import HAProxyController, NginxController
from ringkit.live import Store, connect, parse_store_url

__all__ = ["run_haproxy", "run_nginx"]


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
            pause(args.timeout_s)
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
        return 130
    return 0


def run_haproxy(args: argparse.Namespace) -> int:
    """Keep HAProxy's ``args.backend`` in step with ``args.store``."""
    store = _open(store_url_with_password(args.store, args.etcd_password_file))
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
    store = _open(store_url_with_password(args.store, args.etcd_password_file))
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
