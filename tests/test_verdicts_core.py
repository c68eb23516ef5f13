"""The arithmetic under every verdict, at its edges: the median after sorting, verification
exact (one float32 step apart fails), every chunk of a pipeline written, a host batch's time
per operation, the span of a run on several streams (the latest end, whichever lane), and
which trace copies blocked the host, were small, and how long their calls took.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from memprof.core import measure
from memprof.core.activity import ApiRecord, GpuRecord
from memprof.core.measure import Placed, engine_timeline, on_one_clock, records_timeline
from memprof.core.verify import compare_arrays
from memprof.experiments import streams
from memprof.model.statistics import Statistics
from memprof.trace.collect import (
    SMALL_COPY_BYTES,
    copy_groups,
    is_blocking,
)
from memprof.trace.where import outermost_calls
from tests.test_profile import FakeSession

# -- statistics -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("samples", "median"),
    [
        ([5.0, 1.0, 3.0], 3.0),
        ([9.0, 7.0, 1.0, 2.0, 8.0], 7.0),
        ([4.0, 1.0, 3.0, 2.0], 2.5),
        ([1.0, 9.0, 2.0, 8.0, 3.0, 7.0], 5.0),
    ],
)
def test_the_median_is_the_middle_of_the_sorted_samples(samples, median):
    assert Statistics.of(samples).median_ms == median


def test_the_spread_is_the_sample_standard_deviation():
    assert Statistics.of([1.0, 3.0]).stdev_ms == pytest.approx(math.sqrt(2.0))
    assert Statistics.of([2.0, 4.0, 6.0]).stdev_ms == pytest.approx(2.0)


# -- verification -------------------------------------------------------------------------------


def test_verification_is_exact_one_float32_step_apart_fails():
    expected = np.linspace(1.0, 2.0, 1000, dtype=np.float32)
    assert compare_arrays("same", expected.copy(), expected).passed
    nearby = expected.copy()
    nearby[500] = np.nextafter(nearby[500], np.float32(3.0))  # 1 ulp: isclose would pass it
    check = compare_arrays("one ulp", nearby, expected)
    assert not check.passed
    assert "1 of 1000 elements differ; first at index 500" in check.detail
    big = np.full(4, 1e30, np.float32)
    off = big.copy()
    off[3] = np.nextafter(off[3], np.float32(np.inf))
    assert not compare_arrays("large values", off, big).passed


def test_arrays_of_the_same_size_and_another_shape_do_not_match():
    expected = np.arange(6, dtype=np.float32)
    check = compare_arrays("reshaped", expected.reshape(2, 3), expected)
    assert not check.passed
    assert check.detail == "shape (2, 3) != (6,)"


def test_a_pipeline_wrong_at_its_last_element_fails_however_many_elements_are_sampled():
    values = np.arange(3 * streams.SAMPLE_ELEMENTS, dtype=np.float32)
    received = streams.reference(values, 3)
    received[-1] += 1.0
    check = streams._verify(received, values, 3, "last element wrong")
    assert not check.passed


def test_a_pipeline_chunk_never_copied_back_fails_even_where_the_rest_is_right():
    values = np.arange(4096, dtype=np.float32)
    received = streams.reference(values, 3)
    assert streams._verify(received.copy(), values, 3, "all").passed
    received[1024:2048] = np.nan  # one chunk of four left as poisoned
    check = streams._verify(received, values, 3, "one chunk missing")
    assert not check.passed
    assert check.detail == "element 1024 was never copied back"


# -- the measuring core ---------------------------------------------------------------------


def test_a_host_batch_is_timed_per_operation(monkeypatch):
    clock = {"ns": 0}
    monkeypatch.setattr(measure.time, "perf_counter_ns", lambda: clock["ns"])

    def action() -> None:
        clock["ns"] += 20_000  # 20 us each

    profiler = measure.Profiler(FakeSession(), gate=object())
    profiler.host_throughput("memcpy", "staging_h2d", "pageable", 1 << 20, action, batches=2)
    (m,) = profiler._measurements.values()
    assert m.batch == measure.batch_size(0.02) == 50
    assert m.throughput_ms == pytest.approx([0.02, 0.02])
    assert m.samples_ms == m.throughput_ms and m.source == "host"


def test_a_run_on_several_streams_lasts_until_its_latest_end_on_any_lane():
    rows = [
        Placed(0, 0, "h2d", 1.0, 2.0),
        Placed(0, 1, "kernel", 2.0, 9.0),  # lane 0 ends last
        Placed(1, 0, "h2d", 2.0, 3.0),
        Placed(1, 1, "d2h", 3.0, 4.0),
    ]
    timeline, total_ms = on_one_clock(rows)
    assert total_ms == 8.0  # 1.0 to 9.0
    assert timeline[0].start_ms == 0.0


def test_an_operation_starts_when_its_engine_is_free_not_when_its_stream_reached_it():
    rows = [Placed(0, 0, "h2d", 0.0, 2.0), Placed(1, 0, "h2d", 0.0, 4.0)]
    assert engine_timeline(rows) == [Placed(0, 0, "h2d", 0.0, 2.0), Placed(1, 0, "h2d", 2.0, 4.0)]


def test_an_operation_of_several_records_spans_them_all_and_takes_their_sum():
    op = measure.StreamOperation(0, 0, "h2d", "[CUDA memcpy HtoD]", "pinned", 8, lambda s: None)
    records = {7: [GpuRecord("memcpy", "HTOD", 3_000_000, 4_000_000),
                   GpuRecord("memcpy", "HTOD", 1_000_000, 2_000_000)]}  # fmt: skip
    rows, durations = records_timeline([(op, 7)], records)
    assert (rows[0].start_ms, rows[0].end_ms) == (0.0, 3.0)
    assert durations == [pytest.approx(2.0)]


# -- trace's copies -----------------------------------------------------------------------------


def copy(nbytes: int, asynchronous: bool, src: str = "pinned", correlation: int = 0) -> GpuRecord:
    return GpuRecord("memcpy", "HTOD", 0, 1000, nbytes, src, "device", asynchronous, correlation)


@pytest.mark.parametrize(
    ("record", "blocks"),
    [
        (copy(4096, asynchronous=True), False),
        (copy(4096, asynchronous=False), True),  # cuMemcpyHtoD: synchronous
        (copy(4096, asynchronous=True, src="pageable"), True),  # staged by the driver
        (copy(4096, asynchronous=False, src="pageable"), True),
    ],
)
def test_a_copy_blocks_the_host_when_synchronous_or_from_pageable_memory(record, blocks):
    assert is_blocking(record) is blocks


def test_a_runtime_call_and_the_driver_call_inside_it_count_once_the_longer():
    calls = outermost_calls(
        [ApiRecord("cudaMemcpy", 0.5, 11), ApiRecord("cuMemcpyHtoD_v2", 0.4, 11),
         ApiRecord("cuMemcpyHtoD_v2", 0.2, 12)]
    )  # fmt: skip
    assert {key: call.duration_ms for key, call in calls.items()} == {11: 0.5, 12: 0.2}


def test_a_copy_is_small_under_64_kib_and_not_at_it():
    assert SMALL_COPY_BYTES == 64 << 10
    records = [
        copy(SMALL_COPY_BYTES - 1, True, correlation=1),
        copy(SMALL_COPY_BYTES, True, correlation=2),
    ]
    (group,) = copy_groups(records, [])
    assert (group.calls, group.small_calls, group.small_bytes) == (2, 1, SMALL_COPY_BYTES - 1)
