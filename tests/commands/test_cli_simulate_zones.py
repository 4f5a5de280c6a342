"""Scenario files with zones and replicas: parsing, ``--json`` fields, tables, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ringkit.cli import main
from ringkit.errors import ConfigError
from ringkit.ring import HashRing
from ringkit.sim import Population, fail_zone, parse_scenario, spread_zones, zoned_nodes

ZONED = """
zones = 3
nodes = 12
[keys]
count = 3000
[strategy]
vnodes = 4
replicas = 3
zone_aware = false
[[events]]
type = "fail_zone"
zone = "z1"
[[events]]
type = "add"
node = "late"
[[events]]
type = "fail"
node = "node-04"
[[events]]
type = "stale"
behind = 2
"""


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:  # type: ignore[type-arg]
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def test_zones_replicas_and_fail_zone_parse() -> None:
    (scenario,) = parse_scenario(ZONED, "zoned.toml")
    assert scenario.zones == 3 and scenario.zone_aware is False and scenario.replicas == 3
    assert [e.label for e in scenario.events] == [
        "fail zone z1",
        "add late",
        "fail node-04",
        "stale 2 behind",
    ]
    zone_of = scenario.zone_map()
    assert zone_of["node-01"] == "z0" and zone_of["node-12"] == "z2"
    assert zone_of["late"] == "z0"  # the 13th node named continues the round-robin
    (default,) = parse_scenario("zones = 2\nnodes = 4", "d.toml")
    assert default.zone_aware is True and default.replicas == 1


def test_every_json_step_has_keys_lost_and_below_quorum(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "zoned.toml"
    path.write_text(ZONED)
    data = _json(capsys, "simulate", str(path), "--json")
    assert (data["replicas"], data["zones"], data["zone_aware"]) == (3, 3, False)
    steps = data["steps"]
    assert [s["event"] for s in steps] == [
        "start",
        "fail zone z1",
        "add late",
        "fail node-04",
        "stale 2 behind",
    ]
    assert all(isinstance(s["keys_lost"], int) for s in steps)
    assert all(s["keys_below_quorum"] >= s["keys_lost"] for s in steps)
    assert [steps[i]["keys_lost"] for i in (0, 2, 4)] == [0, 0, 0]
    names = [f"node-{i:02d}" for i in range(1, 13)]
    zone_of = spread_zones(names, 3)
    ring = HashRing(zoned_nodes(names, zone_of, zone_aware=False), vnodes=4)
    report = fail_zone(ring, zone_of, "z1", Population(count=3000, prefix="key-"), replicas=3)
    assert steps[1]["keys_lost"] == report.keys_lost > 0
    assert steps[1]["keys_below_quorum"] == report.keys_below_quorum
    assert steps[1]["failed"] == [list(report.failed)]
    assert steps[1]["failover"]["keys"]["loads"] == report.loads["keys"]
    assert steps[1]["lost"]["keys"] == report.lost["keys"]
    # One node of three replicas: never lost, below quorum only with another replica gone.
    assert steps[3]["keys_lost"] == 0
    assert set(steps[4]["stale_replicas"]) == {
        "replica_set_differs",
        "all_replicas_wrong",
        "some_replica_right",
    }
    assert steps[0]["failover"] is None and steps[0]["stale_replicas"] is None


def test_node_failure_with_one_replica_loses_the_nodes_keys(
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = _json(capsys, "simulate", "cascade", "--json", "--vnodes", "128")
    start, failure = data["steps"]
    assert start["keys_lost"] == 0
    assert failure["keys_lost"] == failure["keys_below_quorum"] == start["keys_per_node"]["node-03"]


def test_bundled_zone_failure_scenario_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "zone-failure", "--vnodes", "4"]) == 0
    out = capsys.readouterr().out
    assert "keys lost" in out and "below quorum" in out
    assert "fail zone z0" in out
    assert "lost every replica" in out and "with at least one right replica" in out


def test_tables_without_replicas_or_zones_have_no_replica_columns(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["simulate", "gatepass", "--vnodes", "8"]) == 0
    assert "keys lost" not in capsys.readouterr().out


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("zones = 0", "bad.toml: zones must be an integer >= 1; got 0"),
        ("zones = true", "bad.toml: zones must be an integer; got True"),
        (
            "nodes = 3\n[strategy]\nreplicas = 0",
            r"strategy.replicas must be an integer in \[1, 3\]",
        ),
        ("nodes = 3\n[strategy]\nreplicas = 4", r"\(the nodes\); got 4"),
        ("[strategy]\nzone_aware = 'yes'", "strategy.zone_aware must be true or false; got 'yes'"),
        (
            "zones = 3\n[[events]]\ntype = 'fail_zone'\nzone = 'z3'",
            "events.0..zone must be one of z0, z1, z2; got 'z3'",
        ),
        (
            "[[events]]\ntype = 'fail_zone'\nzone = 'z0'",
            "events.0..zone needs zones = Z at the top of the file; got 'z0'",
        ),
        (
            "zones = 2\n[[events]]\ntype = 'fail_zone'\nzone = 'z0'\nnode = 'A'",
            "events.0..node does not apply to fail_zone; got 'A'",
        ),
        (
            "zones = 2\n[[events]]\ntype = 'fail'\nnode = 'A'\nzone = 'z0'",
            "events.0..zone applies to fail_zone events only; got 'z0'",
        ),
        (
            "zones = 3\n[[events]]\ntype = 'fail_zone'\nzone = 'z0'\n"
            "[[events]]\ntype = 'remove'\nnode = 'A'",
            r"events.1..node must be one of B, C; got 'A'",
        ),
    ],
)
def test_bad_zone_fields_are_named(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_scenario(text, "bad.toml")


def test_bad_zone_file_is_one_error_line_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("zones = 3\n[[events]]\ntype = 'fail_zone'\nzone = 'z9'\n")
    assert main(["simulate", str(bad)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"ringkit: error: {bad}: events[0].zone must be one of z0, z1, z2; got 'z9'\n"
    )


def test_a_zone_holding_every_node_ends_the_run_with_every_key_lost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "one-zone.toml"
    path.write_text(
        "zones = 1\nnodes = 3\n[keys]\ncount = 100\n[strategy]\nreplicas = 2\n"
        '[[events]]\ntype = "fail_zone"\nzone = "z0"\n'
    )
    data = _json(capsys, "simulate", str(path), "--json")
    last = data["steps"][-1]
    assert (last["nodes"], last["keys_lost"], last["keys_below_quorum"]) == ([], 100, 100)
    assert main(["simulate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "all nodes down" in out and "100 keys (100.0%) lost every replica" in out
