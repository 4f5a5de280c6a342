"""Cluster views: JSON form, sources (file, environment), validation, audit log, fencing."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ringkit import HashRing
from ringkit.cluster.rebalance.coordinator import RebalanceOptions, Rebalancer
from ringkit.cluster.rebalance.options import Throttle
from ringkit.cluster.views.view import VIEW_ENV, AuditLog, ClusterView, load_view
from ringkit.cluster.wire.urls import parse_url, url_text
from ringkit.errors import ConfigError, StaleViewError, UnsupportedError, ViewConflictError
from ringkit.strategies.modulo import Modulo
from tests.cluster.helpers import memory_urls
from tests.servers import memcached_server

SERVERS = {"a": "redis://:pw@127.0.0.1:7000/0", "b": "memory://view-b", "c": "memory://view-c"}

New = Callable[..., Any]


def _moving() -> ClusterView:
    old = HashRing(["a", "b"], vnodes=8)
    return ClusterView(4, old.add("c"), SERVERS, 2, previous=old, state="moving")


def test_json_round_trip_keeps_every_field() -> None:
    view = _moving()
    again = ClusterView.from_json(view.to_json())
    assert (again.epoch, again.state, again.replicas) == (4, "moving", 2)
    assert again.placement == view.placement and again.previous == view.previous
    assert dict(again.servers) == {**SERVERS, "a": "redis://127.0.0.1:7000/0"}  # no password
    assert again.read_placements == (view.placement, view.previous)
    assert view.to_dict(redact_passwords=True)["servers"]["a"] == "redis://127.0.0.1:7000/0"


def test_rolling_back_reads_the_abandoned_side_first_and_writes_both() -> None:
    view = _moving()
    back = ClusterView(5, view.previous, SERVERS, 2, previous=view.placement, state="rolling_back")
    assert back.read_placements == (view.placement, view.previous)
    assert back.write_placements == (view.previous, view.placement)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"epoch": -1}, "epoch must be an int >= 0, got -1"),
        (
            {"state": "paused"},
            "view state must be one of stable, moving, rolling_back, got 'paused'",
        ),
        ({"state": "moving"}, "a moving view must have a previous placement"),
        ({"servers": {"a": "memory://x"}}, "node 'b' of the view has no server URL"),
    ],
)
def test_bad_views_are_refused(changes: dict[str, object], message: str) -> None:
    fields: dict[str, object] = {"epoch": 1, "placement": HashRing(["a", "b"]), "servers": SERVERS}
    fields.update(changes)
    with pytest.raises(ConfigError, match=message):
        ClusterView(**fields)  # type: ignore[arg-type]


def test_bad_json_is_refused() -> None:
    with pytest.raises(ConfigError, match="cluster view is not valid JSON"):
        ClusterView.from_json(b"{epoch")
    with pytest.raises(ConfigError, match="must be a JSON object, got list"):
        ClusterView.from_json(b"[1]")
    with pytest.raises(ConfigError, match="field 'placement' is missing"):
        ClusterView.from_json(b'{"epoch": 1}')


def test_only_rings_are_stored() -> None:
    view = ClusterView(0, Modulo(["a", "b"]), SERVERS)
    with pytest.raises(UnsupportedError, match="only for a HashRing, got Modulo"):
        view.to_json()


def test_load_view_from_file_and_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "view.json"
    path.write_bytes(_moving().to_json())
    assert load_view(path).epoch == 4
    monkeypatch.setenv(VIEW_ENV, str(path))
    assert load_view().state == "moving"
    monkeypatch.setenv(VIEW_ENV, _moving().to_json().decode())
    assert load_view().epoch == 4
    monkeypatch.delenv(VIEW_ENV)
    with pytest.raises(ConfigError, match="no cluster view: pass a file or set RINGKIT_VIEW"):
        load_view()
    with pytest.raises(ConfigError, match="cannot read cluster view file '/nonexistent'"):
        load_view("/nonexistent")


def test_audit_log_appends_json_lines(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.jsonl")
    log.record("view", _moving().to_dict(redact_passwords=True))
    log.record("done", {"epoch": 5})
    lines = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert [line["kind"] for line in lines] == ["view", "done"]
    assert "pw" not in (tmp_path / "audit.jsonl").read_text()


@pytest.mark.parametrize(
    "text", ["redis://127.0.0.1:6379/2", "memcached://127.0.0.1:11211", "memory://x"]
)
def test_url_text_round_trips(text: str) -> None:
    assert url_text(parse_url(text)) == text
    assert url_text(parse_url("redis://u:pw@127.0.0.1:6379/2")) == "redis://127.0.0.1:6379/2"


def test_options_are_validated() -> None:
    with pytest.raises(ConfigError, match="batch must be an int >= 1, got 0"):
        RebalanceOptions(batch=0)
    with pytest.raises(ConfigError, match="keys_per_s must be a number > 0 or None, got -5"):
        RebalanceOptions(keys_per_s=-5)
    with pytest.raises(ConfigError, match="checkpoint_s must be a number >= 0, got -1"):
        RebalanceOptions(checkpoint_s=-1)
    with pytest.raises(ConfigError, match="keys_per_s must be a number > 0 or None, got 0"):
        Throttle(0)


def test_memory_membership_change_and_refusals(new: New) -> None:
    urls = memory_urls(4)
    base = {name: urls[name] for name in ("s1", "s2", "s3")}
    client = new(HashRing(list(base)), base)
    stale = new(HashRing(list(base)), base)
    client.set_many({f"k{i}": i for i in range(200)})
    with pytest.raises(
        ConfigError, match="no rebalance to roll back: the view at epoch 1 is stable"
    ):
        Rebalancer(client.view).rollback()
    assert Rebalancer(client.view).resume().outcome == "nothing"
    client.add_server("s4", urls["s4"])
    assert stale.get_many([f"k{i}" for i in range(200)]) == {f"k{i}": i for i in range(200)}
    assert stale.epoch == client.epoch == 3  # the first client's 1, moving 2, final 3


def test_memcached_fencing_refuses_a_stale_write(new: New) -> None:
    with memcached_server() as server:
        urls = {"a": f"memcached://{server.address}"}
        admin = new(HashRing(["a"]), urls)
        stale = new(HashRing(["a"]), urls)
        backend = admin.server("a").backend
        view = ClusterView(3, HashRing(["a"]), urls)
        assert backend.publish(3, view.to_json()) == 3  # type: ignore[attr-defined]
        assert stale.server("a").backend.publish(2, b"{}") == 3  # type: ignore[attr-defined]
        with pytest.raises(ViewConflictError, match="holds another view at epoch 3"):
            backend.publish(3, b"{}")  # type: ignore[attr-defined]
        stale.set("k", "v")  # refused at epoch 0, refreshed, retried at epoch 3
        assert stale.epoch == 3 and admin.get("k") == "v"
        with pytest.raises(StaleViewError, match="is at epoch 3, the call was routed by epoch 1"):
            type(backend)(backend.inner, lambda: 1, lambda key: 0).set_many({b"x": b"y"}, None)  # type: ignore[attr-defined]


def test_hot_copies_is_off_in_a_first_view_and_travels_with_the_view() -> None:
    urls = {"a": "memory://a", "b": "memory://b"}
    view = ClusterView(1, HashRing(["a", "b"]), urls)
    assert view.hot_copies is False and view.to_dict()["hot_copies"] is False
    spread = ClusterView(2, HashRing(["a", "b"]), urls, hot_copies=True)
    assert ClusterView.from_json(spread.to_json()).hot_copies is True
    older = json.loads(view.to_json())
    del older["hot_copies"]  # a view published before the field existed: no key is spread
    assert ClusterView.from_dict(older).hot_copies is False
    with pytest.raises(ConfigError, match="'hot_copies' must be true or false, got a string"):
        ClusterView.from_dict({**older, "hot_copies": "yes"})
    with pytest.raises(ConfigError, match="hot_copies must be True or False, got 1"):
        ClusterView(1, HashRing(["a", "b"]), urls, hot_copies=1)  # type: ignore[arg-type]
