"""Hot keys: the Space-Saving sketch finds the top keys; spreading them evens the load.

The seeded scenario: 1M requests with Zipf s = 1.1 over 100,000 keys on 8 servers.
The busiest server's fair share is 1/8; the claim is that after relief it serves at most 1.5 x
that. Requests are generated with numpy (vectorised); the routing of hot reads follows the
client's own rotation rule, checked against ``ShardedClient.read_order`` on a prefix.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringkit import HashRing
from ringkit.cluster import HotKeys, ShardedClient, SpaceSaving
from ringkit.errors import ConfigError
from tests.cluster.helpers import memory_urls

KEYS, REQUESTS, SERVERS, S = 100_000, 1_000_000, 8, 1.1


def zipf_requests(seed: int, keys: int, requests: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    weights = np.arange(1, keys + 1, dtype=np.float64) ** -S
    return rng.choice(keys, size=requests, p=weights / weights.sum())


@given(st.lists(st.integers(0, 30), max_size=300), st.integers(1, 12))
def test_space_saving_bounds_hold(stream: list[int], capacity: int) -> None:
    sketch: SpaceSaving[int] = SpaceSaving(capacity)
    for key in stream:
        sketch.add(key)
        sketch._check()
    truth = Counter(stream)
    for key, count, error in sketch.top(capacity):
        assert count - error <= truth[key] <= count
    # Every key heavier than N / capacity is tracked (Metwally et al., Lemma 3.4).
    tracked = {key for key, _, _ in sketch.top(capacity)}
    assert {key for key, count in truth.items() if count > len(stream) / capacity} <= tracked


def test_space_saving_is_exact_below_capacity() -> None:
    sketch: SpaceSaving[str] = SpaceSaving(10)
    sketch.add_counts([("a", 5), ("b", 3)])
    sketch.add("a")
    assert sketch.top(5) == [("a", 6, 0), ("b", 3, 0)]
    with pytest.raises(ConfigError, match="capacity must be an int >= 1, got 0"):
        SpaceSaving(0)
    with pytest.raises(ConfigError, match="spread must be an int >= 1, got 0"):
        HotKeys(spread=0)


def test_zipf_million_requests_top10_found_and_load_relieved() -> None:
    requests = zipf_requests(11, KEYS, REQUESTS)
    truth = np.bincount(requests, minlength=KEYS)
    true_top = [int(key) for key in np.argsort(-truth, kind="stable")[:10]]

    hot = HotKeys(top=10, spread=SERVERS, capacity=1000)
    for batch in np.array_split(requests, 20):
        ids, counts = np.unique(batch, return_counts=True)
        hot.sketch.add_counts(
            (b"key:%d" % key, int(count)) for key, count in zip(ids, counts, strict=True)
        )
    found = [key for key, _, _ in hot.top(10)]
    assert found == [b"key:%d" % key for key in true_top]

    names = [f"cache-{i}" for i in range(SERVERS)]
    ring = HashRing(names)
    owners = np.array(
        [names.index(name) for name in ring.node_for_many([b"key:%d" % key for key in range(KEYS)])]
    )
    fair = REQUESTS / SERVERS
    before = np.bincount(owners[requests], minlength=SERVERS)
    assert before.max() > 1.5 * fair  # the problem: one node melts under its hot keys

    urls = memory_urls(SERVERS)
    client = ShardedClient(ring, dict(zip(names, urls.values(), strict=True)), hot_keys=hot)
    hot.refresh()
    assert hot.hot == set(found)
    # The client activates a hot key once its copies are in place (ringkit.cluster.core.hotcopies),
    # under a view that allows copies; the routing rule is checked here on its own.
    client.adopt_view(dataclasses.replace(client.view, epoch=client.epoch + 1, hot_copies=True))
    for key in found:
        hot.activate(key, time.monotonic())
    # Hot reads rotate over their copies with one shared counter, one step per hot read.
    top_index = {key: i for i, key in enumerate(true_top)}
    copies = np.array(
        [[names.index(n) for n in ring.nodes_for(b"key:%d" % key, SERVERS)] for key in true_top]
    )
    is_hot = np.isin(requests, true_top)
    hot_rows = np.vectorize(top_index.__getitem__)(requests[is_hot])
    slots = np.arange(len(hot_rows))
    targets = owners[requests].copy()
    targets[is_hot] = copies[hot_rows, slots % SERVERS]
    hot_targets = targets[is_hot]
    for slot, key in enumerate(requests[is_hot][:500].tolist()):
        assert client.router.read_order(b"key:%d" % key)[0] == names[hot_targets[slot]]
    after = np.bincount(targets, minlength=SERVERS)
    assert after.sum() == REQUESTS
    assert after.max() <= 1.5 * fair


def test_client_spreads_hot_reads_end_to_end() -> None:
    names = [f"cache-{i}" for i in range(SERVERS)]
    requests = zipf_requests(5, 2_000, 20_000)
    loads = {}
    for relief in (False, True):
        urls = memory_urls(SERVERS)
        hot = HotKeys(top=10, spread=SERVERS, refresh_every=500) if relief else None
        client = ShardedClient(
            HashRing(names), dict(zip(names, urls.values(), strict=True)), hot_keys=hot
        )
        client.set_many({f"key:{key}": str(key) for key in range(2_000)})
        start = {name: snap.calls for name, snap in client.stats().items()}
        for key in requests.tolist():
            assert client.get(f"key:{key}") == str(key)
        loads[relief] = [client.stats()[name].calls - start[name] for name in names]
        if hot is not None:
            top = Counter(requests.tolist()).most_common(3)
            assert [key for key, _, _ in hot.top(3)] == [b"key:%d" % key for key, _ in top]
    fair = len(requests) / SERVERS
    assert max(loads[False]) > 1.5 * fair
    assert max(loads[True]) <= 1.5 * fair


def test_keys_leaving_the_hot_set_lose_their_extra_copies() -> None:
    names = [f"cache-{i}" for i in range(4)]
    urls = memory_urls(4)
    hot = HotKeys(top=1, spread=4, refresh_every=10_000)
    client = ShardedClient(
        HashRing(names), dict(zip(names, urls.values(), strict=True)), hot_keys=hot
    )
    client.set("viral", "v1")
    for _ in range(5):
        client.get("viral")
    hot.refresh()
    client.get("viral")  # the first read of a hot key marks it and writes its copies
    holders = [n for n in names if client.server(n).backend.get_many([b"viral"])]
    assert sorted(holders) == sorted(names)
    for _ in range(50):
        client.get("other:0")
    hot.refresh()
    assert hot.hot == {b"other:0"}
    client.get("other:0")  # the next read deletes the copies of keys that left the hot set
    holders = [n for n in names if client.server(n).backend.get_many([b"viral"])]
    assert holders == client.replicas_for("viral")
