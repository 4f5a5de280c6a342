"""End to end: members join and leave a real etcd while requests flow through a real proxy.

Each test runs a bounded load loop through the proxy and checks what users of a load balancer
depend on: no request fails during a graceful join or leave, a leaving member's backend keeps
answering until the controller has taken it out, and the keys that changed backend are exactly
those ``ringkit.compat``'s layout of the controller's servers predicts. The seconds from a
join to the proxy routing to the new member are printed (benchmarks/bench_lb.py measures them).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import ringkit.live
from ringkit.lb import HAProxyController, HAProxyRuntime, NginxController, render_upstream
from ringkit.lb.pool import PoolServer
from tests.lb.proxies import (
    LoadLoop,
    haproxy,
    name_servers,
    nginx_reload_command,
    nginx_upstream,
    owner_of,
    wait_until,
)
from tests.proxies import proxy, route
from tests.servers import EtcdCluster, etcd_server

pytestmark = pytest.mark.timeout(120)
KEYS = [f"user-{i}" for i in range(300)]
_prefixes = itertools.count()


@pytest.fixture(scope="module")
def etcd() -> Iterator[EtcdCluster]:
    with etcd_server() as cluster:
        yield cluster


def _routes_to(controller: HAProxyController, port: int, name: str) -> bool:
    """Whether the controller added `name` and the proxy sends it a key its layout gives it."""
    if name not in {server.name for server in controller.servers()}:
        return False
    layout = controller.layout()
    key = next(k for k in KEYS if layout.node_for(k) == name)
    return owner_of(port, key) == name


def _owners(port: int) -> dict[str, str]:
    """Each key's backend, by pipelined requests (not across an nginx reload, which closes
    idle keep-alive connections: see `_owners_one_by_one`)."""
    return dict(zip(KEYS, route(port, KEYS), strict=True))


def _owners_one_by_one(port: int) -> dict[str, str]:
    return {key: owner_of(port, key) for key in KEYS}


def test_haproxy_follows_joins_and_leaves_without_failing_a_request(etcd: EtcdCluster) -> None:
    url = etcd.url(f"lb-e2e-{next(_prefixes)}")
    with (
        name_servers(["a", "b", "c", "d"]) as backends,
        haproxy() as proxy,
        ringkit.live.connect(url) as members,
        ringkit.live.connect(url) as store,
    ):
        joined = {
            name: members.join(name, data={"address": backends[name].address}, ttl_s=3)
            for name in ("a", "b", "c")
        }
        controller = HAProxyController(store, str(proxy.socket), "be", resync_s=1)
        with controller:
            wait_until(lambda: len(controller.servers()) == 3, what="three servers added")
            before_layout = controller.layout()
            before = _owners(proxy.port)
            assert before == dict(zip(KEYS, before_layout.node_for_many(KEYS), strict=True))
            with LoadLoop(proxy.port, KEYS) as load:
                started = time.monotonic()
                members.join("d", data={"address": backends["d"].address}, ttl_s=3)
                wait_until(lambda: _routes_to(controller, proxy.port, "d"), what="routing to d")
                joined_s = time.monotonic() - started
                print(f"join to routing: {joined_s * 1000:.1f} ms")
                after_join = _owners(proxy.port)
                moved = {k for k in KEYS if after_join[k] != before[k]}
                predicted = {
                    k for k in KEYS if controller.layout().node_for(k) != before_layout.node_for(k)
                }
                assert moved == predicted and moved  # exactly the predicted keys, all to d
                assert {after_join[k] for k in moved} == {"d"}

                joined["b"].leave()
                runtime = HAProxyRuntime(str(proxy.socket))
                wait_until(
                    lambda: "b" not in {s.name for s in runtime.servers("be")},
                    what="b is deleted from the backend",
                )
                # b's backend stops only now, after the controller deleted it: the load loop
                # saw it answer and never saw a request fail.
                assert any(owner == "b" for _, owner, _ in load.answers)
                backends["b"].stop()
                after_leave = _owners(proxy.port)
            assert load.failures == []
            assert len(load.answers) > 100
            moved = {k for k in KEYS if after_leave[k] != after_join[k]}
            assert moved == {k for k in KEYS if after_join[k] == "b"}
            layout = controller.layout()
            assert after_leave == dict(zip(KEYS, layout.node_for_many(KEYS), strict=True))


def test_nginx_follows_joins_and_leaves_through_its_upstream_file(
    etcd: EtcdCluster, tmp_path: Path
) -> None:
    url = etcd.url(f"lb-e2e-{next(_prefixes)}")
    upstream = tmp_path / "upstream.conf"
    with (
        name_servers(["a", "b", "c"]) as backends,
        ringkit.live.connect(url) as members,
        ringkit.live.connect(url) as store,
    ):
        by_address = {server.address: name for name, server in backends.items()}
        joined = {
            name: members.join(name, data={"address": backends[name].address}, ttl_s=3)
            for name in ("a", "b")
        }
        upstream.write_text(
            render_upstream([PoolServer(n, backends[n].address, 1) for n in ("a", "b")])
        )
        with proxy("nginx", nginx_upstream(upstream)) as running:
            port, reload_command = running.port, nginx_reload_command(running)
            controller = NginxController(store, upstream, reload_command, resync_s=1)
            with controller, LoadLoop(port, KEYS) as load:
                wait_until(lambda: len(controller.servers()) == 2, what="the first pass")
                members.join("c", data={"address": backends["c"].address}, ttl_s=3)
                wait_until(lambda: len(controller.servers()) == 3, what="c written, reloaded")
                layout = controller.layout()
                to_c = next(k for k in KEYS if by_address[layout.node_for(k)] == "c")
                wait_until(lambda: owner_of(port, to_c) == "c", what="nginx routes to c")
                expected = {
                    k: by_address[n] for k, n in zip(KEYS, layout.node_for_many(KEYS), strict=True)
                }
                wait_until(
                    lambda: _owners_one_by_one(port) == expected, what="every key where predicted"
                )
                joined["a"].leave()
                wait_until(lambda: len(controller.servers()) == 2, what="a removed, reloaded")
                layout = controller.layout()
                expected = {
                    k: by_address[n] for k, n in zip(KEYS, layout.node_for_many(KEYS), strict=True)
                }
                wait_until(
                    lambda: _owners_one_by_one(port) == expected, what="a's keys moved as predicted"
                )
            assert load.failures == []
            assert "# member a" not in upstream.read_text()
