"""The packed copy path of a rebalance on real redis-server processes.

A page of an arc is read and packed by one script on the source and restored and indexed by one
script on the destination (``ringkit.cluster.values.packed``), several streams at once. Each
concurrent path is checked here for what the per-key copy guaranteed: a stream failing mid-page, a
source that dies or hangs during the copy, a newer write or a delete racing a copied page, TTLs,
values that are not strings, keys long enough to have a digest for a tombstone, and an index that
ends exact (every key has its entry, every entry its key).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import redis
from hypothesis import given
from hypothesis import strategies as st

from ringkit import HashRing, Transfer
from ringkit.cluster import ShardedClient
from ringkit.cluster.rebalance.coordinator import RebalanceOptions, Rebalancer
from ringkit.cluster.values.keys import RESERVED_PREFIX, route_key
from ringkit.cluster.values.packed import PackedRecords, Record, pack_records
from ringkit.cluster.wire.index import ArcSet, RedisIndex, _in_arc
from ringkit.errors import BackendError
from tests.cluster.helpers import flushed_redis_urls, index_entries, redis_servers
from tests.servers import Server, sigstop

NAMES = ("s1", "s2", "s3", "s4")
BASE = ("s1", "s2", "s3")
KEYS = [f"order:{i}" for i in range(1200)]


@pytest.fixture(scope="module")
def quartet() -> Iterator[list[Server]]:
    with redis_servers(len(NAMES)) as servers:
        yield servers


@pytest.fixture
def urls(quartet: list[Server]) -> dict[str, str]:
    return flushed_redis_urls(NAMES, quartet)


def _client(urls: dict[str, str], names: tuple[str, ...], **options: Any) -> ShardedClient:
    chosen = {name: urls[name] for name in names}
    return ShardedClient(HashRing(list(chosen)), chosen, **options)


def _raw(url: str) -> redis.Redis:
    host, port = url.removeprefix("redis://").removesuffix("/0").split(":")
    return redis.Redis(host=host, port=int(port))


def _keys_without_entry(url: str) -> set[bytes]:
    server = _raw(url)
    keys = {key for key in server.scan_iter(count=1000) if not key.startswith(RESERVED_PREFIX)}
    indexed = set(index_entries(server))
    return keys - indexed


def _assert_index_exact(client: ShardedClient, urls: dict[str, str]) -> None:
    client.sweep_index()  # drops the entries of keys that never landed or are gone
    for name, url in urls.items():
        server = _raw(url)
        keys = {key for key in server.scan_iter(count=1000) if not key.startswith(RESERVED_PREFIX)}
        indexed = set(index_entries(server))
        assert keys == indexed, name


def _patch_restore(monkeypatch: pytest.MonkeyPatch, before: Callable[[Any, Any], Any]) -> list[int]:
    """Run `before(index, records)` ahead of every page restored (it may replace the page)."""
    original = RedisIndex.restore
    calls: list[int] = []

    def restore(self: RedisIndex, records: Any, **options: Any) -> int:
        calls.append(len(records))
        replaced = before(self, records)
        return original(self, records if replaced is None else replaced, **options)

    monkeypatch.setattr(RedisIndex, "restore", restore)
    return calls


def test_a_stream_failing_mid_page_leaves_no_key_unindexed_and_resumes(
    urls: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    admin = _client(urls, BASE)
    admin.set_many({key: key for key in KEYS[::2]}, ttl_s=600)  # landed one by one
    admin.set_many({key: key for key in KEYS[1::2]})  # landed by one MSET per page
    pages = 0

    def corrupt(index: RedisIndex, records: Any) -> Any:
        nonlocal pages
        pages += 1
        if pages != 3:
            return None
        # A payload this Redis cannot RESTORE, in the middle of the page: the script fails
        # after it has indexed and landed part of the page.
        bad = Record(b"broken:payload", b"not a DUMP payload", -1, b"")
        chosen = list(records)
        return pack_records([*chosen[:5], bad, *chosen[5:]], lambda key: 1)

    _patch_restore(monkeypatch, corrupt)
    with pytest.raises(BackendError, match="payload"):
        admin.add_server("s4", urls["s4"], options=RebalanceOptions(batch=50, checkpoint_s=0))
    assert admin.view.state == "moving"
    assert _keys_without_entry(urls["s4"]) == set()  # indexed before landing
    monkeypatch.undo()
    report = Rebalancer(admin.view).resume()
    assert report.outcome == "done"
    fresh = _client(urls, NAMES)
    assert fresh.get_many(KEYS) == {key: key for key in KEYS}
    assert all(0 < _raw(urls["s4"]).pttl(key) <= 600_000 for key in KEYS[:100:2]
               if fresh.replicas_for(key) == ["s4"])  # fmt: skip
    _assert_index_exact(fresh, urls)


def test_a_source_that_hangs_during_the_copy_fails_it_and_a_resume_finishes(
    quartet: list[Server], urls: dict[str, str]
) -> None:
    admin = _client(urls, BASE)
    admin.set_many({key: key for key in KEYS})
    source = quartet[0]  # s1, a source of the move
    stopped: list[int] = []

    def hang(transfer: Transfer, done: int) -> None:
        if done == 3 and not stopped:
            sigstop(source.process.pid)
            stopped.append(source.process.pid)

    options = RebalanceOptions(on_transfer=hang, checkpoint_s=0, timeout_s=1.0)
    try:
        with pytest.raises(BackendError, match=str(source.port)):
            admin.add_server("s4", urls["s4"], options=options)
    finally:
        os.kill(source.process.pid, signal.SIGCONT)
    assert stopped
    assert _keys_without_entry(urls["s4"]) == set()
    report = Rebalancer(admin.view).resume()
    assert report.outcome == "done" and report.transfers_skipped >= 3
    fresh = _client(urls, NAMES)
    assert fresh.get_many(KEYS) == {key: key for key in KEYS}
    _assert_index_exact(fresh, urls)


def test_a_source_killed_during_the_copy_fails_it_naming_the_server(
    urls: dict[str, str],
) -> None:
    from tests.servers import redis_server

    with redis_server() as doomed:
        urls = {**urls, "s1": f"redis://{doomed.address}/0"}
        admin = _client(urls, BASE)
        admin.set_many({key: key for key in KEYS})

        def kill(transfer: Transfer, done: int) -> None:
            if done == 2:
                doomed.process.kill()
                doomed.process.wait()

        options = RebalanceOptions(on_transfer=kill, checkpoint_s=0)
        with pytest.raises(BackendError, match=str(doomed.port)):
            admin.add_server("s4", urls["s4"], options=options)
    assert _keys_without_entry(urls["s4"]) == set()
    assert admin.view.state == "moving"  # a rollback or a resume decides, as after any failure


def test_a_newer_write_racing_a_copied_page_is_never_overwritten(
    urls: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    admin = _client(urls, BASE)
    admin.set_many({key: {"n": 0} for key in KEYS})
    writer = _client(urls, BASE)
    written: list[str] = []

    def write_first(index: RedisIndex, records: Any) -> None:
        # Between the page's read on the source and its restore here, a client writes the
        # page's first key again: the write goes to the new owner, the copy is older.
        key = records[0].key.decode()
        writer.set(key, {"n": 1})
        written.append(key)

    calls = _patch_restore(monkeypatch, write_first)
    report = admin.add_server("s4", urls["s4"], options=RebalanceOptions(batch=20))
    assert written and len(calls) == len(written)
    assert report.keys_copied == report.keys_streamed - len(written)
    found = _client(urls, NAMES).get_many(KEYS)
    assert {key for key in KEYS if found[key] == {"n": 1}} == set(written)
    assert all(found[key] == {"n": 0} for key in KEYS if key not in written)


def test_long_keys_non_strings_and_deletes_move_by_the_packed_path(
    urls: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    admin = _client(urls, BASE)
    ring = HashRing(list(NAMES))
    long_keys = [f"{'L' * 245}:{i}" for i in range(300)]  # tombstones named by a digest
    admin.set_many({key: key for key in long_keys})
    foreign = [key for key in KEYS if ring.node_for(key.encode()) == "s4"][:5]
    for key in foreign:  # lists written without ringkit: found by the SCAN, moved by DUMP
        owner = HashRing(list(BASE)).node_for(key.encode())
        _raw(urls[owner]).rpush(key, b"a", b"b")
        _raw(urls[owner]).pexpire(key, 300_000)
    deleter = _client(urls, BASE)
    deleted: list[str] = []

    def delete_first(index: RedisIndex, records: Any) -> None:
        key = records[0].key.decode()
        if key in long_keys:
            deleter.delete(key)
            deleted.append(key)

    _patch_restore(monkeypatch, delete_first)
    admin.add_server("s4", urls["s4"], options=RebalanceOptions(batch=10))
    assert deleted
    found = _client(urls, NAMES).get_many(long_keys)
    assert set(found) == set(long_keys) - set(deleted)
    new = _raw(urls["s4"])
    for key in foreign:
        assert new.lrange(key, 0, -1) == [b"a", b"b"]
        assert 0 < new.pttl(key) <= 300_000
    _assert_index_exact(_client(urls, NAMES), urls)


records_strategy = st.lists(
    st.builds(
        Record,
        st.binary(min_size=1, max_size=300),
        st.binary(max_size=200),
        st.one_of(st.just(-1), st.integers(0, 2**40)),
        st.just(b""),
        kind=st.just(2),
        point=st.binary(min_size=8, max_size=8),
    ),
    max_size=20,
)


@given(records_strategy)
def test_a_packed_page_decodes_to_its_records(records: list[Record]) -> None:
    page = pack_records(records, lambda key: 0)
    assert isinstance(page, PackedRecords)
    assert list(page) == records and len(page) == len(records)
    assert page.size_bytes == sum(record.size_bytes for record in records)
    assert page.long_keys == [record.key for record in records if len(record.key) > 237]


_SPACE = 1 << 64
_points = st.integers(min_value=0, max_value=_SPACE - 1)


@given(st.lists(st.tuples(_points, _points), max_size=8), st.lists(_points, max_size=40))
def test_an_arc_set_holds_exactly_the_points_of_its_arcs(
    arcs: list[tuple[int, int]], points: list[int]
) -> None:
    # The backfill indexes a key only where ArcSet says its point is on a moved arc.
    points += [point for arc in arcs for point in arc] + [
        (point + 1) % _SPACE for arc in arcs for point in arc
    ]
    held = ArcSet(arcs, HashRing(["a"])).holds(np.array(points, dtype=np.uint64)).tolist()
    assert held == [any(_in_arc(p, start, end) for start, end in arcs) for p in points]


@pytest.mark.parametrize("replicas", [1, 2])
def test_the_backfill_indexes_the_moved_arcs_foreign_keys_and_every_old_copy_goes(
    urls: dict[str, str], replicas: int
) -> None:
    # Keys written without ringkit on every old replica: those that move are indexed, copied
    # and deleted from every old owner; those that stay are left alone, and a server that only
    # keeps them leaves them unindexed (this change never reads their arcs there).
    admin = _client(urls, BASE, replicas=replicas)
    admin.set_many({key: key for key in KEYS[:50]})  # publishes the view at epoch 1
    foreign = [f"legacy:{i}".encode() for i in range(250)]
    foreign += [f"legacy:{{t{i % 7}}}:{i}".encode() for i in range(50)]  # routed by the tag
    old, new = HashRing(list(BASE)), HashRing(list(NAMES))
    for key in foreign:
        for name in old.nodes_for(route_key(key), replicas):
            _raw(urls[name]).set(key, b"v:" + key)
    admin.add_server("s4", urls["s4"])
    for key in foreign:
        holders = {name for name in NAMES if _raw(urls[name]).get(key) == b"v:" + key}
        assert holders == set(new.nodes_for(route_key(key), replicas)), key
    for name in BASE:
        kept = {k for k in foreign if name in old.nodes_for(route_key(k), replicas)}
        kept &= {k for k in foreign if name in new.nodes_for(route_key(k), replicas)}
        unindexed = _keys_without_entry(urls[name])
        assert kept and unindexed <= kept, name
        if replicas == 1:  # a source loses what it sends: it indexed nothing it keeps
            assert unindexed == kept, name
