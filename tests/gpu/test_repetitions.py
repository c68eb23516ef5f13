"""On the GPU: repetitions until the noise target, --repeat N exactly, what is not measured
twice, and CUPTI left unstarted where nothing uses it (memprof.core.measure, issue 24)."""

import pytest

from memprof import api
from memprof.core.measure import BATCH_TARGET_MS
from memprof.core.repetitions import DEFAULT_MAX_NOISE_PCT, FEWEST
from memprof.experiments.base import GATED_ONLY

pytestmark = pytest.mark.gpu


def test_without_repeat_each_measurement_stops_between_its_least_and_most_count():
    result = api.run("pinned", power=20)
    timing = result.timing
    assert (timing.max_noise_pct, timing.max_count) == (DEFAULT_MAX_NOISE_PCT, 10)
    allocations = [m for m in result.measurements if m.operation in ("alloc", "free")]
    assert allocations and all(FEWEST <= len(m.samples_ms) <= 10 for m in allocations)
    assert result.passed


def test_repeat_n_is_exactly_n_and_says_so():
    result = api.run("pinned", power=16, repeat=4, warmup=1)
    assert (result.timing.max_noise_pct, result.timing.max_count) == (None, None)
    allocations = [m for m in result.measurements if m.operation in ("alloc", "free")]
    assert allocations and all(len(m.samples_ms) == 4 for m in allocations)


def test_copies_longer_than_a_batch_take_their_single_copies_as_batches():
    result = api.run("sweep", powers=(25,), kinds=("pinned",), repeat=5, warmup=1)
    for m in (m for m in result.measurements if m.group == "gpu"):
        assert m.batch == 1 and len(m.throughput_ms) == 5  # the five copies, not run again
        assert min(m.throughput_ms) >= BATCH_TARGET_MS / 2
    assert result.passed


def test_check_times_with_gated_events_and_starts_no_cupti():
    result = api.run("check", power=16, device_power=12, repeat=2)
    assert result.timing.source == "events"
    assert result.timing.note == GATED_ONLY.format("check")
