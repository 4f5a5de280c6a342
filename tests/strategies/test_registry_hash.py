"""The hash strategies by name through the registry, and their determinism across processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ringkit import BoundedLoad, ConfigError, JumpHash, Maglev, MultiProbe, Placement, Rendezvous
from ringkit.strategies.registry import STRATEGY_NAMES, StrategyOptions, build_placement

NAMES = ["cache-a", "cache-b", "cache-c", "cache-d"]
KINDS = {
    "jump": JumpHash,
    "rendezvous": Rendezvous,
    "maglev": Maglev,
    "multiprobe": MultiProbe,
    "bounded": BoundedLoad,
}
# Each strategy gets only the options it uses: build_placement refuses the others.
OPTIONS = {"maglev": StrategyOptions(table_size=251), "multiprobe": StrategyOptions(probes=9)}


@pytest.mark.parametrize("name", sorted(KINDS))
def test_registry_builds_each_strategy(name: str) -> None:
    assert name in STRATEGY_NAMES
    placement = build_placement(name, NAMES, OPTIONS.get(name))
    assert isinstance(placement, KINDS[name]) and isinstance(placement, Placement)
    assert sorted(placement) == NAMES
    keys = [f"k{i}" for i in range(100)]
    assert placement.node_for_many(keys) == [placement.node_for(key) for key in keys]
    assert sum(placement.shares().values()) == pytest.approx(1.0)
    bigger = placement.add("cache-e")
    assert "cache-e" in bigger and "cache-e" not in placement  # immutable
    assert sorted(bigger.remove("cache-e")) == NAMES


def test_registry_passes_the_options_through() -> None:
    maglev = build_placement("maglev", NAMES, StrategyOptions(table_size=13))
    assert isinstance(maglev, Maglev) and maglev.table_size == 13
    multiprobe = build_placement("multiprobe", NAMES, StrategyOptions(probes=3))
    assert isinstance(multiprobe, MultiProbe) and multiprobe.probes == 3
    bounded = build_placement("bounded", NAMES, StrategyOptions(balance_factor=1.5, vnodes=7))
    assert isinstance(bounded, BoundedLoad) and bounded.balance_factor == 1.5
    assert bounded.ring.vnodes == 7
    pymemcache = build_placement(
        "rendezvous", ["0", "1", "2"], StrategyOptions(rendezvous_variant="pymemcache")
    )
    assert pymemcache.node_for("mykey") == "1"
    with pytest.raises(ConfigError, match="maglev table_size must be prime, got 12"):
        build_placement("maglev", NAMES, StrategyOptions(table_size=12))


_SCRIPT = """
import json
from ringkit.strategies.registry import StrategyOptions, build_placement
names = ["cache-a", "cache-b", "cache-c", "cache-d"]
keys = [f"key-{i}" for i in range(40)]
print(json.dumps({
    name: build_placement(
        name, names, StrategyOptions(table_size=251) if name == "maglev" else None
    ).node_for_many(keys)
    for name in ("jump", "rendezvous", "maglev", "multiprobe", "bounded")
}))
"""


def test_owners_do_not_depend_on_the_process_hash_seed() -> None:
    src = str(Path(__file__).resolve().parents[2] / "src")
    results = []
    for seed in ("0", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": src}
        output = subprocess.run(
            [sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True, check=True
        ).stdout
        results.append(json.loads(output))
    keys = [f"key-{i}" for i in range(40)]
    here = {
        name: build_placement(
            name, NAMES, StrategyOptions(table_size=251) if name == "maglev" else None
        ).node_for_many(keys)
        for name in KINDS
    }
    assert results[0] == results[1] == here
