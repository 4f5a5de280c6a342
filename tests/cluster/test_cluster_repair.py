"""Read repair is a conditional write: it never replaces a newer value (issue 16, item 5).

A read that falls back to a second replica repairs the first one with the value it found. A
write acknowledged between that read and the repair must survive it: the repair lands only
where the server holds no value or an older version (a Lua script on Redis, ``gets`` + ``cas``
on memcached, the store lock in memory). The hook below makes the race deterministic: it runs
right after the fallback read answered and writes a newer value before the repair is sent.
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


@pytest.mark.parametrize("read", ["first", "all"])
def test_item_05_repair_never_overwrites_a_newer_write(
    urls: dict[str, str], new: Callable[..., Any], read: str
) -> None:
    writer = ShardedClient(HashRing(list(urls)), urls, replicas=2)
    writer.set(KEY, {"price": 100})
    behind, ahead = writer.replicas_for(KEY)
    key = KEY.encode()
    writer.server(behind).backend.delete(key)  # `behind` missed the write: a repair is due
    raced: list[OpEvent] = []

    def newer_write_lands(event: OpEvent) -> None:
        # Runs after the fallback read answered and before the repair: another client's write.
        if event.server == ahead and event.outcome == "hit" and not raced:
            raced.append(event)
            writer.set(KEY, {"price": 120})

    reader = new(HashRing(list(urls)), urls, replicas=2, read=read, hooks=[newer_write_lands])
    assert reader.get(KEY) == {"price": 100}  # read before the newer write
    assert raced, "the hook did not run between the read and the repair"
    codec = Codec(JSON)
    for name in (behind, ahead):
        stored = reader.server(name).backend.get_many([key])[key]
        assert codec.decode(stored).value == {"price": 120}, name
    assert reader.get(KEY) == {"price": 120}
    writer.close()
