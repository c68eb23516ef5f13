"""Statistics over timed samples. Every sample is kept; the figures are derived, never stored."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Statistics:
    """Summary of repeated timings of one thing, all in milliseconds."""

    count: int
    total_ms: float
    min_ms: float
    mean_ms: float
    median_ms: float
    max_ms: float
    stdev_ms: float  # sample standard deviation; 0 for a single sample

    @classmethod
    def of(cls, samples_ms: Sequence[float]) -> Statistics:
        if not samples_ms:
            raise ValueError("no samples to summarise")
        if not all(map(math.isfinite, samples_ms)) or min(samples_ms) < 0:
            raise ValueError(f"invalid timing sample in {list(samples_ms)!r}")
        count, total = len(samples_ms), math.fsum(samples_ms)
        mean = total / count
        # two passes in floats (as numpy does): statistics.stdev's exact fractions cost
        # seconds over the 10^6 samples of a large trace's profile
        squares = math.fsum((sample - mean) ** 2 for sample in samples_ms)
        return cls(
            count=count,
            total_ms=total,
            min_ms=min(samples_ms),
            mean_ms=statistics.fmean(samples_ms),
            median_ms=statistics.median(samples_ms),
            max_ms=max(samples_ms),
            stdev_ms=math.sqrt(squares / (count - 1)) if count > 1 else 0.0,
        )

    @property
    def relative_spread(self) -> float:
        """Standard deviation over the mean: how noisy the run was."""
        return self.stdev_ms / self.mean_ms if self.mean_ms > 0 else 0.0
