"""Every Python script in examples/ runs to completion (a smoke test, as buraksezer does)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "examples").glob("*.py"))


@pytest.mark.parametrize("script", SCRIPTS, ids=[script.name for script in SCRIPTS])
def test_example_runs(script: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    result = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()


def test_example_scenarios_are_the_bundled_scenarios_byte_for_byte() -> None:
    """Regression: the scenarios were only in examples/, outside the wheel.

    They ship in ``ringkit/sim/scenarios`` (loaded by name); ``examples/`` keeps copies for
    ``ringkit simulate examples/*.toml``, which must not drift from the shipped files.
    """
    shipped = {p.name: p.read_bytes() for p in (ROOT / "src/ringkit/sim/scenarios").glob("*.toml")}
    copies = {p.name: p.read_bytes() for p in (ROOT / "examples").glob("*.toml")}
    assert shipped == copies
    assert sorted(shipped) == [
        "cascade.toml",
        "gatepass.toml",
        "hot-key-remedies.toml",
        "hot-keys.toml",
        "load-balancers.toml",
        "zone-failure.toml",
    ]
