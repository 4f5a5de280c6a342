"""A TTL given the pymemcache or redis-py way fails with a TypeError that names ``ttl_s=``.

pymemcache's ``set(key, value, expire)`` / ``set(key, value, expire=60)`` and redis-py's
``set(key, value, ex=60)`` are habits a user brings; the client keeps its TTL keyword-only, so
they fail, and the error says what to write instead. Nothing is written by such a call, a
correct call is untouched, and an unrelated mistake keeps Python's own message.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

import pytest

from ringkit import HashRing
from ringkit.cluster import AsyncShardedClient, ShardedClient
from tests.cluster.helpers import memory_urls

# (verb, arguments before the TTL): every verb that takes a TTL.
VERBS: list[tuple[str, tuple[object, ...]]] = [
    ("set", ("k", "v")),
    ("set_many", ({"k": "v", "k2": "v"},)),
    ("add", ("k", "v")),
    ("touch", ("k",)),
]
HABITS: list[tuple[dict[str, object], str]] = [
    ({"expire": 60}, r"ttl_s=60 \(seconds, keyword-only\), not expire=60 \(pymemcache's habit\)"),
    ({"ex": 60}, r"ttl_s=60 \(seconds, keyword-only\), not ex=60 \(redis-py's habit\)"),
    ({"px": 60_000}, r"ttl_s=SECONDS \(seconds, keyword-only\), not px=60000 \(redis-py's"),
    ({"exptime": 60}, r"ttl_s=60 .*not exptime=60"),
]


def _sync() -> ShardedClient:
    urls = memory_urls(3)
    return ShardedClient(HashRing(list(urls)), urls, replicas=2)


def _async() -> AsyncShardedClient:
    urls = memory_urls(3)
    return AsyncShardedClient(HashRing(list(urls)), urls, replicas=2)


def _call(client: ShardedClient | AsyncShardedClient, verb: str, *args: Any, **kwargs: Any) -> Any:
    result = getattr(client, verb)(*args, **kwargs)
    return asyncio.run(result) if inspect.iscoroutine(result) else result


@pytest.mark.parametrize("make", [_sync, _async], ids=["sync", "async"])
@pytest.mark.parametrize(("verb", "before"), VERBS, ids=[verb for verb, _ in VERBS])
@pytest.mark.parametrize(("habit", "message"), HABITS, ids=[next(iter(h)) for h, _ in HABITS])
def test_another_clients_ttl_keyword_names_ttl_s(
    make: Callable[[], ShardedClient | AsyncShardedClient],
    verb: str,
    before: tuple[object, ...],
    habit: dict[str, object],
    message: str,
) -> None:
    client = make()
    with pytest.raises(TypeError, match=rf"^{verb}\(\) takes its TTL as {message}"):
        _call(client, verb, *before, **habit)
    assert _call(client, "get_many", ["k", "k2"]) == {}  # nothing was written


@pytest.mark.parametrize("make", [_sync, _async], ids=["sync", "async"])
@pytest.mark.parametrize("verb", ["set", "add"])
def test_a_positional_ttl_names_ttl_s(
    make: Callable[[], ShardedClient | AsyncShardedClient], verb: str
) -> None:
    client = make()
    expected = rf"^{verb}\(\) takes its TTL as ttl_s=60 \(seconds, keyword-only\), not as one more"
    with pytest.raises(TypeError, match=expected):
        _call(client, verb, "k", "v", 60)
    with pytest.raises(TypeError, match=r"^set_many\(\) takes its TTL as ttl_s=60 "):
        _call(client, "set_many", {"k": "v"}, 60)
    assert _call(client, "get", "k") is None


@pytest.mark.parametrize("make", [_sync, _async], ids=["sync", "async"])
def test_the_right_call_and_other_mistakes_are_untouched(
    make: Callable[[], ShardedClient | AsyncShardedClient],
) -> None:
    client = make()
    _call(client, "set", "k", "v", ttl_s=60)
    assert _call(client, "touch", "k", 60) is True  # touch's TTL may be positional
    assert _call(client, "get", "k") == "v"
    with pytest.raises(TypeError, match="unexpected keyword argument 'ttl_ms'") as raised:
        _call(client, "set", "k", "v", ttl_ms=60)
    assert "ttl_s=" not in str(raised.value)
    with pytest.raises(TypeError, match="key must be str or bytes"):  # raised inside the verb
        _call(client, "set", 42, "v", ttl_s=60)


def test_the_signatures_stay_keyword_only() -> None:
    for cls in (ShardedClient, AsyncShardedClient):
        for verb in ("set", "set_many", "add"):
            ttl_s = inspect.signature(getattr(cls, verb)).parameters["ttl_s"]
            assert ttl_s.kind is inspect.Parameter.KEYWORD_ONLY
    for verb in ("set", "set_many", "add", "touch"):  # still awaitable for asyncio's checks
        assert inspect.iscoroutinefunction(getattr(AsyncShardedClient, verb))
