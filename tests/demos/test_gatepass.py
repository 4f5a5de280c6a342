"""The Gatepass claim on real memcached, and the ``ringkit demo cache`` command.

Derived bounds. After adding a 4th server to 3, the ring keeps the keys outside the new node's
arcs: expected 3/4. The new node's share of the circle varies with CV ~ 1/sqrt(V) (Karger et al.
1997), so its share is 1/4 +- 4 * (1/4) / sqrt(160) at four standard deviations, and sampling N
keys adds 4 * sqrt(p (1 - p) / N). ``hash % 3`` and ``hash % 4`` agree when the hash mod 12 is 0, 1
or 2: modulo keeps 1/4 of the keys, +- the sampling term alone."""

from __future__ import annotations

import json
import math
from contextlib import ExitStack

import pytest

from ringkit.cli import main
from ringkit.demos import gatepass
from ringkit.demos.gatepass import memory_urls, run_gatepass
from ringkit.errors import ConfigError
from tests.servers import memcached_server, require_binary

KEYS, VNODES = 4_000, 160
SAMPLING = 4 * math.sqrt(0.25 * 0.75 / KEYS)
RING_BOUND = 4 * 0.25 / math.sqrt(VNODES) + SAMPLING


def test_ring_keeps_three_quarters_and_modulo_a_quarter_on_real_memcached() -> None:
    with ExitStack() as stack:
        servers = [stack.enter_context(memcached_server()) for _ in range(4)]
        urls = [f"memcached://{server.address}" for server in servers]
        report = run_gatepass(
            urls, servers=3, added=1, keys=KEYS, vnodes=VNODES, backend="memcached"
        )
    ring, modulo = report.results
    assert abs(ring.hit_rate - 0.75) <= RING_BOUND
    assert abs(modulo.hit_rate - 0.25) <= SAMPLING
    # Every miss is a moved key and every moved key misses: the cache served all the rest.
    assert (ring.database_reads, modulo.database_reads) == (ring.moved, modulo.moved)


def test_demo_cache_prints_the_comparison(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "cache", "--keys", "2000"]) == 0
    out = capsys.readouterr().out
    assert "Gatepass: 2,000 booking keys on 3 memory servers, then 1 added (4 servers)" in out
    assert "hit rate right after" in out and "reads falling to database" in out


def test_demo_cache_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "cache", "--keys", "1000", "--servers", "4", "--add", "2", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["strategy"] for r in data["results"]] == ["ring (160 vnodes)", "modulo (hash % N)"]
    assert all(r["hits"] + r["database_reads"] == 1000 for r in data["results"])


@pytest.mark.parametrize(
    ("backend", "binary"), [("redis", "redis-server"), ("memcached", "memcached")]
)
def test_demo_starts_and_stops_its_own_servers(
    backend: str, binary: str, capsys: pytest.CaptureFixture[str]
) -> None:
    require_binary(binary, binary)
    assert main(["demo", "cache", "--backend", backend, "--keys", "600", "--json"]) == 0
    captured = capsys.readouterr()
    assert f"starting 4 {backend} servers on loopback" in captured.err
    data = json.loads(captured.out)
    assert data["backend"] == backend and data["results"][0]["hits"] > data["results"][1]["hits"]


def test_demo_says_how_to_install_a_missing_server(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(gatepass.shutil, "which", lambda name: None)
    assert main(["demo", "cache", "--backend", "redis"]) == 1
    err = capsys.readouterr().err
    assert "ringkit: error: redis-server is not installed; install it with: apt-get" in err


def test_gatepass_refuses_a_wrong_number_of_urls() -> None:
    with pytest.raises(ConfigError, match="need servers \\+ added = 4 URLs, got 3"):
        run_gatepass(memory_urls(3, "bad"), servers=3, added=1)
