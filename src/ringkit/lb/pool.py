"""The pool a proxy should hold: the live ring's members that carry an address, with weights.

A member is proxied when its record's ``data`` holds ``{"address": "host:port"}`` and it is
``active`` (a ``joining`` member is not in the ring yet; a ``leaving`` one is being taken out).
Its weight must be an integer in the proxy's range, HAProxy's 1–256 (``set server … weight``
refuses more) or nginx's ≥ 1; a weight outside it refuses the whole pool, naming the member,
unless a ``weight_scale`` K is given, when the proxy gets ``round(weight × K)``. A proxy that
received a silently rounded weight would route differently from what ``ringkit.compat`` of
the members predicts, so nothing is rounded unless asked.

>>> from ringkit.live import MemberInfo
>>> info = MemberInfo("w1", "active", None, 2.0, {"address": "10.0.0.1:80"}, (), 5.0, 7)
>>> proxied({"w1": info}, weights=HAPROXY_WEIGHTS).servers
(PoolServer(member='w1', address='10.0.0.1:80', weight=2),)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from ringkit.errors import ConfigError
from ringkit.live import MemberInfo

__all__ = [
    "HAPROXY_WEIGHTS",
    "NGINX_WEIGHTS",
    "Pool",
    "PoolServer",
    "ProxyServer",
    "WeightRange",
    "member_address",
    "proxied",
]


@dataclass(frozen=True, slots=True)
class WeightRange:
    """The integer weights a proxy accepts: ``low`` ≤ w ≤ ``high`` (None: no upper bound)."""

    proxy: str
    low: int
    high: int | None

    def __str__(self) -> str:
        return f"[{self.low}, {self.high}]" if self.high is not None else f">= {self.low}"

    def __contains__(self, weight: object) -> bool:
        if not isinstance(weight, int):
            return False
        return weight >= self.low and (self.high is None or weight <= self.high)


#: HAProxy's server weights (``weight`` is 0–256, 0 meaning "no traffic", which a member is not).
HAPROXY_WEIGHTS = WeightRange("HAProxy", 1, 256)
#: nginx's ``server … weight=N`` (N ≥ 1).
NGINX_WEIGHTS = WeightRange("nginx", 1, None)


@dataclass(frozen=True, slots=True)
class PoolServer:
    """One proxied member: its name, the ``host:port`` the proxy sends to, its proxy weight."""

    member: str
    address: str
    weight: int


@dataclass(frozen=True, slots=True)
class ProxyServer:
    """A server as a proxy holds it: its name there, member, address, proxy id and weight.

    What the proxy's own layout is computed from (``ringkit.compat``'s HAProxy layout takes
    name, address, id and weight). With pre-declared slots ``name`` is the slot's, not the
    member's.
    """

    name: str
    member: str
    address: str
    id: int
    weight: int


@dataclass(frozen=True, slots=True)
class Pool:
    """The servers a proxy should route to (sorted by member), and what was left out.

    ``leaving``: members in the ``leaving`` state (being taken out gracefully).
    ``refused``: active members without a usable address, name → why.
    """

    servers: tuple[PoolServer, ...]
    leaving: frozenset[str]
    refused: Mapping[str, str]

    @property
    def members(self) -> frozenset[str]:
        """The names of the proxied members."""
        return frozenset(server.member for server in self.servers)


def member_address(info: MemberInfo) -> str:
    """Return the ``host:port`` in `info`'s data.

    >>> from ringkit.live import MemberInfo
    >>> member_address(MemberInfo("w", "active", None, 1.0, {"address": "[::1]:80"}, (), 5, 1))
    '[::1]:80'

    :raises ConfigError: when the data holds no ``address`` of the form ``host:port``
    """
    data = info.data
    address = data.get("address") if isinstance(data, Mapping) else None
    if not isinstance(address, str):
        raise ConfigError(
            f"member {info.name!r} must have data {{'address': 'host:port'}} to be proxied, "
            f"got data {data!r}"
        )
    host, colon, port = address.rpartition(":")
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(
            f"member {info.name!r} address must be host:port with a port in [1, 65535], "
            f"got {address!r}"
        )
    return address


def proxy_weight(info: MemberInfo, weights: WeightRange, weight_scale: float | None) -> int:
    """Return the proxy weight of `info`: its weight, or ``round(weight × weight_scale)``.

    :raises ConfigError: when that is not an integer in `weights`, naming the member
    """
    weight = info.weight if weight_scale is None else round(info.weight * weight_scale)
    if weight_scale is None and math.isfinite(weight) and weight == int(weight):
        weight = int(weight)
    if weight not in weights:
        scaled = "" if weight_scale is None else f" × weight_scale {weight_scale:g} = {weight}"
        fix = "" if weight_scale is not None else "; pass weight_scale K to send round(weight × K)"
        raise ConfigError(
            f"member {info.name!r} weight must be an integer in {weights} for {weights.proxy}, "
            f"got {info.weight:g}{scaled}{fix}"
        )
    return int(weight)


def proxied(
    members: Mapping[str, MemberInfo],
    *,
    weights: WeightRange,
    weight_scale: float | None = None,
) -> Pool:
    """Return the pool of `members` a proxy with `weights` should route to.

    Active members with an address are proxied; active members without one are refused by
    name (``Pool.refused``) and the rest are still proxied; members ``leaving`` are listed to
    be taken out. Runtime: O(members).

    :raises ConfigError: when a proxied member's weight does not fit `weights` (naming it)
    """
    if weight_scale is not None and not (math.isfinite(weight_scale) and weight_scale > 0):
        raise ConfigError(f"weight_scale must be a finite number > 0, got {weight_scale!r}")
    servers: list[PoolServer] = []
    refused: dict[str, str] = {}
    for name, info in sorted(members.items()):
        if info.state != "active":
            continue
        try:
            address = member_address(info)
        except ConfigError as error:
            refused[name] = str(error)
            continue
        servers.append(PoolServer(name, address, proxy_weight(info, weights, weight_scale)))
    leaving = frozenset(name for name, info in members.items() if info.state == "leaving")
    return Pool(tuple(servers), leaving, refused)
