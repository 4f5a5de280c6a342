"""What the token allocator balances: keyspace, or load observed at points of the ring.

A ring balances positions; an operator cares about bytes, requests and cost.
A :class:`Measure` gives each arc of a ring an amount (its length, or the sum of the observed
``(point, amount)`` samples that fall in it) and finds where to cut an arc so that a given amount
lies before the cut.

>>> measure = Measure([(10, 1.0), (20, 5.0), (30, 1.0)])
>>> measure.per_token(np.array([15, 25], dtype=np.uint64)).tolist()
[2.0, 5.0]
>>> measure.cut(0, 40, 3.0)
20
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ringkit.errors import ConfigError
from ringkit.ring import SPACE_64

__all__ = ["LoadSample", "Measure"]

LoadSample = tuple[int, float]
"""An observed point on the ring and what it weighs (bytes, requests)."""


class Measure:
    """The measure being balanced: keyspace (uniform), or observed points with amounts."""

    def __init__(self, samples: Sequence[LoadSample] | None) -> None:
        if samples is None:
            self.points = None
            return
        points = np.array([int(point) for point, _ in samples], dtype=np.uint64)
        amounts = np.array([float(amount) for _, amount in samples], dtype=np.float64)
        if len(points) == 0 or not np.all(np.isfinite(amounts)) or np.any(amounts < 0):
            raise ConfigError("load must be a non-empty list of (point, amount >= 0) pairs")
        if float(amounts.sum()) <= 0:
            raise ConfigError("load must have a positive total amount, got 0")
        order = np.argsort(points, kind="stable")
        self.points = points[order]
        self.cumulative = np.concatenate(([0.0], np.cumsum(amounts[order])))

    def per_token(
        self, tokens: np.ndarray[tuple[int], np.dtype[np.uint64]]
    ) -> np.ndarray[tuple[int], np.dtype[np.float64]]:
        """Return the amount of each token's arc (previous token, token]."""
        if self.points is None:
            lengths = np.diff(tokens, prepend=tokens[-1]).astype(np.float64)
            lengths[0] = float((int(tokens[0]) - int(tokens[-1])) % SPACE_64 or SPACE_64)
            return lengths
        index = np.searchsorted(tokens, self.points, side="left") % len(tokens)
        amounts = np.bincount(index, weights=np.diff(self.cumulative), minlength=len(tokens))
        return np.asarray(amounts, dtype=np.float64)

    def cut(self, start: int, end: int, amount: float) -> int | None:
        """Return a point p strictly inside (start, end) with about `amount` in (start, p]."""
        length = (end - start) % SPACE_64 or SPACE_64
        if length < 2:
            return None
        if self.points is None:
            return (start + min(max(1, int(amount)), length - 1)) % SPACE_64
        # uint64 subtraction wraps modulo 2**64: the offset of each point after `start`.
        offsets = self.points - np.uint64(start)
        inside = np.flatnonzero((offsets >= 1) & (offsets <= np.uint64(length - 1)))
        if len(inside) == 0:
            return None
        inside = inside[np.argsort(offsets[inside], kind="stable")]
        running = np.cumsum(np.diff(self.cumulative)[inside])
        at = min(int(np.searchsorted(running, amount, side="left")), len(inside) - 1)
        return int(self.points[inside[at]])
