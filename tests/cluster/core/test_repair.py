"""Read repair is a conditional write: it never replaces a newer value.

A read that falls back to a second replica, or that finds an older copy with ``read="all"``,
repairs the replica behind with the value it found. A write acknowledged between that read and
the repair must survive it: the repair lands only where the server holds no value or an older
version (a Lua script on Redis, ``gets`` + ``cas`` on memcached, the store lock in memory). The
hook below makes the race deterministic: it runs right after the read answered and writes a
newer value before the repair is sent.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringkit import HashRing
from ringkit.cluster import ShardedClient
from ringkit.cluster.core.health import OpEvent
from ringkit.cluster.values.codec import JSON, Codec, stored_version, supersedes, tombstone
from ringkit.cluster.values.keys import tombstone_key
from ringkit.cluster.wire.fence import MEMCACHED_FENCE_CHECK_S
from ringkit.cluster.wire.handles import fence
from tests.cluster.helpers import one_of_each_backend

KEY = "fare:{lis-jfk}"
# How the replica behind stands before the read: it missed the write, or holds an older version
# (which only read="all" notices: read="first" would serve it).
CASES = [("first", "missing"), ("all", "missing"), ("all", "older")]


def _stored(client: Any, name: str) -> Any:
    key = KEY.encode()
    return Codec(JSON).decode(client.server(name).backend.get_many([key])[key]).value


@pytest.mark.parametrize(("read", "behind_holds"), CASES)
def test_repair_never_overwrites_a_newer_write(
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
    answered: set[str] = set()
    # The read is over when these have answered: with read="all" the async client asks both
    # replicas at once, so the newer write must wait for both, or a read still in flight could
    # see it (legal for a concurrent read, but then no repair races it).
    readers = {ahead} if read == "first" else {ahead, behind}

    def newer_write_lands(event: OpEvent) -> None:
        # Runs after the read answered and before the repair: another client's write.
        if raced or event.op not in ("get", "get_many") or event.outcome not in ("hit", "miss"):
            return
        answered.add(event.server)
        if readers <= answered:
            raced.append(event)
            writer.set(KEY, {"price": 120})

    reader = new(HashRing(list(urls)), urls, replicas=2, read=read, hooks=[newer_write_lands])
    assert reader.get(KEY) == {"price": 100}  # read before the newer write
    assert raced, "the hook did not run between the read and the repair"
    assert [_stored(reader, name) for name in (behind, ahead)] == [{"price": 120}] * 2
    assert reader.get(KEY) == {"price": 120}
    writer.close()


@pytest.mark.parametrize("read", ["first", "all"])
def test_a_delete_between_read_and_repair_stays_deleted(
    urls: dict[str, str], new: Callable[..., Any], read: str
) -> None:
    """Without any fault: a fallback read racing a delete must not write the key back.

    Found by the chaos history check (tests/chaos) with no fault injected: the read found the
    value on one replica, another client deleted the key everywhere, and the repair of the
    replica that had missed the key brought it back there. Every delete now leaves a tombstone
    the repair checks.
    """
    writer = ShardedClient(HashRing(list(urls)), urls, replicas=2)
    writer.set(KEY, {"price": 100})
    behind, ahead = writer.replicas_for(KEY)
    key = KEY.encode()
    writer.server(behind).backend.delete(key)  # the replica that missed the write
    raced: list[OpEvent] = []
    answered: set[str] = set()
    readers = {ahead} if read == "first" else {ahead, behind}  # as in the newer-write test above

    def delete_lands(event: OpEvent) -> None:
        # Runs after the read answered and before the repair: another client's delete.
        if raced or event.op not in ("get", "get_many") or event.outcome not in ("hit", "miss"):
            return
        answered.add(event.server)
        if readers <= answered:
            raced.append(event)
            writer.delete(KEY)

    reader = new(HashRing(list(urls)), urls, replicas=2, read=read, hooks=[delete_lands])
    assert reader.get(KEY) == {"price": 100}  # read before the delete
    assert raced, "the hook did not run between the read and the repair"
    assert [reader.server(name).backend.get_many([key]) for name in (behind, ahead)] == [{}, {}]
    assert reader.get(KEY) is None
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
    backends = one_of_each_backend(redis_trio, memcached_trio)
    for kind, raw in backends.items():
        fenced = fence(raw, lambda: 0, lambda key: 0)
        raw.flush()
        if held is not None:
            raw.set_many({key: held}, None)
        if tomb is not None:
            raw.set_many({tombstone_key(key): tomb}, None)
        landed = fenced.serve("repair", key, value, None)
        assert landed is supersedes(value, held, tomb), kind
        assert raw.get_many([key]).get(key) == (value if landed else held), kind
        fenced.close()


@given(
    cases=st.lists(st.tuples(_HELD, _TOMB, st.integers(1, 6)), min_size=1, max_size=6),
    ttl_s=st.sampled_from([None, 600.0]),
)
def test_every_backend_repairs_a_batch_key_by_key_where_supersedes_says(
    redis_trio: list[Any],
    memcached_trio: list[Any],
    cases: list[tuple[bytes | None, bytes | None, int]],
    ttl_s: float | None,
) -> None:
    """``repair_many`` is one call per server, and each key in it is its own conditional write."""
    keys = [b"fare:rule:%d" % at for at in range(len(cases))]
    values = {
        key: _CODEC.encode(f"repair {key!r}", version=version, expires_at_ms=0)
        for key, (_, _, version) in zip(keys, cases, strict=True)
    }
    backends = one_of_each_backend(redis_trio, memcached_trio)
    for kind, raw in backends.items():
        fenced = fence(raw, lambda: 0, lambda key: 0)
        raw.flush()
        for key, (held, tomb, _) in zip(keys, cases, strict=True):
            if held is not None:
                raw.set_many({key: held}, None)
            if tomb is not None:
                raw.set_many({tombstone_key(key): tomb}, None)
        landed = fenced.serve("repair_many", values, ttl_s)
        expected = [
            key
            for key, (held, tomb, _) in zip(keys, cases, strict=True)
            if supersedes(values[key], held, tomb)
        ]
        assert landed == expected, kind
        found = raw.get_many(keys)
        for key, (held, _, _) in zip(keys, cases, strict=True):
            assert found.get(key) == (values[key] if key in expected else held), (kind, key)
        fenced.close()


def test_a_retried_set_many_is_one_conditional_write_per_server(
    urls: dict[str, str], new: Callable[..., Any]
) -> None:
    """A set_many one server refused goes again as one conditional batch per server.

    The retry carries versions taken when it is sent, so two keys that another client deleted
    and wrote again between the first attempt and the retry take the retry on both replicas
    (it ends after those writes: the newest), and never read as deleted, as they did when the
    retry kept the versions of its first attempt, older than the delete. Every key lands on
    the server that refused it. The retry is one call per server, as the first attempt (it was
    one call per key and server).
    """
    other = ShardedClient(HashRing(list(urls)), urls, replicas=2, read="all")
    keys = [f"fare:{at}" for at in range(60)]
    events: list[OpEvent] = []
    raced: list[OpEvent] = []

    def write_meanwhile(event: OpEvent) -> None:
        # Runs once `first` took the first attempt, before the retry `second`'s refusal makes.
        if event.op == "set_many":
            events.append(event)
        if raced or event.server != first or event.op != "set_many" or event.outcome != "ok":
            return
        raced.append(event)
        other.delete(newer[0])
        other.set_many(dict.fromkeys(newer, "newer"))

    client = new(HashRing(list(urls)), urls, replicas=2, read="all", hooks=[write_meanwhile])
    first, second = client.replicas_for(keys[0])
    # Keys only `first` takes in the first attempt: the newer writes land after it there.
    newer = [key for key in keys if client.replicas_for(key) == [first, second]][:2]
    assert len(newer) == 2
    client.refresh_view()  # a view published on every server: the first attempt's epoch
    view = dataclasses.replace(client.view, epoch=client.view.epoch + 1)
    client.server(second).backend.publish(view.epoch, view.to_json())  # only the second
    let_memcached_fences_look_again(urls)
    client.set_many(dict.fromkeys(keys, "slow"))  # encoded before the newer writes
    assert raced, "the hook did not run between the first attempt and the retry"
    assert client.view.epoch == view.epoch  # refused once, refreshed, retried
    for key in keys:
        held = [Codec(JSON).decode(v).value for v in _copies(client, key)]
        assert held == ["slow", "slow"], key
    assert client.get_many(keys) == dict.fromkeys(keys, "slow")
    assert other.get_many(newer) == dict.fromkeys(newer, "slow")
    calls: dict[str, int] = {}
    for event in events:
        calls[event.server] = calls.get(event.server, 0) + 1
    # Two attempts of one call per server; the refused call is not counted.
    assert calls == {name: 1 if name == second else 2 for name in urls}
    other.close()


def _copies(client: Any, key: str) -> list[bytes]:
    """Return what each replica of `key` holds (a missing copy fails the caller's check)."""
    data = key.encode()
    return [
        client.server(name).backend.get_many([data]).get(data, b"")
        for name in client.replicas_for(key)
    ]


def let_memcached_fences_look_again(urls: dict[str, str]) -> None:
    """memcached's fence is a read of the epoch at most every MEMCACHED_FENCE_CHECK_S."""
    if any(url.startswith("memcached://") for url in urls.values()):
        time.sleep(MEMCACHED_FENCE_CHECK_S + 0.1)


def test_a_write_retried_after_a_refusal_is_applied_once_per_server(
    urls: dict[str, str], new: Callable[..., Any]
) -> None:
    """A stale-view refusal from the second replica must not make the first count twice.

    Found by the chaos history check: after an online rebalance, counters gained more than the
    increments acknowledged. The first replica applied the ``incr``, the second (already at a
    newer epoch) refused it, and the retry under the refreshed view applied it again on the
    first. An ``add`` retried the same way answered False for the key it had just added.
    """
    client = new(HashRing(list(urls)), urls, replicas=2)
    client.set("seats", 10)
    first, second = client.replicas_for("seats")
    newer = dataclasses.replace(client.view, epoch=client.view.epoch + 1)
    client.server(second).backend.publish(newer.epoch, newer.to_json())  # only the second
    let_memcached_fences_look_again(urls)
    assert client.incr("seats", 1) == 11
    assert client.view.epoch == newer.epoch  # refused once, refreshed, retried
    counts = [client.server(name).backend.get_many([b"seats"]) for name in (first, second)]
    assert counts == [{b"seats": b"11"}] * 2
    newest = dataclasses.replace(newer, epoch=newer.epoch + 1)
    client.server(second).backend.publish(newest.epoch, newest.to_json())
    let_memcached_fences_look_again(urls)
    assert client.add("fresh", "x") is True
    assert client.get("fresh") == "x"


def test_a_set_retried_after_a_refusal_never_replaces_the_writes_made_meanwhile(
    urls: dict[str, str], new: Callable[..., Any]
) -> None:
    """A set the second replica refused goes again only where nothing newer landed since.

    Found by the chaos check (a Redis server restarted empty under load, ``read="all"``): the
    first replica took the set, the second refused it (it held no view, or a newer one),
    another client deleted the key and wrote it again, and the retry under the refreshed view
    wrote the first value again on both replicas, over the newer write and under the delete's
    tombstone, whose version is newer: ``read="all"`` buried both copies and every read missed.
    """
    other = ShardedClient(HashRing(list(urls)), urls, replicas=2, read="all")
    raced: list[OpEvent] = []

    def delete_and_write_meanwhile(event: OpEvent) -> None:
        # Runs once the first replica took the set, before the retry the second's refusal makes.
        if raced or event.server != first or event.op != "set_many" or event.outcome != "ok":
            return
        raced.append(event)
        other.delete(KEY)
        other.set(KEY, "newer")

    client = new(
        HashRing(list(urls)), urls, replicas=2, read="all", hooks=[delete_and_write_meanwhile]
    )
    first, second = client.replicas_for(KEY)
    newer = dataclasses.replace(client.view, epoch=client.view.epoch + 1)
    client.server(second).backend.publish(newer.epoch, newer.to_json())  # only the second
    let_memcached_fences_look_again(urls)
    client.set(KEY, "slow")  # encoded (versioned) before the delete and the newer write
    assert raced, "the hook did not run between the first replica's write and the retry"
    assert client.view.epoch == newer.epoch  # refused once, refreshed, retried
    assert [_stored(client, name) for name in (first, second)] == ["newer", "newer"]
    assert client.get(KEY) == other.get(KEY) == "newer"
    other.close()
    client.close()


def test_read_all_reconciles_a_delete_a_replica_missed(
    urls: dict[str, str], new: Callable[..., Any]
) -> None:
    """With read="all", a tombstone takes part in reconciliation like a value.

    Found by the chaos history check (kill and restart faults, read="all", write_quorum=1): a
    delete acknowledged by one replica while the other was unreachable, then a read="all" that
    reached both: the replica that missed the delete held the newest *value* and won, and the
    deleted key came back. Now the delete's tombstone on the first replica wins, the read answers
    None, and the replica behind is given the delete.
    """
    client = new(HashRing(list(urls)), urls, replicas=2, read="all")
    client.set(KEY, {"price": 100})
    missed, took = client.replicas_for(KEY)
    key = KEY.encode()
    held = client.server(took).backend.get_many([key])[key]
    delete = tombstone(int.from_bytes(stored_version(held), "big") + 1)
    client.server(took).backend.serve("bury", key, delete, 60.0)  # the delete reached one replica
    assert client.server(missed).backend.get_many([key]) == {key: held}
    assert client.get(KEY) is None
    assert client.server(missed).backend.get_many([key]) == {}  # given the delete
    assert client.get_many([KEY]) == {}


def test_a_delete_never_removes_a_newer_write(urls: dict[str, str]) -> None:
    """``bury`` is a conditional delete: a value written at a newer version survives it."""
    client = ShardedClient(HashRing(list(urls)), urls, replicas=1)
    client.set(KEY, {"price": 100})
    [name] = client.replicas_for(KEY)
    key = KEY.encode()
    held = client.server(name).backend.get_many([key])[key]
    older_delete = tombstone(int.from_bytes(stored_version(held), "big") - 1)
    assert client.server(name).backend.serve("bury", key, older_delete, 60.0) is False
    assert client.get(KEY) == {"price": 100}
    client.delete(KEY)  # a delete made now is newer: it goes
    assert client.get(KEY) is None
    client.close()


@pytest.mark.parametrize("write", ["delete", "set"])
def test_a_repair_read_before_a_hinted_write_never_lands_after_its_hint(
    urls: dict[str, str], new: Callable[..., Any], write: str
) -> None:
    """A server re-admitted from its hints keeps a tombstone, so a late repair stands down.

    Found by the chaos history check (restart on memcached, the defaults): a fresh client's
    read after the run brought back a deleted key. The race: a reader found the value on the
    second replica (the first had lost it) and, before its repair of the first was sent,
    another client wrote the key (here a delete, or a newer set) while it saw the first replica
    down, so the write left a hint instead of a tombstone there, and then re-admitted that
    replica, which deleted the key there. The repair then found the replica holding neither
    value nor tombstone and put the old value back, with no hint left to remove it. Dynamo's
    hinted handoff delivers the write itself; these hints carry only the key, so re-admission
    leaves a tombstone just below the version the replica that took the write holds.
    """
    writer = ShardedClient(HashRing(list(urls)), urls, replicas=2, dead_timeout_s=60.0)
    writer.set(KEY, {"price": 100})
    behind, ahead = writer.replicas_for(KEY)
    key = KEY.encode()
    writer.server(behind).backend.delete(key)  # the first replica lost it (restarted empty)
    raced: list[OpEvent] = []

    def hinted_write_and_readmission(event: OpEvent) -> None:
        # Runs after the read found the value on `ahead`, before it repairs `behind`.
        if raced or event.server != ahead or event.outcome != "hit":
            return
        raced.append(event)
        health = writer.server(behind).health
        health.mark_down(now=time.monotonic())  # as a timeout of `behind` would
        if write == "delete":
            writer.delete(KEY)
        else:
            writer.set(KEY, {"price": 120})
        assert writer.down_servers == [behind]
        health.probe_soon()
        assert writer.check_health() == []  # re-admitted: its hint of KEY applied

    reader = new(HashRing(list(urls)), urls, replicas=2, hooks=[hinted_write_and_readmission])
    assert reader.get(KEY) == {"price": 100}  # read before the write
    assert raced, "the hook did not run between the read and the repair"
    expected = None if write == "delete" else {"price": 120}
    held = writer.server(behind).backend.get_many([key])
    assert held == {}  # the late repair stood down
    fresh = ShardedClient(HashRing(list(urls)), urls, replicas=2)
    assert fresh.get(KEY) == expected  # asks `behind` first
    if write == "set":  # the hinted write itself still repairs it
        assert _stored(fresh, behind) == expected
    fresh.close()
    writer.close()


def test_readmission_leaves_each_hinted_key_a_tombstone_just_below_the_write(
    urls: dict[str, str],
) -> None:
    """Over more hinted keys than one page of the versions read (500), sets and deletes."""
    client = ShardedClient(HashRing(list(urls)), urls, replicas=2, dead_timeout_s=60.0)
    behind = "s1"
    keys = [k for k in (f"k{i}" for i in range(5000)) if client.replicas_for(k)[0] == behind]
    written, deleted = keys[:1100], keys[1100:1200]
    client.set_many(dict.fromkeys(deleted, "old"))
    health = client.server(behind).health
    health.mark_down(now=time.monotonic())
    client.set_many(dict.fromkeys(written, "new"))  # each hinted for `behind`
    for key in deleted:
        client.delete(key)
    health.probe_soon()
    assert client.check_health() == []

    def versions(name: str, key: bytes) -> tuple[int, int]:
        held = client.server(name).backend.get_many([key, tombstone_key(key)])
        value, tomb = (stored_version(held.get(k)) for k in (key, tombstone_key(key)))
        return int.from_bytes(value, "big"), int.from_bytes(tomb, "big")

    for key in map(str.encode, written + deleted):
        _, ahead = client.replicas_for(key.decode())
        took = max(versions(ahead, key))
        assert versions(behind, key) == (0, took - 1), key
    assert client.get_many(written + deleted) == dict.fromkeys(written, "new")
    client.close()
