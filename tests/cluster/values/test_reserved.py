"""Reserved keys: every verb refuses a ``ringkit:`` key before any server is asked."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ringkit.cluster.core.health import OpEvent
from ringkit.errors import ConfigError

# Each verb called with a reserved key, as the sync client (or the async one behind SyncFacade).
VERBS: dict[str, Callable[[Any, str | bytes], object]] = {
    "get": lambda client, key: client.get(key),
    "get_many": lambda client, key: client.get_many(["plain", key]),
    "set": lambda client, key: client.set(key, 999),
    "set_many": lambda client, key: client.set_many({"plain": 1, key: 999}),
    "add": lambda client, key: client.add(key, 999),
    "delete": lambda client, key: client.delete(key),
    "incr": lambda client, key: client.incr(key),
    "decr": lambda client, key: client.decr(key),
    "touch": lambda client, key: client.touch(key, 60),
}


@pytest.mark.parametrize("verb", sorted(VERBS))
@pytest.mark.parametrize("key", ["ringkit:epoch", b"ringkit:anything"])
def test_a_reserved_key_is_refused_not_fencing_the_client(
    make_client: Callable[..., Any], verb: str, key: str | bytes
) -> None:
    events: list[OpEvent] = []
    client = make_client(hooks=[events.append])
    with pytest.raises(ConfigError, match=r"reserved prefix 'ringkit:', got .*ringkit:"):
        VERBS[verb](client, key)
    assert events == [], "a refused call must not reach any server"
    client.set("plain", "still served")
    assert client.get("plain") == "still served"
