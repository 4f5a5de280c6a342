"""Every import path the docs show, and every path users had before the packages moved, works.

A reorganisation moved modules into packages by concept (``ringkit.movement``, ``ringkit.sim``,
``ringkit.ring``, ``ringkit.strategies.fixed``, ``ringkit.compat``) and kept the public names
where users import them. This test reads every ``from ringkit… import …`` statement and every
dotted ``ringkit.…`` name in the README, docs/ and examples/, and resolves each; a second list
pins the paths that existed before the move.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TEXTS = sorted([ROOT / "README.md", *ROOT.glob("docs/*.md"), *ROOT.glob("examples/*.py")])

_FROM_IMPORT = re.compile(r"^\s*(?:>>> |\.\.\. )?from (ringkit[\w.]*) import ([\w, ]+)$", re.M)
_DOTTED = re.compile(r"\bringkit(?:\.[A-Za-z_]\w*)+")

# Paths users imported before the reorganisation into packages; each must still work.
BEFORE_THE_MOVE = (
    "ringkit.ring.HashRing",
    "ringkit.ring.DEFAULT_VNODES",
    "ringkit.ring.SPACE_64",
    "ringkit.ring.Arc",
    "ringkit.ring.vnode_count",
    "ringkit.placement.Placement",
    "ringkit.movement.diff",
    "ringkit.movement.Movement",
    "ringkit.movement.MovedArc",
    "ringkit.sim.run_scenario",
    "ringkit.sim.gatepass",
    "ringkit.sim.Scenario",
    "ringkit.sim.Event",
    "ringkit.strategies.fixed.FixedPartitions",
    "ringkit.strategies.fixed.DEFAULT_PARTITIONS",
    "ringkit.strategies.allocation.AllocatedRing",
    "ringkit.strategies.allocation.allocate_tokens",
    "ringkit.strategies.maglev.Maglev",
    "ringkit.strategies.maglev.MAGLEV_TABLE_SIZE",
    "ringkit.strategies.modulo.Modulo",
    "ringkit.strategies.jump.JumpHash",
    "ringkit.strategies.rendezvous.Rendezvous",
    "ringkit.strategies.multiprobe.MultiProbe",
    "ringkit.strategies.bounded.BoundedLoad",
    "ringkit.strategies.scheduled.ScheduledRemap",
    "ringkit.strategies.ranges.RangePartitions",
    "ringkit.strategies.registry.build_placement",
    "ringkit.strategies.registry.STRATEGY_NAMES",
    "ringkit.strategies.registry.StrategyOptions",
    "ringkit.compat.ketama",
    "ringkit.compat.envoy_maglev",
    "ringkit.compat.envoy_ring",
    "ringkit.hashing.cassandra_token",
    "ringkit.stats.balance",
    "ringkit.cluster.ShardedClient",
    "ringkit.cluster.AsyncShardedClient",
    "ringkit.cluster.QuorumError",
    "ringkit.cluster.StaleViewError",
    "ringkit.cluster.client.ShardedClient",
    "ringkit.cluster.adapters.PlacementHasher",
    "ringkit.web.app.create_app",
)


def resolve(path: str) -> object:
    """Import the longest module prefix of `path`, then read the rest as attributes."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            value = getattr(value, name)
        return value
    raise ModuleNotFoundError(path)


def documented_paths() -> list[str]:
    found: set[str] = set()
    for text in (path.read_text(encoding="utf-8") for path in TEXTS):
        for module, names in _FROM_IMPORT.findall(text):
            found.update(f"{module}.{name.strip()}" for name in names.split(",") if name.strip())
        found.update(match.rstrip(".") for match in _DOTTED.findall(text))
    # ``python -m ringkit`` runs the CLI: importing ringkit.__main__ would run it.
    return sorted(path for path in found if not path.startswith("ringkit.__main__"))


@pytest.mark.parametrize("path", documented_paths())
def test_every_documented_import_path_resolves(path: str) -> None:
    assert resolve(path) is not None


@pytest.mark.parametrize("path", BEFORE_THE_MOVE)
def test_import_paths_from_before_the_move_still_work(path: str) -> None:
    assert resolve(path) is not None
