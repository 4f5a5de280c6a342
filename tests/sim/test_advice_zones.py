"""``ringkit advise --replicas R --zones Z``: what one zone's failure costs.

Beside the balance target, the share of keys that lose every replica when one zone fails, with
and without zone-aware preference lists, at the advised vnode count: counted key by key over a
sample of keys, and here recounted with the ring's own ``nodes_for``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from ringkit.advice import ZoneRisk, advise, zone_risk
from ringkit.cli import main
from ringkit.errors import ConfigError
from ringkit.ring import HashRing
from ringkit.sim import Population, zoned_nodes


def _recount(n: int, vnodes: int, replicas: int, zones: int, keys: int, rings: int) -> ZoneRisk:
    population = Population(count=keys, prefix="key-").names()
    lost: dict[bool, list[float]] = {True: [], False: []}
    below: dict[bool, list[float]] = {True: [], False: []}
    for r in range(rings):
        names = [f"r{r}-node-{i}" for i in range(1, n + 1)]
        zone_of = {name: f"z{i % zones}" for i, name in enumerate(names)}
        for aware in (True, False):
            nodes = zoned_nodes(names, zone_of, zone_aware=aware)
            ring = HashRing(nodes, vnodes=vnodes)
            lists = [ring.nodes_for(key, replicas) for key in population]
            for zone in sorted(set(zone_of.values())):
                alive = [sum(zone_of[m] != zone for m in nodes) for nodes in lists]
                lost[aware].append(sum(a == 0 for a in alive) / keys)
                below[aware].append(sum(a < replicas // 2 + 1 for a in alive) / keys)
    return ZoneRisk(
        zones=zones,
        replicas=replicas,
        vnodes=vnodes,
        keys=keys,
        rings=rings,
        aware_lost=float(np.mean(lost[True])),
        aware_lost_worst=max(lost[True]),
        aware_below_quorum=float(np.mean(below[True])),
        blind_lost=float(np.mean(lost[False])),
        blind_lost_worst=max(lost[False]),
        blind_below_quorum=float(np.mean(below[False])),
    )


@pytest.mark.parametrize(("n", "vnodes", "zones"), [(12, 4, 3), (9, 16, 3), (8, 2, 4)])
def test_zone_risk_equals_a_recount(n: int, vnodes: int, zones: int) -> None:
    risk = zone_risk(n, vnodes, replicas=3, zones=zones, keys=1500, rings=2)
    assert risk == pytest.approx(_recount(n, vnodes, 3, zones, 1500, 2))
    assert risk.aware_lost == risk.aware_lost_worst == 0.0  # a zone holds one of three replicas
    assert risk.blind_lost <= risk.blind_lost_worst <= risk.blind_below_quorum * 3


def test_zone_risk_names_bad_values() -> None:
    with pytest.raises(ConfigError, match=r"zones must be in \[1, 4\] for 4 nodes, got 5"):
        zone_risk(4, 8, replicas=2, zones=5)
    with pytest.raises(ConfigError, match="zones must be an integer >= 1, got 0"):
        zone_risk(4, 8, replicas=2, zones=0)
    with pytest.raises(ConfigError, match=r"replicas must be in \[1, 4\] for 4 nodes, got 6"):
        zone_risk(4, 8, replicas=6, zones=2)
    with pytest.raises(ConfigError, match="got keys=0 rings=1"):
        zone_risk(4, 8, replicas=2, zones=2, keys=0, rings=1)
    with pytest.raises(ConfigError, match=r"zones must be in \[1, 4\] for 4 nodes, got 9"):
        advise(4, zones=9, draws=5)


def test_advise_counts_zone_failure_at_the_advised_vnodes() -> None:
    advice = advise(12, replicas=3, zones=3, draws=20, target=1.25)
    assert advice.zone_risk is not None and advice.vnodes is not None
    assert advice.zone_risk.vnodes == advice.vnodes
    assert advice.zone_risk == zone_risk(12, advice.vnodes, replicas=3, zones=3)
    assert advise(12, replicas=3, draws=20, target=1.25).zone_risk is None


def test_cli_json_and_table(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["advise", "--nodes", "12", "--replicas", "3", "--zones", "3", "--draws", "20"]
    assert main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    risk = data["zone_risk"]
    assert risk["vnodes"] == data["vnodes"] and risk["zones"] == 3 and risk["replicas"] == 3
    assert risk["aware_lost"] == 0.0 < risk["blind_lost"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "one zone of 3 fails" in out and "zone-aware" in out and "zone-blind" in out
    assert "sampled" in out  # the title says the figures are counted over a sample of keys
    assert main(["advise", "--nodes", "4", "--draws", "5", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["zone_risk"] is None


def test_cli_bad_zones(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["advise", "--zones", "0"])
    assert exit_info.value.code == 2
    assert "argument --zones: must be >= 1, got 0" in capsys.readouterr().err
    assert main(["advise", "--nodes", "4", "--zones", "5", "--draws", "5"]) == 1
    assert capsys.readouterr().err == (
        "ringkit: error: zones must be in [1, 4] for 4 nodes, got 5\n"
    )
