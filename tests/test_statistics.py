import dataclasses
import math

import pytest

from memprof.model.statistics import Statistics, median_noise, noise_band


def test_statistics_of_samples_whose_mean_is_not_their_median():
    stats = Statistics.of([4.0, 1.0, 10.0, 2.0])
    assert stats.count == 4
    assert stats.total_ms == 17.0
    assert (stats.min_ms, stats.max_ms) == (1.0, 10.0)
    assert stats.mean_ms == 4.25
    assert stats.median_ms == 3.0  # the mean of the two middle samples, 2 and 4
    variance = sum((s - 4.25) ** 2 for s in (4.0, 1.0, 10.0, 2.0)) / 3  # n - 1
    assert stats.stdev_ms == pytest.approx(math.sqrt(variance))


def test_odd_count_median_is_the_middle_sample():
    stats = Statistics.of([9.0, 1.0, 2.0])
    assert stats.median_ms == 2.0
    assert stats.mean_ms == 4.0


def test_a_single_sample_has_no_spread():
    stats = Statistics.of([0.25])
    assert (stats.count, stats.total_ms) == (1, 0.25)
    assert (stats.min_ms, stats.median_ms, stats.max_ms) == (0.25, 0.25, 0.25)
    assert stats.stdev_ms == 0.0


def test_two_samples_use_the_sample_standard_deviation():
    assert Statistics.of([1.0, 3.0]).stdev_ms == pytest.approx(math.sqrt(2))


def test_sub_millisecond_samples_have_a_spread():
    assert Statistics.of([0.1, 0.3]).stdev_ms == pytest.approx(math.sqrt(0.02))


def test_statistics_are_values_that_cannot_be_changed():
    stats = Statistics.of([1.0, 2.0])
    with pytest.raises(dataclasses.FrozenInstanceError):
        stats.median_ms = 0.0
    assert stats == Statistics.of([2.0, 1.0]) and hash(stats) == hash(Statistics.of([1.0, 2.0]))


def test_the_spread_is_about_the_mean_even_when_the_median_is_zero():
    stats = Statistics.of([0.0, 0.0, 3.0])
    assert (stats.median_ms, stats.mean_ms) == (0.0, 1.0)
    assert stats.stdev_ms == pytest.approx(math.sqrt(3.0))


def test_zero_times_have_no_spread():
    assert Statistics.of([0.0, 0.0]).stdev_ms == 0.0


def test_total_is_exact_over_many_small_samples():
    assert Statistics.of([0.1] * 10).total_ms == 1.0  # math.fsum, not a running sum


@pytest.mark.parametrize("samples", [[], [1.0, -0.5], [math.nan], [math.inf], [2.0, -math.inf]])
def test_invalid_samples_are_refused(samples):
    with pytest.raises(ValueError):
        Statistics.of(samples)


def test_a_zero_sample_is_valid():
    assert Statistics.of([0.0, 2.0]).min_ms == 0.0


def test_a_refusal_names_what_was_wrong_and_the_samples():
    """The message is what an internal error or a refused file shows: it names the samples."""
    with pytest.raises(ValueError) as refused:
        Statistics.of([])
    assert str(refused.value) == "no samples to summarise"
    with pytest.raises(ValueError) as refused:
        Statistics.of([1.0, -0.5])
    assert str(refused.value) == "invalid timing sample in [1.0, -0.5]"


def test_a_medians_band_is_three_times_its_noise():
    """Median 1.0, median absolute deviation 0.05 over 4 samples: noise sqrt(pi/2) x 1.4826
    x 0.05 / sqrt(4) = 4.65%, a band of 13.9% (what one run's median alone could move)."""
    samples = [1.0, 1.0, 1.1, 0.9]
    noise = math.sqrt(math.pi / 2) * 1.4826 * 0.05 / 2
    assert median_noise(samples) == pytest.approx(noise)
    assert noise_band(samples) == pytest.approx(3 * noise) == pytest.approx(0.1394, abs=1e-4)
    assert noise_band([2.0]) == 0.0  # one sample: no spread seen, no band
