"""Envoy's Maglev load balancer: its table, host weights and key hash, slot for slot.

Envoy's ``MaglevTable`` fills a prime-sized table exactly as :class:`ringkit.Maglev` does
(Eisenbud et al. 2016, pseudocode listing 1; nodes sorted by name, ``offset`` and ``skip`` from
XXH64 of the host's address), so this layout is a ``Maglev`` whose nodes are the hosts, named by
address, weighted by Envoy's integer host weights, with keys hashed by XXH64 as Envoy's header
and cookie hash policies do.

Reference: Envoy ``source/common/upstream/maglev_lb.cc`` and ``test/common/upstream/
maglev_lb_test.cc`` (the tables below come from it).

>>> maglev = envoy_maglev([f"127.0.0.1:{port}" for port in range(90, 96)], table_size=7)
>>> [name[-2:] for name in maglev.table]
['92', '94', '90', '91', '95', '90', '93']
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ringkit.compat.envoy import ENVOY_KEY_HASHER
from ringkit.errors import ConfigError
from ringkit.nodes import Node, coerce_nodes
from ringkit.strategies.maglev import MAGLEV_TABLE_SIZE, Maglev

__all__ = ["ENVOY_KEY_HASHER", "envoy_maglev"]

_UINT32_MAX = 2**32 - 1


def envoy_maglev(
    hosts: Iterable[str] | Mapping[str, int], *, table_size: int = MAGLEV_TABLE_SIZE
) -> Maglev:
    """Return Envoy's Maglev table for `hosts` (addresses, or ``{address: weight}``).

    Nodes are named by address (Envoy hashes ``address()->asString()``, e.g.
    ``"127.0.0.1:90"``; pass host names to model ``use_hostname_for_hashing``). Keys hash with
    XXH64, as Envoy's header and cookie hash policies do. Runtime: O(M log M) to build.

    :raises ConfigError: for a non-prime `table_size`, a weight that is not an int in
        [1, 2**32 - 1], or weights summing past 2**32 - 1 (Envoy refuses those too)
    """
    if isinstance(hosts, (str, bytes)):
        raise TypeError(f"hosts must be a list of addresses or a mapping, got {hosts!r}")
    items = list(hosts.items()) if isinstance(hosts, Mapping) else [(h, 1) for h in hosts]
    for address, weight in items:
        if isinstance(weight, bool) or not isinstance(weight, int):
            raise ConfigError(
                f"envoy host weight of {address!r} must be int, got {type(weight).__name__}"
            )
        if not 1 <= weight <= _UINT32_MAX:
            raise ConfigError(
                f"envoy host weight of {address!r} must be in [1, 2**32 - 1], got {weight!r}"
            )
    total = sum(weight for _, weight in items)
    if total > _UINT32_MAX:
        raise ConfigError(f"the sum of envoy host weights must be <= 2**32 - 1, got {total}")
    nodes = [Node(address, weight=float(w), address=address) for address, w in items]
    return Maglev(coerce_nodes(nodes), table_size=table_size, hasher=ENVOY_KEY_HASHER)
