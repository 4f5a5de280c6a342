"""``ringkit advise``: how many vnodes N nodes need, what they cost, and the alternatives.

The vnode trade-off (balance against table size, Karger et al. 1997; Dynamo's strategies,
DeCandia et al. 2007) as a decision: the fewest vnodes that keep the busiest node within
``--target`` × its fair share in ``--confidence`` of ``--draws`` seeded rings, beside the
vnodes the worst-share estimate ``1 + sqrt(2·ln N / V)`` gives; the routing table, gossip and
join costs of that choice; and what fixed partitions, tokens allocated by a controller, or plain
``hash % N`` give instead. With ``--zones Z`` (and ``--replicas R``), also the share of keys one
zone's failure costs at that vnode count, with and without zone-aware placement, counted over a
sample of keys (``ringkit.advice.zone_risk``).
"""

from __future__ import annotations

import argparse
from dataclasses import asdict

from rich.table import Table

from ringkit.advice import Advice, ZoneRisk, advise
from ringkit.commands.common import (
    check_draw_size,
    print_json,
)
from ringkit.commands.output import Ticker, console, fit

__all__ = ["run"]


# (flag, type, default, help): the numeric options, added in one loop.
def _bytes(value: int | None) -> str:
    return "–" if value is None else f"{value:,} B"


def _ring_rows(a: Advice) -> list[tuple[str, ...]]:
    measured = "not drawn" if a.formula_confidence is None else f"in {a.formula_confidence:.1%}"
    formula = (
        "worst-share formula",
        f"{a.formula_vnodes:,} vnodes",
        f"≤ {a.target:g} {measured}",
        "",
        "",
        "",
    )
    if a.vnodes is None:
        return [("ring", "none ≤ 4,096 vnodes", "–", "–", "–", "–"), formula]
    ring = (
        "ring (hashed tokens)",
        f"{a.vnodes:,} vnodes",
        f"≤ {a.target:g} in {a.achieved:.1%}",
        f"{_bytes(a.table_bytes)} (at 40 B/entry: {_bytes(a.seed_table_bytes)})",
        f"{a.gossip_entries:,}",
        f"{a.join_transfers:,} arcs from ~{a.join_sources:.0f} sources",
    )
    return [ring, formula]


def _other_rows(a: Advice) -> list[tuple[str, ...]]:
    fixed = (
        "fixed partitions",
        f"{a.partitions:,} partitions",
        f"{a.partitions_imbalance:.2f}",
        f"{a.partitions * 2:,} B",
        f"{a.partitions:,}",
        f"~{a.partition_join_moves:,} partitions, sources chosen",
    )
    rows: list[tuple[str, ...]] = [fixed]
    if a.allocated_vnodes is not None:
        sources = min(a.allocated_vnodes, a.nodes)
        allocated = (
            "allocated tokens",
            f"{a.allocated_vnodes:,} per node",
            f"≤ {a.target:g}",
            _bytes(a.allocated_table_bytes),
            f"{a.nodes * a.allocated_vnodes:,}",
            f"{a.allocated_vnodes:,} arcs from ≤ {sources} sources",
        )
        rows.append(allocated)
    modulo = (
        "hash % N",
        "–",
        "1.00 (even by hash)",
        "0 B",
        f"{a.nodes} names",
        f"moves {a.nodes / (a.nodes + 1):.0%} of keys",
    )
    rows.append(modulo)
    return rows


def _table(a: Advice) -> Table:
    plural = "s" if a.replicas > 1 else ""
    table = Table(
        title=f"{a.nodes} nodes, {a.replicas} replica{plural}: busiest ≤ {a.target:g} × fair "
        f"in {a.confidence:.0%} of {a.draws} seeded rings",
        title_justify="left",
    )
    for column in ("placement", "setting", "balance", "table per client", "gossip", "per join"):
        table.add_column(column)
    for row in _ring_rows(a) + _other_rows(a):
        table.add_row(*row)
    return table


def _zone_table(risk: ZoneRisk) -> Table:
    table = Table(
        title=f"one zone of {risk.zones} fails: {risk.replicas} replicas, {risk.vnodes:,} vnodes "
        f"(counted over {risk.keys:,} sampled keys on each of {risk.rings} rings × "
        f"{risk.zones} zones)",
        title_justify="left",
    )
    for column in ("placement", "keys lost (mean)", "keys lost (worst)", "below quorum (mean)"):
        table.add_column(column, justify="left" if column == "placement" else "right")
    table.add_row(
        "zone-aware",
        f"{risk.aware_lost:.3%}",
        f"{risk.aware_lost_worst:.3%}",
        f"{risk.aware_below_quorum:.3%}",
    )
    table.add_row(
        "zone-blind",
        f"{risk.blind_lost:.3%}",
        f"{risk.blind_lost_worst:.3%}",
        f"{risk.blind_below_quorum:.3%}",
    )
    return table


def _notes(a: Advice) -> list[str]:
    notes = [
        "the worst-share formula targets the expected busiest node, not a confidence level.",
        f"fixed partitions: {a.partitions:,} equal partitions keep any count up to "
        f"{max(a.nodes, round(a.partitions * (a.target - 1)))} nodes within {a.target:g} × "
        "fair; a controller holds the partition map.",
        "allocated tokens: a controller places each joiner's tokens to take load from the "
        "busiest nodes (water-filling model); the token map is state every client must learn.",
    ]
    if a.static:
        notes.insert(
            0,
            f"The node count never changes: hash % N (or {a.nodes} fixed "
            "partitions) is perfectly even, needs no table and never moves a key; a "
            "ring is unnecessary overhead here.",
        )
    else:
        notes.append(
            "If the node count never changes, hash % N or fixed partitions suffice "
            "and a ring is overhead (rerun with --static)."
        )
    return notes


def run(args: argparse.Namespace) -> int:
    """Search the vnode count and print the advice as a table or JSON."""
    # The search stops at the first passing vnode count, so only the shares are counted here.
    check_draw_size(args.draws, args.nodes, 1, 1)
    with Ticker("searching vnodes") as ticker:
        advice = advise(
            args.nodes,
            target=args.target,
            confidence=args.confidence,
            replicas=args.replicas,
            draws=args.draws,
            seed=args.seed,
            max_nodes=args.max_nodes,
            static=args.static,
            zones=args.zones,
            progress=ticker,
        )
    if args.json:
        data = asdict(advice)
        data["recommendation"] = advice.recommendation
        print_json(data)
        return 0
    out = console()
    out.print(fit(_table(advice), out.width))
    if advice.zone_risk is not None:
        out.print(fit(_zone_table(advice.zone_risk), out.width))
    for note in _notes(advice):
        out.print(f"  {note}", soft_wrap=out.width >= 100)
    return 0
