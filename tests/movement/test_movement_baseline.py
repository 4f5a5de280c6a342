"""Regression: diff's ``hash % N`` baseline uses the placement's own hasher, for every strategy.

Before the fix, placements without a public ``hasher`` (jump, rendezvous, multiprobe, bounded)
were compared with ``hash % N`` under the default xxh3_64: on the Gatepass lesson's "add D" with
fnv1a_32_mix, diff reported 238 keys where ``hash % N`` with fnv1a_32_mix moves 230.
"""

from __future__ import annotations

import pytest

from ringkit import Modulo, diff
from ringkit.strategies.registry import (
    STRATEGY_NAMES,
    StrategyOptions,
    build_placement,
    options_for,
)

KEYS = [f"booking-{i:04d}" for i in range(1, 301)]
HASHER = "fnv1a_32_mix"


def modulo_moved(hasher: str) -> int:
    before = Modulo(["A", "B", "C"], hasher=hasher).node_for_many(KEYS)
    after = Modulo(["A", "B", "C", "D"], hasher=hasher).node_for_many(KEYS)
    return sum(old != new for old, new in zip(before, after, strict=True))


@pytest.mark.parametrize("strategy", [s for s in STRATEGY_NAMES if s != "ranges"])
def test_modulo_baseline_uses_the_placements_hasher(strategy: str) -> None:
    # vnodes only where the strategy uses them: build_placement refuses an unused option.
    options = options_for(strategy, StrategyOptions(hasher=HASHER, vnodes=32))
    old = build_placement(strategy, ["A", "B", "C"], options)
    new = old.add("D")
    assert new.hasher.name == HASHER  # type: ignore[attr-defined]
    assert diff(old, new, keys=KEYS).modulo_keys_moved == modulo_moved(HASHER)
    assert modulo_moved(HASHER) != modulo_moved("xxh3_64")  # the case would catch the bug
