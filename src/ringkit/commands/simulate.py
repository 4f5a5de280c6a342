"""``ringkit simulate [SCENARIO ...]``: replay the Gatepass lesson, or scenario files in turn.

A scenario is a TOML file or the name of one shipped with ringkit (``ringkit simulate --list``:
cascade, gatepass, hot-key-remedies, hot-keys, load-balancers, zone-failure; ``examples/`` holds
copies of the same files).

With no file it replays Gatepass (a booking service adding a cache node): keys ``booking-0001`` …
``booking-0300`` hashed with ``fnv1a_32_mix`` on a ring of A, B, C; add D; remove B; for 1, 8, 32
and 128 vnodes. After each step: keys per node against the fair share, the busiest node × fair, and
the keys moved on the ring beside the keys moved with ``hash % N`` for the same change. It ends with
one key's lookup.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.table import Table

from ringkit.commands.balancers import NOTE as BALANCERS_NOTE
from ringkit.commands.balancers import balancers_json, balancers_table, run_balancers
from ringkit.commands.common import print_json, refuse
from ringkit.commands.lookup import lookup_report
from ringkit.commands.output import (
    Ticker,
    bar,
    bar_cells,
    console,
    fit,
    percent,
    pyplot,
    save_figure,
)
from ringkit.commands.remedies import NOTE, remedies_json, remedies_table, run_remedies
from ringkit.sim import (
    Run,
    Scenario,
    Step,
    bundled_scenarios,
    gatepass,
    load_bundled_scenario,
    load_scenario,
    run_scenario,
    with_vnodes,
)
from ringkit.strategies.registry import build_placement

__all__ = ["run", "run_json"]

_GATEPASS_VNODES = (1, 8, 32, 128)
# Notes stay one line each on wide output (to grep); narrower consoles wrap them.
_WRAP_NOTES = 100


def _batches(args: argparse.Namespace) -> list[list[Scenario]]:
    """The scenarios of each file or name in `args`, in order (Gatepass when none is given)."""
    if not args.scenario:
        return [
            gatepass(
                vnodes=args.vnodes or _GATEPASS_VNODES,
                keys=args.keys or 300,
                hasher=args.hasher or "fnv1a_32_mix",
            )
        ]
    return [_scenarios(args, source) for source in args.scenario]


def _load(source: str) -> list[Scenario]:
    """Load a scenario file, or the bundled scenario of that name when no such file exists."""
    # Before this, the examples were not in the wheel; they ship in ringkit/sim/scenarios
    if Path(source).exists() or source.endswith(".toml"):
        return load_scenario(source)
    return load_bundled_scenario(source)


def _scenarios(args: argparse.Namespace, source: str) -> list[Scenario]:
    for flag, value, field in (
        ("--keys", args.keys, "keys.count"),
        ("--hasher", args.hasher, "strategy.hasher"),
        ("--trace", args.trace, None),
    ):
        if value is not None:
            where = f"; set {field} in the scenario file" if field else ""
            raise refuse(f"{flag} applies to the default run only, got {value!r}{where}")
    scenarios = _load(source)
    if args.seed is not None:
        scenarios = [
            replace(s, population=replace(s.population, seed=args.seed)) for s in scenarios
        ]
    if args.vnodes is not None:
        scenarios = [v for s in scenarios[:1] for v in with_vnodes(s, args.vnodes)]
    return scenarios


def _step_json(run: Run, step: Step) -> dict[str, Any]:
    scenario = run.scenario
    data: dict[str, Any] = {
        "event": step.event,
        "nodes": list(step.nodes),
        "vnodes": scenario.options.vnodes,
        "keys_per_node": step.keys_per_node,
        "busiest_ratio": step.balance["keys"].busiest_ratio if step.balance else None,
        f"moved_{scenario.strategy}": step.moved["keys"],
    }
    base = _baseline_key(scenario)
    if base is not None:
        data[f"moved_{base}"] = step.baseline_moved
    data["optimum"] = step.optimum
    data["moved"] = step.moved
    data["balance"] = {
        m: {k: v for k, v in b.to_dict().items() if k not in ("loads", "fair")}
        for m, b in step.balance.items()
    }
    data["hot_keys"] = [
        {"key": h.key, "request_share": h.request_share, "node": h.node} for h in step.hot_keys
    ]
    data["failed"] = [list(r) for r in step.failed]
    data["stale"] = step.stale
    if base is not None:
        data[f"stale_{base}"] = step.baseline_stale
    data.update(_replica_json(step))
    return data


def _replica_json(step: Step) -> dict[str, Any]:
    """Replica figures: on every step; survivors' loads after a failure, stale replica sets."""
    failover = None
    if step.failover is not None:
        failover = {
            m: {k: v for k, v in b.to_dict().items() if k not in ("fair", "metric")}
            for m, b in step.failover.items()
        }
    return {
        "keys_lost": step.keys_lost,
        "keys_below_quorum": step.keys_below_quorum,
        "lost": step.lost,
        "failover": failover,
        "stale_replicas": step.stale_replicas,
    }


def _baseline_key(scenario: Scenario) -> str | None:
    """The baseline's name in JSON keys (``baseline`` when it is the strategy itself)."""
    if scenario.baseline is None:
        return None
    return "baseline" if scenario.baseline == scenario.strategy else scenario.baseline


def run_json(runs: list[Run], *, default: bool, trace: dict[str, Any] | None) -> dict[str, Any]:
    """Return the JSON document ``simulate --json`` prints for `runs`."""
    first = runs[0].scenario
    population = first.population
    data: dict[str, Any] = {"hasher": _hasher_name(first)}
    if default:
        data["keys"] = population.names()
    else:
        data["scenario"] = first.name
        data["strategy"] = first.strategy
        data["keys"] = {
            "count": population.count,
            "prefix": population.prefix,
            "zipf": population.zipf,
            "sizes": population.sizes.distribution,
            "seed": population.seed,
        }
        data["replicas"] = first.replicas
        data["zones"] = first.zones
        data["zone_aware"] = first.zone_aware
    data["steps"] = [_step_json(r, step) for r in runs for step in r.steps]
    if trace is not None:
        data["trace"] = trace
    return data


def _hasher_name(scenario: Scenario) -> str:
    hasher = scenario.options.hasher
    return hasher if isinstance(hasher, str) else getattr(hasher, "name", "custom")


def _table(run: Run, *, fair: int) -> Table:
    scenario = run.scenario
    rich_metrics = scenario.population.zipf > 0 or scenario.population.sizes.distribution != "fixed"
    table = Table(
        title=f"{scenario.name} · {scenario.strategy} · {_hasher_name(scenario)} · "
        f"{scenario.population.count:,} keys",
        title_justify="left",
    )
    # Half-length bars (a narrow console) beside three ratios add little: the ratios say it.
    bars = not rich_metrics or fair >= bar_cells(_WRAP_NOTES)
    for column in (
        ("step", "node", "keys", "", "× fair") if bars else ("step", "node", "keys", "× fair")
    ):
        table.add_column(column, justify="right" if column in ("keys", "× fair") else "left")
    if rich_metrics:
        table.add_column("bytes × fair", justify="right")
        table.add_column("requests × fair", justify="right")
    table.add_column(f"moved ({scenario.strategy})", justify="right")
    if scenario.baseline:
        table.add_column(f"moved ({_baseline_label(scenario.baseline)})", justify="right")
    replicated = _replicated(scenario)
    if replicated:
        table.add_column("keys lost", justify="right")
        table.add_column("below quorum", justify="right")
    for step in run.steps:
        if not step.nodes:
            losses = _loss_cells(step, replicated, first=True)
            blank = [""] * (len(table.columns) - 2 - len(losses))
            table.add_row(step.event, "all nodes down", *blank, *losses, end_section=True)
            continue
        keys = step.balance["keys"]
        moved = step.event != "start" and step.stale is None
        for i, name in enumerate(step.nodes):
            ratio = keys.loads[name] / keys.fair[name] if keys.fair[name] else 1.0
            row = [step.event if i == 0 else "", name, f"{int(keys.loads[name]):,}"]
            row += [bar(ratio, fair=fair), f"{ratio:.2f}"] if bars else [f"{ratio:.2f}"]
            if rich_metrics:
                row += [f"{_ratio(step, m, name):.2f}" for m in ("bytes", "requests")]
            row.append(percent(step.moved["keys"]) if i == 0 and moved else "")
            if scenario.baseline:
                base = step.baseline_moved if i == 0 and moved else None
                row.append(percent(base) if base is not None else "")
            row += _loss_cells(step, replicated, first=i == 0)
            table.add_row(*row, end_section=i == len(step.nodes) - 1)
    return table


def _replicated(scenario: Scenario) -> bool:
    """Whether tables show replica figures: keys have several replicas, or nodes have zones."""
    return scenario.replicas > 1 or scenario.zones is not None


def _loss_cells(step: Step, replicated: bool, *, first: bool) -> list[str]:
    """The keys lost / below quorum cells of a step's row (its first row carries them)."""
    if not replicated:
        return []
    return [f"{step.keys_lost:,}", f"{step.keys_below_quorum:,}"] if first else ["", ""]


def _baseline_label(name: str) -> str:
    return "hash % N" if name == "modulo" else name


def _ratio(step: Step, metric: str, name: str) -> float:
    b = step.balance[metric]
    return b.loads[name] / b.fair[name] if b.fair[name] else 1.0


def _notes(run: Run) -> list[str]:
    lines = []
    for step in run.steps:
        parts = [
            f"busiest {b.busiest} {b.busiest_ratio:.2f}× fair by {m}"
            for m, b in step.balance.items()
            if m == "keys"
            or run.scenario.population.zipf > 0
            or (m == "bytes" and run.scenario.population.sizes.distribution != "fixed")
        ]
        if not step.nodes:
            parts.append("every node failed; the run stops here")
        if step.optimum is not None:
            parts.append(
                f"moved {percent(step.moved['keys'])} of keys, a balanced placement "
                f"{percent(step.optimum)}"
            )
        if step.event.startswith("fail zone"):
            parts.append("failed: " + (", ".join(step.failed[0]) if step.failed else "none"))
        elif len(step.failed) > 1:
            parts.append("cascade: " + " → ".join(", ".join(r) for r in step.failed))
        elif step.failed:
            parts.append("no cascade: every survivor stayed under its capacity")
        if step.stale is not None:
            base = (
                f"; with {_baseline_label(run.scenario.baseline)}: {percent(step.baseline_stale)}"
                if run.scenario.baseline
                else ""
            )
            parts.append(
                f"a stale client sends {percent(step.stale['keys'])} of keys "
                f"({percent(step.stale['requests'])} of requests) to the wrong node{base}"
            )
        parts += _replica_notes(run.scenario, step)
        if step.hot_keys:
            hot = ", ".join(f"{h.key} {percent(h.request_share)} → {h.node}" for h in step.hot_keys)
            parts.append(f"hot keys: {hot}")
        lines.append(f"  {step.event}: " + "; ".join(parts))
    return lines


def _replica_notes(scenario: Scenario, step: Step) -> list[str]:
    """Keys lost and below quorum, survivors' load after failover, stale replica sets."""
    parts = []
    if step.lost is not None and _replicated(scenario):
        r = scenario.replicas
        parts.append(
            f"{step.keys_lost:,} keys ({percent(step.lost['keys'])}) lost every replica, "
            f"{step.keys_below_quorum:,} below a quorum of {r // 2 + 1} of {r} (lost included)"
        )
    if step.failover is not None and _replicated(scenario):
        keys = step.failover["keys"]
        parts.append(
            f"after failover busiest survivor {keys.busiest} {keys.busiest_ratio:.2f}× fair by keys"
        )
    if step.stale_replicas is not None:
        stale = step.stale_replicas
        parts.append(
            f"replica sets: {percent(stale['replica_set_differs'])} differ, "
            f"{percent(stale['all_replicas_wrong'])} wholly wrong, "
            f"{percent(stale['some_replica_right'])} with at least one right replica"
        )
    return parts


def _trace(runs: list[Run], key: str | None) -> dict[str, Any]:
    scenario = runs[-1].scenario
    placement = build_placement(scenario.strategy, scenario.nodes, scenario.options)
    return lookup_report(placement, key or scenario.population.key(0), 1)


def _shown_metrics(scenario: Scenario) -> list[str]:
    """Keys always; bytes when sizes vary; requests when popularity is skewed."""
    population = scenario.population
    shown = ["keys"]
    if population.sizes.distribution != "fixed":
        shown.append("bytes")
    if population.zipf > 0:
        shown.append("requests")
    return shown


def _step_title(run: Run, step: Step) -> str:
    title = f"{run.scenario.name}: {step.event}"
    if step.optimum is not None:
        title += f"\nmoved {percent(step.moved['keys'])}"
        if step.baseline_moved is not None:
            title += (
                f", {_baseline_label(run.scenario.baseline or '')} {percent(step.baseline_moved)}"
            )
    return title


def _plot(runs: list[Run], path: str) -> None:
    plt = pyplot(path)
    columns = max(len(r.steps) for r in runs)
    figure, axes = plt.subplots(
        len(runs), columns, figsize=(3.2 * columns, 2.6 * len(runs)), squeeze=False, sharey=True
    )
    for row, r in enumerate(runs):
        metrics = _shown_metrics(r.scenario)
        width = 0.8 / len(metrics)
        for col, step in enumerate(r.steps):
            ax = axes[row][col]
            for k, metric in enumerate(metrics):
                ratios = [_ratio(step, metric, n) for n in step.nodes]
                ax.bar([i + k * width for i in range(len(step.nodes))], ratios, width, label=metric)
            ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
            middle = (len(metrics) - 1) * width / 2
            long = any(len(name) > 3 for name in step.nodes)
            ax.set_xticks(
                [i + middle for i in range(len(step.nodes))],
                step.nodes,
                fontsize=7,
                rotation=30 if long else 0,
            )
            ax.set_title(_step_title(r, step), fontsize=8)
        for col in range(len(r.steps), columns):
            axes[row][col].axis("off")
        axes[row][0].set_ylabel("load × fair share")
        axes[row][0].legend(fontsize=7)
    save_figure(plt, figure, path)


def _print_list() -> None:
    out = console()
    scenarios = bundled_scenarios()
    width = max(map(len, scenarios), default=0)  # the longest name sets the summaries' column
    for name, summary in scenarios.items():
        out.print(f"{name:<{width}}  {summary}", soft_wrap=True)


def run(args: argparse.Namespace) -> int:
    """Run the default lesson or each scenario in turn and print tables or JSON.

    ``--json`` prints one document for one scenario, a list of them for several.
    """
    if args.list:
        _print_list()
        return 0
    if args.plot:
        pyplot(args.plot)  # fail on a bad file name before the long part
    batches = _batches(args)  # every file is read and checked before the first one runs
    with Ticker("simulating") as ticker:
        results = [[run_scenario(s, progress=ticker) for s in batch] for batch in batches]
    runs = [r for batch in results for r in batch]
    trace = _trace(runs, args.trace) if not args.scenario else None
    if args.plot:
        _plot(runs, args.plot)
    remedies = [run_remedies(batch) for batch in results]  # scenarios with a [remedies] table
    balancers = [run_balancers(batch) for batch in results]  # and with a [balancers] table
    if args.json:
        docs = [run_json(b, default=not args.scenario, trace=trace) for b in results]
        for doc, compared, layouts in zip(docs, remedies, balancers, strict=True):
            if compared:
                doc["remedies"] = remedies_json(compared)
            if layouts:
                doc["balancers"] = balancers_json(layouts)
        print_json(docs[0] if len(docs) == 1 else docs)
        return 0
    out = console()
    sources = args.scenario or [None]
    for source, batch, compared, layouts in zip(sources, results, remedies, balancers, strict=True):
        if len(results) > 1:
            out.print(f"scenario {source}", style="bold")
        for r in batch:
            out.print(fit(_table(r, fair=bar_cells(out.width)), out.width, names=("node",)))
            for line in _notes(r):
                out.print(line, soft_wrap=out.width >= _WRAP_NOTES)
            out.print()
        for r, rows in compared:
            out.print(fit(remedies_table(r, rows), out.width, names=("remedy", "busiest")))
            out.print(NOTE, soft_wrap=out.width >= _WRAP_NOTES)
            out.print()
        for r, compared_layouts in layouts:
            out.print(fit(balancers_table(r, compared_layouts), out.width, names=("layout",)))
            out.print(BALANCERS_NOTE, soft_wrap=out.width >= _WRAP_NOTES)
            out.print()
    if trace is not None:
        out.print(
            f"Look up {trace['key']}: hash = {trace['hash']} → walk clockwise to token "
            f"{trace['token']:#018x} → node {trace['owner']}"
        )
    if args.plot:
        out.print(f"plot written to {args.plot}")
    return 0
