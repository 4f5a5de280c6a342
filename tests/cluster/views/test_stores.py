"""View stores (servers, file, registered schemes), the error tree, and the client's imports."""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

import ringkit.cluster
import ringkit.errors
from ringkit import HashRing
from ringkit.cluster import ClusterView, ViewStore, open_view_store, register_view_store
from ringkit.cluster.drivers.steps import Steps
from ringkit.cluster.views import stores as viewstore
from ringkit.cluster.views.stores import FileViewStore, ServersViewStore
from ringkit.errors import ConfigError
from tests.cluster.helpers import memory_urls

New = Callable[..., Any]


class _Fixed:
    """A view store that always answers one view (no I/O)."""

    def __init__(self, view: ClusterView) -> None:
        self.url = "fixed://"
        self.view = view
        self.asked: list[int] = []

    def read(self, servers: Sequence[str], at_least: int) -> Steps[ClusterView | None]:
        self.asked.append(at_least)
        return self.view
        yield  # a generator with no steps


def test_open_view_store_by_url_object_and_registered_scheme(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The registry is process-wide: register into a copy that the test restores.
    monkeypatch.setattr(viewstore, "_STORES", dict(viewstore._STORES))
    assert isinstance(open_view_store(None), ServersViewStore)
    assert isinstance(open_view_store("servers://"), ServersViewStore)
    store = open_view_store("file:///tmp/view.json")
    assert isinstance(store, FileViewStore) and store.path == "/tmp/view.json"
    fixed = _Fixed(ClusterView(0, HashRing(["a"]), {"a": "memory://vs-a"}))
    assert isinstance(fixed, ViewStore) and open_view_store(fixed) is fixed
    register_view_store("fixed", lambda url: fixed)
    assert open_view_store("fixed://anything") is fixed
    with pytest.raises(ConfigError, match=r"view store scheme must be one of .*got 'zk'"):
        open_view_store("zk://host/ring")
    with pytest.raises(TypeError, match="view_store must be a URL or a ViewStore, got int"):
        open_view_store(5)  # type: ignore[arg-type]


def test_a_file_view_store_is_read_on_refresh(tmp_path: Path, new: New) -> None:
    urls = memory_urls(4)
    base = {name: urls[name] for name in ("s1", "s2", "s3")}
    path = tmp_path / "view.json"
    grown = HashRing(list(base)).add("s4")
    path.write_bytes(ClusterView(7, grown, urls).to_json())
    client = new(HashRing(list(base)), base, view_store=f"file://{path}")
    assert client.view_store.url == f"file://{path}"
    assert client.epoch == 0
    view = client.refresh_view()
    assert (view.epoch, client.epoch, "s4" in client.placement) == (7, 7, True)
    client.set("k", "v")  # s4 was opened when the view was adopted
    assert client.get("k") == "v"


def test_a_custom_view_store_is_asked_on_every_check(new: New) -> None:
    urls = memory_urls(2)
    ring = HashRing(list(urls))
    store = _Fixed(ClusterView(4, ring, urls))
    client = new(ring, urls, view_store=store)
    client.view_check_s = 0.0
    client.set("k", 1)
    # Asked when the client settles, at the check, then for the newest view to stamp on the
    # servers, which hold no epoch (nothing published there).
    assert store.asked == [0, 0, 4] and client.epoch == 4


def test_a_file_store_client_redirects_a_stale_write(tmp_path: Path, new: New) -> None:
    urls = memory_urls(4)
    base = {name: urls[name] for name in ("s1", "s2", "s3")}
    path = tmp_path / "view.json"
    store = f"file://{path}"  # the authority: the servers record it with each view
    path.write_bytes(ClusterView(1, HashRing(list(base)), base, authority=store).to_json())
    admin = ringkit.cluster.ShardedClient(HashRing(list(base)), base, view_store=store)
    stale = new(HashRing(list(base)), base, view_store=store)
    assert stale.get("k0") is None and stale.epoch == 1
    admin.add_server("s4", urls["s4"])
    path.write_bytes(admin.view.to_json())  # the operator publishes the new view to the file
    moved = next(f"k{i}" for i in range(1000) if admin.replicas_for(f"k{i}") == ["s4"])
    stale.set(moved, "after the join")  # refused at epoch 1, the file read, retried
    assert stale.epoch == admin.epoch == 3
    assert admin.get(moved) == "after the join"


def test_every_cluster_error_is_in_the_one_tree() -> None:
    for name in ("EpochLostError", "QuorumError", "StaleViewError", "ViewConflictError"):
        error = getattr(ringkit.errors, name)
        assert issubclass(error, ringkit.errors.RingkitError)
        assert getattr(ringkit.cluster, name) is error
        assert name in (ringkit.errors.__doc__ or "")
    assert issubclass(ringkit.errors.QuorumError, ringkit.errors.BackendError)
    assert issubclass(ringkit.errors.StaleViewError, RuntimeError)


@pytest.mark.parametrize(
    "module", ["client", "aio", "clientcore", "core/tracker", "core/reader", "core/writer"]
)
def test_the_client_never_imports_the_coordinator(module: str) -> None:
    source = Path(ringkit.cluster.__file__).parent / f"{module}.py"
    imported = {
        node.module
        for node in ast.walk(ast.parse(source.read_text()))
        if isinstance(node, ast.ImportFrom)
    }
    assert "ringkit.cluster.rebalance.coordinator" not in imported
