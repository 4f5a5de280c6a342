"""Re-admission invalidates only what is older than the write a server missed.

A client that saw a server miss a write deletes the key there when it re-admits the server, so
that the server never serves the older value (hinted handoff as invalidation). That delete runs
long after the write, by which time another client may have written the key again: it must
never remove that newer write. The chaos check found the case below (a memcached restart under
load, split counters' configuration): a client whose own write reached no replica, because it
had marked both down, remembered the key for each of them and, re-admitting them one after the
other, deleted another process's acknowledged write from every replica; the next reads missed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from ringkit import HashRing
from ringkit.cluster import QuorumError, ShardedClient, memory_store
from ringkit.cluster.core.health import OpEvent, ServerHealth
from ringkit.cluster.values.codec import JSON, Codec
from tests.cluster.helpers import memory_urls

KEY = "seat:{lis-jfk}:12A"
New = Callable[..., Any]


def _held(client: Any, name: str, key: str = KEY) -> object:
    """What server `name` holds under `key` (decoded), or None."""
    stored = client.server(name).backend.get_many([key.encode()]).get(key.encode())
    return None if stored is None else Codec(JSON).decode(stored).value


def _readmit(client: Any, names: list[str]) -> None:
    for name in names:
        client.server(name).health.probe_soon()
    assert client.check_health() == []


def test_a_write_no_server_took_never_deletes_a_newer_write(urls: dict[str, str], new: New) -> None:
    behind = new(HashRing(list(urls)), urls, replicas=2, dead_timeout_s=60.0)
    other = ShardedClient(HashRing(list(urls)), urls, replicas=2)
    behind.set(KEY, "old")
    replicas = behind.replicas_for(KEY)
    for name in replicas:  # as timeouts on a loaded machine would: both replicas marked down
        behind.server(name).health.mark_down(now=time.monotonic())
    with pytest.raises(QuorumError):
        behind.set(KEY, "unsent")  # reached no server: not acknowledged
    other.set(KEY, "acknowledged")
    _readmit(behind, replicas)
    assert [_held(behind, name) for name in replicas] == ["acknowledged", "acknowledged"]
    assert behind.get(KEY) == "acknowledged"
    assert other.get(KEY) == "acknowledged"
    other.close()
    behind.close()


def test_a_hint_kept_in_memory_invalidates_only_older_values(new: New) -> None:
    """A hint no other server could keep remembers its write's version; older values still go."""
    urls = memory_urls()
    stores = {name: memory_store(urls[name].removeprefix("memory://")) for name in urls}
    armed: list[str] = []  # the holder, while the write under test runs

    def fail_the_hint(event: OpEvent) -> None:
        # The holder took the write; the hint it should keep for the other replica then fails.
        if event.server in armed and event.op == "set_many" and event.outcome == "ok":
            stores[event.server].unavailable = True

    client = new(HashRing(list(urls)), urls, replicas=2, dead_timeout_s=60.0, hooks=[fail_the_hint])
    other = ShardedClient(HashRing(list(urls)), urls, replicas=2)
    newer_key = "seat:{lis-jfk}:12B"  # routed like KEY: the same two replicas
    client.set_many({KEY: "old", newer_key: "old"})
    missed, holder = client.replicas_for(KEY)
    stores[missed].unavailable = True
    armed.append(holder)
    client.set_many({KEY: "new", newer_key: "new"})  # acknowledged by the holder alone
    armed.clear()
    assert client.server(missed).health.pending_hints == 2  # kept in memory, none on a server
    for store in stores.values():
        store.unavailable = False
    other.set(newer_key, "newest")  # lands on both replicas before the re-admission
    assert _held(client, missed, KEY) == "old"
    _readmit(client, [missed, holder])
    assert _held(client, missed, KEY) is None  # older than the hinted write: invalidated
    assert _held(client, missed, newer_key) == "newest"  # newer: kept
    assert client.get_many([KEY, newer_key]) == {KEY: "new", newer_key: "newest"}
    other.close()
    client.close()


def test_memory_hints_keep_the_newest_version_each_key_missed() -> None:
    health = ServerHealth("a", dead_timeout_s=1.0, max_hints=2)
    for key, version in ((b"x", 5), (b"y", 0), (b"x", 3), (b"z", 9), (b"y", 4)):
        health.hint(key, version)
    assert health.take_hints() == {b"x": 5, b"y": 4}
    assert health.hints_dropped == 1 and health.pending_hints == 0
