"""`import ringkit` loads the ring core only; the rest loads on first use.

Checked through ``sys.modules`` in a fresh interpreter, never by timing: the figure lives in
docs/performance.md (benchmarks/bench_import.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import ringkit

SRC = Path(ringkit.__file__).resolve().parents[1]

# Each of these cost tens of milliseconds and none is needed to build a ring or look up a key.
HEAVY = (
    "ringkit.cluster",
    "ringkit.live",
    "ringkit.compat",
    "ringkit.sim",
    "ringkit.web",
    "asyncio",
    "rich",
    "redis",
    "pymemcache",
    "starlette",
    "matplotlib",
)

_PROBE = f"""
import json, sys
import ringkit
ring = ringkit.HashRing(["cache-a", "cache-b"])
ring.node_for("booking:42")
after_import = sorted(name for name in {HEAVY!r} if name in sys.modules)
client = ringkit.ShardedClient
from ringkit import ShardedClient
print(json.dumps({{
    "after_import": after_import,
    "client": f"{{client.__module__}}.{{client.__qualname__}}",
    "same": client is ShardedClient,
    "cluster_loaded": "ringkit.cluster" in sys.modules,
}}))
"""


def _probe() -> dict[str, object]:
    result = subprocess.run(
        [sys.executable, "-c", _PROBE],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )
    probe: dict[str, object] = json.loads(result.stdout)
    return probe


def test_import_ringkit_loads_no_heavy_module_and_the_client_loads_on_use() -> None:
    probe = _probe()
    assert probe["after_import"] == []
    assert probe["client"] == "ringkit.cluster.client.ShardedClient"
    assert probe["same"] is True
    assert probe["cluster_loaded"] is True


def test_every_lazy_name_resolves_and_is_listed_by_dir() -> None:
    for name in ringkit.__all__:
        assert getattr(ringkit, name) is not None, name
    assert set(ringkit.__all__) <= set(dir(ringkit))


def test_submodules_resolve_as_attributes_and_unknown_names_still_fail() -> None:
    assert ringkit.sim.gatepass is not None
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        ringkit.no_such_name  # noqa: B018
