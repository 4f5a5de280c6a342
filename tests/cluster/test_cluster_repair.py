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
from hypothesis import given
from hypothesis import strategies as st

from ringkit import HashRing
from ringkit.cluster import ShardedClient
from ringkit.cluster.backends import open_backend
from ringkit.cluster.fencing import fence
from ringkit.cluster.health import OpEvent
from ringkit.cluster.keys import tombstone_key
from ringkit.cluster.serializers import JSON, Codec, supersedes, tombstone
from ringkit.cluster.urls import parse_url
from tests.cluster.helpers import memory_urls, server_urls

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


_CODEC = Codec(JSON)
# What a server may hold under a key before a repair: nothing, an envelope of some version, a
# counter or a foreign value (no version); and beside it, maybe a tombstone of some version.
_HELD = st.one_of(
    st.none(),
    st.integers(1, 6).map(lambda version: _CODEC.encode("held", version=version, expires_at_ms=0)),
    st.sampled_from([b"41", b"foreign bytes"]),
)
_TOMB = st.one_of(st.none(), st.integers(1, 6).map(tombstone))


@given(held=_HELD, tomb=_TOMB, version=st.integers(1, 6))
def test_every_backend_repairs_exactly_where_supersedes_says(
    redis_trio: list[Any],
    memcached_trio: list[Any],
    held: bytes | None,
    tomb: bytes | None,
    version: int,
) -> None:
    key = b"fare:rule"
    value = _CODEC.encode("repair", version=version, expires_at_ms=0)
    backends = {
        "memory": open_backend(parse_url(memory_urls(1)["s1"]), timeout_s=1.0),
        "redis": open_backend(parse_url(server_urls("redis", redis_trio)["s1"]), timeout_s=1.0),
        "memcached": open_backend(
            parse_url(server_urls("memcached", memcached_trio)["s1"]), timeout_s=1.0
        ),
    }
    for kind, raw in backends.items():
        fenced = fence(raw, lambda: 0, lambda key: 0)
        raw.flush()
        if held is not None:
            raw.set_many({key: held}, None)
        kept = tomb if kind != "memcached" else None  # memcached keeps no tombstones
        if kept is not None:
            raw.set_many({tombstone_key(key): kept}, None)
        landed = fenced.repair(key, value, None)
        assert landed is supersedes(value, held, kept), kind
        assert raw.get_many([key]).get(key) == (value if landed else held), kind
        fenced.close()
