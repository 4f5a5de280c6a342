"""Failures: fallback reads, write quorum, marking down, re-admission, hung servers, forks."""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack
from typing import Any

import pytest

from ringkit import HashRing
from ringkit.cluster import QuorumError, ShardedClient, memory_store
from ringkit.cluster.values.codec import JSON, Codec
from ringkit.errors import BackendError
from tests.cluster.helpers import memory_urls, server_urls
from tests.servers import Server, memcached_server, redis_server, sigstop

New = Callable[..., Any]
START: dict[str, Callable[..., AbstractContextManager[Server]]] = {
    "redis": redis_server,
    "memcached": memcached_server,
}


def _store(url: str):  # type: ignore[no-untyped-def]
    return memory_store(url.removeprefix("memory://"))


def test_read_falls_back_when_the_first_replica_is_down(new: New) -> None:
    urls = memory_urls()
    client = new(HashRing(list(urls)), urls, replicas=2, dead_timeout_s=60)
    client.set("booking:42", "paid")
    first = client.replicas_for("booking:42")[0]
    settled = client.stats()[first].calls  # the view's calls, then the write
    _store(urls[first]).unavailable = True
    assert client.get("booking:42") == "paid"
    assert client.down_servers == [first]
    assert client.stats()[first].failovers == 1 and client.stats()[first].errors == 1
    assert client.get("booking:42") == "paid"  # skipped now, not tried again
    assert client.stats()[first].skipped == 1 and client.stats()[first].calls == settled + 1


def test_write_quorum_refuses_to_acknowledge_too_few_replicas(new: New) -> None:
    urls = memory_urls()
    client = new(HashRing(list(urls)), urls, replicas=2, write_quorum=2)
    first, _ = client.replicas_for("k")
    _store(urls[first]).unavailable = True
    with pytest.raises(QuorumError, match="fewer than write_quorum=2 replicas, first: b'k'"):
        client.set("k", "v")
    relaxed = new(HashRing(list(urls)), urls, replicas=2, write_quorum=1)
    relaxed.set("k", "v")
    assert relaxed.get("k") == "v"


def test_read_fails_only_when_every_replica_is_down(new: New) -> None:
    urls = memory_urls()
    client = new(HashRing(list(urls)), urls, replicas=2)
    client.set("k", "v")
    for name in client.replicas_for("k"):
        _store(urls[name]).unavailable = True
    with pytest.raises(BackendError, match="no replica of 1 keys could be reached, first: b'k'"):
        client.get("k")


def test_readmitted_server_forgets_writes_it_missed_and_is_repaired(new: New) -> None:
    urls = memory_urls()
    client = new(HashRing(list(urls)), urls, replicas=2, dead_timeout_s=0)
    client.set("k", "old")
    first, _ = client.replicas_for("k")
    store = _store(urls[first])
    store.unavailable = True
    client.set("k", "new")  # marks `first` down, hints k there
    store.unavailable = False  # back, still holding "old" (a hung server that resumed)
    assert client.get("k") == "new"
    assert client.down_servers == []
    assert client.stats()[first].readmissions == 1
    assert client.server(first).backend.get_many([b"k"]) != {}  # repaired with the new value
    assert client.get("k") == "new"


def test_read_all_reconciles_by_version_and_repairs_stale_copies(new: New) -> None:
    urls = memory_urls()
    client = new(HashRing(list(urls)), urls, replicas=3, read="all", dead_timeout_s=0, max_hints=0)
    client.set("k", {"v": 1})
    stale = client.replicas_for("k")[0]
    _store(urls[stale]).unavailable = True
    client.set("k", {"v": 2})
    _store(urls[stale]).unavailable = False  # no hints (max_hints=0): it still has v1
    raw_before = client.server(stale).backend.get_many([b"k"])
    assert client.get("k") == {"v": 2}
    assert client.server(stale).backend.get_many([b"k"]) != raw_before
    assert client.get_many(["k", "other"]) == {"k": {"v": 2}}


def test_read_repair_fills_a_replica_that_lost_the_key(new: New) -> None:
    urls = memory_urls()
    client = new(HashRing(list(urls)), urls, replicas=2)
    client.set("k", "v", ttl_s=3600)
    first, _ = client.replicas_for("k")
    client.server(first).backend.delete(b"k")
    assert client.get("k") == "v"
    assert client.server(first).backend.get_many([b"k"]) != {}


def _load(
    client: ShardedClient,
    acked: dict[str, int],
    failures: list[str],
    stop: threading.Event,
    progress: list[int],
) -> None:
    rng = random.Random(7)
    for i in range(20_000):
        if stop.is_set():
            return
        key = f"seat:{rng.randrange(400)}"
        try:
            client.set(key, i)
            acked[key] = i
        except QuorumError:
            pass  # not acknowledged: nothing promised
        probe = rng.choice(list(acked))
        try:
            if client.get(probe) != acked[probe]:
                failures.append(f"stale or lost {probe}")
        except BackendError as error:
            failures.append(f"read failed: {error}")
        progress[0] = i


def _wait_for(progress: list[int], count: int) -> None:
    deadline = time.monotonic() + 60
    while progress[0] < count and time.monotonic() < deadline:
        time.sleep(0.01)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["redis", "memcached"])
def test_killing_a_server_mid_load_loses_no_read_and_no_acknowledged_write(
    kind: str, new: New
) -> None:
    with ExitStack() as stack:
        trio = [stack.enter_context(START[kind]()) for _ in range(3)]
        urls = server_urls(kind, trio)
        client = new(HashRing(list(urls)), urls, replicas=2, timeout_s=0.5, dead_timeout_s=0.05)
        acked: dict[str, int] = {}
        failures: list[str] = []
        stop, progress = threading.Event(), [0]
        client.set("seat:0", -1)
        acked["seat:0"] = -1
        load = threading.Thread(target=_load, args=(client, acked, failures, stop, progress))
        load.start()
        try:
            _wait_for(progress, 300)
            victim = trio[1]
            victim.process.kill()
            victim.process.wait()
            _wait_for(progress, progress[0] + 600)
            stack.enter_context(START[kind](port=victim.port))  # back, empty
            _wait_for(progress, progress[0] + 600)
        finally:
            stop.set()
            load.join()
        assert failures == []
        assert client.stats()["s2"].errors >= 1
        time.sleep(0.1)
        assert client.check_health() == []
        assert client.stats()["s2"].readmissions >= 1
        assert client.get_many(list(acked)) == acked
        client.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["redis", "memcached"])
def test_a_hung_server_is_timed_out_skipped_and_readmitted(kind: str, new: New) -> None:
    with ExitStack() as stack:
        trio = [stack.enter_context(START[kind]()) for _ in range(3)]
        urls = server_urls(kind, trio)
        client = new(HashRing(list(urls)), urls, replicas=2, timeout_s=0.3, dead_timeout_s=0.1)
        client.set("booking:42", "v1")
        first = client.replicas_for("booking:42")[0]
        hung = trio[list(urls).index(first)].process
        sigstop(hung.pid)
        try:
            assert client.get("booking:42") == "v1"
            assert client.down_servers == [first]
            client.set("booking:42", "v2")  # the hung replica misses it: hinted
        finally:
            os.kill(hung.pid, signal.SIGCONT)
        time.sleep(0.15)
        assert client.check_health() == []
        assert client.get("booking:42") == "v2"  # the resumed server's v1 was invalidated
        client.close()


# Sync only: a forked child has no copy of the async facade's event loop thread.
def _child(urls: dict[str, str], queue: multiprocessing.Queue[object]) -> None:
    client = _CLIENTS["shared"]
    client.set("child", os.getpid())
    queue.put((client.get("parent"), client.get("child")))


_CLIENTS: dict[str, ShardedClient] = {}


@pytest.fixture
def shared_client(backend: str, urls: dict[str, str]) -> Iterator[ShardedClient]:
    client = ShardedClient(HashRing(list(urls)), urls, replicas=2)
    _CLIENTS["shared"] = client
    yield client
    client.close()


@pytest.mark.timeout(60)
def test_a_forked_child_gets_its_own_connections(
    shared_client: ShardedClient, urls: dict[str, str]
) -> None:
    shared_client.set("parent", "before fork")
    context = multiprocessing.get_context("fork")
    queue: multiprocessing.Queue[object] = context.Queue()
    child = context.Process(target=_child, args=(urls, queue))
    child.start()
    result = queue.get(timeout=30)
    child.join(30)
    assert child.exitcode == 0
    assert result == ("before fork", child.pid)
    if not urls["s1"].startswith("memory"):  # a memory store is per process
        assert shared_client.get("child") == child.pid
    assert shared_client.get("parent") == "before fork"


def test_one_client_is_safe_to_share_between_threads(urls: dict[str, str], new: New) -> None:
    shared_client = new(HashRing(list(urls)), urls, replicas=2)
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            for i in range(150):
                shared_client.set(f"t{worker}:{i % 20}", i)
                assert shared_client.get(f"t{worker}:{i % 20}") == i
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert shared_client.get_many([f"t{n}:9" for n in range(8)]) == {
        f"t{n}:9": 149 for n in range(8)
    }


@pytest.mark.timeout(60)
def test_readmission_invalidates_more_hints_than_the_pool_has_connections(new: New) -> None:
    # Regression: the async client sends a re-admitted server's hint deletes as one concurrent
    # round; redis.asyncio's default pool refused the calls past max_connections, the probe
    # failed, and the taken hints were dropped, so the stale copies stayed.
    with ExitStack() as stack:
        trio = [stack.enter_context(redis_server()) for _ in range(3)]
        urls = server_urls("redis", trio)
        ring = HashRing(list(urls))
        client = new(ring, urls, replicas=2, max_connections=4, dead_timeout_s=0.05)
        keys = [f"k{i}" for i in range(400) if "s2" in ring.nodes_for(f"k{i}", 2)]
        client.set_many(dict.fromkeys(keys, "old"))
        victim = trio[1]
        victim.process.send_signal(signal.SIGSTOP)  # hung: keeps its old values
        try:
            time.sleep(0.05)
            for key in keys:
                client.set(key, "new")  # s2 times out, is marked down, every key is hinted
        finally:
            victim.process.send_signal(signal.SIGCONT)
        time.sleep(0.1)
        assert client.check_health() == []
        assert client.stats()["s2"].readmissions >= 1
        assert client.get_many(keys) == dict.fromkeys(keys, "new")
        on_s2 = client.server("s2").backend.get_many([key.encode() for key in keys])
        # Every stale copy on s2 was invalidated (read repair may since have written "new").
        assert {Codec(JSON).decode(value).value for value in on_s2.values()} <= {"new"}
        client.close()
