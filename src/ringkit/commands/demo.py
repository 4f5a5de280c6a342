"""``ringkit demo``: lessons on real servers and processes.

``demo cache`` is the Gatepass scenario (``ringkit simulate``) on real cache servers. Fills the
servers, warms them, adds servers and replays the reads, for a ring and for ``hash % N``, then
prints the hit rate right after the change, the keys moved, the reads that fall through to the
database, and the time each phase took. With ``--backend memcached`` or ``redis`` it starts the
servers itself on free loopback ports (and stops them at the end).

``demo workers`` is a pool of workers sharing tenants through a live ring
(:mod:`ringkit.commands.workers`): one is killed with SIGKILL and the pool converges.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

from ringkit.commands import workers
from ringkit.commands.common import positive_int, print_json
from ringkit.demos.gatepass import (
    GatepassReport,
    StrategyResult,
    local_servers,
    memory_urls,
    run_gatepass,
)

__all__ = ["register", "render"]


def register(subparsers: Any) -> None:
    """Add the ``demo`` subcommand and its ``cache`` scenario."""
    parser = subparsers.add_parser(
        "demo",
        help="run a lesson on real servers or processes",
        description="Run a lesson on real servers or processes.",
    )
    scenarios = parser.add_subparsers(dest="scenario", metavar="SCENARIO", required=True)
    cache = scenarios.add_parser(
        "cache",
        help="Gatepass: add a cache server, ring against hash %% N",
        description="Fill cache servers, add one, replay the reads: ring against hash % N.",
    )
    cache.add_argument(
        "--backend",
        choices=("memory", "memcached", "redis"),
        default="memory",
        help="where the cache lives (default: memory, in this process)",
    )
    cache.add_argument(
        "--servers", type=positive_int, default=3, help="servers before the change (default: 3)"
    )
    cache.add_argument("--add", type=positive_int, default=1, help="servers added (default: 1)")
    cache.add_argument(
        "--keys", type=positive_int, default=10_000, help="booking keys (default: 10000)"
    )
    cache.add_argument("--json", action="store_true", help="print JSON")
    cache.set_defaults(run=run)
    workers.register(scenarios)


def render(report: GatepassReport) -> str:
    """Return the report as the table the command prints."""
    total = report.servers + report.added
    lines = [
        f"Gatepass: {report.keys:,} booking keys on {report.servers} {report.backend} servers, "
        f"then {report.added} added ({total} servers)",
        f"{'':<28}" + "".join(f"{result.strategy:>22}" for result in report.results),
    ]
    rows: list[tuple[str, Callable[[StrategyResult], str]]] = [
        ("keys moved", lambda r: f"{r.moved:,} ({r.moved_fraction:.1%})"),
        ("hit rate right after", lambda r: f"{r.hit_rate:.1%}"),
        ("reads falling to database", lambda r: f"{r.database_reads:,}"),
        (
            "fill / warm / replay (s)",
            lambda r: f"{r.fill_s:.2f} / {r.warm_s:.2f} / {r.replay_s:.2f}",
        ),
    ]
    for label, cell in rows:
        lines.append(f"{label:<28}" + "".join(f"{cell(result):>22}" for result in report.results))
    ring, modulo = report.results
    lines.append(
        f"The ring keeps {ring.hit_rate:.0%} of the hits (expected {report.servers / total:.0%}"
        f"); hash % N keeps {modulo.hit_rate:.0%}: {modulo.database_reads - ring.database_reads:,}"
        f" more reads hit the database at once."
    )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Run the scenario on the chosen backend and print the report."""
    count = args.servers + args.add
    options = {
        "servers": args.servers,
        "added": args.add,
        "keys": args.keys,
        "backend": args.backend,
    }
    if args.backend == "memory":
        report = run_gatepass(memory_urls(count, str(os.getpid())), **options)
    else:
        print(f"starting {count} {args.backend} servers on loopback ...", file=sys.stderr)
        with local_servers(args.backend, count) as urls:
            report = run_gatepass(urls, **options)
    if args.json:
        print_json(
            {
                "backend": report.backend,
                "servers": report.servers,
                "added": report.added,
                "keys": report.keys,
                "results": [
                    {
                        "strategy": r.strategy,
                        "moved": r.moved,
                        "hits": r.hits,
                        "hit_rate": r.hit_rate,
                        "database_reads": r.database_reads,
                        "fill_s": r.fill_s,
                        "warm_s": r.warm_s,
                        "replay_s": r.replay_s,
                    }
                    for r in report.results
                ],
            }
        )
    else:
        print(render(report))
    return 0
