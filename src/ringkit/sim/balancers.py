"""The load-balancer lesson: sticky users, and who moves when a backend joins, per proxy.

A load balancer that hashes a user id keeps each user on one backend (*sticky*), so the
backend's caches and sessions stay warm; when a backend joins, the users that change backend
lose them. How many do depends on the proxy's layout, not on "consistent hashing" in general:
HAProxy's ``hash-type consistent`` (``lb_chash.c``: 16 points per weight unit, at the hash of
the server's id), nginx's ``hash … consistent`` (``ngx_http_upstream_hash_module``: 160 points
per weight unit, chained CRC-32 of the address), Envoy's ring hash and Maglev table, and
``hash % N`` for contrast. Each layout here is the library's own exact one
(``ringkit.compat.haproxy``, ``nginx``, ``envoy_ring``, ``envoy_maglev``; ``Modulo``),
fed the same users and backends: backend i is ``10.0.0.i:8080`` with HAProxy id i.

>>> results = compare_balancers(["web-1", "web-2", "web-3"], "web-4", [f"u{i}" for i in range(900)])
>>> [(r.layout, r.moved_to_new == r.moved) for r in results][:2]
[('haproxy', True), ('nginx', True)]
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ringkit.compat import envoy_maglev, envoy_ring
from ringkit.compat.haproxy import HAProxyServer, haproxy
from ringkit.compat.nginx import nginx
from ringkit.errors import ConfigError
from ringkit.strategies.modulo import Modulo

__all__ = [
    "BALANCER_LABELS",
    "BALANCER_LAYOUTS",
    "BalancerResult",
    "Balancers",
    "backend_address",
    "compare_balancers",
]

#: The layouts compared, in the order shown, and what each is called on the page.
BALANCER_LABELS: Mapping[str, str] = {
    "haproxy": "HAProxy hash-type consistent",
    "nginx": "nginx hash … consistent",
    "envoy_ring": "Envoy ring hash",
    "maglev": "Envoy Maglev",
    "modulo": "hash % N",
}
BALANCER_LAYOUTS = tuple(BALANCER_LABELS)


@dataclass(frozen=True, slots=True)
class Balancers:
    """A scenario's ``[balancers]`` table: the backend that joins (None: the next name)."""

    join: str | None = None


def backend_address(index: int) -> str:
    """The address the lesson gives backend number `index` (from 1).

    >>> backend_address(3)
    '10.0.0.3:8080'
    """
    return f"10.0.0.{index}:8080"


def _owners(layout: str, names: Sequence[str]) -> Callable[[Sequence[str]], list[str]]:
    """Return a function from users to the backend names `layout` sends them to."""
    addresses = {backend_address(i): name for i, name in enumerate(names, start=1)}
    if layout == "haproxy":
        servers = [
            HAProxyServer(n, id=i, address=a) for i, (a, n) in enumerate(addresses.items(), 1)
        ]
        return haproxy(servers).node_for_many
    if layout == "modulo":
        return Modulo(names).node_for_many
    if layout == "nginx":
        placement: Any = nginx(list(addresses))
    elif layout == "envoy_ring":
        placement = envoy_ring(list(addresses))
    else:
        placement = envoy_maglev(list(addresses))
    return lambda users: [addresses[a] for a in placement.node_for_many(users)]


@dataclass(frozen=True, slots=True)
class BalancerResult:
    """One layout's users per backend before and after the join, and how many moved.

    ``least_fraction`` is the least any layout could move: the new backend's fair share.
    """

    layout: str
    users: int
    before: Mapping[str, int]
    after: Mapping[str, int]
    moved: int
    moved_to_new: int

    @property
    def label(self) -> str:
        """What the page and the table call the layout."""
        return BALANCER_LABELS[self.layout]

    @property
    def moved_fraction(self) -> float:
        """The share of users that changed backend."""
        return self.moved / self.users if self.users else 0.0

    @property
    def least_fraction(self) -> float:
        """1 / (N + 1): the new backend's fair share of users."""
        return 1 / len(self.after) if self.after else 0.0

    def to_dict(self) -> dict[str, Any]:
        """Return the result as JSON-ready data (``simulate --json``, ``/api/balancers``)."""
        return {
            "layout": self.layout,
            "label": self.label,
            "users": self.users,
            "before": dict(self.before),
            "after": dict(self.after),
            "moved": self.moved,
            "moved_to_new": self.moved_to_new,
            "moved_fraction": self.moved_fraction,
            "least_fraction": self.least_fraction,
        }


def compare_balancers(
    backends: Sequence[str], join: str, users: Sequence[str]
) -> tuple[BalancerResult, ...]:
    """Place `users` on `backends`, then with `join` added, under every layout; compare.

    Runtime: O(U + P log P) per layout for U users and P points.

    :raises ConfigError: for no backends, a duplicate name, or `join` already a backend
    """
    if not backends or len(set(backends)) != len(backends):
        raise ConfigError(f"backends must be distinct names, at least one, got {list(backends)!r}")
    if join in backends:
        raise ConfigError(f"the joining backend must be new, got {join!r} (already a backend)")
    results = []
    for layout in BALANCER_LAYOUTS:
        old = _owners(layout, backends)(users)
        new = _owners(layout, [*backends, join])(users)
        moved = [n for o, n in zip(old, new, strict=True) if o != n]
        results.append(
            BalancerResult(
                layout,
                len(users),
                {name: Counter(old)[name] for name in backends},
                {name: Counter(new)[name] for name in [*backends, join]},
                len(moved),
                moved.count(join),
            )
        )
    return tuple(results)
