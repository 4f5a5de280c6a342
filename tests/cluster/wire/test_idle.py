"""Idle connections: reused between calls, reopened when the server closed them, not shared."""

from __future__ import annotations

import os

import redis
from pymemcache.client.base import Client

from ringkit import HashRing
from ringkit.cluster import ShardedClient
from ringkit.cluster.wire.idle import IdleConnections
from tests.servers import memcached_server, redis_server


def test_the_stack_keeps_at_most_max_idle_and_gives_the_latest_back_first() -> None:
    idle = IdleConnections[str](max_idle=2)
    assert [idle.give(name) for name in "abc"] == [True, True, False]
    assert [idle.take(), idle.take(), idle.take()] == ["b", "a", None]


def test_a_forked_child_forgets_its_parents_idle_connections() -> None:
    idle = IdleConnections[str](max_idle=2)
    idle.give("parent's socket")
    child = os.fork()
    if child == 0:  # the child: exit 0 only if it starts with no idle connection
        os._exit(0 if idle.take() is None else 1)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert idle.take() == "parent's socket"


def test_a_redis_connection_the_server_closed_while_idle_is_reopened_not_failed() -> None:
    # Redis closes idle clients after its `timeout`, and every client on a restart: the next
    # call must open a new connection, not fail and mark a healthy server down.
    with redis_server() as server:
        client = ShardedClient(HashRing(["a"]), {"a": f"redis://127.0.0.1:{server.port}/0"})
        try:
            client.set("k", "before")
            admin = redis.Redis(host="127.0.0.1", port=server.port)
            assert admin.client_kill_filter(_type="normal", skipme=True) >= 1
            admin.close()
            assert client.get("k") == "before"
            client.set("k", "after")
            assert client.get("k") == "after"
            assert client.down_servers == []
            assert client.stats()["a"].errors == 0
        finally:
            client.close()


def test_memcached_connections_are_reused_between_calls() -> None:
    with memcached_server() as server:
        client = ShardedClient(HashRing(["a"]), {"a": f"memcached://127.0.0.1:{server.port}"})
        try:
            for round_ in range(20):
                client.set("k", round_)
                assert client.get("k") == round_
            stats = client.stats()["a"]
            assert stats.errors == 0
        finally:
            client.close()
        admin = Client(("127.0.0.1", server.port))
        try:
            # The client's calls took one connection, not one per call (and the admin one).
            assert int(admin.stats()[b"total_connections"]) <= 4
        finally:
            admin.close()
