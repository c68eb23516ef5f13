"""The nvprof-style profile: grouping, sorting and Time(%), from recorded and made-up inputs."""

import pytest

from memprof.profile import Profiler, profile_rows
from memprof.results import Measurement, Result

FIXTURES = __import__("pathlib").Path(__file__).parent / "fixtures"


def test_rows_are_grouped_gpu_first_and_sorted_by_total_time():
    measurements = [
        Measurement("api", "cuMemAlloc", "alloc", "device", 8, [1.0, 1.0]),
        Measurement("gpu", "[CUDA memcpy HtoD]", "h2d", "pinned", 8, [0.5, 0.5]),
        Measurement("gpu", "[CUDA memcpy DtoH]", "d2h", "pinned", 8, [3.0]),
        Measurement("api", "cuMemcpyHtoD", "h2d", "pinned", 8, [6.0]),
        Measurement("host", "numpy.empty + first touch", "alloc", "pageable", 8, [9.0]),
        Measurement("span", "flow", "flow", "pinned", 8, [9.0]),
    ]
    rows = profile_rows(measurements)
    assert [(r.group, r.name) for r in rows] == [
        ("GPU activities", "[CUDA memcpy DtoH] (pinned)"),
        ("GPU activities", "[CUDA memcpy HtoD] (pinned)"),
        ("API calls", "cuMemcpyHtoD (pinned)"),
        ("API calls", "cuMemAlloc (device)"),
    ]
    assert rows[0].time_fraction == pytest.approx(0.75)
    assert rows[1].time_fraction == pytest.approx(0.25)
    assert rows[2].time_fraction == pytest.approx(0.75)
    assert rows[3].stats.count == 2


def test_one_name_at_several_sizes_folds_into_one_row():
    measurements = [
        Measurement("gpu", "k(float*)", "kernel", "mapped", 8, [1.0]),
        Measurement("gpu", "k(float*)", "kernel", "mapped", 16, [2.0, 3.0]),
    ]
    [row] = profile_rows(measurements)
    assert (row.stats.count, row.stats.total_ms, row.stats.max_ms) == (3, 6.0, 3.0)


def test_pinned_fixture_profile_keeps_memory_kinds_apart():
    result = Result.load(FIXTURES / "h200_pinned_p20.json")
    rows = profile_rows(result.measurements)
    names = [r.name for r in rows]
    assert "[CUDA memcpy HtoD] (pageable)" in names and "[CUDA memcpy HtoD] (pinned)" in names
    for group in ("GPU activities", "API calls"):
        group_rows = [r for r in rows if r.group == group]
        assert sum(r.time_fraction for r in group_rows) == pytest.approx(1.0)
        totals = [r.stats.total_ms for r in group_rows]
        assert totals == sorted(totals, reverse=True)
    htod_pinned = next(r for r in rows if r.name == "[CUDA memcpy HtoD] (pinned)")
    assert htod_pinned.stats.count == 2 * result.parameters["repeat"]  # a and b, every run


class FakeEvent:
    """Stands in for pycuda.driver.Event: a clock the test advances."""

    clock_ms = 0.0

    def record(self, stream=None):
        self.at = FakeEvent.clock_ms

    def synchronize(self):
        pass

    def time_since(self, start):
        return self.at - start.at


class FakeDriver:
    Event = FakeEvent


def test_profiler_records_events_and_skips_warmups():
    profiler = Profiler(FakeDriver())
    durations = iter([5.0, 7.0, 1.0, 2.0, 3.0])

    def step():
        with profiler.events("gpu", "[CUDA memcpy HtoD]", "h2d", "pinned", 64):
            FakeEvent.clock_ms += next(durations)

    profiler.repeat(step, warmup=2, repeat=3)
    [measurement] = profiler.measurements()
    assert measurement.samples_ms == [1.0, 2.0, 3.0]
    assert (measurement.kind, measurement.bytes) == ("pinned", 64)


def test_profiler_host_clock_records_nothing_when_the_call_raises():
    profiler = Profiler(FakeDriver())
    with pytest.raises(RuntimeError), profiler.api("cuMemAlloc", "alloc", "device", 8):
        raise RuntimeError("out of memory")
    assert profiler.measurements() == []
    with profiler.api("cuMemAlloc", "alloc", "device", 8):
        pass
    [measurement] = profiler.measurements()
    assert measurement.group == "api" and len(measurement.samples_ms) == 1
