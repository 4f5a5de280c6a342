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
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ringkit import HashRing
from ringkit.cluster import QuorumError, ShardedClient, memory_store
from ringkit.cluster.core.health import OpEvent, ServerHealth
from ringkit.cluster.rebalance.options import RebalanceOptions
from ringkit.cluster.values.codec import (
    JSON,
    Codec,
    VersionClock,
    is_readmission_tombstone,
    readmission_tombstone,
    stored_version,
)
from ringkit.cluster.values.keys import tombstone_key
from ringkit.movement import Transfer
from tests.cluster.helpers import flushed_redis_urls, memory_urls, redis_servers
from tests.servers import Server, redis_server

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


@pytest.fixture(scope="module")
def quartet() -> Iterator[list[Server]]:
    with redis_servers(4) as servers:
        yield servers


def three_servers_and_a_fourth(
    kind: str, request: pytest.FixtureRequest
) -> tuple[dict[str, str], dict[str, str]]:
    """URLs of four empty servers of `kind` (s1-s4), and of the three a cluster starts with."""
    names = ("s1", "s2", "s3", "s4")
    if kind == "memory":
        urls = memory_urls(4)
    else:
        urls = flushed_redis_urls(names, request.getfixturevalue("quartet"))
    return urls, {name: urls[name] for name in names[:3]}


@pytest.mark.parametrize("write", ["set", "add"])  # a batch write, and a single-key one
@pytest.mark.parametrize("kind", ["memory", "redis"])
def test_a_hint_an_old_owner_kept_never_deletes_a_write_after_the_move(
    kind: str, write: str, new: New, request: pytest.FixtureRequest
) -> None:
    """A write made while data moves leaves hints only on the key's new replicas.

    The write goes to the old owners too, and one of them, which the move takes the key from,
    is the only server that takes it: both new replicas were marked down by this client (as
    timeouts on a loaded machine do), so the write is not acknowledged. Once the move is done
    the cleanup deletes the key on that old owner, and another client's write is acknowledged
    on both new replicas. Re-admitting them must not remove it. It used to: the old owner kept
    the hints, and the re-admission, finding neither the key nor a tombstone there, deleted the
    key outright on each new replica (the chaos check lost a write so, adding a server under
    ``read="all"``).
    """
    urls, base = three_servers_and_a_fourth(kind, request)
    before, after = HashRing(list(base)), HashRing(list(urls))
    key = next(  # a key that one of its replicas loses to the new server
        f"seat:{n}"
        for n in range(1000)
        if set(before.nodes_for(f"seat:{n}", 2)) - set(after.nodes_for(f"seat:{n}", 2))
    )
    new_replicas = after.nodes_for(key, 2)
    admin = ShardedClient(before, base, replicas=2)
    behind = new(before, base, replicas=2, read="all", dead_timeout_s=60.0)
    other = ShardedClient(before, base, replicas=2, read="all")
    admin.set(key, "old")
    written: list[str] = []

    def while_moving(transfer: Transfer, done: int) -> None:
        if written:
            return
        behind.refresh_view()  # the moving view: writes go to the old and the new owners
        for name in new_replicas:
            behind.server(name).health.mark_down(now=time.monotonic())
        with pytest.raises(QuorumError):
            getattr(behind, write)(key, "unacknowledged")  # taken by the old owner alone
        written.append(key)

    admin.add_server("s4", urls["s4"], options=RebalanceOptions(on_transfer=while_moving))
    assert written
    other.refresh_view()
    other.set(key, "acknowledged")
    behind.refresh_view()
    _readmit(behind, new_replicas)
    assert [_held(behind, name, key) for name in new_replicas] == ["acknowledged"] * 2
    assert behind.get(key) == other.get(key) == "acknowledged"
    other.close()
    admin.close()


@pytest.mark.parametrize("kind", ["memory", "redis"])  # memcached cannot move data online
def test_a_hint_a_replica_kept_before_a_move_never_deletes_a_write_after_the_move(
    kind: str, new: New, request: pytest.FixtureRequest
) -> None:
    """Re-admission reads the key's versions on its current replicas, not only on its hint holder.

    A write acknowledged by one replica while this client had marked the other down leaves a
    hint on the replica that took it. A move then takes the key from that holder (the copy
    goes to the new server) and its cleanup deletes the holder's copy; another client's write
    is acknowledged on both current replicas, the re-admitted server among them. When this
    client re-admits that server it finds the hint, but no version on its holder: it used to
    delete the key outright there, removing the newer acknowledged write from one replica.
    """
    urls, base = three_servers_and_a_fourth(kind, request)
    before, after = HashRing(list(base)), HashRing(list(urls))

    def moves_from_one_replica(key: str) -> bool:  # one replica stays, the other loses the key
        return len(set(before.nodes_for(key, 2)) & set(after.nodes_for(key, 2))) == 1

    key = next(f"seat:{n}" for n in range(1000) if moves_from_one_replica(f"seat:{n}"))
    [down] = set(before.nodes_for(key, 2)) & set(after.nodes_for(key, 2))
    [holder] = set(before.nodes_for(key, 2)) - {down}
    current = after.nodes_for(key, 2)
    admin = ShardedClient(before, base, replicas=2)
    behind = new(before, base, replicas=2, read="all", dead_timeout_s=60.0)
    other = ShardedClient(before, base, replicas=2, read="all")
    admin.set(key, "old")
    behind.server(down).health.mark_down(now=time.monotonic())  # as a timeout would
    behind.set(key, "hinted")  # acknowledged by the holder alone, which keeps the hint
    assert _held(behind, holder, key) == "hinted" and _held(behind, down, key) == "old"
    admin.add_server("s4", urls["s4"])  # the holder loses the key; the cleanup deletes its copy
    assert _held(admin, holder, key) is None
    other.refresh_view()
    other.set(key, "acknowledged")  # on both current replicas, the server still down above
    behind.refresh_view()
    _readmit(behind, [down])
    assert [_held(behind, name, key) for name in current] == ["acknowledged"] * 2
    assert behind.get(key) == other.get(key) == "acknowledged"
    first = ShardedClient(after, urls, replicas=2)  # read="first": whichever replica it asks
    assert first.get(key) == "acknowledged"
    first.close()
    other.close()
    behind.close()
    admin.close()


class _ClockBehind(VersionClock):
    """A writer's clock that counts on from `version` (behind the others', as a slow machine's)."""

    def __init__(self, version: int) -> None:
        super().__init__()
        self.last = version

    def next(self) -> int:
        self.last += 1
        return self.last


def test_an_older_version_written_after_a_readmission_is_read_back() -> None:
    """A re-admission's tombstone is no delete: ``read="all"`` reads a write that followed it.

    Found by the chaos check (a Redis server restarted empty under load, ``read="all"``): a
    re-admission leaves a tombstone just below the newest version the other replica holds.
    A write acknowledged afterwards may carry an older version (a call retried after the
    restarted server refused it keeps the version it was encoded with; another machine's
    clock may be behind); it lands on both replicas, and read as a delete that tombstone hid
    it on both: every read missed an acknowledged write.
    """
    key = KEY.encode()
    with redis_server() as one, redis_server() as two:
        servers = {"s1": one, "s2": two}
        urls = {name: f"redis://127.0.0.1:{server.port}/0" for name, server in servers.items()}
        ring = HashRing(list(urls))
        client = ShardedClient(ring, urls, replicas=2, read="all", dead_timeout_s=60.0)
        late = ShardedClient(ring, urls, replicas=2, read="all")
        client.set(KEY, "first")
        behind, ahead = client.replicas_for(KEY)
        servers[behind].process.kill()  # SIGKILL, as the chaos runs do
        servers[behind].process.wait()
        client.set(KEY, "new")  # refused a connection: hinted on the other replica
        assert client.down_servers == [behind]
        with redis_server(servers[behind].port):  # restarted empty on the same port
            for _ in range(3):  # the first probe gives the empty server its view back
                client.server(behind).health.probe_soon()
                if client.check_health() == []:
                    break
            assert client.down_servers == []
            held = client.server(behind).backend.get_many([tombstone_key(key)])
            assert is_readmission_tombstone(held[tombstone_key(key)])
            newest = stored_version(client.server(ahead).backend.get_many([key])[key])
            late.writer._clock = _ClockBehind(int.from_bytes(newest, "big") - 100)
            late.set(KEY, "late")  # acknowledged after the re-admission, by both replicas
            assert [_held(client, name) for name in (behind, ahead)] == ["late", "late"]
            assert client.get(KEY) == "late"
            assert late.get(KEY) == "late"
        late.close()
        client.close()


@pytest.mark.parametrize("kind", ["memory", "redis"])
def test_a_replicas_readmission_tombstone_never_deletes_the_write_it_holds(
    kind: str, new: New, request: pytest.FixtureRequest
) -> None:
    """The other replica's versions count as its value's, not an earlier re-admission's mark.

    That replica holds a tombstone an earlier re-admission left just below a write it missed
    (here planted), and an acknowledged write with an older version that landed after it (a
    set retried after a server restarted empty keeps the version it was encoded with). This
    client re-admits the other server with a hint it kept in memory for an older write: the
    key is invalidated there below the newest *write* the replica holds, so both keep the
    acknowledged value; below the tombstone it would go from the re-admitted server.
    """
    names = ("s1", "s2")
    if kind == "memory":
        urls = memory_urls(2)
    else:
        urls = flushed_redis_urls(names, request.getfixturevalue("quartet")[:2])
    ring = HashRing(list(urls))
    client = new(ring, urls, replicas=2, read="all", dead_timeout_s=60.0)
    late = ShardedClient(ring, urls, replicas=2, read="all")
    client.set(KEY, "old")
    assert late.get(KEY) == "old"  # settled: its backends send the view's epoch
    missed, replica = client.replicas_for(KEY)
    older = stored_version(late.server(replica).backend.get_many([KEY.encode()])[KEY.encode()])
    mark = int.from_bytes(older, "big") + 1_000_000  # far above any write in this test
    late.server(replica).backend.set_many(
        {tombstone_key(KEY.encode()): readmission_tombstone(mark)}, 60.0
    )
    late.writer._clock = _ClockBehind(mark - 1000)
    late.set(KEY, "acknowledged")  # older than the mark, on both replicas
    client.server(missed).health.mark_down(now=time.monotonic())
    client.server(missed).health.hint(KEY.encode(), int.from_bytes(older, "big"))
    _readmit(client, [missed])
    assert [_held(client, name) for name in (missed, replica)] == ["acknowledged"] * 2
    assert client.get(KEY) == late.get(KEY) == "acknowledged"
    late.close()
    client.close()
