"""A write carries the version of when it is sent, not of when it was encoded.

Versions order the copies that ``read="all"`` reconciles, and a delete's tombstone hides every
value with an older version. A plain ``set`` replaces whatever its server holds, so a write
whose version was taken before a slow step of its call (a view refresh, a probe) and that
reaches the servers after another client's delete and newer write replaces that write there
and then reads as deleted on every replica. The chaos check found it (``kill/memcached/read_all``
under load): a ``set`` encoded before a 160 ms view refresh reached memcached after another
process had deleted the key and written it again; the final reads missed the acknowledged write.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from ringkit import HashRing
from ringkit.cluster import ShardedClient
from ringkit.cluster.core.health import OpEvent
from ringkit.cluster.values.codec import JSON, Codec
from ringkit.cluster.values.keys import tombstone_key
from ringkit.cluster.wire.memcached.transports import SocketTransport

KEY = "seat:{lis-jfk}:14C"
New = Callable[..., Any]


def _held(client: Any, name: str) -> object:
    """What server `name` holds under KEY (decoded), or None."""
    stored = client.server(name).backend.get_many([KEY.encode()]).get(KEY.encode())
    return None if stored is None else Codec(JSON).decode(stored).value


def test_a_set_delayed_by_a_view_refresh_never_hides_a_write_made_meanwhile(
    urls: dict[str, str], new: New
) -> None:
    ring = HashRing(list(urls))
    other = ShardedClient(ring, urls, replicas=2, read="all")
    armed: list[bool] = []  # set while the slow write under test runs, until it refreshes

    def meanwhile(event: OpEvent) -> None:
        # The slow client is reading the view before its write: another client deletes the
        # key and writes it again, both acknowledged on every replica.
        if armed and event.op == "read_view":
            armed.clear()
            other.delete(KEY)
            other.set(KEY, "acknowledged")

    slow = new(ring, urls, replicas=2, read="all", hooks=[meanwhile])
    slow.set(KEY, "first")
    slow.view_check_s = 0.0  # its next call reads the view first, as a due view check does
    armed.append(True)
    slow.set(KEY, "late")  # began before the delete and the other write, ends after both
    assert not armed  # the other client's writes ran in the middle of it
    replicas = slow.replicas_for(KEY)
    assert [_held(slow, name) for name in replicas] == ["late", "late"]
    # The later of the two writes: read as deleted, it was lost on both replicas.
    assert slow.get(KEY) == "late"
    assert other.get(KEY) == "late"
    other.close()


class _StampThen:
    """A writer's codec that runs `meanwhile` once, just after it stamps the values to send."""

    def __init__(self, codec: Any, meanwhile: Callable[[], None]) -> None:
        self.codec, self.meanwhile = codec, meanwhile
        self.ran = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.codec, name)

    def stamp(self, data: bytes, version: int) -> bytes:
        stamped = self.codec.stamp(data, version)
        if not self.ran:
            self.ran = True
            self.meanwhile()
        return stamped


@pytest.mark.parametrize("write", ["set", "add"])
def test_a_set_delayed_after_its_version_never_hides_a_write_made_meanwhile(
    urls: dict[str, str], new: New, write: str
) -> None:
    """The set that lands last is read back, not the delete the other write had followed.

    The late ``set`` replaces the other client's write on both replicas with a value older
    than that client's delete, which it began before. Found by the chaos check
    (``kill/memcached/read_all`` under load): a ``set`` that timed out was applied 400 ms
    after it was stamped, once another process had deleted the key and written it again;
    ``read="all"`` then read the key as deleted, losing both writes.
    """
    ring = HashRing(list(urls))
    other = ShardedClient(ring, urls, replicas=2, read="all")

    def meanwhile() -> None:  # both acknowledged on every replica before the late set lands
        other.delete(KEY)
        assert getattr(other, write)(KEY, "acknowledged") is not False

    slow = new(ring, urls, replicas=2, read="all")
    slow.set(KEY, "first")
    slow.writer.codec = delayed = _StampThen(slow.writer.codec, meanwhile)
    slow.set(KEY, "late")  # stamped before the delete and the other write, lands after both
    assert delayed.ran
    replicas = slow.replicas_for(KEY)
    assert [_held(slow, name) for name in replicas] == ["late", "late"]
    # The late write is the last on every replica: reading "deleted" would lose both writes.
    assert slow.get(KEY) == "late"
    assert other.get(KEY) == "late"
    other.close()


@pytest.mark.parametrize("backend", ["memcached"])
@pytest.mark.parametrize("write", ["set", "add"])
def test_a_write_is_acknowledged_only_once_the_delete_it_outdates_is_lifted(
    urls: dict[str, str], new: New, write: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other client's write has lifted the delete's tombstone on every replica when it returns.

    On memcached a write takes away an older delete's tombstone with a ``cas`` after its
    ``set`` (Redis's write script does both at once). Were the write acknowledged while that
    ``cas`` is still on its way, a set stamped before the delete could land in between, and
    ``read="all"`` would find the tombstone newer than every copy: the key read as deleted after
    two writes acknowledged. Another connection's commands may run first (memcached serves
    each connection on a thread of its own, a loaded machine let it happen): here the other
    client's lifts reach the servers 0.3 s late, whether or not it waits for them.
    """
    ring = HashRing(list(urls))
    other = ShardedClient(ring, urls, replicas=2, read="all")
    delayed = {other.server(name).backend.inner.transport for name in urls}
    exchange = SocketTransport.exchange

    def late_lifts(transport: SocketTransport, request: Any) -> Any:
        if transport not in delayed or not request.data.startswith(b"cas "):
            return exchange(transport, request)
        if request.replies:  # the client waits for its answer
            time.sleep(0.3)
            return exchange(transport, request)
        threading.Timer(0.3, exchange, (transport, request)).start()  # on a socket of its own
        return []

    monkeypatch.setattr(SocketTransport, "exchange", late_lifts)

    def meanwhile() -> None:
        other.delete(KEY)
        assert getattr(other, write)(KEY, "acknowledged") is not False

    slow = new(ring, urls, replicas=2, read="all")
    slow.set(KEY, "first")
    slow.writer.codec = stamped = _StampThen(slow.writer.codec, meanwhile)
    slow.set(KEY, "late")  # stamped before the delete, lands after the other write returned
    assert stamped.ran
    assert slow.get(KEY) == "late"
    assert other.get(KEY) == "late"
    time.sleep(0.4)  # every late lift has landed by now
    assert slow.get(KEY) == "late"
    other.close()


def test_a_set_older_than_a_delete_it_lands_after_leaves_the_delete_standing(
    urls: dict[str, str], new: New
) -> None:
    """Only a write newer than the delete lifts its tombstone, never an older one landing late.

    An acknowledged ``set`` may still reach one replica late (it timed out there), after a
    delete that began once the set was acknowledged. The delete must stay: its tombstone is
    newer than the late value, and ``read="all"`` reads the key as deleted.
    """
    ring = HashRing(list(urls))
    other = ShardedClient(ring, urls, replicas=2, read="all")
    slow = new(ring, urls, replicas=2, read="all")
    slow.set(KEY, "first")
    slow.writer.codec = delayed = _StampThen(slow.writer.codec, lambda: other.delete(KEY))
    slow.set(KEY, "late")
    assert delayed.ran
    tomb = tombstone_key(KEY.encode())
    for name in slow.replicas_for(KEY):
        assert tomb in slow.server(name).backend.get_many([tomb])
    assert slow.get(KEY) is None
    assert other.get(KEY) is None
    other.close()


def test_a_write_repaired_after_a_delete_is_never_hidden_by_it_later(
    urls: dict[str, str], new: New
) -> None:
    """A value a read repair lands beside an older delete lifts it, as a client's write does.

    The other write reached one replica, after a delete both had; a read repaired it onto the
    second. A ``set`` stamped before the delete then lands late on both: it is the last write
    on both, and the delete must not hide it on the repaired replica either.
    """
    client = new(HashRing(list(urls)), urls, replicas=2, read="all")
    key = KEY.encode()
    first, second = client.replicas_for(KEY)
    codec = Codec(JSON)
    client.set(KEY, "first")
    late = time.time_ns() // 1000  # the late set's version: stamped before the delete
    client.delete(KEY)  # on both replicas
    acknowledged = codec.encode("acknowledged", version=late + 1_000_000, expires_at_ms=0)
    client.server(first).backend.set_many({key: acknowledged}, None)  # the second missed it
    assert client.get(KEY) == "acknowledged"  # and repaired it there
    assert _held(client, second) == "acknowledged"
    straggler = codec.encode("late", version=late, expires_at_ms=0)
    for name in (first, second):  # the late set, stamped before the delete, lands on both
        client.server(name).backend.set_many({key: straggler}, None)
    assert client.get(KEY) == "late"
