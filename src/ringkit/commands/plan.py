"""``ringkit plan``: what a membership change moves, from whom to whom, and how to migrate it.

Builds the placement before and after (``--add`` / ``--remove``), diffs them with
:func:`ringkit.diff`, plans the transfers over a seeded key sample and prints the report of
:func:`ringkit.movement.report.movement_report`: the moved fraction beside the optimum and
``hash % N``, totals per (source, destination) pair, the largest transfers and the plan's
estimate. ``--json`` prints the same report as JSON.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from typing import Any, TypeVar

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from ringkit.commands import output
from ringkit.commands.common import (
    node_list,
    print_json,
    refuse,
)
from ringkit.commands.output import fit
from ringkit.commands.proxy_modes import (
    PROXY_MODES,
    load_pool,
    renumbering_notes,
)
from ringkit.movement import Movement, diff, movement_report
from ringkit.movement.plan import (
    MigrationPlan,
)
from ringkit.placement import Placement
from ringkit.strategies.registry import StrategyOptions, build_placement

__all__ = ["run"]

T = TypeVar("T")
# Above this many keys the work takes about a second or more: show a progress bar.
_PROGRESS_KEYS = 200_000


def _node_lists(args: argparse.Namespace) -> None:
    """Split ``--add A,B`` / ``--remove C`` into node names for a placement (not a proxy)."""
    for name in ("add", "remove"):
        try:
            setattr(args, name, [node for text in getattr(args, name) for node in node_list(text)])
        except argparse.ArgumentTypeError as error:
            raise refuse(f"--{name}: {error}") from None


def _proxy_placements(args: argparse.Namespace) -> tuple[Placement, Placement]:
    given = {
        "--strategy": args.strategy != "ring",
        "--vnodes": args.vnodes,
        "--hasher": args.hasher,
        "--replicas": args.replicas,
    }
    for flag, value in given.items():
        if value:
            raise refuse(f"{flag} is not for --mode {args.mode}: the proxy has its own layout")
    if not (args.add or args.remove or args.weight):
        raise refuse("nothing to plan: give --add, --remove and/or --weight")
    pool = load_pool(args)
    old, new = pool.layout(), pool.changed(args.add, args.remove, args.weight).layout()
    args.proxy_notes = renumbering_notes(old, new)
    return old, new


def _placements(args: argparse.Namespace) -> tuple[Placement, Placement]:
    if args.mode in PROXY_MODES:
        return _proxy_placements(args)
    for flag in ("config", "backend", "upstream", "socket", "hash_type"):
        if getattr(args, flag) is not None:
            raise refuse(f"--{flag.replace('_', '-')} is for --mode haproxy or nginx")
    if args.weight:
        raise refuse("--weight is for --mode haproxy or nginx")
    _node_lists(args)
    if not args.add and not args.remove:
        raise refuse("nothing to plan: give --add and/or --remove")
    # Only the options given: a strategy refuses one it does not use (--vnodes for modulo).
    options = StrategyOptions(vnodes=args.vnodes, hasher=args.hasher, replicas=args.replicas)
    old = build_placement(args.strategy, args.nodes, options)
    new = old
    if set(args.nodes) <= set(args.remove) and not args.add:
        raise refuse(
            f"--remove {','.join(args.remove)} leaves no nodes; a plan needs a node after"
            " the change"
        )
    for name in args.remove:
        new = new.remove(name)
    for name in args.add:
        new = new.add(name)
    return old, new


def _keys(count: int, seed: int) -> list[str]:
    suffixes = np.random.default_rng(seed).integers(0, 2**63, count, dtype=np.int64)
    return [f"key-{value}" for value in suffixes.tolist()]


def _steps(show: bool, steps: Sequence[tuple[str, Callable[[], Any]]]) -> list[Any]:
    """Run `steps` in order, behind a progress bar on stderr when `show`.

    A step reports no progress of its own (``diff`` has no callback), so while one runs the
    bar pulses beside the step's name, its number and the time elapsed, instead of sitting
    at 0% through the slow part.
    """
    # Before this, the bar sat at 0% through the diff, the slow phase
    console = Console(stderr=True)
    bar = (
        Progress(
            SpinnerColumn(),
            TextColumn("{task.description}", markup=False),
            BarColumn(),
            TextColumn("step {task.fields[step]} of {task.fields[steps]}"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        if show and console.is_terminal
        else None
    )
    results = []
    with bar or nullcontext():
        task = bar.add_task("planning", total=None, step=1, steps=len(steps)) if bar else None
        for number, (description, step) in enumerate(steps, start=1):
            if bar is not None and task is not None:
                bar.update(task, description=description, step=number)
            results.append(step())
    return results


def run(args: argparse.Namespace) -> int:
    """Print the movement report and plan for the membership change in `args`."""
    old, new = _placements(args)
    given = read_keys(args.keys_file) if args.keys_file is not None else []
    if args.keys_file is not None:
        args.keys = len(given)
    keys: list[str] = []
    holder: dict[str, Movement] = {}

    def sample() -> None:
        keys.extend(_keys(args.keys, args.seed) if args.keys_file is None else given)

    def measure() -> Movement:
        holder["movement"] = diff(old, new, replicas=args.replicas or 1, keys=keys)
        return holder["movement"]

    def schedule() -> MigrationPlan:
        return holder["movement"].plan(
            keys,
            [args.value_bytes] * len(keys),
            max_streams_per_source=args.max_streams,
            setup_s=args.setup_s,
            bandwidth_bytes_per_s=args.bandwidth,
        )

    _, movement, plan = _steps(
        args.keys >= _PROGRESS_KEYS,
        [
            ("drawing the key sample", sample),
            ("diffing and counting keys", measure),
            ("planning transfers", schedule),
        ],
    )
    report = movement_report(movement, plan)
    ring, hasher = old.ring, old.hasher
    report["change"] = {
        "add": args.add,
        "remove": args.remove,
        "strategy": args.mode or args.strategy,
        "vnodes": None if ring is None else ring.vnodes,
        "hasher": None if hasher is None else hasher.name,
        "seed": args.seed,
    }
    report["notes"] = degenerate_notes(
        report["replicas"], len(report["nodes_before"]), len(report["nodes_after"])
    )
    _add_proxy_and_key_file_parts(report, args, movement, keys)
    if args.json:
        print_json(report)
        return 0
    _render(report, args.top)
    return 0


def _add_proxy_and_key_file_parts(
    report: dict[str, Any], args: argparse.Namespace, movement: Movement, keys: list[str]
) -> None:
    """Add a proxy change's weights and notes, and the moved keys of a ``--keys-file``."""
    if args.mode is not None:
        report["change"]["weight"] = args.weight
        report["notes"] += getattr(args, "proxy_notes", [])
    if args.keys_file is not None:
        report["moved_keys"] = [
            {"key": key, "from": source, "to": destination}
            for key, source, destination in movement.moved_keys(keys)
        ]


def read_keys(path: str) -> list[str]:
    """Return the keys of `path`, one per line (the line without its end), none empty.

    :raises ConfigError: when the file cannot be read or holds no key
    """
    try:
        with open(path, encoding="utf-8", newline="") as file:
            keys = [line.rstrip("\r\n") for line in file]
    except (OSError, UnicodeDecodeError) as error:
        raise refuse(f"cannot read --keys-file {path!r}: {error}") from None
    keys = [key for key in keys if key]
    if not keys:
        raise refuse(f"--keys-file {path!r} holds no key")
    return keys


def degenerate_notes(replicas: int, before: int, after: int) -> list[str]:
    """Return the notes for a change whose figures cannot tell placements apart.

    With as many replicas as nodes (one node and one replica included) every node holds
    every key, so any placement moves the same copies: a ring and ``hash % N`` agree.

    >>> [note.split(":")[0] for note in degenerate_notes(3, 3, 4)]
    ['replicas 3 >= 3 nodes before']
    >>> [note.split(":")[0] for note in degenerate_notes(1, 1, 2)], degenerate_notes(1, 4, 5)
    (['replicas 1 >= 1 node before'], [])
    """
    notes = []
    for side, nodes in (("before", before), ("after", after)):
        if replicas >= nodes:
            counted = f"{nodes} node" if nodes == 1 else f"{nodes} nodes"
            notes.append(
                f"replicas {replicas} >= {counted} {side}: every node holds every key, so every"
                " placement moves the same copies; these figures do not compare placements"
            )
            break
    return notes


def _plural(count: int, word: str) -> str:
    """Return ``"1 wave"`` or ``"3 waves"``.

    >>> _plural(1, "wave"), _plural(1_000, "wave")
    ('1 wave', '1,000 waves')
    """
    return f"{count:,} {word}" if count == 1 else f"{count:,} {word}s"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.3%}"


def _count(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


_BASIS = {
    "points": "exactly, arc by arc",
    "partitions": "exactly, partition by partition",
    "slots": "exactly, slot by slot",
    "keys": "over the key sample",
}


def _render(report: dict[str, Any], top: int) -> None:
    console = output.console()
    change = report["change"]
    before, after = report["nodes_before"], report["nodes_after"]
    steps = [f"+{n}" for n in change["add"]] + [f"-{n}" for n in change["remove"]]
    steps += [f"{n}" for n in change.get("weight", [])]
    hasher = f", hasher {change['hasher']}" if change["hasher"] else ""
    console.print(
        f"{change['strategy']}: {len(before)} -> {_plural(len(after), 'node')} "
        f"({', '.join(steps)}), replicas {report['replicas']}{hasher}, "
        f"{_plural(report['movement']['keys_total'], 'key')} (seed {change['seed']}); "
        f"compared {_BASIS[report['basis']]}"
    )
    for note in report["notes"]:
        console.print(f"note: {note}")
    console.print(fit(_summary(report), console.width))
    # Arcs are counted only where the placement has arcs (a ring's points basis).
    pairs = _pair_table(report["pairs"], arcs=report["basis"] == "points")
    console.print(fit(pairs, console.width, names=("source", "destination")))
    transfers = _transfer_table(report["largest_transfers"][:top], report["basis"])
    console.print(fit(transfers, console.width, names=("source", "destination")))
    if "moved_keys" in report:
        console.print(fit(_moved_table(report["moved_keys"], top), console.width))
    plan = report["plan"]
    console.print(
        f"plan: {_plural(plan['transfers'], 'transfer')} in {_plural(plan['waves'], 'wave')} "
        f"(<= {_plural(plan['max_streams_per_source'], 'stream')} per source), "
        f"{_plural(plan['sources'], 'source')} -> "
        f"{_plural(plan['destinations'], 'destination')}, "
        f"{_count(plan['total_keys'])} keys, {_count(plan['total_bytes'])} bytes, "
        f"about {plan['duration_s']:,.1f} s"
    )


def _moved_table(moved: list[dict[str, str]], top: int) -> Table:
    table = Table(title="moved keys", caption=f"first {min(top, len(moved)):,} of {len(moved):,}")
    for column in ("key", "from", "to"):
        table.add_column(column, justify="left", overflow="fold")
    for row in moved[:top]:
        table.add_row(row["key"], row["from"], row["to"])
    return table


def _summary(report: dict[str, Any]) -> Table:
    moved = report["movement"]
    table = Table(title="moved copies")
    for column in ("", "keyspace (exact)", "key sample"):
        table.add_column(column, justify="right" if column else "left")
    sample = moved["keys_total"] * min(report["replicas"], len(report["nodes_after"]))
    # Before this, modulo's sampled figure sat under "keyspace (exact)": over a key
    # sample there is no exact figure, only the sample's (in the next column).
    exact = None if report["basis"] == "keys" else moved["moved_fraction"]
    table.add_row(
        "this placement",
        _percent(exact),
        f"{_count(moved['keys_moved'])} ({_percent(moved['keys_moved'] / sample)})",
    )
    table.add_row("optimum (fair-share change)", _percent(moved["optimum_fraction"]), "")
    modulo_keys = moved["modulo_keys_moved"]
    table.add_row(
        "hash % N, same nodes",
        _percent(moved["modulo_fraction"]),
        f"{_count(modulo_keys)} ({_percent(modulo_keys / sample)})",
    )
    return table


def _pair_table(pairs: list[dict[str, Any]], *, arcs: bool) -> Table:
    table = Table(title="per source -> destination")
    columns = ("source", "destination", "arcs", "keyspace", "keys", "bytes")
    for column in columns if arcs else tuple(c for c in columns if c != "arcs"):
        left = column in ("source", "destination")
        table.add_column(column, justify="left" if left else "right", no_wrap=True)
    for pair in pairs:
        cells = [_count(pair["arcs"])] if arcs else []
        table.add_row(
            pair["source"],
            pair["destination"],
            *cells,
            _percent(pair["fraction"]),
            _count(pair["keys"]),
            _count(pair["bytes"]),
        )
    return table


def _bound(value: int, basis: str) -> str:
    """Return a range bound: a point as 64-bit hex, fixed width so that ranges line up; a slot
    (maglev's table, fixed partitions) as its index.

    >>> _bound(0x1F, "points"), _bound(31, "slots")
    ('0x000000000000001f', '31')
    """
    return f"0x{value:016x}" if basis == "points" else str(value)


def _transfer_table(transfers: list[dict[str, Any]], basis: str) -> Table:
    table = Table(title="largest transfers")
    for column in ("range", "source", "destination", "keyspace", "keys", "bytes", "est. s", "wave"):
        left = column in ("range", "source", "destination")
        # Numbers never wrap; a narrow terminal folds the range instead.
        folds = column == "range"
        table.add_column(
            column,
            justify="left" if left else "right",
            no_wrap=not folds,
            overflow="fold" if folds else "ellipsis",
        )
    for t in transfers:
        start, end = t["start"], t["end"]
        where = "keys" if start is None else f"({_bound(start, basis)}, {_bound(end, basis)}]"
        table.add_row(
            where,
            t["source"],
            t["destination"],
            _percent(t["fraction"]),
            _count(t["keys"]),
            _count(t["bytes"]),
            f"{t['duration_s']:.2f}",
            str(t["wave"]),
        )
    return table
