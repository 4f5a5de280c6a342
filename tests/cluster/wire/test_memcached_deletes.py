"""memcached's conditional deletes free the item at once, and still work without meta commands.

A delete removes its key, and a write lifts an older delete's tombstone, only if the item is
still what the ``gets`` read (its cas token): ``md KEY C<token>`` on memcached >= 1.6. An item
taken away by the older form, a ``cas`` with a negative exptime, stayed in memory, expired,
until the next command to read that key unlinked it: the next write of a key deleted and
written again paid for it, and the slab held it meanwhile.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from ringkit import HashRing
from ringkit.cluster import ShardedClient
from ringkit.cluster.values.codec import JSON, Codec
from ringkit.cluster.values.keys import tombstone_key
from ringkit.cluster.wire.drive import drive_sync
from ringkit.cluster.wire.memcached.ops import bury, bury_many, repair
from ringkit.cluster.wire.memcached.protocol import Exchange, Reply
from ringkit.cluster.wire.urls import parse_url
from tests.servers import memcached_server

URL = parse_url("memcached://127.0.0.1:11211")
CODEC = Codec(JSON)


class _Scripted:
    """A memcached answering each exchange with the next replies of a script; it records what
    it was sent."""

    def __init__(self, *script: list[Reply]) -> None:
        self.script = list(script)
        self.sent: list[bytes] = []

    def exchange(self, request: Exchange) -> list[Reply]:
        self.sent.append(request.data)
        replies = self.script.pop(0)
        assert len(replies) == request.replies, (request, replies)
        return replies


OLDER = CODEC.encode("fare", version=5, expires_at_ms=0)
TOMBSTONE = CODEC.encode(None, version=9, expires_at_ms=0)
# bury's first round trip: the tombstone stored, and the key read with its cas token.
STORED_AND_READ: list[Reply] = [(b"STORED", []), (b"END", [(b"fare:1", OLDER, b"41")])]


def test_a_delete_is_a_meta_delete_conditional_on_the_token_read() -> None:
    server = _Scripted(STORED_AND_READ, [(b"HD", [])])
    assert drive_sync(bury(URL, b"fare:1", TOMBSTONE, 60), server) is True
    assert server.sent[1] == b"md fare:1 C41\r\n"
    changed = _Scripted(STORED_AND_READ, [(b"EX", [])])  # written since the read: it stays
    assert drive_sync(bury(URL, b"fare:1", TOMBSTONE, 60), changed) is False


def test_a_delete_on_a_memcached_without_meta_commands_falls_back_to_an_expiring_cas() -> None:
    server = _Scripted(STORED_AND_READ, [(b"ERROR", [])], [(b"STORED", [])])
    assert drive_sync(bury(URL, b"fare:1", TOMBSTONE, 60), server) is True
    assert server.sent[1] == b"md fare:1 C41\r\n"  # answered ERROR: memcached before 1.6
    assert server.sent[2] == b"cas fare:1 0 -1 %d 41\r\n%s\r\n" % (len(OLDER), OLDER)
    changed = _Scripted(STORED_AND_READ, [(b"ERROR", [])], [(b"EXISTS", [])])
    assert drive_sync(bury(URL, b"fare:1", TOMBSTONE, 60), changed) is False


def test_a_delete_of_many_keys_is_two_round_trips_whatever_their_number() -> None:
    keys = [b"fare:%d" % i for i in range(3)]
    newer = CODEC.encode("fare", version=12, expires_at_ms=0)  # written after the delete
    server = _Scripted(
        [(b"STORED", [])] * 3  # the three tombstones
        + [(b"END", [(keys[0], OLDER, b"41"), (keys[1], newer, b"42")])],  # fare:2 is absent
        [(b"HD", [])],  # only fare:0 is older than its tombstone
    )
    gone = drive_sync(bury_many(URL, dict.fromkeys(keys, TOMBSTONE), 60), server)
    assert gone == [b"fare:0"]
    assert len(server.sent) == 2
    assert server.sent[1] == b"md fare:0 C41\r\n"


def test_a_repair_added_under_a_delete_that_ran_meanwhile_is_taken_back_by_its_token() -> None:
    repaired = CODEC.encode("fare", version=5, expires_at_ms=0)
    tomb = tombstone_key(b"fare:1")
    server = _Scripted(
        [(b"END", [])],  # the key and its tombstone: neither held
        [(b"STORED", [])],  # added
        [(b"END", [(b"fare:1", repaired, b"7"), (tomb, TOMBSTONE, b"8")])],  # a delete ran
        [(b"HD", [])],  # the copy taken back
    )
    assert drive_sync(repair(URL, b"fare:1", repaired, None), server) is False
    assert server.sent[-1] == b"md fare:1 C7\r\n"


@pytest.fixture
def memcached_port() -> Iterator[int]:
    with memcached_server() as server:
        yield server.port


def _items(port: int) -> int:
    """The items the server holds, expired ones it has not unlinked yet included."""
    with socket.create_connection(("127.0.0.1", port)) as connection:
        connection.sendall(b"stats\r\n")
        answer = b""
        while not answer.endswith(b"END\r\n"):
            answer += connection.recv(65536)
    [count] = [
        line.split()[2] for line in answer.split(b"\r\n") if line.startswith(b"STAT curr_items ")
    ]
    return int(count)


def test_a_delete_and_a_lift_leave_no_expired_item_behind(memcached_port: int) -> None:
    client = ShardedClient(HashRing(["a"]), {"a": f"memcached://127.0.0.1:{memcached_port}"})
    client.set("warm", 1)  # the cluster's epoch is written before anything is counted
    before = _items(memcached_port)
    client.set("fare:1", "first")
    client.delete("fare:1")  # the key goes; its tombstone stays beside it
    assert client.get("fare:1") is None
    assert _items(memcached_port) == before + 1  # the tombstone only
    client.set("fare:1", "again")  # newer than the delete: lifts its tombstone
    assert client.get("fare:1") == "again"
    assert _items(memcached_port) == before + 1  # the key only
    client.close()


def test_delete_many_on_memcached_deletes_the_keys_it_finds_and_leaves_their_tombstones(
    memcached_port: int,
) -> None:
    client = ShardedClient(HashRing(["a"]), {"a": f"memcached://127.0.0.1:{memcached_port}"})
    client.set_many({f"fare:{i}": i for i in range(20)})
    keys = [f"fare:{i}" for i in range(25)]  # five never written
    assert client.delete_many(keys) == 20
    assert client.get_many(keys) == {}
    tombstones = [tombstone_key(key.encode()) for key in keys]
    assert len(client.server("a").backend.get_many(tombstones)) == 25
    client.close()
