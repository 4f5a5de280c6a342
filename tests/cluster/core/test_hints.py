"""Hinted handoff on the servers: any process that re-admits a server repairs it first.

Dynamo (DeCandia et al. 2007, section 4.6) keeps the hints for a failed node on the nodes that
took its writes, so a hint outlives the coordinator that wrote it. These tests run the writer
and the re-admitting reader in different processes, on real redis-server and memcached
processes, with the failed server hung by SIGSTOP (a hung server, not a dead one).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from contextlib import ExitStack
from typing import Any

import pytest

from ringkit import HashRing
from ringkit.cluster import AsyncShardedClient, ShardedClient, memory_store
from ringkit.cluster.core.health import ServerHealth
from ringkit.cluster.drivers.steps import Steps, _call_sync
from ringkit.cluster.values.codec import JSON, Codec
from ringkit.cluster.values.keys import hints_key
from ringkit.cluster.wire.redis.handoff import copy_tombstone
from tests.cluster.helpers import memory_urls, server_urls
from tests.cluster.processes import client_in_this_process, workers
from tests.servers import memcached_server, redis_server, sigstop

START = {"redis": redis_server, "memcached": memcached_server}
# Short timeouts keep the hung server cheap; the reader re-admits soon after SIGCONT.
TIMEOUT_S = 0.3
READER_DEAD_TIMEOUT_S = 0.5


def _readmitted(reader: Any, within_s: float = 30.0) -> list[str]:
    """Probe until the reader re-admits every server; return the servers still down at the end.

    A probe answers within ``TIMEOUT_S`` or fails: on a loaded machine (tests in parallel) the
    resumed server's first answer can miss it, and the server stays down until the next probe,
    ``READER_DEAD_TIMEOUT_S`` later. Re-admission, not its first attempt, is the behaviour.
    """
    deadline = time.monotonic() + within_s
    while True:
        time.sleep(READER_DEAD_TIMEOUT_S + 0.1)  # the reader's probe of a down server is due
        down: list[str] = reader("check_health")
        if not down or time.monotonic() > deadline:
            return down


def _options(dead_timeout_s: float) -> dict[str, object]:
    return {"replicas": 2, "timeout_s": TIMEOUT_S, "dead_timeout_s": dead_timeout_s}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("flavor", ["sync", "async"])
@pytest.mark.parametrize("kind", ["redis", "memcached"])
def test_another_process_readmits_a_hung_server_only_after_its_hints(
    kind: str, flavor: str
) -> None:
    with ExitStack() as stack:
        trio = [stack.enter_context(START[kind]()) for _ in range(3)]
        urls = server_urls(kind, trio)
        ring = HashRing(list(urls))
        hung_name = "s2"
        # Keys that the hung server holds, most of them as the replica read first.
        keys = [f"k{i}" for i in range(200) if hung_name in ring.nodes_for(f"k{i}", 2)]
        seeding = ShardedClient(ring, urls, replicas=2)
        seeding.flush()
        seeding.set_many(dict.fromkeys(keys, "old"))
        seeding.close()
        start = stack.enter_context(workers())
        writer = start(flavor, urls, _options(60.0))  # P1: never probes within the test
        reader = start(flavor, urls, _options(READER_DEAD_TIMEOUT_S))  # P2
        first_on_hung = next(key for key in keys if ring.nodes_for(key, 2)[0] == hung_name)
        assert reader("get", first_on_hung) == "old"
        hung = trio[list(urls).index(hung_name)].process
        sigstop(hung.pid)
        try:
            assert reader("get", first_on_hung) == "old"  # P2 fails on s2 and marks it down
            assert reader("down_servers") == [hung_name]
            for key in keys:
                writer("set", key, "new")  # P1 marks s2 down too and hints every key
            assert writer("down_servers") == [hung_name]
        finally:
            os.kill(hung.pid, signal.SIGCONT)
        writer.kill()  # a writer that crashed after its writes: its memory is gone
        assert _readmitted(reader) == []
        for _ in range(2):
            assert reader("get_many", keys) == dict.fromkeys(keys, "new")
        for key in keys:
            assert reader("get", key) == "new", key


@pytest.mark.parametrize("flavor", ["sync", "async"])
def test_hints_of_a_down_server_are_stored_on_the_replicas_that_took_the_write(
    flavor: str,
) -> None:
    urls = memory_urls()
    ring = HashRing(list(urls))
    client = client_in_this_process(flavor, urls, _options(60.0))
    key = next(f"k{i}" for i in range(100) if ring.nodes_for(f"k{i}", 2)[0] == "s1")
    survivor = ring.nodes_for(key, 2)[1]
    memory_store(urls["s1"].removeprefix("memory://")).unavailable = True
    client.set(key, "v")
    stored = memory_store(urls[survivor].removeprefix("memory://")).data
    assert key.encode() in stored[hints_key("s1")][0].split()
    client.close()


def _drive(steps: Steps[Any], client: ShardedClient, stop: str | None = None) -> Any:
    """Run `steps` on `client`'s servers; pause before the first round that calls `stop`."""
    outcomes: Any = None
    while True:
        try:
            round_ = steps.send(outcomes)
        except StopIteration as done:
            return done.value
        if stop is not None and round_[0].method == stop:
            return round_
        outcomes = [_call_sync(call, client.server(call.server)) for call in round_]


def test_a_hint_written_while_another_process_readmits_is_not_lost() -> None:
    # The race left by hints on the servers: P2 reads the hints for s1 and, before it deletes
    # them there and re-admits s1, P1 (which still has s1 down) writes and hints a key. P2
    # never saw that hint; P1 sees P2's re-admission stamp and invalidates the key on s1.
    urls = memory_urls()
    ring = HashRing(list(urls))
    options: dict[str, Any] = {"replicas": 2}
    p1 = ShardedClient(ring, urls, dead_timeout_s=60.0, **options)
    p2 = ShardedClient(ring, urls, dead_timeout_s=0.0, **options)
    key, warm = [k for k in (f"k{i}" for i in range(500)) if ring.nodes_for(k, 2)[0] == "s1"][:2]
    p2.set_many({key: "old", warm: "old"})
    store = memory_store(urls["s1"].removeprefix("memory://"))
    store.unavailable = True
    assert p2.get(key) == "old" and p2.down_servers == ["s1"]
    p1.set(warm, "warm")  # P1 fails on s1 too, and hints `warm`
    store.unavailable = False
    probe = p2._servers.usable("s1", p2.router)
    paused = _drive(probe, p2, stop="bury")  # P2 has read the hints (warm), not applied them
    p1.set(key, "new")  # P1 skips s1 and hints `key` on s2: too late for P2's read
    outcomes = [_call_sync(call, p2.server(call.server)) for call in paused]
    assert _drive(_resume(probe, outcomes), p2) is True
    assert p2.down_servers == []
    assert p2.get(key) == "new"
    assert p2.get(warm) == "warm"
    # P1 invalidated `key` on s1 itself, leaving a tombstone below its write: read="all",
    # which takes a tombstone for a delete, still finds the write (a tombstone at the time of
    # the invalidation hid it: the chaos runs kill/restart on redis with read="all").
    reading_all = ShardedClient(ring, urls, read="all", **options)
    assert reading_all.get_many([key, warm]) == {key: "new", warm: "warm"}
    reading_all.close()
    p1.close()
    p2.close()


def _resume(steps: Steps[Any], outcomes: list[Any]) -> Steps[Any]:
    """Continue `steps`, paused at a round, with that round's `outcomes`."""
    try:
        round_ = steps.send(outcomes)
    except StopIteration as done:
        return done.value
    outcomes = yield round_
    return (yield from _resume(steps, outcomes))


def test_in_memory_hints_are_bounded_and_dropped_hints_are_counted() -> None:
    health = ServerHealth("a", dead_timeout_s=1.0, max_hints=2)
    for key in (b"x", b"y", b"z", b"x"):
        health.hint(key)
    assert sorted(health.take_hints()) == [b"x", b"y"]
    assert health.hints_dropped == 1


_OLD = Codec(JSON).encode("old", version=1, expires_at_ms=0)
_NEW = Codec(JSON).encode("new", version=2, expires_at_ms=0)
# The hint and copy calls of one server, in order, and what each must answer.
STEPS: list[tuple[str, tuple[Any, ...], object]] = [
    ("add_hints", ("s9", [b"a", b"b"], 3), (0, 0)),
    ("add_hints", ("s9", [b"b", b"c", b"d"], 3), (1, 0)),  # b is there, c fits, d is dropped
    ("read_hints", ("s9",), [b"a", b"b", b"c"]),
    ("drop_hints", ("s9", [b"a", b"c"]), None),
    ("mark_readmitted", ("s9", 1234), None),
    ("add_hints", ("s9", [b"e"], 3), (0, 1234)),  # a writer learns that s9 is being re-admitted
    ("read_hints", ("s9",), [b"b", b"e"]),  # exactly the applied ones went; e, added since, stays
    ("set_copy", (b"copy", _NEW, None), True),
    ("set_copy", (b"copy", _OLD, None), False),  # an old copy never overwrites a newer one
    ("set_copy", (b"copy", copy_tombstone(3), None), True),
    ("get_many", ([b"copy"],), {b"copy": copy_tombstone(3)}),
]


def _answer(found: object) -> object:
    return sorted(found) if isinstance(found, list) else found


def test_hints_and_copies_on_each_backend(urls: dict[str, str]) -> None:
    client = ShardedClient(HashRing(list(urls)), urls)
    backend = client.server("s1").backend
    for verb, args, expected in STEPS:
        assert _answer(backend.serve(verb, *args)) == expected, verb
    client.close()


def test_hints_and_copies_on_each_async_backend(urls: dict[str, str]) -> None:
    async def run() -> None:
        client = AsyncShardedClient(HashRing(list(urls)), urls)
        backend = client.server("s2").backend
        for verb, args, expected in STEPS:
            assert _answer(await backend.serve(verb, *args)) == expected, verb
        await client.close()

    asyncio.run(run())
