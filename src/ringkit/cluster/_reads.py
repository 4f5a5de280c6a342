"""The two read paths of :class:`~ringkit.cluster.client.ShardedClient`, kept apart for size.

``read_first`` asks each key's first usable server, then sends the misses and the failures to
the next server of the key's read order, round after round, grouping keys per server so each
round costs one round trip per server. ``read_all`` asks every usable replica of every key in
one round and keeps the highest version (last writer wins, by the writer's clock). Both repair:
a replica that missed (or held an older version) is given the value found, with the TTL it has
left, when the client's ``read_repair`` is on. Raw counters (ints) carry no TTL and are not
repaired.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ringkit.cluster.serializers import Decoded
from ringkit.errors import BackendError

if TYPE_CHECKING:
    from ringkit.cluster.client import ShardedClient

__all__ = ["read_all", "read_first", "read_one"]


def _fetch(client: ShardedClient, name: str, group: list[bytes]) -> dict[bytes, bytes] | None:
    """Return what server `name` holds of `group`, or None when it failed."""
    server = client.server(name)
    count = len(group)
    try:
        return server.call(
            "get_many",
            lambda b: b.get_many(group),
            hits=lambda found: (len(found), count - len(found)),
        )
    except BackendError:
        server.stats.bump("failovers")
        return None


def _unreachable(keys: list[bytes]) -> BackendError:
    return BackendError(
        f"no replica of {len(keys)} keys could be reached, first: {keys[0]!r}; "
        f"every server holding them is down"
    )


def read_one(client: ShardedClient, key: bytes) -> Decoded | None:
    """Return one key read from its first replica that hits, or None (``read_first``'s rule).

    The single-key path of ``get``: the same fallback and repair without the batch machinery.

    :raises BackendError: when no replica of the key answered at all
    """
    missed: list[str] = []
    answered = False
    servers = client._servers
    for name in client._router.read_order(key):
        server = servers[name]
        if not (server.health.up or server.usable()):
            continue
        try:
            stored = server.get_one(key)
        except BackendError:
            server.stats.bump("failovers")
            continue
        answered = True
        if stored is None:
            missed.append(name)
            continue
        decoded = client._decode(stored)
        if missed and client._read_repair:
            _repair(client, key, stored, decoded, missed)
        return decoded
    if not answered:
        raise _unreachable([key])
    return None


def read_first(client: ShardedClient, keys: list[bytes]) -> dict[bytes, Decoded]:
    """Return the keys found, reading each from its first server that answers with a hit.

    :raises BackendError: when no server of some key answered at all
    """
    orders = {key: client.router.read_order(key) for key in keys}
    position = dict.fromkeys(keys, 0)
    missed: dict[bytes, list[str]] = {}
    answered: set[bytes] = set()
    found: dict[bytes, Decoded] = {}
    raw: dict[bytes, bytes] = {}
    pending = list(keys)
    while pending:
        groups: dict[str, list[bytes]] = {}
        for key in pending:
            order = orders[key]
            while position[key] < len(order):
                name = order[position[key]]
                position[key] += 1
                if client.server(name).usable():
                    groups.setdefault(name, []).append(key)
                    break
        pending = []
        for name, group in groups.items():
            values = _fetch(client, name, group)
            if values is None:
                pending.extend(group)
                continue
            answered.update(group)
            for key in group:
                if key in values:
                    raw[key] = values[key]
                    found[key] = client._decode(values[key])
                else:
                    missed.setdefault(key, []).append(name)
                    pending.append(key)
    unreachable = [key for key in keys if key not in answered]
    if unreachable:
        raise _unreachable(unreachable)
    if client._read_repair:
        for key, names in missed.items():
            if key in found:
                _repair(client, key, raw[key], found[key], names)
    return found


def read_all(client: ShardedClient, keys: list[bytes]) -> dict[bytes, Decoded]:
    """Return the keys found, asking every usable replica and keeping the highest version.

    :raises BackendError: when no replica of some key answered
    """
    groups: dict[str, list[bytes]] = {}
    for key in keys:
        for name in dict.fromkeys(client.router.read_order(key)):
            if client.server(name).usable():
                groups.setdefault(name, []).append(key)
    answers: dict[bytes, dict[str, bytes | None]] = {}
    for name, group in groups.items():
        values = _fetch(client, name, group)
        if values is not None:
            for key in group:
                answers.setdefault(key, {})[name] = values.get(key)
    unreachable = [key for key in keys if key not in answers]
    if unreachable:
        raise _unreachable(unreachable)
    found: dict[bytes, Decoded] = {}
    for key, by_server in answers.items():
        copies = {
            name: (stored, client._decode(stored))
            for name, stored in by_server.items()
            if stored is not None
        }
        if not copies:
            continue
        stored, best = max(copies.values(), key=lambda copy: copy[1].version)
        found[key] = best
        stale = [
            name
            for name in by_server
            if name not in copies or copies[name][1].version < best.version
        ]
        if stale and client._read_repair:
            _repair(client, key, stored, best, stale)
    return found


def _repair(
    client: ShardedClient, key: bytes, stored: bytes, decoded: Decoded, names: list[str]
) -> None:
    """Copy `stored` to the servers `names` with the TTL it has left (best effort)."""
    if decoded.version == 0:
        return  # a raw counter or a foreign value: its TTL is unknown, so leave it be
    ttl_s = None
    if decoded.expires_at_ms:
        ttl_s = decoded.expires_at_ms / 1000 - time.time()
        if ttl_s <= 0:
            return
    for name in names:
        server = client.server(name)
        if server.usable():
            try:
                server.call("repair", lambda b: b.set_many({key: stored}, ttl_s))
            except BackendError:
                server.health.hint(key)
