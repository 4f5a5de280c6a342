"""The asyncio twin: same operations, same answers, same failover, on every backend."""

from __future__ import annotations

import asyncio
import os
import signal
from contextlib import ExitStack

import pytest

from ringkit import HashRing
from ringkit.cluster import ShardedClient
from ringkit.cluster.aio import AsyncShardedClient
from ringkit.errors import BackendError, ConfigError
from tests.cluster.core.test_faults import START
from tests.cluster.helpers import memory_urls, server_urls
from tests.servers import sigstop


def test_every_operation_matches_the_sync_client(urls: dict[str, str]) -> None:
    ring = HashRing(list(urls))
    sync = ShardedClient(ring, urls, replicas=2)

    async def scenario() -> None:
        client = AsyncShardedClient(ring, urls, replicas=2)
        values = {"bytes": b"\x00raw", "str": "héllo", "int": 42, "obj": {"seat": "12A"}}
        await client.set_many(values, ttl_s=3600)
        assert await client.get_many([*values, "missing"]) == values
        assert sync.get_many(list(values)) == values  # what one writes, the other reads
        sync.set("from-sync", [1, 2])
        assert await client.get("from-sync") == [1, 2]
        assert await client.add("lock", "a") is True
        assert await client.add("lock", "b") is False
        assert await client.incr("int", 8) == 50
        assert await client.decr("int", 100) == 0
        assert await client.incr("absent") is None
        with pytest.raises(ValueError, match="b'str' is not a decimal integer"):
            await client.incr("str")
        assert await client.touch("str", 60) is True
        assert await client.touch("absent", 60) is False
        assert await client.delete("str") is True
        assert await client.get("str") is None
        with pytest.raises(ConfigError, match="ttl_s must be a number > 0 or None, got 0"):
            await client.set("k", "v", ttl_s=0)
        assert {n: s.calls > 0 for n, s in client.stats().items()} == dict.fromkeys(urls, True)
        await client.close()

    asyncio.run(scenario())
    sync.close()


def test_get_many_is_one_round_trip_per_server(urls: dict[str, str]) -> None:
    async def scenario() -> None:
        client = AsyncShardedClient(HashRing(list(urls)), urls)
        await client.refresh_view()  # settles the view first (its own calls)
        before = [s.calls for s in client.stats().values()]
        await client.set_many({f"k{i}": i for i in range(50)})
        assert await client.get_many([f"k{i}" for i in range(50)]) == {
            f"k{i}": i for i in range(50)
        }
        after = [s.calls for s in client.stats().values()]
        assert [a - b for a, b in zip(after, before, strict=True)] == [2, 2, 2]
        await client.close()

    asyncio.run(scenario())


def test_fallback_readmission_and_reconcile_on_memory() -> None:
    from ringkit.cluster import memory_store

    urls = memory_urls()

    async def scenario() -> None:
        client = AsyncShardedClient(
            HashRing(list(urls)), urls, replicas=2, dead_timeout_s=0, read="all"
        )
        await client.set("k", "old")
        first = client.replicas_for("k")[0]
        store = memory_store(urls[first].removeprefix("memory://"))
        store.unavailable = True
        await client.set("k", "new")
        assert client.down_servers == [first]
        store.unavailable = False
        assert await client.get("k") == "new"
        assert await client.check_health() == []
        for name in client.replicas_for("k"):
            store = memory_store(urls[name].removeprefix("memory://"))
            store.unavailable = True
        with pytest.raises(BackendError, match="no replica of 1 keys could be reached"):
            await client.get("k")

    asyncio.run(scenario())


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["redis", "memcached"])
def test_hung_and_killed_servers_are_timed_out_and_readmitted(kind: str) -> None:
    with ExitStack() as stack:
        trio = [stack.enter_context(START[kind]()) for _ in range(3)]
        urls = server_urls(kind, trio)

        async def scenario() -> None:
            client = AsyncShardedClient(
                HashRing(list(urls)), urls, replicas=2, timeout_s=0.3, dead_timeout_s=0.1
            )
            await client.set_many({f"seat:{i}": i for i in range(100)})
            first = client.replicas_for("seat:1")[0]
            hung = trio[list(urls).index(first)].process
            sigstop(hung.pid)
            try:
                assert await client.get("seat:1") == 1
                assert client.down_servers == [first]
                await client.set("seat:1", "moved on")
            finally:
                os.kill(hung.pid, signal.SIGCONT)
            await asyncio.sleep(0.15)
            assert await client.check_health() == []
            assert await client.get("seat:1") == "moved on"
            trio[2].process.kill()
            trio[2].process.wait()
            assert await client.get_many([f"seat:{i}" for i in range(2, 100)]) == {
                f"seat:{i}": i for i in range(2, 100)
            }
            assert "s3" in client.down_servers
            await client.close()

        asyncio.run(scenario())  # pytest-timeout fails it if a hung server is waited on


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["memory", "redis"])
def test_a_stale_async_writer_after_a_join_is_refused_and_redirected(kind: str) -> None:
    # Regression: an async client with an old view wrote 50 keys to their old servers after a
    # join, and up-to-date clients then found none of them.
    with ExitStack() as stack:
        if kind == "redis":
            quartet = [stack.enter_context(START["redis"]()) for _ in range(4)]
            names = ("s1", "s2", "s3", "s4")
            urls = {n: f"redis://{s.address}/0" for n, s in zip(names, quartet, strict=True)}
        else:
            urls = memory_urls(4)
        base = {name: urls[name] for name in ("s1", "s2", "s3")}
        admin = ShardedClient(HashRing(list(base)), base)
        admin.set_many({f"seed:{i}": i for i in range(100)})

        async def scenario() -> None:
            stale = AsyncShardedClient(HashRing(list(base)), base)
            assert await stale.get("seed:1") == 1  # it has served under the old view
            admin.add_server("s4", urls["s4"])
            moved = [f"k{i}" for i in range(2000) if admin.replicas_for(f"k{i}") == ["s4"]][:50]
            await stale.set_many({key: key for key in moved})
            assert stale.epoch == admin.epoch == 3  # the first view was 1
            for key in moved[:5]:
                await stale.set(key, key)  # one-key writes take the same path
            assert await stale.get_many(moved) == {key: key for key in moved}
            await stale.close()
            fresh = ShardedClient(admin.view.placement, dict(admin.view.servers))
            assert fresh.get_many(moved) == {key: key for key in moved}  # zero lost
            old = HashRing(list(base))
            for key in moved:
                owner = old.node_for(key)
                assert fresh.server(owner).backend.get_many([key.encode()]) == {}
            fresh.close()

        asyncio.run(scenario())
        admin.close()


def test_async_add_and_remove_server_move_keys_while_serving() -> None:
    urls = memory_urls(4)
    base = {name: urls[name] for name in ("s1", "s2", "s3")}

    async def scenario() -> None:
        client = AsyncShardedClient(HashRing(list(base)), base, replicas=2)
        await client.set_many({f"k{i}": i for i in range(300)})
        added = await client.add_server("s4", urls["s4"])
        assert (added.outcome, client.epoch, client.view.state) == ("done", 3, "stable")
        assert "s4" in client.view.placement
        removed = await client.remove_server("s1")
        assert removed.outcome == "done" and "s1" not in client.view.placement
        assert await client.get_many([f"k{i}" for i in range(300)]) == {
            f"k{i}": i for i in range(300)
        }
        await client.close()

    asyncio.run(scenario())
