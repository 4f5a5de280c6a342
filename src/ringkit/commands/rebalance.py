"""``ringkit rebalance``: add or remove a server of a live cluster, and move its keys online.

The current membership comes from ``--servers NAME=URL,…`` (a ring over those nodes, with
``--vnodes``, ``--hasher`` and ``--replicas``) or from a view file (``--view``, or the
``RINGKIT_VIEW`` environment variable); a newer view stored on the servers always wins. The
view the servers hold (the first client publishes it) is the cluster's configuration: the
replica count comes from it, and a ``--replicas``, ``--vnodes`` or ``--hasher`` that contradicts
it is refused; on servers that hold no view, ``--add`` / ``--remove`` need ``--replicas``. Then
``--add NAME=URL`` or ``--remove NAME`` runs a rebalance
(:mod:`ringkit.cluster.rebalance.coordinator`), ``--resume`` finishes an interrupted one,
``--rollback`` undoes one, and ``--status`` prints the servers' view. ``--write-view FILE`` saves
the final view for static setups.

Views hold no secrets: a password given inline in ``--servers`` or ``--add`` URLs (percent-encoded
as for redis-py) is used by this process only, and servers learnt from a view are opened with
``RINGKIT_REDIS_PASSWORD``. Files written here (``--write-view``, ``--audit``) are created 0600,
and their paths are checked before anything moves.

``--view-store etcd://HOST:PORT/PREFIX`` keeps the view in etcd (:mod:`ringkit.cluster.views.etcd`):
the current view comes from there (``--servers`` and ``--view`` only start an empty store), the
coordinator holds etcd's lease lock while it works, and each view is published there first.
``--import-from-servers`` moves the view the servers hold into etcd (or a ``file://`` store),
once, to switch stores, and ``--export-to-servers`` moves it back. The servers record which store
is the view's authority: a coordinator through another store is refused, naming both commands.
"""

from __future__ import annotations

import argparse
import sys
from contextlib import nullcontext
from typing import Any

from ringkit.cluster.rebalance.coordinator import (
    RebalanceOptions,
    Rebalancer,
    RebalanceReport,
    read_views,
)
from ringkit.cluster.rebalance.options import DEFAULT_PAGE_BYTES
from ringkit.cluster.views.stores import (
    AuthoritativeViewStore,
    FileViewStore,
    ViewStore,
    open_view_store,
)
from ringkit.cluster.views.view import ClusterView, check_view_path, load_view, write_view
from ringkit.cluster.wire.credentials import Credentials
from ringkit.cluster.wire.urls import redact
from ringkit.commands.common import positive_int, print_json, refuse
from ringkit.commands.output import TransferBar
from ringkit.hashing import DEFAULT_HASH, HASHERS
from ringkit.ring import DEFAULT_VNODES
from ringkit.strategies.registry import StrategyOptions, build_placement

__all__ = ["register", "run"]


def _server(text: str) -> tuple[str, str]:
    name, sep, url = text.partition("=")
    if not sep or not name or not url:
        raise argparse.ArgumentTypeError(f"expected NAME=URL, got {redact(text)!r}")
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
        help="where the cluster view is kept: servers:// (default) or etcd://HOST:PORT/PREFIX",
    )
    add(
        "--vnodes",
        type=positive_int,
        default=None,
        help=f"vnodes (with --servers; default {DEFAULT_VNODES})",
    )
    add(
        "--hasher",
        choices=sorted(HASHERS),
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
    parser.set_defaults(run=run)


def _initial_view(
    args: argparse.Namespace, store: ViewStore | None, credentials: Credentials
) -> ClusterView:
    if isinstance(store, FileViewStore) and args.servers is None and args.view is None:
        return load_view(store.path)
    if isinstance(store, AuthoritativeViewStore) and args.servers is None and args.view is None:
        held = store.load()
        if held is None:
            raise refuse(
                f"view store {store.url} holds no cluster view; give --servers (or --view) to "
                f"start one, or --import-from-servers to move the servers' view there"
            )
        return held
    if args.servers is None:
        for flag in ("vnodes", "hasher", "replicas"):
            if getattr(args, flag) is not None:
                raise refuse(f"--{flag} applies with --servers; a view has its own placement")
        return load_view(args.view)
    if args.view is not None:
        raise refuse("give --servers or --view, not both")
    servers = credentials.learn_all(args.servers)  # checks every URL, keeps the secrets here
    options = StrategyOptions(vnodes=args.vnodes, hasher=args.hasher, replicas=args.replicas)
    ring = build_placement("ring", list(servers), options)
    return ClusterView(0, ring, servers, args.replicas or 1)


def _check_configuration(
    rebalancer: Rebalancer, view: ClusterView, args: argparse.Namespace, store: ViewStore | None
) -> None:
    """Refuse options that contradict the cluster's view; the replica count comes from it.

    A replica count other than the clients' moves primaries only and deletes the other copies
    (issue 16, item 2), so without a view to take it from it must be given.
    """
    found = store.load() if isinstance(store, AuthoritativeViewStore) else None
    if found is None:  # the servers' view (an authoritative store refuses to start behind it)
        found = read_views({name: rebalancer.backend(name) for name in view.servers})
    if found is None:
        if args.servers is not None and args.replicas is None:
            raise refuse(
                "the servers hold no cluster view to take the replica count from; give "
                "--replicas N, the replica count of the clients (another count would drop or "
                "strand copies)"
            )
        return
    placement = found.placement
    given = (
        ("--replicas", view.replicas if args.servers is None else args.replicas, found.replicas),
        ("--vnodes", args.vnodes, getattr(placement, "vnodes", None)),
        ("--hasher", args.hasher, getattr(getattr(placement, "hasher", None), "name", None)),
    )
    for flag, mine, theirs in given:
        if mine is not None and mine != theirs:
            raise refuse(
                f"{flag} must match the cluster view the servers hold (epoch {found.epoch}): "
                f"configured {mine!r}, published {theirs!r}; leave it out to use the view's"
            )


def _report(report: RebalanceReport, as_json: bool) -> None:
    fields = {name: getattr(report, name) for name in report.__dataclass_fields__}
    fields["keys_per_s"] = round(report.keys_per_s, 1)
    if as_json:
        print_json(fields)
        return
    print(
        f"{report.outcome}: epoch {report.epoch}, {report.transfers} transfers "
        f"({report.transfers_skipped} already done), {report.keys_streamed} keys streamed, "
        f"{report.keys_copied} copied ({report.bytes_copied} bytes), {report.keys_deleted} "
        f"deleted from old owners, {report.elapsed_s:.2f} s ({report.keys_per_s:,.0f} keys/s)"
    )


def _act(rebalancer: Rebalancer, args: argparse.Namespace) -> RebalanceReport:
    if args.add is not None:
        return rebalancer.add(*args.add)
    if args.remove is not None:
        return rebalancer.remove(args.remove)
    if args.resume:
        return rebalancer.resume()
    return rebalancer.rollback()


def _move_authority(
    rebalancer: Rebalancer, store: ViewStore | None, args: argparse.Namespace
) -> int:
    if store is None:
        flag = "--import-from-servers" if args.import_from_servers else "--export-to-servers"
        raise refuse(f"{flag} needs --view-store etcd://HOST:PORT/PREFIX (or file://PATH)")
    if args.import_from_servers:
        moved = rebalancer.import_from_servers()
        done = "imported" if moved else "already held"
        what = f"the servers' view at epoch {rebalancer.view.epoch}"
    else:
        moved = rebalancer.export_to_servers()
        done = "exported" if moved else "already held"
        what = f"the view of {rebalancer.authority} at epoch {rebalancer.view.epoch}"
    view = rebalancer.view
    if args.json:
        key = "imported" if args.import_from_servers else "exported"
        print_json({key: moved, "epoch": view.epoch, "view_store": store.url})
    else:
        print(f"{done}: {what} ({view.state}); the authority is {view.authority}")
    return 0


def run(args: argparse.Namespace) -> int:
    """Run the rebalance the arguments ask for; return the exit status."""
    store = None if args.view_store is None else open_view_store(args.view_store)
    try:
        return _run(args, store)
    finally:
        close = getattr(store, "close", None)
        if close is not None:
            close()


def _run(args: argparse.Namespace, store: ViewStore | None) -> int:
    credentials = Credentials()
    view = _initial_view(args, store, credentials)
    if args.write_view:
        check_view_path(args.write_view)  # a bad path fails now, not after the keys moved
    show = not args.no_progress and not args.json and sys.stderr.isatty()
    bar = TransferBar() if show and not args.status else None
    options = RebalanceOptions(
        batch=args.batch,
        page_bytes=args.page_bytes,
        keys_per_s=args.keys_per_s,
        max_streams_per_source=args.max_streams,
        scan=not args.no_scan,
        progress=bar,
        audit_path=args.audit,
    )
    rebalancer = Rebalancer(view, options=options, view_store=store, credentials=credentials)
    try:
        if args.import_from_servers or args.export_to_servers:
            return _move_authority(rebalancer, store, args)
        if args.status:
            if isinstance(store, AuthoritativeViewStore):
                found = store.load()
            else:
                found = read_views({name: rebalancer.backend(name) for name in view.servers})
            print_json((found or view).to_dict(redact_passwords=True))
            return 0
        if args.add is not None or args.remove is not None:
            _check_configuration(rebalancer, view, args, store)
        with bar or nullcontext():
            report = _act(rebalancer, args)
    finally:
        rebalancer.close()
    # The report first: a file that cannot be written after all must not lose it.
    _report(report, args.json)
    if rebalancer.audit.error is not None:
        print(f"ringkit: warning: {rebalancer.audit.error}", file=sys.stderr)
    if args.write_view:
        write_view(rebalancer.view, args.write_view)
    return 0
