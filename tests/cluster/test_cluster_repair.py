"""Read repair is a conditional write: it never replaces a newer value (issue 16, item 5).

A read that falls back to a second replica, or that finds an older copy with ``read="all"``,
repairs the replica behind with the value it found. A write acknowledged between that read and
the repair must survive it: the repair lands only where the server holds no value or an older
version (a Lua script on Redis, ``gets`` + ``cas`` on memcached, the store lock in memory). The
hook below makes the race deterministic: it runs right after the read answered and writes a
newer value before the repair is sent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ringkit import HashRing
from ringkit.cluster import ShardedClient
from ringkit.cluster.health import OpEvent
from ringkit.cluster.serializers import JSON, Codec

KEY = "fare:{lis-jfk}"
# How the replica behind stands before the read: it missed the write, or holds an older version
# (which only read="all" notices: read="first" would serve it).
CASES = [("first", "missing"), ("all", "missing"), ("all", "older")]


def _stored(client: Any, name: str) -> Any:
    key = KEY.encode()
    return Codec(JSON).decode(client.server(name).backend.get_many([key])[key]).value


@pytest.mark.parametrize(("read", "behind_holds"), CASES)
def test_item_05_repair_never_overwrites_a_newer_write(
    urls: dict[str, str], new: Callable[..., Any], read: str, behind_holds: str
) -> None:
    writer = ShardedClient(HashRing(list(urls)), urls, replicas=2)
    writer.set(KEY, {"price": 90})
    behind, ahead = writer.replicas_for(KEY)
    key = KEY.encode()
    older = writer.server(behind).backend.get_many([key])[key]
    writer.set(KEY, {"price": 100})
    if behind_holds == "missing":
        writer.server(behind).backend.delete(key)
    else:
        writer.server(behind).backend.set_many({key: older}, None)
    raced: list[OpEvent] = []

    def newer_write_lands(event: OpEvent) -> None:
        # Runs after the read answered and before the repair: another client's write.
        if event.server == ahead and event.outcome == "hit" and not raced:
            raced.append(event)
            writer.set(KEY, {"price": 120})

    reader = new(HashRing(list(urls)), urls, replicas=2, read=read, hooks=[newer_write_lands])
    assert reader.get(KEY) == {"price": 100}  # read before the newer write
    assert raced, "the hook did not run between the read and the repair"
    assert [_stored(reader, name) for name in (behind, ahead)] == [{"price": 120}] * 2
    assert reader.get(KEY) == {"price": 120}
    writer.close()


@pytest.mark.parametrize(("read", "behind_holds"), CASES)
def test_repair_still_fixes_a_replica_behind(
    urls: dict[str, str], new: Callable[..., Any], read: str, behind_holds: str
) -> None:
    writer = ShardedClient(HashRing(list(urls)), urls, replicas=2)
    writer.set(KEY, {"price": 90})
    behind, _ = writer.replicas_for(KEY)
    key = KEY.encode()
    older = writer.server(behind).backend.get_many([key])[key]
    writer.set(KEY, {"price": 100}, ttl_s=600)
    if behind_holds == "missing":
        writer.server(behind).backend.delete(key)
    else:
        writer.server(behind).backend.set_many({key: older}, None)
    reader = new(HashRing(list(urls)), urls, replicas=2, read=read)
    assert reader.get(KEY) == {"price": 100}
    assert _stored(reader, behind) == {"price": 100}  # repaired: added, or replaced by cas
    writer.close()
