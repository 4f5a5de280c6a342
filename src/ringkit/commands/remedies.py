"""The hot-key remedies of a scenario's ``[remedies]`` table, as ``ringkit simulate`` shows them.

The numbers come from :func:`ringkit.sim.remedies.compare_remedies`; this module only lays them
out: one table per run (one per vnode count) and the same rows under ``remedies`` in ``--json``.
"""

from __future__ import annotations

from typing import Any

from rich.table import Table

from ringkit.sim import Run
from ringkit.sim.remedies import RemedyResult, compare_remedies

__all__ = ["NOTE", "remedies_json", "remedies_table", "run_remedies"]

# What the columns mean, printed under the table (docs/simulator.md says it at length).
NOTE = (
    "  × fair: busiest node's server calls over its fair share of all calls; vs requests: over "
    "its fair share of the client requests; calls: server calls per client request; +writes, "
    "+reads: extra server calls per update or read of a remedied key; stale: the oldest value a "
    "read may return after another client's write"
)


def run_remedies(runs: list[Run]) -> list[tuple[Run, tuple[RemedyResult, ...]]]:
    """Return each run that has a ``[remedies]`` table with its remedies compared."""
    return [(r, compare_remedies(r.scenario)) for r in runs if r.scenario.remedies is not None]


def remedies_json(compared: list[tuple[Run, tuple[RemedyResult, ...]]]) -> list[dict[str, Any]]:
    """Return the ``remedies`` list of ``simulate --json``: settings and rows per run."""
    docs = []
    for run, results in compared:
        remedies = run.scenario.remedies
        assert remedies is not None
        settings = {name: getattr(remedies, name) for name in remedies.__dataclass_fields__}
        docs.append(
            {
                "vnodes": run.scenario.options.vnodes,
                "settings": settings,
                "rows": [result.to_dict() for result in results],
            }
        )
    return docs


def remedies_table(run: Run, results: tuple[RemedyResult, ...]) -> Table:
    """Return one run's remedies as a table, one row per remedy."""
    remedies = run.scenario.remedies
    assert remedies is not None
    table = Table(
        title=f"{run.scenario.name} · hot-key remedies · top {remedies.top} keys · "
        f"{remedies.writes:.0%} writes · {remedies.clients} clients",
        title_justify="left",
    )
    for column in ("remedy", "busiest", "× fair", "vs requests", "calls", "extra items"):
        table.add_column(column, justify="left" if column in ("remedy", "busiest") else "right")
    for column in ("+writes", "+reads", "stale"):
        table.add_column(column, justify="right")
    for result in results:
        where = {"nodes": " nodes", "clients": " clients"}.get(result.held_in, "")
        table.add_row(
            result.remedy.replace("_", "-"),
            result.balance.busiest,
            f"{result.busiest_ratio:.2f}",
            f"{result.busiest_load:.2f}",
            f"{result.server_calls:.2f}",
            f"{result.extra_items:,}{where}",
            str(result.extra_writes_per_update),
            str(result.extra_reads_per_read),
            f"{result.worst_staleness_s:g} s",
        )
    return table
