"""Pieces of the rebalance: the index's ranges of an arc, routing while moving, deletes."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringkit import HashRing, Transfer
from ringkit.cluster import ShardedClient, memory_store
from ringkit.cluster.rebalance.coordinator import RebalanceOptions, Rebalancer
from ringkit.cluster.rebalance.options import Progress
from ringkit.cluster.values.buckets import top_of
from ringkit.cluster.views.stores import stamp
from ringkit.cluster.views.view import ClusterView
from ringkit.cluster.wire.index import _in_arc, point_ranges, top_range
from ringkit.errors import BackendError
from tests.cluster.helpers import memory_urls

SPACE = 1 << 64
POINTS = st.one_of(
    st.integers(0, SPACE - 1), st.sampled_from([0, 1, 2**53, 2**53 + 1, SPACE - 2, SPACE - 1])
)

New = Callable[..., Any]


@given(point=POINTS, start=POINTS, end=POINTS)
def test_point_ranges_and_their_windows_hold_exactly_the_points_of_the_arc(
    point: int, start: int, end: int
) -> None:
    # A point is inside when its top bits are among the whole windows, or it is one of an
    # end window's points checked exactly: never both, never neither when it is on the arc.
    found = 0
    for low, high in point_ranges(start, end, SPACE):
        first, last, edges = top_range(low, high)
        whole = first <= top_of(point) <= last
        assert not (whole and top_of(point) in edges)
        assert not whole or low <= point <= high
        found += whole or (top_of(point) in edges and low <= point <= high)
    assert found == _in_arc(point, start, end)


def test_point_ranges_at_the_top_of_the_space() -> None:
    assert point_ranges(5, SPACE - 1, SPACE) == [(6, SPACE - 1)]
    assert point_ranges(SPACE - 1, 3, SPACE) == [(0, 3)]
    assert top_range(0, SPACE - 1) == (0, 2**24 - 1, [])


def test_moving_view_routes_reads_new_first_and_writes_both_sides(new: New) -> None:
    urls = memory_urls(4)
    old = HashRing(["s1", "s2", "s3"])
    grown = old.add("s4")
    client = new(old, {name: urls[name] for name in ("s1", "s2", "s3")})
    client.adopt_view(ClusterView(1, grown, urls, previous=old, state="moving"))
    key = next(f"k{i}".encode() for i in range(1000) if grown.node_for(f"k{i}".encode()) == "s4")
    was = old.node_for(key)
    assert client.router.read_order(key) == ["s4", was]
    assert client.router.write_names(key) == [was, "s4"]
    assert not client.reader.repairs(client.view)  # no repair while keys move
    assert client.placement == grown and client.epoch == 1


def test_a_delete_during_the_move_is_not_undone_by_the_copy(new: New) -> None:
    urls = memory_urls(4)
    base = {name: urls[name] for name in ("s1", "s2", "s3")}
    client = new(HashRing(list(base)), base)
    keys = [f"k{i}" for i in range(300)]
    client.set_many({key: key for key in keys})

    class Stop(Exception):
        pass

    def stop(transfer: Transfer, done: int) -> None:
        raise Stop

    with pytest.raises(Stop):
        client.add_server("s4", urls["s4"], options=RebalanceOptions(on_transfer=stop))
    moving = [key for key in keys if client.replicas_for(key) == ["s4"]]
    for key in moving:
        client.delete(key)  # reaches the old owner and the new one
    report = Rebalancer(client.view, on_view=client.adopt_view).resume()
    assert report.outcome == "done"
    fresh = new(client.view.placement, urls)
    assert fresh.get_many(keys) == {key: key for key in keys if key not in moving}


def test_progress_counts_keys_and_bytes() -> None:
    told: list[tuple[str, int, int, int]] = []
    progress = Progress(10, show=lambda *counts: told.append(counts), title="test")
    with progress:
        progress.advance(4, 100)
        progress.advance(6, 50)
    assert (progress.keys, progress.bytes) == (10, 150)
    # The library draws nothing: it tells the callback (title, keys, planned, bytes).
    assert told == [("test", 0, 10, 0), ("test", 4, 10, 100), ("test", 10, 10, 150)]


def test_down_servers_that_cannot_be_worked_around_stop_the_change(new: New) -> None:
    urls = memory_urls(4)
    base = {name: urls[name] for name in ("s1", "s2", "s3")}
    client = new(HashRing(list(base)), base)
    client.set_many({f"k{i}": i for i in range(50)})
    memory_store(urls["s4"].removeprefix("memory://")).unavailable = True
    with pytest.raises(
        BackendError, match="server 's4' is down and is a node of the new placement"
    ):
        client.add_server("s4", urls["s4"])
    assert client.view.state == "stable"  # nothing was published
    memory_store(urls["s2"].removeprefix("memory://")).unavailable = True
    with pytest.raises(
        BackendError, match=r"'s2' is down and its keys have no other copy \(replicas=1\)"
    ):
        client.remove_server("s2")
    assert client.view.state == "stable" and client.epoch == 1  # the first client's view


def test_a_change_keeps_hot_key_copies_allowed() -> None:
    # Writers update spread copies only under a view that allows them: a membership change
    # that dropped the setting would leave copies that no writer updates.
    urls = memory_urls(4)
    three = {name: urls[name] for name in ("s1", "s2", "s3")}
    client = ShardedClient(HashRing(list(three)), three)
    client.set("k", 1)  # settles: epoch 1
    client.adopt_view(dataclasses.replace(client.view, epoch=2, hot_copies=True))
    client._run(stamp(client.view, list(three)))  # the servers hold it too
    client.add_server("s4", urls["s4"])
    assert client.view.hot_copies and client.view.epoch > 2
    assert client.get("k") == 1
    client.close()
