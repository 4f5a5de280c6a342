"""One authority for the view: the servers record which store decides it, and others are refused.

A cluster whose view was moved to etcd (``--import-from-servers``) used to accept a coordinator
that published on the servers alone: the servers moved past etcd's epoch and every client that
followed etcd failed every call with StaleViewError until someone imported again.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ringkit import HashRing
from ringkit.cli import main
from ringkit.cluster import ClusterView, EtcdViewStore, ShardedClient
from ringkit.cluster.views.stores import check_authority, same_authority
from ringkit.cluster.views.view import SERVERS_AUTHORITY, load_view
from ringkit.cluster.wire.backends import open_backend
from ringkit.cluster.wire.handles import fence
from ringkit.cluster.wire.urls import parse_url
from ringkit.errors import ConfigError
from tests.cluster.helpers import memory_urls

pytestmark = pytest.mark.timeout(60)
New = Callable[..., Any]


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(["rebalance", *args, "--no-progress"])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def _listing(urls: dict[str, str]) -> str:
    return ",".join(f"{name}={url}" for name, url in urls.items())


def _recorded(url: str) -> ClusterView:
    data = fence(open_backend(parse_url(url), timeout_s=1.0), lambda: 0, lambda key: 0).read_view()
    assert data is not None
    return ClusterView.from_json(data)


def _seeded(urls: dict[str, str]) -> None:
    """Servers holding a servers:// view at epoch 1 and a few keys, as the first client leaves."""
    first = ShardedClient(HashRing(list(urls)), urls)
    first.set_many({f"k{i}": i for i in range(50)})
    first.close()


def test_a_coordinator_without_the_etcd_store_is_refused_after_the_import(
    etcd_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    urls = memory_urls(3)
    _seeded(urls)
    status, _, _ = _cli(
        capsys, "--servers", _listing(urls), "--view-store", etcd_url, "--import-from-servers"
    )
    assert status == 0
    store = EtcdViewStore(etcd_url)
    try:
        assert store.authority.startswith("etcd://") and store.load() is not None
        assert _recorded(urls["s1"]).authority == store.authority
        # The repro: a coordinator through the servers alone moved them past etcd's epoch.
        status, _, err = _cli(capsys, "--servers", _listing(urls), "--remove", "s2")
        assert status == 1
        assert f"recorded {store.authority}" in err and "configured servers://" in err
        assert "--export-to-servers" in err
        assert {_recorded(url).epoch for url in urls.values()} == {1}
        follower = ShardedClient(HashRing(list(urls)), urls, view_store=etcd_url)
        assert follower.get("k7") == 7 and follower.epoch == 1
        follower.close()
    finally:
        store.close()


def test_clients_with_another_store_are_refused_at_their_first_call(
    etcd_url: str, new: New, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    urls = memory_urls(3)
    _seeded(urls)
    assert _cli(
        capsys, "--servers", _listing(urls), "--view-store", etcd_url, "--import-from-servers"
    )[0] == 0  # fmt: skip
    path = tmp_path / "view.json"
    path.write_bytes(_recorded(urls["s1"]).to_json())
    other = new(HashRing(list(urls)), urls, view_store=f"file://{path}")
    for _ in range(2):  # and at every call after it, not only the first
        with pytest.raises(ConfigError, match=r"configured file://.*recorded etcd://"):
            other.get("k7")
    # A client configured with no store follows the servers as before; the etcd one agrees.
    plain = new(HashRing(list(urls)), urls)
    assert plain.get("k7") == 7
    follower = new(HashRing(list(urls)), urls, view_store=etcd_url)
    assert follower.get("k8") == 8


def test_export_gives_the_authority_back_to_the_servers(
    etcd_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    urls = memory_urls(3)
    _seeded(urls)
    listing = _listing(urls)
    assert (
        _cli(capsys, "--servers", listing, "--view-store", etcd_url, "--import-from-servers")[0]
        == 0
    )
    status, out, _ = _cli(capsys, "--view-store", etcd_url, "--export-to-servers")
    assert status == 0 and out.startswith("exported: ") and "the authority is servers://" in out
    assert _recorded(urls["s2"]).authority == SERVERS_AUTHORITY
    status, out, _ = _cli(capsys, "--view-store", etcd_url, "--export-to-servers")
    assert status == 0 and out.startswith("already held: ")
    # Now the etcd coordinator is the one refused, naming the way back.
    status, _, err = _cli(capsys, "--view-store", etcd_url, "--remove", "s3")
    assert status == 1 and "recorded servers://" in err and "--import-from-servers" in err
    status, out, _ = _cli(capsys, "--servers", listing, "--remove", "s3")
    assert status == 0 and out.startswith("done: epoch 3")
    two = {name: urls[name] for name in ("s1", "s2")}
    assert ShardedClient(HashRing(list(two)), two).get_many(["k1", "k2"]) == {"k1": 1, "k2": 2}


def test_a_file_store_becomes_the_authority_by_import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], new: New
) -> None:
    urls = memory_urls(3)
    _seeded(urls)
    path = tmp_path / "view.json"
    store = f"file://{path}"
    status, _, _ = _cli(capsys, "--servers", _listing(urls), "--view-store", store,
                        "--import-from-servers")  # fmt: skip
    assert status == 0 and load_view(str(path)).authority == store
    assert _recorded(urls["s3"]).authority == store
    status, _, err = _cli(capsys, "--servers", _listing(urls), "--remove", "s3")
    assert status == 1 and f"recorded {store}" in err
    assert new(HashRing(list(urls)), urls, view_store=store).get("k3") == 3


def test_an_authority_never_holds_a_secret_and_etcd_urls_match_by_member() -> None:
    ring = HashRing(["a"])
    with pytest.raises(ConfigError, match="must not hold a user or password"):
        ClusterView(1, ring, {"a": "memory://a"}, authority="etcd://u:p@h:2379/x")
    view = ClusterView(1, ring, {"a": "memory://a"}, authority="etcd://h1:2379,h2:2379/x")
    assert ClusterView.from_json(view.to_json()).authority == "etcd://h1:2379,h2:2379/x"
    assert b"authority" not in ClusterView(1, ring, {"a": "memory://a"}).to_json()
    assert same_authority("etcd://h1:2379,h2:2379/x", "etcds://h2:2379/x/")
    assert not same_authority("etcd://h1:2379/x", "etcd://h1:2379/y")
    assert not same_authority("servers://", "file:///v.json")
    check_authority(None, "file:///v.json", who="the client")  # nothing recorded: nothing to refuse
