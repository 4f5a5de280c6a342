"""One streaming pass of the simulator: the owner of every key under several placements.

A pass reads the population chunk by chunk, asks each placement for the owner of every key (from
the chunk's cached hashes when the placement routes by its hash alone,
``owner_indices_for_hashes``; ``node_for_many`` for any other placement) and sums
keys, bytes and requests per node, and the keys, bytes and requests whose owner differs between
pairs of placements. Memory is one chunk, plus the hash cache a run may keep.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from ringkit.placement import Placement
from ringkit.sim.population import CHUNK_KEYS, Chunk, HashCache, Population
from ringkit.stats import METRICS

__all__ = ["Measured", "PassContext", "PassResult", "Progress", "measure_pass", "owner_indices"]

IndexArray = npt.NDArray[np.int64]
# Progress callback: (keys done in this pass, keys in this pass).
Progress = Callable[[int, int], None]


# -- owners of a chunk ---------------------------------------------------------------------------


def owner_indices(placement: Placement, chunk: Chunk, universe: dict[str, int]) -> IndexArray:
    """Return the owner of each key in `chunk` as an index into `universe` (name -> index).

    A placement that routes by the key hash alone answers from the chunk's hashes (one hash
    per key per hasher, cached in the chunk); any other answers through its ``node_for_many``.
    """
    hasher = placement.hasher
    if placement.routes_by_hash and hasher is not None:
        lut = np.array([universe[node.name] for node in placement.nodes], dtype=np.int64)
        return lut[placement.owner_indices_for_hashes(chunk.hashes(hasher))]
    names = placement.node_for_many(chunk.key_bytes)
    return np.fromiter((universe[name] for name in names), dtype=np.int64, count=len(names))


class Measured(Protocol):
    """What a pass reads of the scenario it measures (a :class:`~ringkit.sim.scenario.Scenario`)."""

    @property
    def population(self) -> Population: ...


ScenarioT = TypeVar("ScenarioT", bound=Measured)


@dataclass(frozen=True, slots=True)
class PassContext(Generic[ScenarioT]):
    """What every pass of one run shares: the scenario, node indices, progress, hash cache."""

    scenario: ScenarioT
    universe: dict[str, int]
    progress: Progress | None
    cache: HashCache | None


@dataclass(frozen=True, slots=True)
class PassResult:
    loads: list[dict[str, npt.NDArray[np.float64]]]
    moved: list[dict[str, float]]


def measure_pass(
    ctx: PassContext[ScenarioT],
    placements: Sequence[Placement],
    pairs: Sequence[tuple[int, int]] = (),
) -> PassResult:
    """One streaming pass: loads of each placement, and moved shares between index pairs."""
    universe, progress = ctx.universe, ctx.progress
    size = len(universe)
    loads = [{m: np.zeros(size) for m in METRICS} for _ in placements]
    moved = [dict.fromkeys(METRICS, 0.0) for _ in pairs]
    total_bytes = 0.0
    population = ctx.scenario.population
    for chunk in population.chunks(CHUNK_KEYS, cache=ctx.cache):
        owners = [owner_indices(p, chunk, universe) for p in placements]
        weights = {"keys": None, "bytes": chunk.sizes, "requests": chunk.requests}
        for owner, load in zip(owners, loads, strict=True):
            for metric in METRICS:
                load[metric] += np.bincount(owner, weights=weights[metric], minlength=size)
        for (i, j), shares in zip(pairs, moved, strict=True):
            differ = owners[i] != owners[j]
            shares["keys"] += float(np.count_nonzero(differ))
            shares["bytes"] += float(chunk.sizes[differ].sum())
            shares["requests"] += float(chunk.requests[differ].sum())
        total_bytes += float(chunk.sizes.sum())
        if progress is not None:
            progress(chunk.stop, population.count)
    for shares in moved:
        shares["keys"] /= population.count
        shares["bytes"] /= total_bytes
    return PassResult(loads, moved)
