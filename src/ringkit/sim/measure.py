"""One streaming pass of the simulator: the owner of every key under several placements.

A pass reads the population chunk by chunk, asks each placement for the owner of every key (one
vectorised search for rings and ``hash % N``; ``node_for_many`` for any other placement) and sums
keys, bytes and requests per node, and the keys, bytes and requests whose owner differs between
pairs of placements. Memory is one chunk, plus the hash cache a run may keep.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ringkit.placement import Placement
from ringkit.ring import SPACE_64, HashRing
from ringkit.sim.population import CHUNK_KEYS, Chunk, HashCache
from ringkit.stats import METRICS
from ringkit.strategies.modulo import Modulo

if TYPE_CHECKING:
    from ringkit.sim.scenario import Scenario

__all__ = ["PassContext", "PassResult", "Progress", "measure_pass", "owner_indices"]

IndexArray = npt.NDArray[np.int64]
# Progress callback: (keys done in this pass, keys in this pass).
Progress = Callable[[int, int], None]


# -- owners of a chunk ---------------------------------------------------------------------------


def owner_indices(placement: Placement, chunk: Chunk, universe: dict[str, int]) -> IndexArray:
    """Return the owner of each key in `chunk` as an index into `universe` (name -> index).

    Rings and modulo are vectorised (one hash per key per hasher, cached in the chunk); any
    other placement answers through its ``node_for_many``.
    """
    lut = np.array([universe[node.name] for node in placement.nodes], dtype=np.int64)
    if isinstance(placement, HashRing):
        hashes = chunk.hashes(placement.hasher)
        if placement.space == SPACE_64:
            points = hashes << np.uint64(64 - placement.hasher.bits)
        else:
            points = hashes % np.uint64(placement.space)
        return lut[placement.owner_indices(points)]
    if isinstance(placement, Modulo):
        hashes = chunk.hashes(placement._hasher)
        return lut[(hashes % np.uint64(len(lut))).astype(np.int64)]
    names = placement.node_for_many(chunk.key_bytes)
    return np.fromiter((universe[name] for name in names), dtype=np.int64, count=len(names))


@dataclass(frozen=True, slots=True)
class PassContext:
    """What every pass of one run shares: the scenario, node indices, progress, hash cache."""

    scenario: Scenario
    universe: dict[str, int]
    progress: Progress | None
    cache: HashCache | None


@dataclass(frozen=True, slots=True)
class PassResult:
    loads: list[dict[str, npt.NDArray[np.float64]]]
    moved: list[dict[str, float]]


def measure_pass(
    ctx: PassContext, placements: Sequence[Placement], pairs: Sequence[tuple[int, int]] = ()
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
