"""ringkit.sim: scenarios of keys and membership events, measured step by step.

A :class:`Scenario` is a key population (counts, value sizes, Zipf popularity) on a placement
and a sequence of membership events (add, remove, reweight, fail with cascades, stale views);
:func:`run_scenario` measures balance by keys, bytes and requests, what moved, and what a
baseline (``hash % N``) would have moved, after every step. :func:`gatepass` is the Gatepass
lesson — a booking service named Gatepass that shards 300 booking keys over three cache nodes,
adds a fourth the night before a sale and later loses one — the classic demonstration that a
ring with virtual nodes moves about 1/N of the keys where ``hash % N`` moves most of them.

The package's parts, each one concept:

- :mod:`~ringkit.sim.population`: the key population, its sizes and popularity, in chunks;
- :mod:`~ringkit.sim.keyhash`: generated keys hashed with numpy, bit for bit;
- :mod:`~ringkit.sim.measure`: one pass over the population: owners and loads per node;
- :mod:`~ringkit.sim.scenario`: ``Scenario``, ``Event``, ``run_scenario``, ``gatepass``;
- :mod:`~ringkit.sim.scenario_file`: scenarios from TOML files;
- :mod:`~ringkit.sim.compare`: every strategy on the same keys and change, side by side;
- :mod:`~ringkit.sim.remedies`: hot-key remedies (spread, near-cache, split) side by side;
- :mod:`~ringkit.sim.zones`: zones and replica sets: what a zone failure or a stale view costs.

>>> run = run_scenario(gatepass(vnodes=(128,))[0])
>>> [step.event for step in run.steps]
['start', 'add D', 'remove B']
"""

from __future__ import annotations

from ringkit.sim.compare import Comparison, compare
from ringkit.sim.population import Population, Sizes
from ringkit.sim.remedies import Remedies, RemedyResult, compare_remedies
from ringkit.sim.scenario import Event, Run, Scenario, Step, gatepass, run_scenario, with_vnodes
from ringkit.sim.scenario_file import (
    bundled_scenarios,
    load_bundled_scenario,
    load_scenario,
    parse_scenario,
)
from ringkit.sim.zones import (
    FailureReport,
    fail_each_zone,
    fail_nodes,
    fail_zone,
    quorum,
    replica_owners,
    spread_zones,
    stale_replicas,
    zone_names,
    zoned_nodes,
)

__all__ = [
    "Comparison",
    "Event",
    "FailureReport",
    "Population",
    "Remedies",
    "RemedyResult",
    "Run",
    "Scenario",
    "Sizes",
    "Step",
    "bundled_scenarios",
    "compare",
    "compare_remedies",
    "fail_each_zone",
    "fail_nodes",
    "fail_zone",
    "gatepass",
    "load_bundled_scenario",
    "load_scenario",
    "parse_scenario",
    "quorum",
    "replica_owners",
    "run_scenario",
    "spread_zones",
    "stale_replicas",
    "with_vnodes",
    "zone_names",
    "zoned_nodes",
]
