"""``ringkit ring status``, ``watch`` and ``restore``: a live ring as an operator sees it.

``status`` is Cassandra's ``nodetool ring`` and Grafana dskit's ``/ring`` page for a
``ringkit.live`` store: each member's state, zone, weight, token count, exact share of the
keyspace (the ring's ``shares()``), its lease's TTL and the seconds it has left (a heartbeat is
a lease renewal, so the time since the last one is about TTL minus that), at one epoch.
``watch`` prints one line per new epoch: who joined, left or changed state, and the share of
the keyspace that moved beside the least any placement could move (``change.movement``). It
stops after ``--count`` changes or ``--timeout-s`` seconds, or on Ctrl-C (exit status 130).
``restore`` raises the epoch base after etcd was restored while no process ran
(:mod:`ringkit.live.restore`). An etcd password comes from ``--etcd-password-file`` or
``$RINGKIT_ETCD_PASSWORD`` for a URL that names only the user, never from the command line.
"""

from __future__ import annotations

import argparse
import json
import queue
import sys
import time
from typing import Any

from rich.table import Table

from ringkit.commands.common import (
    print_json,
    shown_url,
    store_url_with_password,
)
from ringkit.commands.output import console, fit, percent
from ringkit.commands.waiting import next_item
from ringkit.errors import BackendError, ConfigError
from ringkit.live import Change, Snapshot, Store, connect, parse_store_url
from ringkit.live.restore import BASE_KEY, raise_base
from ringkit.live.snapshot import snapshot_dict

__all__ = [
    "change_dict",
    "describe_change",
    "run_restore",
    "run_status",
    "run_watch",
    "status_rows",
]


def _open(args: argparse.Namespace) -> Store:
    """Connect to ``args.store``; errors name the store (a password never shown)."""
    url = store_url_with_password(args.store, args.etcd_password_file)
    parse_store_url(url)  # a malformed URL: ConfigError naming it
    try:
        return connect(url)
    except BackendError as error:
        raise BackendError(f"cannot read the live ring: {error}") from error


def _lease_left(store: Store, name: str) -> float | None:
    try:
        return store.lease_remaining_s(name)
    except (BackendError, KeyError):
        return None


def status_rows(store: Store, snapshot: Snapshot) -> list[dict[str, Any]]:
    """Return ``snapshot_dict``'s members, each with ``lease_remaining_s`` asked of the store."""
    rows: list[dict[str, Any]] = snapshot_dict(snapshot)["members"]
    for row in rows:
        row["lease_remaining_s"] = _lease_left(store, row["name"])
    return rows


def _status_table(snapshot: Snapshot, rows: list[dict[str, Any]]) -> Table:
    table = Table(title=f"live ring at epoch {snapshot.epoch}: {len(snapshot.ring)} in the ring")
    for header in ("member", "state", "zone", "weight", "tokens", "owns", "TTL", "lease left"):
        table.add_column(header, justify="left" if header in {"member", "state"} else "right")
    for row in rows:
        left = row["lease_remaining_s"]
        table.add_row(
            row["name"],
            row["state"],
            row["zone"] or "–",
            f"{row['weight']:g}",
            f"{row['tokens']:,}",
            percent(row["share"]),
            f"{row['ttl_s']:g} s",
            "–" if left is None else _seconds_left(left),
        )
    return table


def _seconds_left(left: float) -> str:
    """Return a lease's time left as the store reports it: etcd's whole seconds stay whole.

    >>> _seconds_left(7), _seconds_left(6.73)
    ('7 s', '6.7 s')
    """
    return f"{left:.0f} s" if float(left).is_integer() else f"{left:.1f} s"


def run_status(args: argparse.Namespace) -> int:
    """Print the members of the ring at ``args.store`` at its current epoch."""
    store = _open(args)
    try:
        snapshot = store.snapshot()
        rows = status_rows(store, snapshot)
        confirmed_s = store.confirmed_age_s()
        skipped_records = store.skipped_records()
    finally:
        store.close()
    if args.json:
        ring = {"nodes": [node.name for node in snapshot.ring.nodes]}
        skipped = [record.as_dict() for record in skipped_records]
        print_json(
            {
                "epoch": snapshot.epoch,
                "table": snapshot.table,
                "confirmed_age_s": confirmed_s,
                "members": rows,
                "ring": ring,
                "skipped": skipped,
            }
        )
        return 0
    if not rows:
        print(f"epoch {snapshot.epoch}: no members")
    else:
        out = console()
        out.print(fit(_status_table(snapshot, rows), out.width, names=("member", "state", "zone")))
    print(f"confirmed current {confirmed_s:.1f} s ago (a linearizable read of the records)")
    if skipped_records:
        count = len(skipped_records)
        print(f"{count} records skipped (not valid; the ring goes on without them):")
        for record in skipped_records:
            print(f"  {record.key}: {record.reason}")
    return 0


def run_restore(args: argparse.Namespace) -> int:
    """Raise the epoch base of ``args.store`` above ``args.epoch_above``."""
    store = _open(args)
    try:
        base = raise_base(store.backend, store.prefix + BASE_KEY, above_epoch=args.epoch_above)
        snapshot = store.wait_for(lambda s: s.epoch > args.epoch_above)
    finally:
        store.close()
    print(f"epoch base {base}: the ring is at epoch {snapshot.epoch} (above {args.epoch_above})")
    return 0


def change_dict(change: Change) -> dict[str, Any]:
    """Return `change` as ``ring watch --json`` prints it: one JSON object per new epoch.

    ``joined`` and ``left`` name members that appeared or disappeared, ``changed`` maps a member
    whose state changed to ``[old, new]``, ``rejoined`` names members back under a new lease.
    """
    old, new = change.old.members, change.new.members
    movement = change.movement
    changed = {
        name: [old[name].state, new[name].state]
        for name in sorted(new.keys() & old.keys())
        if old[name].state != new[name].state
    }
    rejoined = [
        name
        for name in sorted(new.keys() & old.keys())
        if name not in changed and old[name].lease != new[name].lease
    ]
    return {
        "epoch": change.new.epoch,
        "joined": {name: new[name].state for name in sorted(new.keys() - old.keys())},
        "left": sorted(old.keys() - new.keys()),
        "changed": changed,
        "rejoined": rejoined,
        "ring_members": len(change.new.ring),
        "moved_fraction": movement.moved_fraction,
        "optimum_fraction": getattr(movement, "optimum_fraction", movement.moved_fraction),
    }


def describe_change(change: Change) -> str:
    """Return one line for `change`: epoch, members in and out, share moved against the least.

    Members that appeared are ``+name``, that disappeared ``-name``, whose state changed
    ``name joining→active``; one that rejoined under a new lease is ``name rejoined``.
    """
    fields = change_dict(change)
    events = [f"+{name} ({state})" for name, state in fields["joined"].items()]
    events += [f"-{name}" for name in fields["left"]]
    events += [f"{name} {old}→{new}" for name, (old, new) in fields["changed"].items()]
    events += [f"{name} rejoined" for name in fields["rejoined"]]
    events.sort(key=lambda event: event.lstrip("+-"))
    members = fields["ring_members"]
    return (
        f"epoch {fields['epoch']}: {', '.join(events) or _no_member_event(change)}; "
        f"ring {members} {'member' if members == 1 else 'members'}; "
        f"moved {percent(fields['moved_fraction'])} "
        f"of the keyspace (least possible {percent(fields['optimum_fraction'])})"
    )


def _no_member_event(change: Change) -> str:
    """What changed at an epoch where no member came, went or changed state."""
    old, new = change.old, change.new
    if new.epoch - new.revision != old.epoch - old.revision:
        return "epoch base raised (etcd restored)"
    return "table published" if new.table else "member records rewritten"


def run_watch(args: argparse.Namespace) -> int:
    """Print a line per change of ``args.store`` until --count, --timeout-s or Ctrl-C."""
    store = _open(args)
    changes: queue.Queue[Change] = queue.Queue()
    store.subscribe(changes.put)
    deadline = None if args.timeout_s is None else time.monotonic() + args.timeout_s
    seen = 0
    try:
        # Inside the try: a Ctrl-C right after this line is a clean stop, not a traceback.
        # With --json, stdout is JSON Lines only; the human line goes to stderr.
        print(
            f"watching {shown_url(args.store)} from epoch {store.snapshot().epoch}",
            file=sys.stderr if args.json else sys.stdout,
            flush=True,
        )
        while args.count is None or seen < args.count:
            change = next_item(changes, deadline)
            if change is None:
                break
            line = json.dumps(change_dict(change)) if args.json else describe_change(change)
            print(line, flush=True)
            seen += 1
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
        return 130
    finally:
        store.close()
    if args.count is not None and seen < args.count:
        raise ConfigError(
            f"--count {args.count} changes must arrive within --timeout-s {args.timeout_s:g}, "
            f"got {seen}"
        )
    return 0
