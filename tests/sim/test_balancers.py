"""The load-balancer lesson: each proxy's exact layout, the same users, one backend joining."""

from __future__ import annotations

import json

import pytest

from ringkit.cli import main
from ringkit.compat import envoy_maglev
from ringkit.compat.haproxy import HAProxyServer, haproxy
from ringkit.errors import ConfigError
from ringkit.sim import load_bundled_scenario
from ringkit.sim.balancers import BALANCER_LAYOUTS, backend_address, compare_balancers
from ringkit.sim.scenario_file import parse_scenario

USERS = [f"user-{i}" for i in range(4000)]
NAMES = ["web-1", "web-2", "web-3", "web-4"]


def test_every_layout_is_compared_with_its_users_counted() -> None:
    results = compare_balancers(NAMES, "web-5", USERS)
    assert [r.layout for r in results] == list(BALANCER_LAYOUTS)
    for result in results:
        assert sum(result.before.values()) == sum(result.after.values()) == len(USERS)
        assert list(result.after) == [*NAMES, "web-5"]
        assert result.least_fraction == pytest.approx(1 / 5)


def test_haproxy_and_nginx_move_users_only_to_the_new_backend() -> None:
    by_layout = {r.layout: r for r in compare_balancers(NAMES, "web-5", USERS)}
    for layout in ("haproxy", "nginx"):
        assert by_layout[layout].moved == by_layout[layout].moved_to_new > 0
    # hash % N moves most users: all but those whose hash is the same mod 4 and mod 5.
    assert by_layout["modulo"].moved_fraction > 0.7
    # Envoy's ring gives each host ring_size / hosts entries: a join takes entries away from
    # every other host too, so users move between old hosts as well.
    assert by_layout["envoy_ring"].moved > by_layout["envoy_ring"].moved_to_new


def test_the_numbers_are_the_compat_layouts_own() -> None:
    servers = [HAProxyServer(n, id=i) for i, n in enumerate(NAMES, start=1)]
    owners = haproxy(servers).node_for_many(USERS)
    result = compare_balancers(NAMES, "web-5", USERS)[0]
    assert result.before == {name: owners.count(name) for name in NAMES}
    addresses = [backend_address(i) for i in range(1, 5)]
    maglev = envoy_maglev(addresses).node_for_many(USERS)
    result = compare_balancers(NAMES, "web-5", USERS)[3]
    assert list(result.before.values()) == [maglev.count(a) for a in addresses]


def test_a_joining_backend_that_is_already_there_is_refused() -> None:
    with pytest.raises(ConfigError, match="must be new, got 'web-1'"):
        compare_balancers(NAMES, "web-1", USERS)
    text = 'nodes = ["a", "b"]\n[balancers]\njoin = "a"\n'
    with pytest.raises(ConfigError, match=r"lb.toml: balancers.join must be a new backend name"):
        parse_scenario(text, "lb.toml")


def test_the_bundled_scenario_runs_in_simulate(capsys: pytest.CaptureFixture[str]) -> None:
    (scenario,) = load_bundled_scenario("load-balancers")
    assert scenario.balancers is not None and scenario.balancers.join == "web-5"
    assert main(["simulate", "load-balancers", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = doc["balancers"][0]["rows"]
    assert [row["layout"] for row in rows] == list(BALANCER_LAYOUTS)
    assert rows[0]["moved"] == rows[0]["moved_to_new"]
