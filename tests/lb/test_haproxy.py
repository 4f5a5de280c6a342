"""HAProxyController against a real HAProxy: what it sends, in what order, and what survives."""

from __future__ import annotations

import itertools
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import ringkit.live
from ringkit.errors import BackendError, ConfigError
from ringkit.lb import HAProxyController, HAProxyRuntime
from ringkit.live import Store
from ringkit.live.backend import Record
from ringkit.live.memory import MemoryBackend
from tests.lb.proxies import haproxy, haproxy_config, name_servers, owner_of, wait_until
from tests.proxies import Proxy, route

pytestmark = pytest.mark.timeout(120)
_names = itertools.count()


@pytest.fixture
def store() -> Iterator[Store]:
    with ringkit.live.connect(f"memory://lb-haproxy-{next(_names)}") as opened:
        yield opened


@pytest.fixture
def backends() -> Iterator[dict[str, str]]:
    with name_servers(["a", "b", "c"]) as servers:
        yield {name: server.address for name, server in servers.items()}


@pytest.fixture
def proxy() -> Iterator[Proxy]:
    with haproxy() as running:
        yield running


def _states(proxy: Proxy) -> dict[str, tuple[int, int, int]]:
    """Server name → (id, weight, admin state) as HAProxy reports them."""
    runtime = HAProxyRuntime(str(proxy.socket))
    return {s.name: (s.id, s.weight, s.admin_state) for s in runtime.servers("be")}


def test_a_member_joins_with_an_explicit_id_and_a_second_pass_sends_nothing(
    store: Store, backends: dict[str, str], proxy: Proxy
) -> None:
    store.join("a", data={"address": backends["a"]}, weight=3)
    controller = HAProxyController(store, str(proxy.socket), "be")
    assert controller.reconcile() == [
        f"add server be/a {backends['a']} id 1 weight 3",
        "enable server be/a",
    ]
    assert controller.reconcile() == []
    assert _states(proxy) == {"a": (1, 3, 0)}
    assert owner_of(proxy.port, "any-key") == "a"
    assert [(s.name, s.id, s.weight) for s in controller.servers()] == [("a", 1, 3)]


def test_a_leaving_member_is_drained_then_put_in_maintenance_then_deleted(
    store: Store, backends: dict[str, str], proxy: Proxy
) -> None:
    store.join("a", data={"address": backends["a"]})
    b = store.join("b", data={"address": backends["b"]})
    controller = HAProxyController(store, str(proxy.socket), "be")
    controller.reconcile()
    b.leave()
    assert controller.reconcile() == ["set server be/b state drain"]
    assert _states(proxy)["b"][2] & 0x08  # draining: no new requests, sessions finish
    assert controller.reconcile() == ["set server be/b state maint", "del server be/b"]
    assert set(_states(proxy)) == {"a"}


def test_drain_waits_for_sessions_up_to_the_timeout(
    store: Store, backends: dict[str, str], proxy: Proxy
) -> None:
    store.join("a", data={"address": backends["a"]})
    b = store.join("b", data={"address": backends["b"]})
    controller = HAProxyController(store, str(proxy.socket), "be", drain_timeout_s=2)
    controller.reconcile()
    key = next(k for k in (f"k{i}" for i in range(100)) if owner_of(proxy.port, k) == "b")
    with socket.create_connection(("127.0.0.1", proxy.port)) as held:
        # A request whose headers never end holds a session on b (HAProxy forwards at once).
        held.sendall(f"POST / HTTP/1.1\r\nX-Key: {key}\r\nContent-Length: 10\r\n\r\n".encode())
        time.sleep(0.3)
        b.leave()
        assert controller.reconcile() == ["set server be/b state drain"]
        assert controller.reconcile() == []  # a session is still open
        time.sleep(2.1)
        assert controller.reconcile() == [
            "set server be/b state maint",
            "shutdown sessions server be/b",
            "del server be/b",
        ]


def test_servers_come_back_with_the_same_ids_after_haproxy_reloads(
    store: Store, backends: dict[str, str], proxy: Proxy
) -> None:
    for name in ("a", "b"):
        store.join(name, data={"address": backends[name]})
    controller = HAProxyController(store, str(proxy.socket), "be")
    controller.reconcile()
    before = _states(proxy)
    proxy.reload(haproxy_config())  # a real reload (SIGUSR2): runtime servers are lost
    assert _states(proxy) == {}
    assert len(controller.reconcile()) == 4
    assert _states(proxy) == before
    # A second controller (the first one restarted) finds nothing to do.
    assert HAProxyController(store, str(proxy.socket), "be").reconcile() == []


def test_weight_and_address_changes_are_applied_in_place(
    store: Store, backends: dict[str, str], proxy: Proxy
) -> None:
    a = store.join("a", data={"address": backends["a"]})
    controller = HAProxyController(store, str(proxy.socket), "be")
    controller.reconcile()
    a.leave()
    store.join("a", data={"address": backends["b"]}, weight=7)
    assert controller.reconcile() == [
        f"set server be/a addr 127.0.0.1 port {backends['b'].rpartition(':')[2]}",
        "set server be/a weight 7",
    ]
    assert owner_of(proxy.port, "k") == "b"


def test_a_pool_with_a_weight_haproxy_cannot_take_is_refused_and_nothing_changes(
    store: Store, backends: dict[str, str], proxy: Proxy
) -> None:
    store.join("a", data={"address": backends["a"]}, weight=0.5)
    controller = HAProxyController(store, str(proxy.socket), "be")
    with pytest.raises(ConfigError, match=r"member 'a' weight must be an integer in \[1, 256\]"):
        controller.reconcile()
    assert _states(proxy) == {}
    scaled = HAProxyController(store, str(proxy.socket), "be", weight_scale=4)
    assert scaled.reconcile()[0].endswith("id 1 weight 2")


def test_servers_of_the_configuration_are_left_alone_and_their_ids_not_reused(
    store: Store, backends: dict[str, str], tmp_path: Path
) -> None:
    with haproxy([f"server static {backends['c']} id 1"]) as proxy:
        store.join("a", data={"address": backends["a"]})
        controller = HAProxyController(store, str(proxy.socket), "be")
        assert controller.reconcile()[0] == f"add server be/a {backends['a']} id 2 weight 1"
        assert set(_states(proxy)) == {"static", "a"}


def test_pre_declared_slots_are_filled_and_freed(
    store: Store, backends: dict[str, str], tmp_path: Path
) -> None:
    slots = [f"server slot{i} 127.0.0.1:1 id {100 + i} disabled" for i in (1, 2)]
    with haproxy(slots) as proxy:
        a = store.join("a", data={"address": backends["a"]}, weight=2)
        controller = HAProxyController(store, str(proxy.socket), "be", slots=True)
        port = backends["a"].rpartition(":")[2]
        assert controller.reconcile() == [
            f"set server be/slot1 addr 127.0.0.1 port {port}",
            "set server be/slot1 weight 2",
            "enable server be/slot1",
        ]
        assert owner_of(proxy.port, "k") == "a"
        assert [(s.name, s.member, s.id) for s in controller.servers()] == [("slot1", "a", 101)]
        a.leave()
        assert controller.reconcile() == ["set server be/slot1 state drain"]
        assert controller.reconcile() == ["set server be/slot1 state maint"]
        assert controller.reconcile() == []


def test_a_socket_that_does_not_answer_is_a_bounded_error_naming_it(
    store: Store, tmp_path: Path
) -> None:
    path = tmp_path / "silent.sock"
    with socket.socket(socket.AF_UNIX) as silent:
        silent.bind(str(path))
        silent.listen(1)  # accepts connections in the backlog, never answers
        controller = HAProxyController(store, HAProxyRuntime(str(path), timeout_s=0.5), "be")
        started = time.monotonic()
        with pytest.raises(BackendError, match=f"HAProxy admin socket {path} must answer"):
            controller.reconcile()
        assert time.monotonic() - started < 5


def test_a_backend_haproxy_does_not_have_is_named(store: Store, proxy: Proxy) -> None:
    controller = HAProxyController(store, str(proxy.socket), "nope")
    with pytest.raises(BackendError, match="has no backend 'nope'"):
        controller.reconcile()


def test_the_background_thread_puts_servers_back_after_haproxy_reloads(
    store: Store, backends: dict[str, str], proxy: Proxy
) -> None:
    store.join("a", data={"address": backends["a"]})
    with HAProxyController(store, str(proxy.socket), "be", resync_s=0.2) as controller:
        wait_until(lambda: bool(controller.servers()), what="a is added")
        proxy.reload(haproxy_config())

        def back() -> bool:
            try:  # the new process may not listen on the admin socket yet
                return _states(proxy).get("a", (0, 0, 1))[2] == 0
            except BackendError:
                return False

        wait_until(back, what="a is back")
        assert owner_of(proxy.port, "k") == "a"
        assert controller.last_error is None


class _Unreachable(MemoryBackend):
    """A memory:// service that can be made to fail every read, as an unreachable etcd does."""

    away = False

    def get_prefix(self, prefix: str, revision: int = 0) -> tuple[int, list[Record]]:
        if self.away:
            raise BackendError("etcd at 127.0.0.1:2379 cannot be reached: test")
        return super().get_prefix(prefix, revision)


def test_nothing_is_sent_while_the_members_cannot_be_read(
    backends: dict[str, str], proxy: Proxy
) -> None:
    """The controller acts only on members it has just read: with etcd away it sends nothing,
    not even to put back servers HAProxy lost (it cannot know they are still members)."""
    service = _Unreachable(f"lb-away-{next(_names)}")
    with Store(service, "/") as store:
        store.join("a", data={"address": backends["a"]})
        controller = HAProxyController(store, str(proxy.socket), "be")
        assert len(controller.reconcile()) == 2
        service.away = True
        proxy.reload(haproxy_config())
        wait_until(lambda: proxy.socket.exists(), what="the admin socket")
        with pytest.raises(BackendError, match="cannot be reached"):
            controller.reconcile()
        service.away = False
        assert _states(proxy) == {}
        assert len(controller.reconcile()) == 2


def test_haproxy_routes_every_key_where_the_controllers_layout_says(
    store: Store, backends: dict[str, str], proxy: Proxy
) -> None:
    """Unequal weights and ids from etcd: the layout of ``servers()`` is HAProxy's own."""
    for name, weight in (("a", 1), ("b", 3), ("c", 2)):
        store.join(name, data={"address": backends[name]}, weight=weight)
    controller = HAProxyController(store, str(proxy.socket), "be")
    controller.reconcile()
    keys = [f"session-{i}" for i in range(2000)]
    assert route(proxy.port, keys) == controller.layout().node_for_many(keys)
