"""``/api/remedies``: the hot-key remedies on the page's placement and Zipf keys.

The numbers are :func:`ringkit.sim.compare_remedies`'s, on the page's nodes, strategy and keys
(the simulator's ``Population``): per remedy, the server calls each node gets (in requests, out
of :data:`~ringkit.web.api.REQUESTS`), the busiest node × fair, extra items, extra writes per
update, extra reads per read and the worst staleness. Settings the query does not give are
:class:`ringkit.sim.Remedies`' defaults, with copies and parts capped at the number of nodes.

>>> from ringkit.web.params import parse_remedies_query
>>> report = remedies_report(parse_remedies_query({"zipf": "1.1", "keys": "1000"}))
>>> [row["remedy"] for row in report["rows"]]
['none', 'spread', 'near_cache', 'split']
>>> report["settings"]["parts"]  # three nodes: eight parts would not fit
3
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ringkit.errors import RingkitError
from ringkit.sim import Remedies, Scenario, compare_remedies
from ringkit.web.api import REQUESTS, build, population
from ringkit.web.params import ParamError, RemediesQuery, RingQuery

__all__ = ["remedies_report"]


def _settings(query: RemediesQuery) -> Remedies:
    nodes = len(query.placement.nodes)
    defaults = Remedies()
    given: dict[str, Any] = {
        "spread": min(defaults.spread, nodes),
        "parts": min(defaults.parts, nodes),
        **query.settings,
    }
    try:
        return Remedies(**given)
    except RingkitError as error:  # the parser bounds every value; this is a safety net
        raise ParamError("remedies", str(error), None) from None


def remedies_report(query: RemediesQuery) -> dict[str, Any]:
    """Return every remedy's outcome on the query's placement and keys.

    Runtime: O(K) for K keys, plus a preference list per top key.

    :raises ParamError: when the strategy refuses the nodes or an option
    """
    settings = _settings(query)
    keys = query.population
    ring_query = RingQuery(query.placement, keys.keys, keys.prefix, keys.zipf, None)
    placement = build(query.placement)
    scenario = Scenario(population(ring_query), query.placement.nodes, remedies=settings)
    try:
        results = compare_remedies(scenario, placement=placement)
    except RingkitError as error:
        raise ParamError("strategy", str(error), query.placement.strategy) from None
    rows = []
    for result in results:
        row = result.to_dict()
        row["calls"] = {name: load * REQUESTS for name, load in result.balance.loads.items()}
        row["fair_calls"] = {name: fair * REQUESTS for name, fair in result.balance.fair.items()}
        rows.append(row)
    return {
        "settings": dataclasses.asdict(settings),
        "requests": REQUESTS,
        "rows": rows,
    }
