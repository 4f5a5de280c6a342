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
import importlib.util
import os
import sys
from collections.abc import Callable

from ringkit.commands.common import print_json
from ringkit.demos.gatepass import (
    GatepassReport,
    StrategyResult,
    local_servers,
    memory_urls,
    run_gatepass,
)
from ringkit.errors import ConfigError

__all__ = ["render"]


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


# The Python client of each server backend and the extra that installs it.
_CLIENTS = {"redis": ("redis", "redis"), "memcached": ("pymemcache", "memcached")}


def _require_client(backend: str) -> None:
    """Refuse a backend whose Python client is not installed, naming the extra to install."""
    module, extra = _CLIENTS[backend]
    if importlib.util.find_spec(module) is None:
        raise ConfigError(
            f"--backend {backend} needs the {module} package, which is not installed; "
            f"install it with: pip install 'ringkit[{extra}]'"
        )


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
        _require_client(args.backend)  # before any server starts, not after four of them
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
