"""Multi-key calls reach every server at once: fan-out, delete_many, their failures."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pymemcache.client.base import Client

from ringkit import HashRing
from ringkit.cluster import ShardedClient
from ringkit.cluster.drivers.fanout import THREAD_NAME_PREFIX, FanOut
from ringkit.cluster.drivers.steps import Call, Failed, run_sync
from ringkit.cluster.remedies.nearcache import NearCache
from ringkit.cluster.wire.backends import open_backend
from ringkit.cluster.wire.memory import memory_store
from ringkit.cluster.wire.urls import parse_url
from ringkit.errors import BackendError, ConfigError, StaleViewError
from tests.cluster.helpers import memory_urls, server_urls
from tests.servers import Server, sigstop


def _fan_out_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(THREAD_NAME_PREFIX)]


@pytest.fixture
def redis_urls(redis_trio: list[Server]) -> Iterator[dict[str, str]]:
    urls = server_urls("redis", redis_trio)
    flusher = ShardedClient(HashRing(list(urls)), urls)
    flusher.flush()
    flusher.close()
    yield urls


# -- delete_many, on every backend and both clients ----------------------------------------------


def test_delete_many_deletes_every_key_and_counts_those_some_replica_had(
    make_client: Callable[..., Any],
) -> None:
    client = make_client(replicas=2, write_quorum=2)
    client.set_many({f"k{i}": i for i in range(30)})
    assert client.delete_many([f"k{i}" for i in range(40)]) == 30
    assert client.get_many([f"k{i}" for i in range(40)]) == {}
    assert client.delete_many(["k1", "k2"]) == 0
    assert client.delete_many([]) == 0


def test_delete_many_leaves_tombstones_that_stop_an_older_repair(
    make_client: Callable[..., Any],
) -> None:
    # The tombstone of each key is what keeps a read repair from bringing the key back
    # too: a repair with the value read before the delete must not land after it.
    client = make_client(replicas=2, write_quorum=2)
    client.set("gone", "old")
    first = client.replicas_for("gone")[0]
    stored = client.server(first).backend.get_many([b"gone"])[b"gone"]
    assert client.delete_many(["gone"]) == 1
    assert client.server(first).backend.serve("repair", b"gone", stored, None) is False
    assert client.get("gone") is None


def test_delete_many_counts_a_key_given_as_str_and_bytes_once(
    make_client: Callable[..., Any],
) -> None:
    client = make_client()
    client.set("dup", 1)
    assert client.delete_many(["dup", b"dup"]) == 1


def test_delete_many_refuses_bad_keys_before_deleting_anything(
    make_client: Callable[..., Any],
) -> None:
    client = make_client()
    client.set("kept", 1)
    with pytest.raises(TypeError, match="one key 'kept'"):
        client.delete_many("kept")
    with pytest.raises(ConfigError, match="whitespace"):
        client.delete_many(["kept", "bad key"])
    with pytest.raises(ConfigError, match="reserved prefix"):
        client.delete_many(["kept", "ringkit:epoch"])
    with pytest.raises(TypeError, match="str or bytes, got int"):
        client.delete_many(["kept", 7])
    assert client.get("kept") == 1


# -- the fan-out pool itself ---------------------------------------------------------------------


def test_fan_out_refuses_a_bad_thread_count() -> None:
    for bad in (0, -1, True, 2.5, "4"):
        with pytest.raises(ConfigError, match=f"max_threads must be an int >= 1, got {bad!r}"):
            FanOut(max_threads=bad)  # type: ignore[arg-type]


def test_fan_out_runs_each_server_lane_in_order_and_servers_at_once() -> None:
    fan_out = FanOut(max_threads=4)
    seen: dict[str, list[int]] = {}
    threads: dict[str, set[str]] = {}
    barrier = threading.Barrier(3, timeout=10)  # three servers must be in flight together

    def perform(request: tuple[str, int]) -> int:
        server, n = request
        if n == 0:
            barrier.wait()
        seen.setdefault(server, []).append(n)
        threads.setdefault(server, set()).add(threading.current_thread().name)
        return n * 10

    requests = [(server, n) for n in range(3) for server in "abc"]
    lanes = [server for server, _ in requests]
    assert fan_out.run(requests, perform, lanes=lanes) == [n * 10 for _, n in requests]
    assert seen == {server: [0, 1, 2] for server in "abc"}
    assert all(len(names) == 1 for names in threads.values())  # one lane, one thread
    fan_out.close()


def test_fan_out_returns_the_first_error_in_round_order_after_every_call_ran() -> None:
    fan_out = FanOut(max_threads=4)
    ran: list[str] = []

    def perform(server: str) -> str:
        if server == "b":
            time.sleep(0.05)  # the later error comes first in time; the earlier one still wins
            ran.append(server)
            raise StaleViewError("redis://b", 9, 8)
        ran.append(server)
        if server == "c":
            raise ConfigError("server c refused the value")
        return server

    outcome = fan_out.run(["a", "b", "c", "d"], perform, lanes=["a", "b", "c", "d"])
    assert isinstance(outcome, StaleViewError)
    assert "redis://b" in str(outcome)
    assert sorted(ran) == ["a", "b", "c", "d"]
    fan_out.close()


def test_close_stops_the_threads_and_later_rounds_run_in_the_calling_thread() -> None:
    before = set(_fan_out_threads())
    fan_out = FanOut(max_threads=3)
    names: list[str] = []

    def perform(server: str) -> str:
        names.append(threading.current_thread().name)
        return server

    assert fan_out.run(["a", "b", "c"], perform, lanes=["a", "b", "c"]) == ["a", "b", "c"]
    assert set(_fan_out_threads()) - before
    fan_out.close()
    assert not set(_fan_out_threads()) - before
    names.clear()
    assert fan_out.run(["a", "b"], perform, lanes=["a", "b"]) == ["a", "b"]
    assert names == [threading.current_thread().name] * 2


def test_a_round_without_network_calls_stays_in_the_calling_thread() -> None:
    fan_out = FanOut(max_threads=3)
    names: list[str] = []

    def perform(request: int) -> int:
        names.append(threading.current_thread().name)
        return request

    assert fan_out.run([1, 2, 3], perform, lanes=[None, None, "only"]) == [1, 2, 3]
    assert names == [threading.current_thread().name] * 3
    fan_out.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_starts_a_pool_of_its_own() -> None:
    fan_out = FanOut(max_threads=2)
    assert fan_out.run(["a", "b"], lambda s: s, lanes=["a", "b"]) == ["a", "b"]
    pid = os.fork()
    if pid == 0:  # the child: the parent's threads are gone; a new pool must serve the round
        code = 1
        try:
            signal.alarm(10)
            ok = fan_out.run(["a", "b", "c"], lambda s: s * 2, lanes=["a", "b", "c"])
            code = 0 if ok == ["aa", "bb", "cc"] else 2
            fan_out.close()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    fan_out.close()


def test_run_sync_throws_the_named_error_into_the_core(redis_urls: dict[str, str]) -> None:
    # Every call of the round runs; the core is given the first error in round order, and
    # a BackendError (the server failed) becomes Failed for that server only.
    client = ShardedClient(HashRing(list(redis_urls)), redis_urls)

    def steps() -> Any:
        outcomes = yield (
            Call("s1", "get_many", ([b"x"],), client.epoch),
            Call("s2", "no_such_method", (), client.epoch),
            Call("s3", "get_many", ([b"y"],), client.epoch),
        )
        return outcomes

    with pytest.raises(AttributeError, match="no_such_method"):
        run_sync(steps(), client.server, client.fan_out)
    client.close()


# -- the sync client over real servers ----------------------------------------------------------


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    written=st.sets(st.integers(0, 199), max_size=60),
    asked=st.lists(st.integers(0, 199), max_size=80),
    deleted=st.sets(st.integers(0, 199), max_size=30),
)
def test_fanned_out_calls_answer_as_the_sequential_ones(
    redis_urls: dict[str, str], written: set[int], asked: list[int], deleted: set[int]
) -> None:
    ring = HashRing(list(redis_urls))
    concurrent = ShardedClient(ring, redis_urls, replicas=2, write_quorum=2)
    sequential = ShardedClient(ring, redis_urls, replicas=2, write_quorum=2)
    sequential.fan_out.close()  # rounds run one server after the other
    try:
        concurrent.flush()
        concurrent.set_many({f"k{i}": i for i in written})
        keys = [f"k{i}" for i in asked]
        expected = {f"k{i}": i for i in asked if i in written}
        assert concurrent.get_many(keys) == sequential.get_many(keys) == expected
        gone = sum(1 for i in deleted if i in written)
        assert concurrent.delete_many([f"k{i}" for i in deleted]) == gone
        left = {key: value for key, value in expected.items() if int(key[1:]) not in deleted}
        assert sequential.get_many(keys) == concurrent.get_many(keys) == left
    finally:
        concurrent.close()
        sequential.close()


def test_get_many_falls_back_past_a_hung_server_and_close_stops_the_threads(
    redis_trio: list[Server], redis_urls: dict[str, str]
) -> None:
    before = set(_fan_out_threads())
    client = ShardedClient(HashRing(list(redis_urls)), redis_urls, replicas=2, timeout_s=0.3)
    values = {f"k{i}": i for i in range(60)}
    client.set_many(values)
    hung = redis_trio[1]  # s2
    sigstop(hung.process.pid)
    try:
        assert client.get_many(list(values)) == values  # s2 times out; its keys' next replicas
        assert "s2" in client.down_servers
        client.set_many({"after": 1})  # hinted for s2, acknowledged by the others
        assert client.delete_many(["k1", "k2"]) == 2
    finally:
        hung.process.send_signal(signal.SIGCONT)
    assert set(_fan_out_threads()) - before  # the rounds did fan out
    client.close()
    assert not set(_fan_out_threads()) - before


def test_a_failing_server_is_named_and_the_others_still_answer(
    redis_trio: list[Server], redis_urls: dict[str, str]
) -> None:
    dead = dict(redis_urls, s3="redis://127.0.0.1:1/0")  # nothing listens on port 1
    ring = HashRing(list(dead))
    client = ShardedClient(ring, dead, timeout_s=0.3)
    keys = [f"k{i}" for i in range(60)]
    on_dead = [key for key in keys if client.replicas_for(key) == ["s3"]]
    assert on_dead
    with pytest.raises(BackendError, match=r"redis://127\.0\.0\.1:1/0 failed"):
        client.get_many(keys)
    alive = [key for key in keys if key not in on_dead]
    client.set_many(dict.fromkeys(alive, "v"))
    assert client.get_many(alive) == dict.fromkeys(alive, "v")
    client.close()


def test_a_refused_value_names_its_server_through_the_fan_out(
    memcached_trio: list[Server],
) -> None:
    urls = server_urls("memcached", memcached_trio)
    client = ShardedClient(HashRing(list(urls)), urls, max_value_bytes=4_000_000)
    items = {f"big{i}": "x" * 1_200_000 for i in range(6)}  # over memcached's 1 MiB items
    with pytest.raises(ConfigError, match=r"server memcached://127\.0\.0\.1:\d+ refused"):
        client.set_many(items)
    client.close()


def test_failed_outcomes_pass_through_as_failed(redis_urls: dict[str, str]) -> None:
    dead = dict(redis_urls, s3="redis://127.0.0.1:1/0")
    client = ShardedClient(HashRing(list(dead)), dead, timeout_s=0.3)

    def steps() -> Any:
        return (yield tuple(Call(name, "get_many", ([b"x"],), 0) for name in ("s1", "s3", "s2")))

    outcomes = run_sync(steps(), client.server, client.fan_out)
    assert outcomes[0] == {} and outcomes[2] == {}
    assert isinstance(outcomes[1], Failed)
    assert "127.0.0.1:1" in str(outcomes[1].error)
    client.close()


# -- the single-key read: direct when nothing else can happen -----------------------------------


def test_a_direct_read_refused_by_a_newer_view_refreshes_and_reads_the_new_owner(
    new: Callable[..., Any],
) -> None:
    urls = memory_urls(2)
    one = {"s1": urls["s1"]}
    client = new(HashRing(["s1"]), one)
    stale = new(HashRing(["s1"]), one)
    values = {f"k{i}": i for i in range(100)}
    client.set_many(values)
    assert stale.get("k0") == 0  # settled at the first view: its reads go direct from now on
    client.add_server("s2", urls["s2"])
    moved = [key for key in values if client.replicas_for(key) == ["s2"]]
    assert moved
    assert [stale.get(key) for key in moved] == [values[key] for key in moved]
    assert stale.epoch == client.epoch


def test_a_direct_read_of_a_failing_server_names_it_and_counts_the_failover(
    new: Callable[..., Any],
) -> None:
    urls = memory_urls(1)
    client = new(HashRing(list(urls)), urls)
    client.set("k", 1)
    assert client.get("k") == 1
    memory_store(urls["s1"].removeprefix("memory://")).unavailable = True
    with pytest.raises(BackendError, match="no replica of 1 keys could be reached"):
        client.get("k")
    stats = client.stats()["s1"]
    assert stats.failovers == 1 and stats.errors == 1
    assert client.down_servers == ["s1"]


def test_a_direct_read_counts_hits_and_misses_as_the_steps_do(new: Callable[..., Any]) -> None:
    urls = memory_urls(1)
    direct = new(HashRing(list(urls)), urls)
    steps = new(HashRing(list(urls)), urls)
    steps._alone = False  # every read takes the whole steps
    direct.set_many({"a": 1, "b": None})
    for client in (direct, steps):
        assert [client.get(key) for key in ("a", "b", "c")] == [1, None, None]
    assert (direct.stats()["s1"].hits, direct.stats()["s1"].misses) == (
        steps.stats()["s1"].hits,
        steps.stats()["s1"].misses,
    )


def test_memcached_connections_are_pooled_and_close_closes_them(
    memcached_trio: list[Server],
) -> None:
    server = memcached_trio[0]
    watcher = Client((server.host, server.port), default_noreply=False)

    def connections() -> int:
        return int(watcher.stats()[b"curr_connections"])

    before = connections()
    backend = open_backend(
        parse_url(f"memcached://{server.address}"), timeout_s=1.0, max_connections=4
    )
    backend.set_many({b"k": b"v"}, None)
    threads = [threading.Thread(target=backend.get_many, args=([b"k"],)) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert before < connections() <= before + 4  # reused, at most one per concurrent call
    backend.close()
    deadline = time.monotonic() + 10
    while connections() > before and time.monotonic() < deadline:
        time.sleep(0.02)  # the server notices the closed sockets on its own time
    assert connections() == before
    assert backend.get_many([b"k"]) == {b"k": b"v"}  # reopened on use
    backend.close()
    watcher.close()


def test_a_near_cache_answers_before_any_direct_read(new: Callable[..., Any]) -> None:
    urls = memory_urls(1)
    cached = new(HashRing(list(urls)), urls, near_cache=NearCache(max_items=10, ttl_s=60.0))
    writer = new(HashRing(list(urls)), urls)
    cached.set("k", "first")
    assert cached.get("k") == "first"  # read once: now in this client's near-cache
    writer.set("k", "second")
    assert cached.get("k") == "first"  # still within ttl_s: the near-cache answered, no call
    assert writer.get("k") == "second"
