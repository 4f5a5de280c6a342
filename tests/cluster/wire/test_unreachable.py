"""An unreachable server is named in the error, with the cause."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from ringkit import HashRing
from ringkit.cluster import memory_store
from ringkit.cluster.wire.failures import server_failed
from ringkit.cluster.wire.urls import parse_url
from ringkit.errors import BackendError
from tests.cluster.helpers import memory_urls
from tests.servers import free_port

# A closed port: free_port() found it free, and nothing listens on it during the test.
CALLS: dict[str, Callable[[Any], object]] = {
    "get": lambda client: client.get("k"),
    "get_many": lambda client: client.get_many(["k", "j"]),
    "set": lambda client: client.set("k", "v"),
    "add": lambda client: client.add("k", "v"),
    "delete": lambda client: client.delete("k"),
    "incr": lambda client: client.incr("k"),
    "touch": lambda client: client.touch("k", 60),
}


@pytest.mark.parametrize("verb", sorted(CALLS))
@pytest.mark.parametrize("scheme", ["redis", "memcached"])
def test_an_unreachable_server_is_named_with_its_cause_not_just_down(
    new: Callable[..., Any], scheme: str, verb: str
) -> None:
    port = free_port()
    url = (
        f"redis://:secret@127.0.0.1:{port}/0"
        if scheme == "redis"
        else (f"memcached://127.0.0.1:{port}")
    )
    shown = f"redis://:***@127.0.0.1:{port}/0" if scheme == "redis" else url
    client = new(HashRing(["s1"]), {"s1": url}, timeout_s=0.5)
    with pytest.raises(BackendError) as raised:
        CALLS[verb](client)
    message = str(raised.value)
    assert f"server {shown} failed: ConnectionRefusedError: " in message, message
    assert "secret" not in message


def test_an_unavailable_memory_server_is_named(new: Callable[..., Any]) -> None:
    urls = memory_urls(1)
    client = new(HashRing(list(urls)), urls)
    memory_store(urls["s1"].removeprefix("memory://")).unavailable = True
    with pytest.raises(BackendError, match=f"cause: server {urls['s1']} is unavailable"):
        client.get("k")


def test_an_async_timeout_is_reported_as_a_timeout_not_a_cancellation() -> None:
    async def cut_short() -> None:
        await asyncio.wait_for(asyncio.sleep(1), 0.001)

    url = parse_url("memcached://127.0.0.1:11211")
    with pytest.raises(TimeoutError) as raised:
        asyncio.run(cut_short())
    assert str(server_failed(url, raised.value)) == (
        "server memcached://127.0.0.1:11211 failed: TimeoutError: no answer in time"
    )
