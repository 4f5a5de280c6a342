"""Fixtures for the live ring: one etcd per session, a fresh prefix per test, both stores."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from tests.servers import EtcdCluster, etcd_server

_counter = itertools.count()


@pytest.fixture(scope="session")
def etcd() -> Iterator[EtcdCluster]:
    with etcd_server() as cluster:
        yield cluster


@pytest.fixture(params=["memory", "etcd"])
def store_url(request: pytest.FixtureRequest) -> str:
    """A URL of an empty ring: in-process, or a fresh prefix on the session's etcd."""
    name = f"t{next(_counter)}-{request.node.name}".replace("[", "-").replace("]", "")
    if request.param == "memory":
        return f"memory://{name}"
    cluster: EtcdCluster = request.getfixturevalue("etcd")
    return cluster.url(name)
