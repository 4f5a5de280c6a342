"""Helpers shared by the cluster tests: URLs of fresh memory stores and of real server trios."""

from __future__ import annotations

import itertools

from ringkit.cluster import memory_store
from tests.servers import Server

NAMES = ("s1", "s2", "s3")
_memory_ids = itertools.count()


def memory_urls(count: int = len(NAMES)) -> dict[str, str]:
    """Return URLs of fresh, empty memory stores named after this test run."""
    run = next(_memory_ids)
    urls = {f"s{i + 1}": f"memory://test-{run}-{i}" for i in range(count)}
    for url in urls.values():
        store = memory_store(url.removeprefix("memory://"))
        store.unavailable = False
        store.data.clear()
    return urls


def server_urls(kind: str, trio: list[Server]) -> dict[str, str]:
    """Return ``{s1: url, s2: url, s3: url}`` for three running servers of `kind`."""
    scheme = "redis" if kind == "redis" else "memcached"
    suffix = "/0" if kind == "redis" else ""
    return {
        name: f"{scheme}://{server.address}{suffix}"
        for name, server in zip(NAMES, trio, strict=True)
    }
