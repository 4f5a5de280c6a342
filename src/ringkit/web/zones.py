"""``/api/fail_zone``: every node of one zone fails at once, with and without zone-aware replicas.

The counts are :func:`ringkit.sim.fail_zone`'s, exact over the page's keys: keys that lost every
replica, keys below a quorum (``R // 2 + 1`` replicas alive; lost keys included) and the keys and
requests each survivor serves after failover. The same nodes are placed twice: in their zones
(a zone-aware preference list takes one node per zone first) and with no zones at all (the next
R nodes clockwise, whatever their zone), the way :func:`ringkit.sim.zones.zoned_nodes` builds
them; the zones still say which nodes fail together.

>>> from ringkit.web.params import parse_fail_zone_query
>>> query = parse_fail_zone_query(
...     {"nodes": "A:1:z0,B:1:z1,C:1:z2,D:1:z0,E:1:z1,F:1:z2", "zone": "z0", "replicas": "3"}
... )
>>> report = fail_zone_report(query)
>>> report["failed"], report["zone_aware"]["keys_lost"]
(['A', 'D'], 0)
"""

from __future__ import annotations

from typing import Any

from ringkit.errors import RingkitError
from ringkit.sim.zones import FailureReport, fail_zone, quorum, zoned_nodes
from ringkit.stats import balance
from ringkit.web.api import REQUESTS, build, population
from ringkit.web.params import FailZoneQuery, ParamError, RingQuery

__all__ = ["fail_zone_report"]


def _outcome(report: FailureReport, weights: dict[str, float], zipf: bool) -> dict[str, Any]:
    survivors = {name: weights[name] for name in report.loads["keys"]}
    data: dict[str, Any] = {
        "keys_lost": report.keys_lost,
        "keys_below_quorum": report.keys_below_quorum,
        "lost_fraction": report.lost["keys"],
        "below_quorum_fraction": report.keys_below_quorum / report.keys,
        "survivors": [],
        "busiest": None,
    }
    if not survivors:
        return data
    metric = "requests" if zipf else "keys"
    scale = REQUESTS if zipf else 1.0
    loads = {name: report.loads[metric][name] * scale for name in survivors}
    measured = balance(loads, survivors, metric=metric)
    data["survivors"] = [
        {"name": name, "keys": report.loads["keys"][name], metric: loads[name]}
        for name in survivors
    ]
    data["busiest"] = {
        "node": measured.busiest,
        "metric": metric,
        "load": measured.loads[measured.busiest],
        "ratio": measured.busiest_ratio,
    }
    return data


def fail_zone_report(query: FailZoneQuery) -> dict[str, Any]:
    """Return what failing the query's zone costs, zone-aware and zone-blind.

    Runtime: O(K × R) for K keys and R replicas, per placement, plus a preference list per
    token of a ring.

    :raises ParamError: when the strategy refuses the nodes or an option
    """
    nodes = query.placement.nodes
    zone_of = {node.name: str(node.zone) for node in nodes}
    keys = query.population
    keys_population = population(
        RingQuery(query.placement, keys.keys, keys.prefix, keys.zipf, None)
    )
    weights = {node.name: node.weight for node in nodes}
    outcomes = {}
    failed: list[str] = []
    for label, aware in (("zone_aware", True), ("zone_blind", False)):
        placement = build(query.placement, zoned_nodes(nodes, zone_of, zone_aware=aware))
        try:
            report = fail_zone(
                placement, zone_of, query.zone, keys_population, replicas=query.replicas
            )
        except RingkitError as error:
            raise ParamError("strategy", str(error), query.placement.strategy) from None
        failed = list(report.failed)
        outcomes[label] = _outcome(report, weights, keys.zipf is not None)
    return {
        "zone": query.zone,
        "failed": failed,
        "replicas": query.replicas,
        "quorum": quorum(query.replicas),
        "keys": keys.keys,
        **outcomes,
    }
