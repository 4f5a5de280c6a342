"""The live ring's Prometheus metrics, scraped over HTTP while members join and leave.

The store is a real etcd (and the in-process store); the scrape goes through
``prometheus_client``'s own HTTP server, as a process that exposes its metrics runs it, and
through ``ringkit serve --store … --metrics``'s app.
"""

from __future__ import annotations

import subprocess
import sys
import urllib.request
import warnings
from collections.abc import Callable, Iterator

import pytest
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.parser import text_string_to_metric_families

import ringkit.live
from ringkit.web.app import create_app
from ringkit.web.live import LiveView
from tests.live.test_auth import secured  # noqa: F401 (an etcd with user root / s3cret)
from tests.live.test_records import member_json, put
from tests.servers import EtcdCluster, free_port

with warnings.catch_warnings():
    # Starlette 1.x prefers the httpx2 fork for its TestClient; httpx still works.
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from starlette.testclient import TestClient

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`"),
]

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[sample.name, frozenset(sample.labels.items())] = sample.value
    return samples


@pytest.fixture
def scrape() -> Iterator[tuple[CollectorRegistry, Callable[[], tuple[str, Samples]]]]:
    registry = CollectorRegistry()
    port = free_port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=registry)

    def read() -> tuple[str, Samples]:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
            text = reply.read().decode()
        return text, parse(text)

    yield registry, read
    server.shutdown()
    thread.join(timeout=5)


def test_epoch_members_shares_currency_and_skipped_records_are_scraped(
    store_url: str, scrape: tuple[CollectorRegistry, Callable[[], tuple[str, Samples]]]
) -> None:
    registry, read = scrape
    with ringkit.live.connect(store_url) as before:
        # A store reads the release marks when it connects (and while a member waits).
        put(before, "_released/a", b"not a mark")  # no epoch, but counted as skipped too
    with ringkit.live.connect(store_url, metrics_registry=registry) as store:
        ring = store.url
        store.join("a", ttl_s=3)
        store.join("b", ttl_s=3)
        store.wait_for(lambda s: len(s.ring) == 2, timeout_s=10)
        put(store, "members/bad", member_json("bad", weight=-1))
        snapshot = store.wait_for(lambda s: len(store.skipped_records()) == 2, timeout_s=10)
        _, samples = read()

        assert samples["ringkit_live_epoch", frozenset({("ring", ring)})] >= snapshot.epoch
        states = {
            dict(labels)["state"]: value
            for (name, labels), value in samples.items()
            if name == "ringkit_live_members" and dict(labels)["ring"] == ring
        }
        assert states == {"active": 2}
        shares = {
            dict(labels)["member"]: value
            for (name, labels), value in samples.items()
            if name == "ringkit_live_member_share" and dict(labels)["ring"] == ring
        }
        assert shares == pytest.approx(store.snapshot().ring.shares())
        assert sum(shares.values()) == pytest.approx(1.0)
        assert samples["ringkit_live_records_skipped", frozenset({("ring", ring)})] == 2
        assert samples["ringkit_live_current", frozenset({("ring", ring)})] == 1
        age = samples["ringkit_live_confirmed_age_seconds", frozenset({("ring", ring)})]
        assert 0 <= age <= store.current_within_s()

    # A closed store stops reporting.
    _, after = read()
    assert not any(dict(labels).get("ring") == ring for _, labels in after)


def test_a_password_in_the_store_url_never_reaches_a_scrape(
    scrape: tuple[CollectorRegistry, Callable[[], tuple[str, Samples]]],
    secured: EtcdCluster,  # noqa: F811
) -> None:
    registry, read = scrape
    url = f"etcd://root:s3cret@{secured.endpoints}/metrics-secret"
    with ringkit.live.connect(url, metrics_registry=registry) as store:
        store.join("a", ttl_s=3)
        text, _ = read()
    assert "s3cret" not in text and "root" not in text
    assert f'ring="etcd://{secured.endpoints}/metrics-secret"' in text


def test_serve_answers_the_live_rings_metrics(etcd: EtcdCluster) -> None:
    registry = CollectorRegistry()
    url = etcd.url("metrics-serve")
    with ringkit.live.connect(url) as member_store:
        member_store.join("w1", ttl_s=3)
        live = LiveView(ringkit.live.connect(url, metrics_registry=registry))
        try:
            live.store.wait_for(lambda s: "w1" in s.ring, timeout_s=10)
            ring = live.store.url
            with TestClient(create_app(live, metrics_registry=registry)) as client:
                reply = client.get("/metrics", follow_redirects=False)
        finally:
            live.close()
    assert reply.status_code == 200  # at /metrics itself, not a redirect to /metrics/
    assert reply.headers["content-type"].startswith("text/plain")
    samples = parse(reply.text)
    share = samples["ringkit_live_member_share", frozenset({("ring", ring), ("member", "w1")})]
    assert share == pytest.approx(1.0)


def test_serve_refuses_metrics_without_a_store() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ringkit", "serve", "--metrics", "--port", str(free_port())],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "--metrics shows a live ring's metrics: give --store URL" in result.stderr
