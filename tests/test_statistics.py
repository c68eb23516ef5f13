import math

import pytest

from memprof.timing import Statistics


def test_statistics_of_samples():
    stats = Statistics.of([4.0, 1.0, 3.0, 2.0])
    assert stats.count == 4
    assert stats.total_ms == 10.0
    assert (stats.min_ms, stats.max_ms) == (1.0, 4.0)
    assert stats.mean_ms == 2.5
    assert stats.median_ms == 2.5
    assert stats.stdev_ms == pytest.approx(math.sqrt(5 / 3))  # sample standard deviation
    assert stats.relative_spread == pytest.approx(math.sqrt(5 / 3) / 2.5)


def test_a_single_sample_has_no_spread():
    stats = Statistics.of([0.25])
    assert (stats.median_ms, stats.stdev_ms, stats.relative_spread) == (0.25, 0.0, 0.0)


def test_odd_count_median_is_the_middle_sample():
    assert Statistics.of([9.0, 1.0, 5.0]).median_ms == 5.0


@pytest.mark.parametrize("samples", [[], [1.0, -0.5], [math.nan], [math.inf]])
def test_invalid_samples_are_refused(samples):
    with pytest.raises(ValueError):
        Statistics.of(samples)
