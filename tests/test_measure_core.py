"""The measuring core with fakes (no GPU): concurrent batches on several lanes, batch sizes,
the event-overhead correction, labels and declarations; what each figure is made of."""

from __future__ import annotations

import contextlib
from typing import ClassVar

import pytest

from memprof.core import measure
from memprof.core.measure import (
    BATCH_TARGET_MS,
    MAX_BATCH,
    Lane,
    Profiler,
    UndeclaredMeasurement,
    batch_size,
    concurrent,
)
from memprof.errors import ExitCode
from tests.test_profile import FakeActivity, FakeEvent, FakeSession


class LoggingGate:
    """A GPU-side gate whose closing and opening is logged with its lane's name."""

    def __init__(self, name: str) -> None:
        self.name, self.closed = name, False

    def close(self, stream):
        self.closed = True
        FakeEvent.log.append(f"close {self.name}")

    def open(self):
        self.closed = False
        FakeEvent.log.append(f"open {self.name}")

    def check(self):
        FakeEvent.log.append(f"check {self.name}")


class CountingActivity(FakeActivity):
    pauses: ClassVar[list[str]] = []

    def __init__(self) -> None:
        super().__init__({}, {})

    @contextlib.contextmanager
    def paused(self):
        CountingActivity.pauses.append("pause")
        yield
        CountingActivity.pauses.append("resume")


def lane_profiler(name: str, activity=None) -> Profiler:
    return Profiler(FakeSession(), activity, gate=LoggingGate(name))


def operation(milliseconds: float, name: str):
    def action(stream) -> None:
        FakeEvent.clock_ms += milliseconds
        FakeEvent.log.append(name)

    return action


@pytest.fixture(autouse=True)
def clock():
    FakeEvent.clock_ms, FakeEvent.log = 0.0, []
    CountingActivity.pauses = []


def test_batch_size_aims_at_a_millisecond_within_bounds():
    assert batch_size(0.01) == 100
    assert batch_size(0.3) == 4  # ceil(1 / 0.3)
    assert batch_size(1.0) == 1
    assert batch_size(50.0) == 1  # a slow operation is a batch of one
    assert batch_size(1e-9) == MAX_BATCH  # a zero-time operation: the cap, not a division by 0
    assert batch_size(0.2, target_ms=20.0) == 100
    assert BATCH_TARGET_MS == 1.0 and MAX_BATCH == 128


def test_concurrent_lanes_queue_every_batch_before_any_gate_opens():
    first, second = lane_profiler("A"), lane_profiler("B")
    lanes = [
        Lane(first, operation(0.01, "a"), "[CUDA memcpy HtoD]", "h2d", "pinned", 4096, (0,)),
        Lane(second, operation(0.04, "b"), "[CUDA memcpy HtoD]", "h2d", "pinned", 4096, (1,)),
    ]
    concurrent(lanes, batches=2, warmup=1)
    # sized on the slower lane's one operation: ceil(1 / 0.04) = 25 per batch
    a = first._measurement("gpu", "[CUDA memcpy HtoD]", "h2d", "pinned", 4096, (0,))
    b = second._measurement("gpu", "[CUDA memcpy HtoD]", "h2d", "pinned", 4096, (1,))
    assert a.batch == b.batch == 25
    assert a.throughput_ms == pytest.approx([0.01, 0.01])  # its own batch's time / 25
    assert b.throughput_ms == pytest.approx([0.04, 0.04])
    assert a.samples_ms == a.throughput_ms and a.source == "events"  # no single operations
    assert (a.gpus, b.gpus) == ((0,), (1,))
    one_batch = ["close A", "event", *["a"] * 25, "event", "close B", "event", *["b"] * 25,
                 "event", "open A", "open B", "check A", "check B"]  # fmt: skip
    sizing = ["close A", "event", "a", "event", "close B", "event", "b", "event",
              "open A", "open B", "check A", "check B"]  # fmt: skip
    assert FakeEvent.log == sizing + one_batch * 3  # one warm-up batch, then two timed


def test_lanes_keep_their_single_operations_as_samples():
    profiler = lane_profiler("A")
    measurement = profiler._measurement("gpu", "c", "h2d", "pinned", 8)
    measurement.samples_ms = [0.5, 0.6]
    concurrent([Lane(profiler, operation(0.1, "c"), "c", "h2d", "pinned", 8)], batches=3)
    assert measurement.samples_ms == [0.5, 0.6]  # the latency stays one copy's
    assert measurement.throughput_ms == pytest.approx([0.1] * 3)
    assert measurement.batch == 10


def test_cupti_is_paused_during_batches_once_per_log():
    shared = CountingActivity()
    lanes = [
        Lane(lane_profiler("A", shared), operation(0.5, "a"), "c", "h2d", None, 8),
        Lane(lane_profiler("B", shared), operation(0.5, "b"), "c", "h2d", None, 8),
    ]
    concurrent(lanes, batches=1)
    assert CountingActivity.pauses == ["pause", "resume"]


def test_synchronous_operations_run_alone_and_ungated():
    profiler = lane_profiler("A")
    concurrent([Lane(profiler, operation(0.5, "s"), "c", "h2d", "pageable", 8)], True, batches=1)
    assert "close A" not in FakeEvent.log
    assert profiler._measurement("gpu", "c", "h2d", "pageable", 8).throughput_ms == [0.5]
    with pytest.raises(ValueError, match="cannot run concurrently"):
        concurrent([Lane(profiler, operation(0.1, "s"), "c", "h2d", None, 8)] * 2, True)


def test_throughput_is_not_measured_while_paused():
    profiler = lane_profiler("A")
    with profiler.paused():
        profiler.throughput("c", "h2d", "pinned", 8, operation(0.1, "c"))
    assert FakeEvent.log == [] and profiler._measurements == {}


def test_events_without_cupti_lose_the_empty_gated_pairs_interval():
    profiler = lane_profiler("A")
    profiler._event_overhead_ms = 0.25  # measured once per profiler

    def step():
        with profiler.events("gpu", "k", "kernel", "device", 4):
            FakeEvent.clock_ms += 1.0
        with profiler.events("gpu", "tiny", "kernel", "mapped", 4):
            FakeEvent.clock_ms += 0.1  # less than the overhead: never negative
        with profiler.events("span", "flow", "flow", "pinned", 4):
            FakeEvent.clock_ms += 2.0  # a span keeps its own

    profiler.repeat(step, warmup=0, repeat=2)
    found = {m.name: m.samples_ms for m in profiler.measurements()}
    assert found == {
        "k": pytest.approx([0.75, 0.75]),
        "tiny": [0.0, 0.0],
        "flow": pytest.approx([2.0, 2.0]),
    }
    assert profiler.timing_info().event_overhead_ms == 0.25


def test_the_event_overhead_is_the_median_of_empty_gated_pairs():
    profiler = lane_profiler("A")
    gaps = iter([0.001] * 10 + [0.002] * 12 + [0.05] * 10)  # 32 intervals, a few outliers

    class Spaced(FakeEvent):
        def record(self, stream=None):
            FakeEvent.clock_ms += next(gaps, 0.0)
            super().record(stream)

    profiler._cuda = type("Driver", (), {"Event": Spaced})
    assert profiler.event_overhead_ms() == pytest.approx(0.002)
    assert profiler.event_overhead_ms() == pytest.approx(0.002)  # cached


def test_timing_info_says_where_figures_came_from():
    events = Profiler(FakeSession(), None, "cupti-python is not installed", gate=LoggingGate("A"))
    events._event_overhead_ms = 0.001
    info = events.timing_info()
    assert (info.source, info.note) == ("events", "cupti-python is not installed")
    assert info.unified_memory is None
    assert info.unified_memory_note == "cupti-python is not installed"

    class Counting(CountingActivity):
        unified_memory_refusal = None

        def unified_memory_totals(self):
            return {"GPU_PAGE_FAULT": {"count": 2}}

    cupti = Profiler(FakeSession(), Counting(), gate=LoggingGate("B"))
    cupti._event_overhead_ms = 0.001
    info = cupti.timing_info()
    assert (info.source, info.unified_memory) == ("cupti", {"GPU_PAGE_FAULT": {"count": 2}})
    Counting.unified_memory_refusal = "refused"
    info = cupti.timing_info()
    assert (info.unified_memory, info.unified_memory_note) == (None, "refused")


def test_measurements_are_labelled_with_their_gpus_and_declared_ones_only():
    profiler = Profiler(FakeSession(), None, gate=LoggingGate("A"), declared={("gpu", "h2d")})
    profiler._event_overhead_ms = 0.0
    with profiler.timed():
        with profiler.on_gpus(0, 1), profiler.events("gpu", "c", "h2d", None, 8):
            FakeEvent.clock_ms += 1.0
        with profiler.events("gpu", "c", "h2d", None, 8):
            FakeEvent.clock_ms += 2.0
    profiler.resolve()
    labelled = {m.gpus: m.samples_ms for m in profiler.measurements()}
    assert labelled == {(0, 1): [1.0], (): [2.0]}
    with pytest.raises(UndeclaredMeasurement, match="recorded gpu 'd2h'") as refused:
        profiler._measurement("gpu", "c", "d2h", None, 8)
    assert refused.value.exit_code == ExitCode.INTERNAL


def test_host_clock_samples_are_host_sourced_and_times_once_is_not_recorded(monkeypatch):
    profiler = lane_profiler("A")
    ticks = iter([1_000_000, 3_500_000])
    monkeypatch.setattr(measure.time, "perf_counter_ns", lambda: next(ticks))
    with profiler.timed(), profiler.host_clock("host", "numpy.empty", "alloc", "pageable", 8):
        pass
    [allocation] = profiler.measurements()
    assert (allocation.samples_ms, allocation.source) == ([2.5], "host")

    def action():
        FakeEvent.clock_ms += 0.7

    assert profiler.time_once(action) == pytest.approx(0.7)
    assert [m.name for m in profiler.measurements()] == ["numpy.empty"]


def test_release_lets_go_of_the_gate_and_stream():
    profiler = lane_profiler("A")
    gate = profiler.gate()
    gate.close("stream")
    profiler.release()
    assert not gate.closed and profiler.stream is None and profiler._gate is None
    assert not profiler.gate_closed


def test_discard_pending_drops_unresolved_events():
    profiler = lane_profiler("A")
    with profiler.timed(), profiler.events("gpu", "k", "kernel", "device", 4):
        pass
    assert profiler._pending
    profiler.discard_pending()
    assert profiler._pending == [] and not profiler.gate_closed


# -- the gate -----------------------------------------------------------------------------------


class PinnedFlag:
    """pycuda's pagelocked_empty(..., DEVICEMAP): a numpy array whose base knows its device
    pointer."""

    def __init__(self, count: int) -> None:
        import numpy as np

        self.array = np.zeros(count, dtype=np.int64)
        self.freed = False

    def get_device_pointer(self) -> int:
        return 0xD000

    def free(self) -> None:
        self.freed = True


def fake_gate(monkeypatch):
    import numpy as np

    from memprof.core import gate as gate_module

    calls = []
    kernel = type("Kernel", (), {})()
    kernel.function = type("Function", (), {"prepared_async_call": lambda *a: calls.append(a)})()
    monkeypatch.setattr(gate_module, "load_kernel", lambda session, file, name: kernel)

    class Flag(np.ndarray):
        pass

    def pagelocked_empty(count, dtype, mem_flags):
        holder = PinnedFlag(count)
        view = holder.array.view(Flag)
        view.base_holder = holder
        return view

    cuda = type("Cuda", (), {})()
    cuda.pagelocked_empty = pagelocked_empty
    cuda.host_alloc_flags = type("Flags", (), {"DEVICEMAP": 2})
    owned = []
    session = type("Session", (), {})()
    session.cuda = cuda
    session.own = lambda free: owned.append(free) or len(owned)
    session.disown = lambda handle: owned.append(("disowned", handle))
    monkeypatch.setattr(Flag, "base", property(lambda self: self.base_holder), raising=False)
    return gate_module.Gate(session), calls, owned


def test_the_gate_spins_on_a_new_generation_each_time_it_closes(monkeypatch):
    from memprof.core.gate import GATE_TIMEOUT_NS

    gate, calls, owned = fake_gate(monkeypatch)
    assert (gate.generation, gate.closed, list(gate.flag)) == (0, False, [0, 0])
    gate.close("stream")
    gate.close("stream")
    assert [call[1:] for call in calls] == [
        ((1, 1), (1, 1, 1), "stream", 0xD000, 1, GATE_TIMEOUT_NS),
        ((1, 1), (1, 1, 1), "stream", 0xD000, 2, GATE_TIMEOUT_NS),
    ]
    assert gate.closed and gate.flag[0] == 0  # nothing released yet
    gate.open()
    assert not gate.closed and gate.flag[0] == 2  # everything queued up to now runs
    gate.check()  # the kernel did not give up
    [free] = owned  # the session frees the flag when it closes
    free()
    assert gate.flag.base.freed


def test_a_gate_that_timed_out_says_so_once(monkeypatch):
    from memprof.errors import MemprofError

    gate, _, _ = fake_gate(monkeypatch)
    gate.flag[1] = 1  # the spinning kernel's "gave up" mark
    with pytest.raises(MemprofError, match="gate timed out"):
        gate.check()
    assert gate.flag[1] == 0
    gate.check()


# -- what a mutation round found untested (issue 37) -------------------------------------------


def singles_then_throughput(single_ms: float, count: int) -> Profiler:
    """A profiler that timed `count` single copies of single_ms, then asked their throughput."""
    profiler = lane_profiler("A")

    def step():
        with profiler.events("gpu", "c", "h2d", "pinned", 8):
            FakeEvent.clock_ms += single_ms

    profiler.repeat(step, warmup=0, repeat=count)
    FakeEvent.log.clear()
    profiler.throughput("c", "h2d", "pinned", 8, operation(single_ms, "c"))
    return profiler


@pytest.mark.parametrize(
    ("single_ms", "count", "reused"),
    [
        (BATCH_TARGET_MS, 3, True),  # three singles of a batch's length: they are the batches
        (BATCH_TARGET_MS, 2, False),  # one single too few: batches are timed
        (BATCH_TARGET_MS - 1e-6, 3, False),  # just shorter than a batch: batches are timed
    ],
)
def test_single_operations_stand_for_batches_from_three_lasting_a_batch(single_ms, count, reused):
    profiler = singles_then_throughput(single_ms, count)
    measurement = profiler._measurement("gpu", "c", "h2d", "pinned", 8)
    if reused:
        assert measurement.batch == 1 and FakeEvent.log == []  # nothing run again
        assert measurement.throughput_ms == pytest.approx([single_ms] * count)
        profiler.throughput("c", "h2d", "pinned", 8, operation(single_ms, "c"))
        assert len(measurement.throughput_ms) == 2 * count  # a second call adds, never replaces
    else:
        assert "c" in FakeEvent.log and "close A" in FakeEvent.log  # gated: not synchronous
        assert measurement.throughput_ms == pytest.approx(
            [single_ms] * len(measurement.throughput_ms)
        )


def test_a_batch_of_one_is_its_sizing_operation_and_no_warm_up_by_default():
    profiler = lane_profiler("A")
    concurrent([Lane(profiler, operation(2.0, "c"), "c", "h2d", "pinned", 8)], batches=3)
    measurement = profiler._measurement("gpu", "c", "h2d", "pinned", 8)
    assert FakeEvent.log.count("c") == 3  # the sizing operation is the first of three batches
    assert (measurement.batch, measurement.throughput_ms) == (1, [2.0, 2.0, 2.0])
    assert measurement.samples_ms == [2.0, 2.0, 2.0]


def test_concurrent_batches_are_sized_to_the_target_it_is_given():
    profiler = lane_profiler("A")
    lane = Lane(profiler, operation(0.2, "c"), "c", "h2d", "pinned", 8)
    concurrent([lane], target_ms=20.0, batches=1)
    assert profiler._measurement("gpu", "c", "h2d", "pinned", 8).batch == 100


def test_each_lanes_own_cupti_log_is_paused():
    lanes = [
        Lane(lane_profiler("A", CountingActivity()), operation(0.5, "a"), "c", "h2d", None, 8),
        Lane(lane_profiler("B", CountingActivity()), operation(0.5, "b"), "c", "h2d", None, 8),
    ]
    concurrent(lanes, batches=1)
    assert CountingActivity.pauses == ["pause", "pause", "resume", "resume"]


def test_synchronous_warm_up_batches_are_not_gated_either():
    profiler = lane_profiler("A")
    concurrent(
        [Lane(profiler, operation(0.5, "s"), "c", "h2d", None, 8)], True, batches=1, warmup=1
    )
    assert "close A" not in FakeEvent.log and FakeEvent.log.count("s") == 1 + 2 * 2
    with pytest.raises(ValueError) as refused:
        concurrent([Lane(profiler, operation(0.1, "s"), "c", "h2d", None, 8)] * 2, True)
    assert str(refused.value) == (
        "synchronous operations block the host: they cannot run concurrently"
    )


class StreamEvent(FakeEvent):
    """An event that logs the stream it is recorded on."""

    def record(self, stream=None):
        super().record(stream)
        FakeEvent.log[-1] = ("event", stream)


class StreamGate(LoggingGate):
    def close(self, stream):
        FakeEvent.log.append(("close", stream))
        self.closed = True


def test_a_lane_given_its_own_stream_is_gated_timed_and_run_on_it():
    profiler = Profiler(FakeSession(), None, gate=StreamGate("A"))
    profiler._cuda = type("Driver", (), {"Event": StreamEvent})

    def copy(stream):
        FakeEvent.log.append(("copy", stream))
        FakeEvent.clock_ms += 2.0

    concurrent([Lane(profiler, copy, "c", "d2h", None, 8, stream="back")], batches=1)
    on = [entry for entry in FakeEvent.log if isinstance(entry, tuple)]
    assert on == [("close", "back"), ("event", "back"), ("copy", "back"), ("event", "back")]
    FakeEvent.log.clear()
    concurrent([Lane(profiler, copy, "c", "d2h", None, 8)], batches=1)
    assert {entry[1] for entry in FakeEvent.log if isinstance(entry, tuple)} == {"stream"}
    FakeEvent.log.clear()
    assert profiler.time_once(lambda: None, stream="side") == 0.0
    assert [entry for entry in FakeEvent.log if isinstance(entry, tuple)] == [
        ("close", "side"),
        ("event", "side"),
        ("event", "side"),
    ]


def test_host_throughput_batches_to_its_target_and_adds_to_earlier_batches(monkeypatch):
    clock = [0]
    monkeypatch.setattr(measure.time, "perf_counter_ns", lambda: clock[0])

    def memcpy() -> None:
        clock[0] += 200_000  # 0.2 ms

    profiler = lane_profiler("A")
    profiler.host_throughput("memcpy", "h2d", "pageable", 8, memcpy, target_ms=20.0, batches=2)
    found = profiler._measurement("host", "memcpy", "h2d", "pageable", 8)
    assert (found.batch, found.source) == (100, "host")
    assert found.throughput_ms == pytest.approx([0.2, 0.2]) and found.samples_ms == [0.2, 0.2]
    profiler.host_throughput("memcpy", "h2d", "pageable", 8, memcpy, target_ms=20.0, batches=1)
    assert found.throughput_ms == pytest.approx([0.2] * 3)


def test_a_profiler_without_a_reason_for_events_says_none():
    info = Profiler(FakeSession(), None, gate=LoggingGate("A")).timing_info()
    assert (info.note, info.unified_memory_note) == ("", None)


def test_a_gate_that_timed_out_fails_the_resolve():
    class TimedOut(LoggingGate):
        def check(self):
            raise RuntimeError("gate timed out")

    profiler = Profiler(FakeSession(), None, gate=TimedOut("A"))
    with pytest.raises(RuntimeError, match="gate timed out"):
        with profiler.timed(), profiler.events("gpu", "k", "kernel", "device", 4):
            FakeEvent.clock_ms += 1.0
        profiler.resolve()


def test_cuptis_driver_calls_are_rows_of_their_own_without_kind_or_bytes():
    activity = FakeActivity({1: 0.5}, {1: [("cuLaunchKernel", 0.004)]})
    profiler = Profiler(FakeSession(), activity, gate=LoggingGate("A"))
    with profiler.timed(), profiler.events("gpu", "k", "kernel", "device", 4):
        FakeEvent.clock_ms += 1.0
    [api] = [m for m in profiler.measurements() if m.group == "api"]
    assert (api.name, api.operation, api.kind, api.bytes) == (
        "cuLaunchKernel",
        "driver_call",
        None,
        0,
    )
    assert (api.source, api.samples_ms) == ("cupti", [0.004])


def test_an_undeclared_measurement_is_refused_in_one_whole_line():
    profiler = Profiler(FakeSession(), None, gate=LoggingGate("A"), declared=frozenset())
    with pytest.raises(UndeclaredMeasurement) as refused:
        profiler._measurement("gpu", "c", "d2h", None, 8)
    assert str(refused.value) == (
        "recorded gpu 'd2h' (c), which the experiment does not declare: a bug in memprof"
    )
