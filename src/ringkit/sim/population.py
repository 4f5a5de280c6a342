"""Key populations for the simulator: named keys, value sizes and Zipf request popularity.

A :class:`Population` is ``count`` keys named ``f"{prefix}{i:0{width}d}"`` for ``i`` from
``start`` (the Gatepass example's ``booking-0001`` … ``booking-0300`` is the default), each with a
value size drawn from a :class:`Sizes` distribution and a request rate from Zipf's law: the key of
rank r (the r-th key) receives a share ``r**-s / H(count, s)`` of the requests (s = 0: all equal).
Equal key counts do not mean equal bytes or equal traffic (Zipf popularity: Breslau et al. 1999,
for web caches), and this is what shows it.

Keys are produced in chunks of numpy arrays (:meth:`Population.chunks`), so a hundred million
keys never sit in memory at once. Sizes are seeded per chunk, so the same seed gives the same
population however it is read.

>>> population = Population(count=3)
>>> [population.key(i) for i in range(3)]
['booking-0001', 'booking-0002', 'booking-0003']
>>> Population(count=3, zipf=1.0).request_shares(0, 3).round(3).tolist()
[0.545, 0.273, 0.182]
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from ringkit.errors import ConfigError
from ringkit.hashing import HASHERS, Hasher, HasherLike, get_hasher
from ringkit.sim.keyhash import hash_generated

__all__ = [
    "CHUNK_KEYS",
    "DISTRIBUTIONS",
    "MAX_KEY_WIDTH",
    "Chunk",
    "HashCache",
    "Population",
    "Sizes",
]

# One chunk: ~1M keys keeps every per-chunk array under ~10 MB.
CHUNK_KEYS = 1 << 20
# Zero-padding past this many digits only makes every key longer (and a chunk larger).
MAX_KEY_WIDTH = 1024
DISTRIBUTIONS: tuple[str, ...] = ("fixed", "uniform", "lognormal", "pareto")

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Sizes:
    """A distribution of value sizes in bytes.

    ``fixed``: every value is `size`. ``uniform``: integers in [`low`, `high`]. ``lognormal``:
    median `median`, shape `sigma`. ``pareto``: at least `minimum`, tail index `alpha` (heavy
    tailed: a few values dwarf the rest).
    """

    distribution: str = "fixed"
    size: float = 1024.0
    low: float = 1.0
    high: float = 65536.0
    median: float = 4096.0
    sigma: float = 1.0
    minimum: float = 1024.0
    alpha: float = 1.5

    def __post_init__(self) -> None:
        if self.distribution not in DISTRIBUTIONS:
            raise ConfigError(
                f"sizes distribution must be one of {', '.join(DISTRIBUTIONS)}, "
                f"got {self.distribution!r}"
            )
        for name in ("size", "low", "high", "median", "sigma", "minimum", "alpha"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ConfigError(f"sizes {name} must be a number > 0, got {value!r}")
        if self.low > self.high:
            raise ConfigError(f"sizes low must be <= high, got low={self.low!r} high={self.high!r}")

    def sample(self, rng: np.random.Generator, count: int) -> FloatArray:
        """Return `count` sizes drawn with `rng`."""
        if self.distribution == "fixed":
            return np.full(count, float(self.size))
        if self.distribution == "uniform":
            return rng.integers(int(self.low), int(self.high), count, endpoint=True).astype(float)
        if self.distribution == "lognormal":
            return np.round(rng.lognormal(math.log(self.median), self.sigma, count)) + 1.0
        return np.round(self.minimum * (1.0 + rng.pareto(self.alpha, count)))


HashCache = dict[tuple[int, Hasher], npt.NDArray[np.uint64]]


@dataclass(frozen=True, slots=True)
class Chunk:
    """Keys ``start`` … ``stop - 1`` of a population, with their sizes and request shares.

    The key names are made on first use, and hashes are computed once per hasher and kept in
    `cache` (shared across passes when the caller passes one to :meth:`Population.chunks`).
    """

    start: int
    stop: int
    sizes: FloatArray
    requests: FloatArray
    population: Population
    cache: HashCache = field(default_factory=dict, repr=False)
    _names: list[list[str]] = field(default_factory=list, repr=False)
    _encoded: list[list[bytes]] = field(default_factory=list, repr=False)

    def __len__(self) -> int:
        return self.stop - self.start

    @property
    def keys(self) -> list[str]:
        """The key names of this chunk."""
        if not self._names:
            self._names.append(self.population.names(self.start, self.stop))
        return self._names[0]

    @property
    def key_bytes(self) -> list[bytes]:
        """The keys of this chunk as the bytes they are hashed as (UTF-8)."""
        if not self._encoded:
            self._encoded.append(self.population.key_bytes(self.start, self.stop))
        return self._encoded[0]

    def hashes(self, hasher: HasherLike) -> npt.NDArray[np.uint64]:
        """Return the native hashes of the keys under `hasher` (computed once, then cached)."""
        resolved = get_hasher(hasher)
        cached = self.cache.get((self.start, resolved))
        if cached is None:
            cached = self.population.hashes(resolved, self.start, self.stop)
            self.cache[(self.start, resolved)] = cached
        return cached


@dataclass(frozen=True, slots=True)
class Population:
    """`count` keys with sizes and Zipf popularity; see the module docstring."""

    count: int = 300
    prefix: str = "booking-"
    start: int = 1
    width: int = 4
    sizes: Sizes = field(default_factory=Sizes)
    zipf: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 1:
            raise ConfigError(f"keys count must be an int >= 1, got {self.count!r}")
        if not isinstance(self.zipf, (int, float)) or not 0 <= self.zipf <= 10:
            raise ConfigError(f"zipf exponent must be in [0, 10], got {self.zipf!r}")
        if (
            isinstance(self.width, bool)
            or not isinstance(self.width, int)
            or not 0 <= self.width <= MAX_KEY_WIDTH
        ):
            # Before this, width = 100000000 made every key a 100 MB string
            raise ConfigError(
                f"keys width must be an int in [0, {MAX_KEY_WIDTH}], got {self.width!r}"
            )
        # Before this, numpy refuses negative seeds, mid-run, with a traceback
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ConfigError(f"seed must be an int >= 0, got {self.seed!r}")

    def key(self, i: int) -> str:
        """Return the name of key `i` (0-based; it has popularity rank ``i + 1``)."""
        return f"{self.prefix}{self.start + i:0{self.width}d}"

    def _format(self) -> str:
        # %-formatting through map() is the fastest way CPython names a million keys.
        return self.prefix.replace("%", "%%") + (f"%0{self.width}d" if self.width else "%d")

    def names(self, begin: int = 0, end: int | None = None) -> list[str]:
        """Return the names of keys `begin` … `end - 1`."""
        stop = self.count if end is None else min(end, self.count)
        return list(map(self._format().__mod__, range(self.start + begin, self.start + stop)))

    def hashes(self, hasher: Hasher, begin: int, end: int) -> npt.NDArray[np.uint64]:
        """Return the native hashes of keys `begin` … `end - 1` under `hasher`.

        Registered FNV-1a and XXH3 hashers run as numpy array operations on the generated keys
        (``ringkit.sim.keyhash``, exact); any other hasher is called once per key.
        """
        if HASHERS.get(hasher.name) == hasher:
            prefix = self.prefix.encode()
            first = self.start + begin
            fast = hash_generated(prefix, self.width, first, first + end - begin, hasher.name)
            if fast is not None:
                return fast
        # map() over ready-made bytes: no per-key encode or generator frame.
        return np.fromiter(
            map(hasher.function, self.key_bytes(begin, end)), dtype=np.uint64, count=end - begin
        )

    def key_bytes(self, begin: int = 0, end: int | None = None) -> list[bytes]:
        """Return keys `begin` … `end - 1` as UTF-8 bytes (what they are hashed as)."""
        stop = self.count if end is None else min(end, self.count)
        form = self._format().encode()
        return list(map(form.__mod__, range(self.start + begin, self.start + stop)))

    def _weights(self, begin: int, end: int) -> FloatArray:
        return np.arange(begin + 1, end + 1, dtype=np.float64) ** -float(self.zipf)

    def request_total(self) -> float:
        """Return ``H(count, s)``, the sum of the unnormalised Zipf weights (streamed)."""
        return math.fsum(
            float(self._weights(b, min(b + CHUNK_KEYS, self.count)).sum())
            for b in range(0, self.count, CHUNK_KEYS)
        )

    def request_shares(self, begin: int, end: int, total: float | None = None) -> FloatArray:
        """Return the request shares of keys `begin` … `end - 1` (all keys sum to 1)."""
        return self._weights(begin, end) / (self.request_total() if total is None else total)

    def chunks(self, size: int = CHUNK_KEYS, *, cache: HashCache | None = None) -> Iterator[Chunk]:
        """Yield the population in chunks of `size` keys, with sizes and request shares.

        Hashes land in `cache` when given (8 bytes per key per hasher), so later passes skip
        hashing; without it every pass hashes again and memory stays O(`size`).

        Runtime: O(count) to name and draw, streamed.
        """
        total = self.request_total()
        for index, begin in enumerate(range(0, self.count, size)):
            end = min(begin + size, self.count)
            rng = np.random.default_rng([self.seed, index, size])
            yield Chunk(
                start=begin,
                stop=end,
                sizes=self.sizes.sample(rng, end - begin),
                requests=self.request_shares(begin, end, total),
                population=self,
                cache={} if cache is None else cache,
            )
