"""A migration plan: range reads grouped into waves, with a cost model for how long they take.

A :class:`Transfer` is one range read, "arc (a, b] from S to D" (or "n keys from S to D" when the
diff is over a key sample). Every transfer has a fixed setup cost (connection, snapshot,
handshake) and sources are many machines, so 256 small streams from 256 sources and one large
stream from one source are different migrations even when they move the same bytes. The cost
model says by how much: a transfer takes ``setup_s + size_bytes / bandwidth_bytes_per_s``, the
transfers run in *waves* in which no source serves more than ``max_streams_per_source`` streams
(and, if set, no destination receives more than ``max_streams_per_destination``), a wave lasts as
long as its longest transfer, and the plan as long as its waves together.

>>> plan = build_plan(
...     [("A", "D", 0, 10, 10, None, 2_000), ("B", "D", 20, 30, 10, None, 1_000)],
...     space=100, max_streams_per_source=1, setup_s=1.0,
...     bandwidth_bytes_per_s=1_000.0,
... )
>>> [str(t) for t in plan.transfers], plan.duration_s, plan.sources, plan.destinations
(['arc (0, 10] from A to D', 'arc (20, 30] from B to D'], 3.0, 2, 1)
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ringkit.errors import ConfigError
from ringkit.hashing import Key

__all__ = [
    "DEFAULT_BANDWIDTH_BYTES_PER_S",
    "DEFAULT_MAX_STREAMS",
    "DEFAULT_SETUP_S",
    "Candidate",
    "MigrationPlan",
    "Transfer",
    "arc_candidates",
    "build_plan",
    "check_plan_options",
    "check_sizes",
    "pair_candidates",
]

DEFAULT_SETUP_S = 0.5
DEFAULT_BANDWIDTH_BYTES_PER_S = 100_000_000.0  # about 1 Gbit/s per stream
DEFAULT_MAX_STREAMS = 4

# (source, destination, start, end, length, keys, size_bytes); start/end None for key transfers.
Candidate = tuple[str, str, int | None, int | None, int, int | None, int | None]


@dataclass(frozen=True, slots=True)
class Transfer:
    """One range read: the arc (start, end] from `source` to `destination`, in wave `wave`.

    `length` is the arc's length in points (partitions, slots; keys for a key-level transfer);
    `keys` and `size_bytes` are known when the plan was given keys (and sizes).
    """

    source: str
    destination: str
    start: int | None
    end: int | None
    length: int
    keys: int | None
    size_bytes: int | None
    duration_s: float
    wave: int

    def __str__(self) -> str:
        what = f"arc ({self.start}, {self.end}]" if self.start is not None else f"{self.keys} keys"
        return f"{what} from {self.source} to {self.destination}"


@dataclass(frozen=True, slots=True)
class MigrationPlan:
    """Transfers in waves, with the cost model's estimate.

    Invariant: in every wave each source serves at most ``max_streams_per_source`` transfers
    (each destination at most ``max_streams_per_destination``, when set). ``transfers`` are
    ordered by wave, then longest first.
    """

    transfers: tuple[Transfer, ...]
    wave_durations_s: tuple[float, ...]
    duration_s: float
    sources: int
    destinations: int
    max_streams_per_source: int
    max_streams_per_destination: int | None
    setup_s: float
    bandwidth_bytes_per_s: float

    @property
    def waves(self) -> tuple[tuple[Transfer, ...], ...]:
        """The transfers of each wave, in order."""
        grouped: list[list[Transfer]] = [[] for _ in self.wave_durations_s]
        for transfer in self.transfers:
            grouped[transfer.wave].append(transfer)
        return tuple(tuple(group) for group in grouped)

    @property
    def total_keys(self) -> int | None:
        """The keys moved by all transfers, when known."""
        counts = [t.keys for t in self.transfers]
        return None if None in counts else sum(c or 0 for c in counts)

    @property
    def total_bytes(self) -> int | None:
        """The bytes moved by all transfers, when known."""
        sizes = [t.size_bytes for t in self.transfers]
        return None if None in sizes else sum(s or 0 for s in sizes)


def check_plan_options(
    max_streams_per_source: int,
    max_streams_per_destination: int | None,
    setup_s: float,
    bandwidth_bytes_per_s: float,
) -> None:
    """Validate the plan's limits and cost model.

    :raises ConfigError: for a stream limit < 1, a negative setup time or a bandwidth <= 0
    """
    for name, value in (
        ("max_streams_per_source", max_streams_per_source),
        ("max_streams_per_destination", max_streams_per_destination),
    ):
        if value is None and name == "max_streams_per_destination":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{name} must be an int >= 1, got {value!r}")
    if not (isinstance(setup_s, (int, float)) and math.isfinite(setup_s) and setup_s >= 0):
        raise ConfigError(f"setup_s must be a finite number >= 0, got {setup_s!r}")
    if not (
        isinstance(bandwidth_bytes_per_s, (int, float))
        and math.isfinite(bandwidth_bytes_per_s)
        and bandwidth_bytes_per_s > 0
    ):
        raise ConfigError(
            f"bandwidth_bytes_per_s must be a finite number > 0, got {bandwidth_bytes_per_s!r}"
        )


def _duration(
    candidate: Candidate, space: int, total_bytes: int | None, setup_s: float, bandwidth: float
) -> float:
    length, size = candidate[4], candidate[6]
    if size is None:
        # Without sizes, bytes are the arc's share of the data, when its total is known.
        size_estimate = length / space * total_bytes if total_bytes else 0.0
        return setup_s + size_estimate / bandwidth
    return setup_s + size / bandwidth


def _waves(
    pairs: Sequence[tuple[str, str]], per_source: int, per_destination: int | None
) -> list[int]:
    """First-fit: each transfer (in the given order) goes to the first wave with room."""
    load: defaultdict[tuple[int, str, str], int] = defaultdict(int)
    lowest: defaultdict[tuple[str, str], int] = defaultdict(int)
    result = []
    for source, destination in pairs:
        wave = max(lowest["s", source], lowest["d", destination])
        while load[wave, "s", source] >= per_source or (
            per_destination is not None and load[wave, "d", destination] >= per_destination
        ):
            wave += 1
        load[wave, "s", source] += 1
        load[wave, "d", destination] += 1
        for side, node, limit in (("s", source, per_source), ("d", destination, per_destination)):
            while limit is not None and load[lowest[side, node], side, node] >= limit:
                lowest[side, node] += 1
        result.append(wave)
    return result


def build_plan(
    candidates: Sequence[Candidate],
    *,
    space: int,
    max_streams_per_source: int = DEFAULT_MAX_STREAMS,
    max_streams_per_destination: int | None = None,
    setup_s: float = DEFAULT_SETUP_S,
    bandwidth_bytes_per_s: float = DEFAULT_BANDWIDTH_BYTES_PER_S,
    total_bytes: int | None = None,
) -> MigrationPlan:
    """Return the plan for moving `candidates` (one per arc, or per pair for key samples).

    Transfers are placed longest first, each in the first wave where its source (and
    destination) has room, which keeps the long ones from stretching several waves.
    Runtime: O(T log T + T·w) for T transfers and w waves skipped per placement.

    :raises ConfigError: for invalid limits or cost model (see :func:`check_plan_options`)
    """
    check_plan_options(
        max_streams_per_source, max_streams_per_destination, setup_s, bandwidth_bytes_per_s
    )
    durations = [
        _duration(c, space, total_bytes, setup_s, bandwidth_bytes_per_s) for c in candidates
    ]
    order = sorted(
        range(len(candidates)),
        key=lambda i: (
            -durations[i],
            -candidates[i][4],
            candidates[i][0],
            candidates[i][1],
            candidates[i][2] or 0,
        ),
    )
    waves = _waves(
        [candidates[i][:2] for i in order], max_streams_per_source, max_streams_per_destination
    )
    transfers = [
        Transfer(*candidates[i], duration_s=durations[i], wave=wave)
        for i, wave in zip(order, waves, strict=True)
    ]
    transfers.sort(key=lambda t: t.wave)  # stable: longest first inside a wave
    wave_durations = [0.0] * (max(waves) + 1 if waves else 0)
    for transfer in transfers:
        wave_durations[transfer.wave] = max(wave_durations[transfer.wave], transfer.duration_s)
    return MigrationPlan(
        transfers=tuple(transfers),
        wave_durations_s=tuple(wave_durations),
        duration_s=math.fsum(wave_durations),
        sources=len({t.source for t in transfers}),
        destinations=len({t.destination for t in transfers}),
        max_streams_per_source=max_streams_per_source,
        max_streams_per_destination=max_streams_per_destination,
        setup_s=setup_s,
        bandwidth_bytes_per_s=bandwidth_bytes_per_s,
    )


def check_sizes(
    sizes: Iterable[int] | None, keys: Sequence[Key] | None
) -> npt.NDArray[np.int64] | None:
    """Return byte sizes aligned with `keys` as an int64 array, or None without sizes.

    :raises ConfigError: for sizes without keys, a length mismatch, or a negative size
    """
    if sizes is None:
        return None
    if keys is None:
        raise ConfigError("sizes need keys: pass keys= to plan() or to diff()")
    array = np.fromiter(sizes, dtype=np.int64)
    if len(array) != len(keys):
        raise ConfigError(
            f"sizes must align with keys: got {len(array)} sizes for {len(keys)} keys"
        )
    if len(array) and int(array.min()) < 0:
        raise ConfigError(f"sizes must be >= 0, got {int(array.min())!r}")
    return array


def arc_candidates(
    names: Sequence[str],
    pair_keys: npt.NDArray[np.int64],
    arcs: tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64], list[int]],
    hit_arcs: npt.NDArray[np.int64] | None,
    hit_sizes: npt.NDArray[np.int64] | None,
) -> list[Candidate]:
    """Return one candidate per arc, counting the keys (and bytes) that hit each.

    `pair_keys` encode ``source * len(names) + destination``; `arcs` are (starts, ends,
    lengths); `hit_arcs` is the arc of each key hit and `hit_sizes` its size.
    """
    starts, ends, lengths = arcs
    count = len(pair_keys)
    keys: list[int | None] = [None] * count
    sizes: list[int | None] = [None] * count
    if hit_arcs is not None:
        keys = list(np.bincount(hit_arcs, minlength=count).tolist())
        if hit_sizes is not None:
            totals = np.zeros(count, dtype=np.int64)
            np.add.at(totals, hit_arcs, hit_sizes)
            sizes = list(totals.tolist())
    width = len(names)
    return [
        (names[pair // width], names[pair % width], start, end, length, k, b)
        for pair, start, end, length, k, b in zip(
            pair_keys.tolist(), starts.tolist(), ends.tolist(), lengths, keys, sizes, strict=True
        )
    ]


def pair_candidates(
    names: Sequence[str],
    sources: npt.NDArray[np.int64],
    destinations: npt.NDArray[np.int64],
    sizes: npt.NDArray[np.int64] | None,
) -> list[Candidate]:
    """Return one key-level candidate per (source, destination) pair of key streams."""
    width = len(names)
    pairs = sources * width + destinations
    result: list[Candidate] = []
    for pair in np.unique(pairs).tolist():
        chosen = pairs == pair
        moved = int(np.count_nonzero(chosen))
        size = None if sizes is None else int(sizes[chosen].sum())
        result.append((names[pair // width], names[pair % width], None, None, moved, moved, size))
    return result
