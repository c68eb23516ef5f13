"""How many times a measurement repeats: the policy (Repetitions) and its loop.

Apart from the timing core (memprof.core.measure) so that what only reads a policy
(`--max-noise`'s default, a footnote's words) does not import it: `memprof report`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from memprof.model.statistics import median_noise

THROUGHPUT_BATCHES = 3  # batches per throughput figure with --repeat N, and at least this many

# The noise target, from benchmarks/noise.py (every long command, 2026-11-25/27): at 1% most
# figures settle in 5 to 9 samples, saving 11.4 s on the H200 (6.4 s on the H100); 0.5% saves
# 4.8 s (3.1 s), many figures never getting there; 2% saves 14.0 s (8.9 s) but lets pinned
# copies move by more than the 1% nvbandwidth agreement.
DEFAULT_MAX_NOISE_PCT = 1.0  # --max-noise: the relative noise of each median, in percent
MIN_COUNT = 5  # repetitions before the noise is trusted (a median of fewer says little)
FEWEST = 3  # ...or this many, where they already took the time cap (a median and its spread)
TIME_CAP_S = 0.1  # host seconds after which a measurement repeats no more (past MIN_COUNT)
MAX_COUNT = 10_000  # as --repeat allows


@dataclass(frozen=True)
class Repetitions:
    """How many times a measurement repeats: exactly `exactly` (--repeat N), or until the
    relative noise of its median is at most max_noise_pct percent, cap_s seconds are spent or
    `most` repetitions made (its Params' repeat: the noise target only ever saves time), and
    at least `minimum` times (FEWEST where those take longer than the cap: 1 GiB allocations)."""

    exactly: int | None = None
    max_noise_pct: float = DEFAULT_MAX_NOISE_PCT
    cap_s: float = TIME_CAP_S
    minimum: int = MIN_COUNT
    most: int = MAX_COUNT

    def given(self, repeat: int | None) -> Repetitions:
        """This policy, or exactly `repeat` times where a count is given."""
        return self if repeat is None else dataclasses.replace(self, exactly=repeat)

    def batches(self, batches: int | None) -> Repetitions:
        """The policy of back-to-back batches: `batches` where given; THROUGHPUT_BATCHES with
        --repeat N; else until the noise target, at least THROUGHPUT_BATCHES."""
        if batches is not None:
            return Repetitions(batches)
        if self.exactly is not None:
            return Repetitions(THROUGHPUT_BATCHES)
        most = max(THROUGHPUT_BATCHES, self.most)
        return dataclasses.replace(self, minimum=THROUGHPUT_BATCHES, most=most)

    def loop(self) -> RepetitionLoop:
        return RepetitionLoop(self)


class RepetitionLoop:
    """One measurement's repetitions: `while loop.more(series): repeat once`. series(), the
    samples so far per figure, is asked for only after the least count, then each time the
    count has grown by an eighth (the noise of n samples costs a sort of n)."""

    def __init__(self, policy: Repetitions) -> None:
        self.policy = policy
        self.count = 0  # repetitions begun
        self._started = time.perf_counter()
        self._check_at = policy.minimum

    def more(self, series: Callable[[], Iterable[Sequence[float]]]) -> bool:
        """Whether to repeat once more (counted here), given the samples so far."""
        needed = self._needed(series)
        self.count += needed
        return needed

    def _needed(self, series: Callable[[], Iterable[Sequence[float]]]) -> bool:
        policy, count = self.policy, self.count
        if policy.exactly is not None:
            return count < policy.exactly
        if count >= policy.most:
            return False
        if count < min(FEWEST, policy.minimum):
            return True
        if time.perf_counter() - self._started >= policy.cap_s:
            return False
        if count < self._check_at:  # policy.minimum at first, then an eighth more each time
            return True
        self._check_at = count + max(1, count // 8)
        return not all(median_noise(s) * 100 <= policy.max_noise_pct for s in series())
