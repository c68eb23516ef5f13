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
        if any(not math.isfinite(s) or s < 0 for s in samples_ms):
            raise ValueError(f"invalid timing sample in {list(samples_ms)!r}")
        return cls(
            count=len(samples_ms),
            total_ms=math.fsum(samples_ms),
            min_ms=min(samples_ms),
            mean_ms=statistics.fmean(samples_ms),
            median_ms=statistics.median(samples_ms),
            max_ms=max(samples_ms),
            stdev_ms=statistics.stdev(samples_ms) if len(samples_ms) > 1 else 0.0,
        )

    @property
    def relative_spread(self) -> float:
        """Standard deviation over the mean: how noisy the run was."""
        return self.stdev_ms / self.mean_ms if self.mean_ms > 0 else 0.0
