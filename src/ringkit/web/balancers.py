"""``/api/balancers``: the load-balancer lesson on the page, from the simulator's own call.

``GET /api/balancers?backends=4&users=10000`` places users ``user-1`` … on backends ``web-1``
… ``web-N`` under HAProxy's, nginx's, Envoy's ring hash and Maglev layouts and ``hash % N``,
then with ``web-N+1`` added: :func:`ringkit.sim.balancers.compare_balancers`, the numbers
``ringkit simulate load-balancers`` prints.

>>> report = balancers_report(parse_balancers_query({"backends": "3", "users": "300"}))
>>> report["join"], [row["layout"] for row in report["rows"]][:2]
('web-4', ['haproxy', 'nginx'])
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ringkit.errors import ParamError
from ringkit.sim.balancers import compare_balancers

__all__ = [
    "MAX_BACKENDS",
    "MAX_USERS",
    "BalancersQuery",
    "balancers_report",
    "parse_balancers_query",
]

MAX_BACKENDS = 32
MAX_USERS = 20_000
_DEFAULTS = {"backends": 4, "users": 10_000}
_LIMITS = {"backends": MAX_BACKENDS, "users": MAX_USERS}


@dataclass(frozen=True, slots=True)
class BalancersQuery:
    """``GET /api/balancers``: how many backends before the join, how many sticky users."""

    backends: int
    users: int


def parse_balancers_query(params: Mapping[str, str] | Iterable[tuple[str, str]]) -> BalancersQuery:
    """Return the validated ``/api/balancers`` query.

    :raises ParamError: for an unknown or repeated parameter, or a count out of range
    """
    items = params.items() if isinstance(params, Mapping) else params
    values: dict[str, int] = {}
    for name, text in items:
        if name not in _DEFAULTS:
            raise ParamError(name, f"unknown parameter {name!r}; known: backends, users", text)
        if name in values:
            raise ParamError(name, f"{name} must be given once", text)
        if not re.fullmatch(r"[0-9]{1,6}", text) or not 1 <= int(text) <= _LIMITS[name]:
            raise ParamError(name, f"{name} must be in [1, {_LIMITS[name]}], got {text!r}", text)
        values[name] = int(text)
    return BalancersQuery(**{**_DEFAULTS, **values})


def balancers_report(query: BalancersQuery) -> dict[str, Any]:
    """Return every layout's users per backend before and after the join, and the moves."""
    names = [f"web-{i}" for i in range(1, query.backends + 1)]
    join = f"web-{query.backends + 1}"
    users = [f"user-{i}" for i in range(1, query.users + 1)]
    results = compare_balancers(names, join, users)
    return {
        "backends": names,
        "join": join,
        "users": query.users,
        "rows": [result.to_dict() for result in results],
    }
