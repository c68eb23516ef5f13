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
        count = len(samples_ms)
        if count == 1:  # most of a large trace's figures: one call each
            only = float(samples_ms[0])
            return cls(1, only, only, only, only, only, 0.0)
        ordered = sorted(samples_ms)
        total = math.fsum(ordered)
        mean = total / count
        middle = count // 2
        median = ordered[middle] if count % 2 else (ordered[middle - 1] + ordered[middle]) / 2
        # two passes in floats (as numpy does): statistics.stdev's exact fractions cost
        # seconds over the 10^6 samples of a large trace's profile
        squares = math.fsum((sample - mean) ** 2 for sample in ordered)
        return cls(
            count=count,
            total_ms=total,
            min_ms=ordered[0],
            mean_ms=mean,
            median_ms=median,
            max_ms=ordered[-1],
            stdev_ms=math.sqrt(squares / (count - 1)),
        )


# The standard error of a median of n normal samples is sqrt(pi / 2) sigma / sqrt(n), and
# 1.4826 x the median absolute deviation estimates sigma without letting outliers in.
_MEDIAN_ERROR = math.sqrt(math.pi / 2) * 1.4826
# A change is real beyond this many times the medians' combined noise (diff, fleet, pinlimit).
NOISE_SIGMAS = 3


def median_noise(samples_ms: Sequence[float]) -> float:
    """The relative noise of the samples' median: a robust estimate of its standard error
    (from the median absolute deviation) over the median; 0 under two samples or at 0."""
    count = len(samples_ms)
    if count < 2:
        return 0.0
    median = statistics.median(samples_ms)
    if median <= 0:
        return 0.0
    deviation = statistics.median(abs(sample - median) for sample in samples_ms)
    return _MEDIAN_ERROR * deviation / math.sqrt(count) / median


def noise_band(samples_ms: Sequence[float]) -> float:
    """The relative change one median's own noise could explain: NOISE_SIGMAS times it."""
    return NOISE_SIGMAS * median_noise(samples_ms)


def repetitions_words(sample_lists: Sequence[Sequence[float]], unit: str = "") -> str:
    """For a footnote: "5 to 40 batches, noise at most 0.8%" ("" where there are none)."""
    counts = sorted({len(samples) for samples in sample_lists})
    if not counts:
        return ""
    count = f"{counts[0]} to {counts[-1]}" if len(counts) > 1 else f"{counts[0]}"
    noise = max(median_noise(samples) for samples in sample_lists)
    return f"{count}{f' {unit}' if unit else ''}, noise at most {noise:.1%}"
