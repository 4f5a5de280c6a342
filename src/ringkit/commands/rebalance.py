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

from ringkit.cluster.drivers.steps import run_plain
from ringkit.cluster.rebalance.coordinator import (
    RebalanceOptions,
    Rebalancer,
    RebalanceReport,
    read_views,
)
from ringkit.cluster.views.stores import (
    AuthoritativeViewStore,
    FileViewStore,
    ViewStore,
    open_view_store,
)
from ringkit.cluster.views.view import ClusterView, check_view_path, load_view, write_view
from ringkit.cluster.wire.credentials import Credentials
from ringkit.commands.common import print_json, refuse, shown_url
from ringkit.commands.output import TransferBar
from ringkit.strategies.registry import StrategyOptions, build_placement

__all__ = ["run"]


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

    A replica count other than the clients' moves primaries only and deletes the other copies,
    so without a view to take it from it must be given.
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


def _counted(count: int, noun: str) -> str:
    """Return ``1 server`` or ``3 servers``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _status(fields: dict[str, Any], args: argparse.Namespace) -> None:
    """Print the view ``--status`` found: JSON with ``--json``, else a few lines to read."""
    if args.json:
        print_json(fields)
        return
    placement = fields["placement"]
    shape = ", ".join(
        f"{name} {placement[name]}" for name in ("hasher", "vnodes") if name in placement
    )
    source = args.view_store or "servers://"
    print(
        f"cluster view at epoch {fields['epoch']} ({fields['state']}, from {shown_url(source)}): "
        f"{_counted(len(fields['servers']), 'server')}, "
        f"{_counted(fields['replicas'], 'replica')}, {placement['kind']}"
        + (f" ({shape})" if shape else "")
    )
    width = max(map(len, fields["servers"]), default=0)
    for name, url in fields["servers"].items():
        print(f"  {name:<{width}}  {url}")
    if fields.get("previous") is not None:
        print("  a change is in progress: --resume finishes it, --rollback undoes it")


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
            backends = {name: rebalancer.backend(name) for name in view.servers}
            if isinstance(store, AuthoritativeViewStore):
                found = store.load()
            elif store is not None:  # file:// (or a registered store): the view it holds
                found = run_plain(store.read(list(view.servers), 0), backends)
            else:
                found = read_views(backends)
            _status((found or view).to_dict(redact_passwords=True), args)
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
