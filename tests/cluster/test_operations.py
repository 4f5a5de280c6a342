"""What an operator on call depends on: log lines, the real cause of a failure, partial reads.

Before: nothing was logged when a server was marked down or re-admitted (pymemcache logs
both); a Redis authentication failure in ``ringkit rebalance`` read "no server answered for
the cluster view"; and ``get_many`` with one shard down raised for every key, also those on
healthy servers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest

from ringkit import HashRing
from ringkit.cli import main
from ringkit.errors import BackendError, ConfigError
from tests.cluster.helpers import server_urls
from tests.servers import Server, free_port, memcached_server, redis_server, stop

pytestmark = pytest.mark.timeout(120)
New = Callable[..., Any]
SECRET = "s3cr3t-pw"


@pytest.fixture(params=["redis", "memcached"])
def shards(request: pytest.FixtureRequest) -> Iterator[tuple[str, list[Server]]]:
    start = redis_server if request.param == "redis" else memcached_server
    with ExitStack() as stack:
        yield request.param, [stack.enter_context(start()) for _ in range(3)]


def test_get_many_on_error_miss_returns_what_the_healthy_servers_hold(
    shards: tuple[str, list[Server]], new: New
) -> None:
    kind, trio = shards
    urls = server_urls(kind, trio)
    for read in ("first", "all"):
        client = new(HashRing(list(urls)), urls, read=read, timeout_s=2.0)
        client.flush()
        client.set_many({f"k{i}": i for i in range(60)})
    keys = [f"k{i}" for i in range(60)] + ["absent"]
    healthy = {key: int(key[1:]) for key in keys[:60] if client.replicas_for(key) != ["s3"]}
    assert 0 < len(healthy) < 60
    stop(trio[2].process)  # one shard down, no replica elsewhere (replicas=1)
    for read in ("first", "all"):
        client = new(HashRing(list(urls)), urls, read=read, timeout_s=2.0)
        with pytest.raises(BackendError, match="no replica of"):
            client.get_many(keys)  # the default is unchanged
        assert client.get_many(keys, on_error="miss") == healthy
    with pytest.raises(ConfigError, match=r"on_error must be one of raise, miss, got 'skip'"):
        client.get_many(keys, on_error="skip")


def test_operations_are_logged_without_a_secret(new: New, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="ringkit.cluster")
    with ExitStack() as stack:
        trio = [stack.enter_context(redis_server(password=SECRET)) for _ in range(3)]
        urls = {f"s{i + 1}": f"redis://:{SECRET}@{s.address}/0" for i, s in enumerate(trio)}
        two = {name: urls[name] for name in ("s1", "s2")}
        client = new(HashRing(list(two)), two, dead_timeout_s=0.0, replicas=2, timeout_s=2.0)
        client.set_many({f"k{i}": i for i in range(40)})
        port = trio[1].port
        stop(trio[1].process)
        client.set("k1", "while s2 is down")  # s2 fails: marked down, the write hinted
        with redis_server(port=port, password=SECRET):
            assert client.get("k1") == "while s2 is down"
            client.check_health()  # s2 is due at once (dead_timeout_s=0): probed, re-admitted
            client.add_server("s3", urls["s3"])
            assert client.get_many(["k2", "k3"]) == {"k2": 2, "k3": 3}
    lines = [record.getMessage() for record in caplog.records if record.name == "ringkit.cluster"]
    text = "\n".join(lines)
    assert "server s2 (redis://:***@" in text and "marked down for 0.0 s" in text
    assert "server s2" in text and "re-admitted" in text
    assert "cluster view epoch 1 adopted" in text
    assert "move started to epoch 2: add s3" in text
    assert "move finished (done) at epoch 3" in text
    assert SECRET not in text
    assert all(SECRET not in str(record.args) for record in caplog.records)


def test_a_view_nobody_answered_for_names_each_cause(capsys: pytest.CaptureFixture[str]) -> None:
    with redis_server(password=SECRET) as locked:
        closed = free_port()
        listing = f"s1=redis://{locked.address}/0,s2=redis://127.0.0.1:{closed}/0"
        status = main(["rebalance", "--servers", listing, "--replicas", "1", "--remove", "s2"])
    err = capsys.readouterr().err
    assert status == 1 and "no server answered for the cluster view (asked 2); cause:" in err
    assert "AuthenticationError" in err and "ConnectionRefusedError" in err
    assert SECRET not in err
