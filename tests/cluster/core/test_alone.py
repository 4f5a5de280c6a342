"""The lone call: a single-key get or set made straight answers exactly as the whole steps do.

Each test runs the same operations on two clients over stores of their own: one as built (its
single-key calls go alone whenever they can) and one made to take the whole steps for every
call. Values, errors, the servers' counters and the hooks' events must be the same.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ringkit import HashRing
from ringkit.cluster import OpEvent, memory_store
from ringkit.errors import RingkitError
from tests.cluster.helpers import FLAVORS, memory_urls, new_client

KEYS = ["k1", "k2", b"k3", "cart:{7}:a", "cart:{7}:b"]
BAD_KEYS = ["ringkit:epoch", "two words", "", 7]
VALUES = st.one_of(
    st.text(max_size=8),
    st.binary(max_size=8),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.none(),
    st.lists(st.integers(), max_size=3),
    st.tuples(st.integers()),  # refused by the JSON serializer: the error must match too
    st.floats(allow_nan=True),
)
TTLS = st.sampled_from([None, None, 60, 0.5, 0, -1])
OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("set"), st.sampled_from(KEYS), VALUES, TTLS),
        st.tuples(st.just("get"), st.sampled_from(KEYS)),
        st.tuples(st.just("set"), st.sampled_from(BAD_KEYS), VALUES, TTLS),
        st.tuples(st.just("get"), st.sampled_from(BAD_KEYS)),
        st.tuples(st.just("set_many"), st.sampled_from(KEYS), VALUES, TTLS),
        st.tuples(st.just("down"), st.sampled_from(["s1", "s2", "s3"])),
        st.tuples(st.just("up"), st.sampled_from(["s1", "s2", "s3"])),
    ),
    max_size=25,
)


def _pair(
    flavor: str, **options: Any
) -> tuple[list[Any], list[list[OpEvent]], list[dict[str, str]]]:
    """Two clients of `flavor` on stores of their own: as built, and made to take the steps."""
    clients, events, stores = [], [], []
    for lone in (True, False):
        urls = memory_urls()
        seen: list[OpEvent] = []
        # A server marked down stays skipped for the whole example, in both clients alike,
        # however long it runs. (With a dead timeout that has passed, a failed lone call would
        # be followed by the probe of the whole steps, one ping the steps alone do not send.)
        client = new_client(
            flavor, HashRing(list(urls)), urls, hooks=[seen.append], dead_timeout_s=3600, **options
        )
        if not lone:
            client._alone = False  # every call takes the whole steps
        clients.append(client)
        events.append(seen)
        stores.append(urls)
    return clients, events, stores


def _outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "value", call()
    except (RingkitError, TypeError, ValueError) as error:
        return type(error).__name__, str(error)


def _apply(client: Any, urls: dict[str, str], operation: tuple[Any, ...]) -> tuple[str, Any]:
    kind, *args = operation
    if kind in ("down", "up"):
        memory_store(urls[args[0]].removeprefix("memory://")).unavailable = kind == "down"
        return "value", None
    if kind == "get":
        return _outcome(lambda: client.get(args[0]))
    key, value, ttl_s = args
    if kind == "set":
        return _outcome(lambda: client.set(key, value, ttl_s=ttl_s))
    return _outcome(lambda: client.set_many({key: value}, ttl_s=ttl_s))


def _named(outcome: tuple[str, Any], urls: dict[str, str]) -> tuple[str, Any]:
    """`outcome` with each store's URL in an error's message replaced by its server's name."""
    kind, detail = outcome
    if kind != "value":
        for name, url in sorted(urls.items(), key=lambda item: -len(item[1])):
            detail = detail.replace(url, name)
    return kind, detail


def _seen(events: list[OpEvent]) -> list[tuple[str, str, str, str | None]]:
    # The error text names the store, which differs between the two clients' stores.
    return [(event.server, event.op, event.outcome, None) for event in events]


def _counters(client: Any) -> dict[str, tuple[int, ...]]:
    # Every counter but `skipped`: after a lone call fails (the server is marked down), the
    # whole steps that answer instead skip that server once more, and count it; the steps alone
    # made the failing call inside themselves and had nothing left to skip.
    return {
        name: (s.calls, s.hits, s.misses, s.errors, s.failovers, s.readmissions)
        for name, s in client.stats().items()
    }


@pytest.mark.parametrize("flavor", FLAVORS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations=OPERATIONS)
def test_a_lone_get_or_set_answers_as_the_whole_steps(
    flavor: str, operations: list[tuple[Any, ...]]
) -> None:
    clients, events, stores = _pair(flavor)
    try:
        for operation in operations:
            lone, steps = (
                _named(_apply(client, urls, operation), urls)
                for client, urls in zip(clients, stores, strict=True)
            )
            assert lone == steps, operation
        assert _seen(events[0]) == _seen(events[1])
        assert _counters(clients[0]) == _counters(clients[1])
    finally:
        for client in clients:
            client.close()


@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_lone_write_refused_by_a_newer_view_lands_on_the_new_owner(flavor: str) -> None:
    urls = memory_urls(2)
    one = {"s1": urls["s1"]}
    client = new_client(flavor, HashRing(["s1"]), one)
    stale = new_client(flavor, HashRing(["s1"]), one)
    try:
        assert stale.get("k0") is None  # settled at the first view: lone calls from now on
        client.add_server("s2", urls["s2"])
        keys = [f"k{i}" for i in range(100)]
        moved = [key for key in keys if client.replicas_for(key) == ["s2"]]
        assert moved
        for key in moved:
            stale.set(key, key.upper())
        assert stale.epoch == client.epoch
        assert [client.get(key) for key in moved] == [key.upper() for key in moved]
        s2 = memory_store(urls["s2"].removeprefix("memory://"))
        assert all(key.encode() in s2.data for key in moved)
    finally:
        client.close()
        stale.close()


STORED = [
    "seat 12A",
    "\ud800",  # a lone surrogate round-trips, as inside JSON
    b"\x00\xfe raw",
    b"",
    41,
    2**64 - 1,
    -3,
    {"seat": "12A", "legs": [1, 2]},
    1.5,
    None,
]


@pytest.mark.parametrize("flavor", FLAVORS)
@pytest.mark.parametrize("value", STORED, ids=repr)
def test_a_lone_get_reads_back_every_kind_of_value(flavor: str, value: object) -> None:
    clients, _, _ = _pair(flavor)
    try:
        for client in clients:
            client.set("k", value)
        read = [client.get("k") for client in clients]
        assert read == [value, value]
        assert [type(found) for found in read] == [type(value), type(value)]
    finally:
        for client in clients:
            client.close()


@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_lone_get_reads_a_foreign_value_and_a_counter_as_the_steps(flavor: str) -> None:
    clients, _, stores = _pair(flavor)
    try:
        for client, urls in zip(clients, stores, strict=True):
            owner = client.replicas_for("k")[0]
            store = memory_store(urls[owner].removeprefix("memory://"))
            store.data[b"k"] = (b"written by another program", 0.0)
            store.data[b"n"] = (b"9 ", 0.0)  # memcached pads a decremented counter
        assert [client.get("k") for client in clients] == [b"written by another program"] * 2
        for client, urls in zip(clients, stores, strict=True):
            owner = client.replicas_for("n")[0]
            memory_store(urls[owner].removeprefix("memory://")).data[b"n"] = (b"9 ", 0.0)
        assert [client.get("n") for client in clients] == [9, 9]
    finally:
        for client in clients:
            client.close()
