"""Deletes during a move leave tombstones, so no copy brings a deleted key back.

The coordinator copies a page of keys in two steps, a read (DUMP) on the old owner and a write
(RESTORE) on the new one. A delete that lands in between used to be undone by the write. Here the
coordinator runs in its own process, a delete is made between each page's read and write (the
race, made deterministic), other deletes run concurrently from this process, and the coordinator
is killed with SIGKILL mid-copy; the move is then resumed, or rolled back, by another coordinator.
No deleted key may come back, and no other key may be lost.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from ringkit import HashRing
from ringkit.cluster import ShardedClient
from ringkit.cluster.core.writer import TOMBSTONE_TTL_S
from ringkit.cluster.rebalance.coordinator import Rebalancer
from ringkit.cluster.values.keys import tombstone_key
from ringkit.cluster.wire.index import RedisIndex, ScanIndex
from tests.cluster.helpers import flushed_redis_urls, memory_urls, new_client, redis_servers
from tests.servers import Server

NAMES = ("s1", "s2", "s3", "s4")
BASE = ("s1", "s2", "s3")
KEYS = [f"ticket:{i}" for i in range(2000)]
SRC = str(Path(__file__).resolve().parents[3] / "src")

# The coordinator process: adds s4, and between each page's DUMP and RESTORE another client
# deletes the page's first key (printed once acknowledged), as a concurrent delete would.
COORDINATOR = """
import json, sys, threading
from ringkit import HashRing
from ringkit.cluster import ShardedClient
from ringkit.cluster.wire.index import RedisIndex
from ringkit.cluster.rebalance.coordinator import RebalanceOptions

urls = json.loads(sys.argv[1])
base = {name: urls[name] for name in ("s1", "s2", "s3")}
deleter = ShardedClient(HashRing(list(base)), base)
restore = RedisIndex.restore
lock = threading.Lock()  # the copy runs in threads: one whole line at a time

def say(line):
    with lock:
        sys.stdout.write(line + "\\n")
        sys.stdout.flush()

def delete_then_restore(self, records, **options):
    if records:
        key = records[0].key.decode()
        say("deleting " + key)
        deleter.delete(key)
        say("deleted " + key)
    return restore(self, records, **options)

RedisIndex.restore = delete_then_restore
admin = ShardedClient(HashRing(list(base)), base)
admin.add_server("s4", urls["s4"], options=RebalanceOptions(batch=10, checkpoint_s=0))
say("finished")
"""


@pytest.fixture(scope="module")
def quartet() -> Iterator[list[Server]]:
    with redis_servers(len(NAMES)) as servers:
        yield servers


@pytest.fixture
def urls(quartet: list[Server]) -> dict[str, str]:
    return flushed_redis_urls(NAMES, quartet)


def _client(urls: dict[str, str], names: tuple[str, ...]) -> ShardedClient:
    chosen = {name: urls[name] for name in names}
    return ShardedClient(HashRing(list(chosen)), chosen)


def _kill_mid_copy(urls: dict[str, str], deletes: int) -> tuple[list[str], set[str]]:
    """Run the coordinator with concurrent deletes; SIGKILL it after `deletes` of its own.

    Returns the keys whose delete was acknowledged, and those whose delete may or may not have
    happened (the kill cut it short).
    """
    deleted: list[str] = []  # by the coordinator's process, between a page's read and write
    concurrently: list[str] = []
    unsure: set[str] = set()
    stop = threading.Event()

    errors: list[BaseException] = []

    def delete_concurrently() -> None:
        client = _client(urls, BASE)
        for key in KEYS[1::7]:
            if stop.is_set():
                break
            try:
                client.delete(key)
            except Exception as error:  # reported below: a delete must not fail here
                errors.append(error)
                break
            concurrently.append(key)
            time.sleep(0.001)
        client.close()

    command = [sys.executable, "-c", COORDINATOR, json.dumps(urls)]
    env = {**os.environ, "PYTHONPATH": SRC}
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    concurrent = threading.Thread(target=delete_concurrently, daemon=True)
    concurrent.start()
    try:
        for line in process.stdout:
            assert line.strip() != "finished", "the coordinator finished before it was killed"
            _note(line, deleted, unsure)
            if len(deleted) >= deletes:
                break
        process.send_signal(signal.SIGKILL)
        for line in process.stdout:  # what it wrote before it died
            _note(line, deleted, unsure)
    finally:
        process.kill()
        process.wait(timeout=10)
        stop.set()
        concurrent.join(timeout=30)
    assert errors == []
    return deleted + concurrently, unsure - set(deleted)


def _note(line: str, deleted: list[str], unsure: set[str]) -> None:
    what, _, key = line.strip().partition(" ")
    if what == "deleted":
        deleted.append(key)
    elif what == "deleting":
        unsure.add(key)


def _check(
    urls: dict[str, str], names: tuple[str, ...], deleted: list[str], unsure: set[str]
) -> None:
    """No deleted key is readable or stored anywhere; every other key kept its value."""
    gone = set(deleted)
    fresh = _client(urls, names)
    fresh.refresh_view()
    assert fresh.view.state == "stable"
    found = fresh.get_many(KEYS)
    back = sorted(gone & set(found))
    assert back == [], f"{len(back)} deleted keys came back, first {back[:3]}"
    lost = [key for key in KEYS if key not in gone | unsure and found.get(key) != key]
    assert lost == [], f"{len(lost)} keys lost, first {lost[:3]}"
    for name, url in urls.items():
        host, port = url.removeprefix("redis://").removesuffix("/0").split(":")
        raw = redis.Redis(host=host, port=int(port))
        stored = [key for key in gone if raw.exists(key)]
        assert stored == [], f"{name} holds {len(stored)} deleted keys, first {stored[:3]}"
    fresh.close()


@pytest.mark.parametrize("recovery", ["resume", "rollback"])
def test_deleted_keys_stay_deleted_after_a_killed_move(urls: dict[str, str], recovery: str) -> None:
    seed = _client(urls, BASE)
    seed.set_many({key: key for key in KEYS})
    deleted, unsure = _kill_mid_copy(urls, deletes=20)
    assert seed.refresh_view().state == "moving"
    assert len(deleted) >= 20
    # A new coordinator (this process) starts from the servers' view.
    coordinator = Rebalancer(_client(urls, ("s1",)).view)
    if recovery == "resume":
        assert coordinator.resume().outcome == "done"
        _check(urls, NAMES, deleted, unsure)
    else:
        assert coordinator.rollback().outcome == "rolled_back"
        _check(urls, BASE, deleted, unsure)
    coordinator.close()
    seed.close()


def test_tombstones_are_bounded_and_never_block_a_newer_write(
    urls: dict[str, str],
) -> None:
    seed = _client(urls, BASE)
    seed.set_many({key: key for key in KEYS[:50]})
    deleted, _ = _kill_mid_copy(urls, deletes=5)
    key = deleted[0]
    seed.refresh_view()
    holders = [name for name in NAMES if _raw(urls, name).exists(tombstone_key(key.encode()))]
    assert holders, "a delete during a move left no tombstone"
    for name in holders:  # they expire by themselves
        assert 0 < _raw(urls, name).pttl(tombstone_key(key.encode())) <= TOMBSTONE_TTL_S * 1000
    assert seed.add(key, "again") is True  # a tombstone is no value: add and set work
    assert seed.get(key) == "again"
    seed.close()


def _raw(urls: dict[str, str], name: str) -> redis.Redis:
    host, port = urls[name].removeprefix("redis://").removesuffix("/0").split(":")
    return redis.Redis(host=host, port=int(port))


@pytest.mark.parametrize("kind", ["memory", "redis"])
@pytest.mark.parametrize("flavor", ["sync", "async"])
def test_a_delete_between_copy_read_and_write_stays_deleted(
    kind: str, flavor: str, quartet: list[Server], monkeypatch: pytest.MonkeyPatch
) -> None:
    urls = memory_urls(4) if kind == "memory" else flushed_redis_urls(NAMES, quartet)
    urls = dict(zip(NAMES, urls.values(), strict=True))
    base = {name: urls[name] for name in BASE}
    admin = ShardedClient(HashRing(list(base)), base)
    admin.set_many({key: key for key in KEYS[:600]})
    deleter = new_client(flavor, HashRing(list(base)), base)  # deletes as the flavor under test
    deleted: list[str] = []

    def racing(restore: Callable[..., int]) -> Callable[..., int]:
        def delete_then_restore(self: Any, records: Any, **options: Any) -> int:
            if records:
                deleted.append(records[0].key.decode())
                deleter.delete(deleted[-1])
            return restore(self, records, **options)

        return delete_then_restore

    index = ScanIndex if kind == "memory" else RedisIndex
    monkeypatch.setattr(index, "restore", racing(index.restore))
    admin.add_server("s4", urls["s4"])
    assert deleted
    found = _client(urls, NAMES).get_many(KEYS[:600])
    assert sorted(set(deleted) & set(found)) == []
    assert len(found) == 600 - len(set(deleted))
    deleter.close()
    admin.close()
