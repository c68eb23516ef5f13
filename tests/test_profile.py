"""The nvprof-style profile: grouping, sorting and Time(%), from recorded and made-up inputs."""

import contextlib
from typing import ClassVar

import pytest

from memprof.core.measure import Profiler
from memprof.experiments import load as load_result
from memprof.model.results import Measurement
from memprof.output.profile import profile_rows

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
    result = load_result(FIXTURES / "h200_pinned_p20.json")
    rows = profile_rows(result.measurements)
    names = [r.name for r in rows]
    assert "[CUDA memcpy HtoD] (pageable)" in names and "[CUDA memcpy HtoD] (pinned)" in names
    for group in ("GPU activities", "API calls"):
        group_rows = [r for r in rows if r.group == group]
        assert sum(r.time_fraction for r in group_rows) == pytest.approx(1.0)
        totals = [r.stats.total_ms for r in group_rows]
        assert totals == sorted(totals, reverse=True)
    htod_pinned = next(r for r in rows if r.name == "[CUDA memcpy HtoD] (pinned)")
    assert htod_pinned.stats.count == 2 * result.parameters.repeat  # a and b, every run


class FakeEvent:
    """Stands in for pycuda.driver.Event: a clock the test advances."""

    clock_ms = 0.0
    log: ClassVar[list] = []

    def record(self, stream=None):
        self.at = FakeEvent.clock_ms
        FakeEvent.log.append("event")

    def synchronize(self):
        pass

    def time_since(self, start):
        return self.at - start.at


class FakeDriver:
    Event = FakeEvent

    @staticmethod
    def Stream():
        return "stream"


class FakeSession:
    cuda = FakeDriver

    def active(self):
        return contextlib.nullcontext(self)


class FakeGate:
    closed = False

    def close(self, stream):
        self.closed = True
        FakeEvent.log.append("close")

    def open(self):
        self.closed = False
        FakeEvent.log.append("open")

    def check(self):
        pass


class FakeActivity:
    """CUPTI as the profiler sees it: tags pushed around operations, records per tag."""

    def __init__(self, gpu_ms: dict[int, float], api: dict[int, list[tuple[str, float]]]):
        self.gpu_ms, self.api, self.pushed = gpu_ms, api, []
        self.last_tag = 0

    def new_tag(self):
        self.last_tag += 1
        return self.last_tag

    def paused(self):
        return contextlib.nullcontext()

    def push(self, tag):
        self.pushed.append(tag)

    def pop(self):
        pass

    def flush(self):
        pass

    def gpu_records(self):
        from memprof.core.activity import GpuRecord

        return {
            tag: [GpuRecord("memcpy", "HTOD", 0, int(ms * 1e6))] for tag, ms in self.gpu_ms.items()
        }

    def api_records(self):
        from memprof.core.activity import ApiRecord

        return {tag: [ApiRecord(n, ms) for n, ms in calls] for tag, calls in self.api.items()}


def make_profiler(activity=None):
    FakeEvent.clock_ms, FakeEvent.log = 0.0, []
    return Profiler(FakeSession(), activity, gate=FakeGate())


def test_profiler_records_only_timed_repetitions():
    profiler = make_profiler()
    durations = iter([5.0, 7.0, 1.0, 2.0, 4.0])

    def step():
        with profiler.events("gpu", "[CUDA memcpy HtoD]", "h2d", "pinned", 64):
            FakeEvent.clock_ms += next(durations)

    with profiler.api("cuMemAlloc", "alloc", "device", 64):  # set-up: never recorded
        pass
    profiler.repeat(step, warmup=2, repeat=3)
    [measurement] = profiler.measurements()
    assert measurement.samples_ms == [1.0, 2.0, 4.0]
    assert measurement.source == "events"
    assert (measurement.kind, measurement.bytes) == ("pinned", 64)


def test_asynchronous_operations_wait_behind_the_gate_synchronous_ones_do_not():
    profiler = make_profiler()

    def step():
        with profiler.events("gpu", "k", "kernel", "device", 4):
            FakeEvent.log.append("op")
        with profiler.events("gpu", "[CUDA memcpy HtoD]", "h2d", "pageable", 4, synchronous=True):
            FakeEvent.log.append("sync op")

    profiler.repeat(step, warmup=0, repeat=1)
    assert FakeEvent.log == [
        "close", "event", "op", "event", "open",  # gated: events bracket GPU work only
        "event", "sync op", "event",  # a blocking call never waits behind a closed gate
    ]  # fmt: skip


def test_a_span_gates_once_and_a_blocking_call_inside_releases_it():
    profiler = make_profiler()

    def step():
        with profiler.events("span", "flow", "flow", "pinned", 4):
            with profiler.events("gpu", "k", "kernel", "device", 4):
                FakeEvent.log.append("op")
            with profiler.events("gpu", "c", "h2d", "pageable", 4, synchronous=True):
                FakeEvent.log.append("sync op")

    profiler.repeat(step, warmup=0, repeat=1)
    assert FakeEvent.log == [
        "close",
        "event",
        "event",
        "op",
        "event",
        "open",
        "event",
        "sync op",
        "event",
        "event",
    ]


def test_an_operation_after_a_blocking_call_in_a_span_is_gated_on_its_own():
    profiler = make_profiler()

    def step():
        with profiler.events("span", "flow", "flow", "pageable", 4):
            with profiler.events("gpu", "c", "h2d", "pageable", 4, synchronous=True):
                FakeEvent.log.append("sync op")
            with profiler.events("gpu", "k", "kernel", "device", 4):
                FakeEvent.log.append("op")

    profiler.repeat(step, warmup=0, repeat=1)
    assert FakeEvent.log == [
        "close", "event", "open", "event", "sync op", "event",  # the span's gate opens
        "close", "event", "op", "event", "open",  # the kernel never times Python
        "event",
    ]  # fmt: skip


def test_cupti_records_replace_event_samples_and_make_the_api_rows():
    profiler = make_profiler(
        FakeActivity(
            gpu_ms={1: 0.5, 2: 0.25, 3: 0.75},
            api={1: [("cuMemcpyHtoDAsync_v2", 0.01), ("cuFuncSetBlockShape", 0.001)],
                 2: [("cuMemcpyHtoDAsync_v2", 0.02)], 3: [("cuMemcpyHtoDAsync_v2", 0.03)]},
        )
    )  # fmt: skip

    def step():
        with profiler.events("gpu", "[CUDA memcpy HtoD]", "h2d", "pinned", 64):
            FakeEvent.clock_ms += 3.0

    profiler.repeat(step, warmup=1, repeat=3)
    measurements = profiler.measurements()
    gpu = next(m for m in measurements if m.group == "gpu")
    assert gpu.samples_ms == [0.5, 0.25, 0.75]
    assert gpu.events_ms == [3.0, 3.0, 3.0]
    assert gpu.source == "cupti"
    api = {m.name: m for m in measurements if m.group == "api"}
    assert api["cuMemcpyHtoDAsync_v2"].samples_ms == [0.01, 0.02, 0.03]
    assert api["cuFuncSetBlockShape"].stats.count == 1
    assert profiler.activity.pushed == [1, 2, 3]  # the warm-up is not tagged


def test_events_stay_the_source_when_cupti_missed_an_operation():
    profiler = make_profiler(FakeActivity(gpu_ms={1: 0.5}, api={}))

    def step():
        with profiler.events("gpu", "k", "kernel", "device", 4):
            FakeEvent.clock_ms += 2.0

    profiler.repeat(step, warmup=0, repeat=2)
    [gpu] = profiler.measurements()
    assert (gpu.source, gpu.samples_ms) == ("events", [2.0, 2.0])


def test_throughput_batches_last_about_a_millisecond():
    profiler = make_profiler()

    def copy(stream):
        FakeEvent.clock_ms += 0.003

    profiler.throughput("[CUDA memcpy HtoD]", "h2d", "pinned", 4096, copy)
    [measurement] = profiler.measurements() or [
        profiler._measurement("gpu", "[CUDA memcpy HtoD]", "h2d", "pinned", 4096)
    ]
    assert measurement.batch == 128  # ceil(1 ms / 3 us) = 334, capped at MAX_BATCH
    assert measurement.throughput_ms == pytest.approx([0.003] * 3)


def test_throughput_of_slow_operations_is_one_per_batch():
    profiler = make_profiler()

    def copy(stream):
        FakeEvent.clock_ms += 0.4

    profiler.throughput("c", "h2d", "pinned", 1, copy)
    measurement = profiler._measurement("gpu", "c", "h2d", "pinned", 1)
    assert measurement.batch == 3  # ceil(1.0 / 0.4)


def test_profile_shows_cuptis_api_rows_instead_of_host_clock_ones():
    measurements = [
        Measurement("api", "cuMemcpyHtoDAsync", "h2d", "pinned", 8, [1.0], source="host"),
        Measurement("api", "cuMemcpyHtoDAsync_v2", "driver_call", None, 0, [0.5], source="cupti"),
    ]
    assert [r.name for r in profile_rows(measurements)] == ["cuMemcpyHtoDAsync_v2"]
    assert [r.name for r in profile_rows(measurements[:1])] == ["cuMemcpyHtoDAsync (pinned)"]
    # only an API row of CUPTI's replaces them: an operation of that name in another group not
    kernel = Measurement("gpu", "driver_call", "driver_call", None, 0, [2.0])
    assert [r.name for r in profile_rows([kernel, measurements[0]])] == [
        "driver_call",
        "cuMemcpyHtoDAsync (pinned)",
    ]


def test_profiler_host_clock_records_nothing_when_the_call_raises():
    profiler = make_profiler()
    with (
        profiler.timed(),
        pytest.raises(RuntimeError),
        profiler.api("cuMemAlloc", "alloc", "device", 8),
    ):
        raise RuntimeError("out of memory")
    assert profiler.measurements() == []
    with profiler.timed(), profiler.api("cuMemAlloc", "alloc", "device", 8):
        pass
    [measurement] = profiler.measurements()
    assert measurement.group == "api" and len(measurement.samples_ms) == 1


def test_unified_memory_rows_read_like_nvprofs_section():
    from memprof.output.profile import unified_memory_rows

    counters = {
        "BYTES_TRANSFER_HTOD": {"count": 4, "total": 4 << 20, "min": 64 << 10, "max": 2 << 20,
                                "time_ms": 0.5},
        "BYTES_TRANSFER_DTOH": {"count": 0, "total": 0, "min": 0, "max": 0, "time_ms": 0.0},
        "GPU_PAGE_FAULT": {"count": 3, "total": 40, "min": 5, "max": 20, "time_ms": 1.25},
        "CPU_PAGE_FAULT_COUNT": {"count": 7, "total": 7, "min": 1, "max": 1, "time_ms": 0.0},
    }  # fmt: skip
    rows, footer = unified_memory_rows(counters)
    assert rows[0][0] == "4" and rows[0][-1] == "Host To Device"
    assert rows[0][1:5] == ["1 MiB", "64 KiB", "2 MiB", "4 MiB"]
    assert [row[-1] for row in rows] == ["Host To Device", "Gpu page fault groups"]
    assert rows[1][0] == "3"
    assert footer == "Total CPU Page faults: 7"
