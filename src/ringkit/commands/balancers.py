"""The load balancers of a scenario's ``[balancers]`` table, as ``ringkit simulate`` shows them.

The numbers come from :func:`ringkit.sim.balancers.compare_balancers`; this module lays them
out: one row per proxy layout (users per backend before and after the join, users moved,
against the least possible) and the same rows under ``balancers`` in ``--json``.
"""

from __future__ import annotations

import re
from typing import Any

from rich.table import Table

from ringkit.commands.output import percent
from ringkit.sim import Run
from ringkit.sim.balancers import BalancerResult, compare_balancers

__all__ = ["NOTE", "balancers_json", "balancers_table", "run_balancers"]

NOTE = (
    "  users per backend: before → after the join; moved: users whose backend changed (every "
    "one of them loses its warm cache or session); least: the new backend's fair share"
)


def _next_name(names: list[str]) -> str:
    """The backend after the last one: ``web-4`` → ``web-5`` (else ``new``)."""
    match = re.fullmatch(r"(.*?)(\d+)", names[-1])
    candidate = f"{match.group(1)}{int(match.group(2)) + 1}" if match else "new"
    while candidate in names:
        candidate += "'"
    return candidate


def run_balancers(runs: list[Run]) -> list[tuple[Run, tuple[BalancerResult, ...]]]:
    """Return the first run of a batch with a ``[balancers]`` table, its layouts compared.

    The layouts do not depend on the ring's vnodes, so one comparison serves the batch.
    """
    for run in runs[:1]:
        balancers = run.scenario.balancers
        if balancers is not None:
            names = [node.name for node in run.scenario.nodes]
            join = balancers.join or _next_name(names)
            users = run.scenario.population.names()
            return [(run, compare_balancers(names, join, users))]
    return []


def balancers_json(compared: list[tuple[Run, tuple[BalancerResult, ...]]]) -> list[dict[str, Any]]:
    """Return the ``balancers`` list of ``simulate --json``."""
    return [{"rows": [result.to_dict() for result in results]} for _, results in compared]


def balancers_table(run: Run, results: tuple[BalancerResult, ...]) -> Table:
    """Return the layouts side by side, one row each."""
    joined = next(iter(results[0].after.keys() - results[0].before.keys()))
    table = Table(
        title=f"{run.scenario.name} · {results[0].users:,} sticky users · {joined} joins",
        title_justify="left",
    )
    table.add_column("layout")
    table.add_column("users per backend")
    for column in ("moved", "least"):
        table.add_column(column, justify="right")
    for result in results:
        before = " ".join(f"{count:,}" for count in result.before.values())
        after = " ".join(f"{count:,}" for count in result.after.values())
        table.add_row(
            result.label,
            f"{before} → {after}",
            f"{result.moved:,} ({percent(result.moved_fraction)})",
            percent(result.least_fraction),
        )
    return table
