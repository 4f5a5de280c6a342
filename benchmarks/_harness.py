"""The timing loop every benchmark shares: warm-up, interleaved repeats, min/median/max.

Contenders are timed in turn within each repeat (A B C, A B C, …) so that a noisy neighbour
slows all of them alike; ratios of medians are then the figures worth quoting. Run by hand,
never collected by pytest.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

__all__ = ["Timing", "print_paired_ratios", "print_table", "time_interleaved"]


@dataclass(frozen=True)
class Timing:
    """Seconds per operation over the repeats of one contender."""

    label: str
    per_op_s: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.per_op_s)

    @property
    def rate(self) -> float:
        """Operations per second at the median."""
        return 1 / self.median


def time_interleaved(
    contenders: Mapping[str, Callable[[], object]], ops: int, *, repeats: int = 7
) -> list[Timing]:
    """Time each contender `repeats` times, interleaved, after one warm-up call each.

    `ops` is the number of operations one call performs (for per-operation figures).
    """
    for function in contenders.values():
        function()  # warm-up: caches, lazy imports, allocator
    samples: dict[str, list[float]] = {label: [] for label in contenders}
    for _ in range(repeats):
        for label, function in contenders.items():
            start = time.perf_counter()
            function()
            samples[label].append((time.perf_counter() - start) / ops)
    return [Timing(label, tuple(values)) for label, values in samples.items()]


def print_table(title: str, timings: list[Timing], baseline: str, unit: str = "ns") -> None:
    """Print min/median/max per operation and each median as a ratio to `baseline`'s."""
    scale = {"ns": 1e9, "us": 1e6, "ms": 1e3, "s": 1.0}[unit]
    base = next(t for t in timings if t.label == baseline).median
    print(f"\n{title}")
    print(f"| contender | min ({unit}/op) | median ({unit}/op) | max ({unit}/op) | ops/s (median) "
          f"| time vs {baseline} |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|")
    for t in timings:
        print(
            f"| {t.label} | {min(t.per_op_s) * scale:,.1f} | {t.median * scale:,.1f} | "
            f"{max(t.per_op_s) * scale:,.1f} | {t.rate:,.0f} | {t.median / base:.2f}x |"
        )


def print_paired_ratios(timings: list[Timing], baseline: str) -> None:
    """Print each contender's median over repeats of (its time / `baseline`'s in that repeat).

    On a loaded machine a burst slows one repeat of everything timed next to each other; the
    ratio within a repeat cancels it where a ratio of medians taken apart may not.
    """
    base = next(t for t in timings if t.label == baseline).per_op_s
    for t in timings:
        if t.label != baseline:
            ratios = [ours / theirs for ours, theirs in zip(t.per_op_s, base, strict=True)]
            print(f"  {t.label} / {baseline}, median of per-repeat ratios: "
                  f"{statistics.median(ratios):.2f}x")  # fmt: skip
