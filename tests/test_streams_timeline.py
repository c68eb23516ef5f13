"""Work on several streams through the measuring core (Profiler.on_streams), without a GPU.

The fakes below are a small, realistic GPU: streams run their items in order; one engine per
kind of operation (copies in, kernels, copies out) takes whichever operation was ready first;
every driver call costs the host HOST_CALL_MS, so whatever is not held behind the gate starts
while Python is still queueing; the real memprof.core.gate.Gate holds streams (its kernel
waits for the flag the host writes, and gives up after its timeout); a blocking call waits
for its stream; CUPTI delivers a record, in GPU nanoseconds, for each tagged operation at a
flush. The tests compare what the core reports with what this GPU really did.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest
from rich.console import Console

from memprof.core import gate as gate_module
from memprof.core.activity import ApiRecord, GpuRecord
from memprof.core.measure import (
    MissingRecords,
    Placed,
    Profiler,
    Span,
    StreamOperation,
    engine_timeline,
    on_one_clock,
    records_timeline,
)
from memprof.errors import InvalidArgument, MemprofError
from memprof.experiments import load, summarize
from memprof.experiments import streams as streams_module
from memprof.output.render import render_result
from tests.conftest import FIXTURES, replace

HOST_CALL_MS = 0.05  # what one driver call costs Python
GATE_TIMEOUT_MS = gate_module.GATE_TIMEOUT_NS / 1e6
CUPTI_EPOCH_NS = 1_700_000_000_123_456_789  # CUPTI's timestamps are large: ms floats lose ns


# -- a small GPU -------------------------------------------------------------------------------


@dataclass(eq=False)
class Item:
    """Something queued on a stream: an event, a gate kernel or an operation."""

    kind: str  # "event", "gate", "op"
    enqueued_ms: float
    tag: int | None = None  # CUPTI's external id current when it was queued
    engine: str = ""
    duration_ms: float = 0.0
    generation: int = 0
    label: tuple = ()
    start_ms: float | None = None
    end_ms: float | None = None


@dataclass(eq=False)
class FakeStream:
    index: int
    items: list[Item] = field(default_factory=list)


class FakeGpu:
    def __init__(self, event_ms: float = 0.0) -> None:
        self.host_ms = 0.0
        self.event_ms = event_ms  # how long the stream is busy with an event
        self.streams: list[FakeStream] = []
        self.flag = [0, 0]  # the gate's mapped flag: generation, timed out
        self.flag_writes: list[tuple[float, int]] = []  # (host time, generation written)
        self.timed_out: set[Item] = set()
        self.tags: list[int] = []  # CUPTI's external-id stack
        self.ops: list[Item] = []

    def new_stream(self) -> FakeStream:
        self.streams.append(FakeStream(len(self.streams)))
        return self.streams[-1]

    def enqueue(self, stream: FakeStream, kind: str, **fields) -> Item:
        assert isinstance(stream, FakeStream), "the legacy default stream is never used"
        item = Item(kind, self.host_ms, self.tags[-1] if self.tags else None, **fields)
        stream.items.append(item)
        if kind == "op":
            self.ops.append(item)
        self.host_ms += HOST_CALL_MS
        return item

    def operation(self, chunk: int, stage: str, duration_ms: float, blocking: bool = False):
        """action(stream) queueing one operation (a blocking one waits for it, as a copy
        from pageable memory does)."""

        def action(stream: FakeStream) -> None:
            item = self.enqueue(
                stream, "op", engine=stage, duration_ms=duration_ms, label=(chunk, stage)
            )
            if blocking:
                self.wait_for(item)

        return action

    def write_flag(self, value: int) -> None:
        self.flag[0] = value
        self.flag_writes.append((self.host_ms, value))

    def wait_for(self, item: Item) -> None:
        """The host blocks until `item` has run; a gate nobody opens gives up after its
        timeout and says so in the flag, as gateWait does."""
        self.simulate()
        if item.end_ms is None:
            self.timed_out |= {i for s in self.streams for i in s.items if i.kind == "gate"}
            self.flag[1] = 1
            self.simulate()
        self.host_ms = max(self.host_ms, item.end_ms)

    def simulate(self) -> None:
        """Run everything queued, from the start: each step runs the stream head that can
        start first (ties: the one that was ready first)."""
        for stream in self.streams:
            for item in stream.items:
                item.start_ms = item.end_ms = None
        engine_free: dict[str, float] = {}
        ready = [0.0] * len(self.streams)
        heads = [0] * len(self.streams)
        while True:
            best = None
            for stream in self.streams:
                if heads[stream.index] < len(stream.items):
                    item = stream.items[heads[stream.index]]
                    arrived = max(ready[stream.index], item.enqueued_ms)
                    start = self._start(item, arrived, engine_free)
                    if start is not None and (best is None or (start, arrived) < best[0][:2]):
                        best = ((start, arrived, stream.index), item)
            if best is None:
                return
            (start, _, index), item = best
            length = {"op": item.duration_ms, "event": self.event_ms, "gate": 0.0}[item.kind]
            item.start_ms, item.end_ms = start, start + length
            if item.kind == "op":
                engine_free[item.engine] = item.end_ms
            ready[index] = item.end_ms
            heads[index] += 1

    def _start(self, item: Item, arrived: float, engine_free: dict[str, float]) -> float | None:
        if item.kind == "op":
            return max(arrived, engine_free.get(item.engine, 0.0))
        if item.kind == "gate":
            if item in self.timed_out:
                return arrived + GATE_TIMEOUT_MS
            opened = [at for at, value in self.flag_writes if value >= item.generation]
            return max(arrived, min(opened)) if opened else None
        return arrived

    def truth(self, since: int = 0) -> list[Placed]:
        """Where the operations queued since op number `since` really ran, from the earliest."""
        ops = self.ops[since:]
        rows = [Placed(0, op.label[0], op.label[1], op.start_ms, op.end_ms) for op in ops]
        return sorted(on_one_clock(rows)[0], key=lambda row: (row.chunk, row.operation))


class FakeEvent:
    def __init__(self, gpu: FakeGpu) -> None:
        self.gpu, self.item = gpu, None

    def record(self, stream: FakeStream) -> None:
        self.item = self.gpu.enqueue(stream, "event")

    def synchronize(self) -> None:
        self.gpu.wait_for(self.item)

    def time_since(self, start: FakeEvent) -> float:
        self.gpu.simulate()
        for event in (self, start):  # cuEventElapsedTime: "device not ready" otherwise
            assert event.item.end_ms is not None and event.item.end_ms <= self.gpu.host_ms
        return self.item.start_ms - start.item.start_ms


class FakeFlag:
    """The gate's pinned, mapped flag: what the host writes, the gate kernel reads."""

    def __init__(self, gpu: FakeGpu) -> None:
        self.gpu = gpu
        self.base = SimpleNamespace(get_device_pointer=lambda: 0x7F00, free=lambda: None)

    def __setitem__(self, key, value) -> None:
        if key == 1:
            self.gpu.flag[1] = int(value)
        else:  # flag[0] = generation, or flag[:] = 0
            self.gpu.write_flag(int(value))

    def __getitem__(self, key):
        return self.gpu.flag[key]


class FakeDriver:
    host_alloc_flags = SimpleNamespace(DEVICEMAP=2)

    def __init__(self, gpu: FakeGpu) -> None:
        self.gpu = gpu

    def Event(self) -> FakeEvent:
        return FakeEvent(self.gpu)

    def Stream(self) -> FakeStream:
        return self.gpu.new_stream()

    def pagelocked_empty(self, shape, dtype, mem_flags=0) -> FakeFlag:
        return FakeFlag(self.gpu)


class FakeSession:
    def __init__(self, gpu: FakeGpu) -> None:
        self.cuda = FakeDriver(gpu)
        self.owned: dict[int, object] = {}

    def own(self, release) -> int:
        self.owned[len(self.owned)] = release
        return len(self.owned) - 1

    def disown(self, handle: int) -> None:
        self.owned.pop(handle, None)


class FakeActivity:
    """CUPTI as the core sees it: external ids pushed around driver calls; a record per
    tagged operation, in GPU nanoseconds, delivered by flush() once the work has run."""

    def __init__(self, gpu: FakeGpu) -> None:
        self.gpu, self.last_tag, self.pushed = gpu, 0, []
        self.delivered: dict[int, list[GpuRecord]] = {}

    def new_tag(self) -> int:
        self.last_tag += 1
        return self.last_tag

    def push(self, tag: int) -> None:
        self.gpu.tags.append(tag)
        self.pushed.append(tag)

    def pop(self) -> None:
        self.gpu.tags.pop()

    @contextlib.contextmanager
    def paused(self):
        yield

    def flush(self) -> None:
        self.gpu.simulate()
        self.delivered = {}
        for op in self.gpu.ops:
            if op.tag is not None and op.end_ms is not None and op.end_ms <= self.gpu.host_ms:
                category = "kernel" if op.engine == "kernel" else "memcpy"
                start_ns = CUPTI_EPOCH_NS + round(op.start_ms * 1e6)
                record = GpuRecord(
                    category, op.engine, start_ns, start_ns + round(op.duration_ms * 1e6)
                )
                self.delivered.setdefault(op.tag, []).append(record)

    def gpu_records(self) -> dict[int, list[GpuRecord]]:
        return {tag: list(records) for tag, records in self.delivered.items()}

    def api_records(self) -> dict[int, list[ApiRecord]]:
        return {tag: [ApiRecord("cuMemcpyHtoDAsync_v2", 0.004)] for tag in self.delivered}


@pytest.fixture
def gpu(monkeypatch) -> FakeGpu:
    gpu = FakeGpu()

    def gate_kernel(session, file_name, kernel_name):
        assert (file_name, kernel_name) == ("gate.cu", "gateWait")

        def launch(grid, block, stream, flag_pointer, generation, timeout_ns):
            gpu.enqueue(stream, "gate", generation=generation)

        return SimpleNamespace(function=SimpleNamespace(prepared_async_call=launch))

    monkeypatch.setattr(gate_module, "load_kernel", gate_kernel)
    return gpu


def profiler_on(gpu: FakeGpu, cupti: bool = False) -> Profiler:
    return Profiler(FakeSession(gpu), FakeActivity(gpu) if cupti else None)


DURATIONS_MS = {"h2d": 1.0, "kernel": 2.0, "d2h": 1.0}


def pipeline(
    gpu: FakeGpu, chunks: int, lanes: int, pageable: bool = False
) -> list[StreamOperation]:
    """Each chunk's copy in, kernel and copy out, chunk i on lane i mod lanes (as streams)."""
    return [
        StreamOperation(
            chunk % lanes, chunk, stage, stage, "pinned", 64,
            gpu.operation(chunk, stage, DURATIONS_MS[stage], pageable and stage != "kernel"),
        )
        for chunk in range(chunks)
        for stage in DURATIONS_MS
    ]  # fmt: skip


def by_chunk(rows: list[Placed]) -> list[tuple]:
    return sorted((row.chunk, row.operation, row.start_ms, row.end_ms) for row in rows)


def approx_rows(rows: list[Placed], abs_ms: float = 1e-9):
    return [
        (c, o, pytest.approx(s, abs=abs_ms), pytest.approx(e, abs=abs_ms))
        for c, o, s, e in by_chunk(rows)
    ]


TOTAL = Span("all chunks", "total", "pinned", 256)


# -- placing operations on one clock (pure) ----------------------------------------------------


def test_engine_timeline_starts_each_operation_when_its_engine_is_free():
    # Stream 1 reached its copy at 0 ms, but the copy engine was busy with stream 0's until 1.
    rows = [
        Placed(0, 0, "h2d", 0.0, 1.0),
        Placed(1, 1, "h2d", 0.0, 2.0),
        Placed(0, 0, "kernel", 1.0, 3.0),
        Placed(1, 1, "kernel", 2.0, 5.0),
        Placed(1, 1, "d2h", 5.0, 6.0),
    ]
    assert engine_timeline(rows) == [  # in the order given
        Placed(0, 0, "h2d", 0.0, 1.0),
        Placed(1, 1, "h2d", 1.0, 2.0),
        Placed(0, 0, "kernel", 1.0, 3.0),
        Placed(1, 1, "kernel", 3.0, 5.0),  # waited for stream 0's kernel
        Placed(1, 1, "d2h", 5.0, 6.0),  # nothing of its kind before it
    ]


def test_engine_timeline_keeps_times_before_the_reference_event():
    # Events are timed from the first lane's first event: another lane's may come earlier.
    rows = [Placed(1, 1, "h2d", -0.5, 0.5), Placed(0, 0, "h2d", 0.0, 1.5)]
    assert engine_timeline(rows) == [Placed(1, 1, "h2d", -0.5, 0.5), Placed(0, 0, "h2d", 0.5, 1.5)]


def test_one_clock_starts_at_the_earliest_start_and_orders_by_lane_then_start():
    rows = [
        Placed(1, 1, "h2d", 12.0, 13.0),
        Placed(0, 2, "h2d", 14.0, 15.5),
        Placed(0, 0, "h2d", 10.0, 11.0),
        Placed(0, 0, "kernel", 11.0, 14.0),
    ]
    timeline, total_ms = on_one_clock(rows)
    assert timeline == [
        Placed(0, 0, "h2d", 0.0, 1.0),
        Placed(0, 0, "kernel", 1.0, 4.0),
        Placed(0, 2, "h2d", 4.0, 5.5),
        Placed(1, 1, "h2d", 2.0, 3.0),
    ]
    assert total_ms == 5.5  # earliest start to latest end


def test_records_place_each_operation_on_the_gpus_own_clock():
    ops = [StreamOperation(lane, lane, "h2d", "c", "pinned", 8, print) for lane in range(3)]
    records = {
        7: [GpuRecord("memcpy", "HTOD", CUPTI_EPOCH_NS + 1_000, CUPTI_EPOCH_NS + 251_000)],
        8: [GpuRecord("memcpy", "HTOD", CUPTI_EPOCH_NS, CUPTI_EPOCH_NS + 1_001)],
        # an operation the driver split in two: its first start to its last end, 2 x 0.5 us
        9: [
            GpuRecord("memcpy", "HTOD", CUPTI_EPOCH_NS + 300_000, CUPTI_EPOCH_NS + 300_500),
            GpuRecord("memcpy", "HTOD", CUPTI_EPOCH_NS + 301_000, CUPTI_EPOCH_NS + 301_500),
        ],
    }
    rows, durations = records_timeline(list(zip(ops, (7, 8, 9), strict=True)), records)
    assert rows == [
        Placed(0, 0, "h2d", 0.001, 0.251),  # exact: nanoseconds are subtracted as integers
        Placed(1, 1, "h2d", 0.0, 0.001001),
        Placed(2, 2, "h2d", 0.3, 0.3015),
    ]
    assert durations == pytest.approx([0.25, 0.001001, 0.001], abs=1e-12)


def test_an_operation_without_a_record_is_refused_rather_than_timed_on_another_clock():
    ops = [StreamOperation(0, chunk, "h2d", "c", "pinned", 8, print) for chunk in range(2)]
    records = {1: [GpuRecord("memcpy", "HTOD", 0, 10)]}
    with pytest.raises(MissingRecords, match="1 of the 2 operations"):
        records_timeline([(ops[0], 1), (ops[1], 2)], records)
    with pytest.raises(MissingRecords):
        records_timeline([(ops[0], 1), (ops[1], None)], records)


# -- the gated multi-stream primitive on the small GPU ----------------------------------------


def test_overlapped_events_timeline_is_what_the_engines_did(gpu):
    profiler = profiler_on(gpu)
    run = profiler.on_streams(pipeline(gpu, chunks=2, lanes=2), span=TOTAL)
    # Worked by hand: the copy engine takes chunk 1 when chunk 0's copy is done, and so on.
    expected = [
        (0, "d2h", 3.0, 4.0), (0, "h2d", 0.0, 1.0), (0, "kernel", 1.0, 3.0),
        (1, "d2h", 5.0, 6.0), (1, "h2d", 1.0, 2.0), (1, "kernel", 3.0, 5.0),
    ]  # fmt: skip
    assert approx_rows(run.timeline) == expected
    assert approx_rows(gpu.truth()) == expected  # the small GPU agrees
    assert [(row.lane, row.chunk) for row in run.timeline] == [(0, 0)] * 3 + [(1, 1)] * 3
    assert (run.source, run.total_ms) == ("events", pytest.approx(6.0))
    measurements = {(m.operation, m.bytes): m for m in profiler.measurements()}
    assert measurements["kernel", 64].samples_ms == pytest.approx([2.0, 2.0])
    assert measurements["kernel", 64].source == "events"
    assert measurements["total", 256].samples_ms == pytest.approx([6.0])
    assert measurements["total", 256].group == "span"


@pytest.mark.parametrize(("chunks", "lanes"), [(4, 4), (5, 3), (4, 1)])
def test_gated_streams_never_time_python(gpu, chunks, lanes):
    # Queueing costs the host HOST_CALL_MS a call: ungated, the first chunks would start
    # (and their events would count Python) while the others are still being queued.
    profiler = profiler_on(gpu)
    since = len(gpu.ops)
    run = profiler.on_streams(pipeline(gpu, chunks, lanes))
    assert approx_rows(run.timeline) == by_chunk(gpu.truth(since))
    opened_at = next(at for at, value in gpu.flag_writes if value > 0)  # the run's gate
    assert all(op.enqueued_ms < opened_at for op in gpu.ops[since:])  # all queued, then opened
    assert min(op.start_ms for op in gpu.ops[since:]) >= opened_at
    serial = profiler_on(gpu).on_streams(pipeline(gpu, chunks, 1))
    assert run.total_ms <= serial.total_ms


def test_cupti_places_operations_by_their_records_and_keeps_events_beside(gpu):
    gpu.event_ms = 0.003  # an event occupies its stream: events read long, records do not
    profiler = profiler_on(gpu, cupti=True)
    since = len(gpu.ops)
    run = profiler.on_streams(pipeline(gpu, chunks=3, lanes=3), span=TOTAL)
    assert run.source == "cupti"
    assert approx_rows(run.timeline) == by_chunk(gpu.truth(since))
    recorded = profiler.measurements()
    measurements = {(m.group, m.operation): m for m in recorded}
    h2d = measurements["gpu", "h2d"]
    assert h2d.source == "cupti"
    assert h2d.samples_ms == pytest.approx([1.0] * 3, abs=1e-9)
    assert len(h2d.events_ms) == 3 and h2d.events_ms != h2d.samples_ms  # beside, as a check
    assert measurements["span", "total"].source == "cupti"
    assert measurements["span", "total"].samples_ms == [pytest.approx(run.total_ms)]
    assert profiler.activity.pushed == list(range(1, 10))  # every operation tagged once
    [api] = [m for m in recorded if m.group == "api"]  # CUPTI's driver calls, nvprof's rows
    assert (api.name, api.stats.count) == ("cuMemcpyHtoDAsync_v2", 9)


def test_events_samples_are_less_an_empty_gated_event_pair(gpu):
    gpu.event_ms = 0.002
    profiler = profiler_on(gpu)
    profiler.on_streams(pipeline(gpu, chunks=2, lanes=1))
    assert profiler.event_overhead_ms() == pytest.approx(0.002)
    by_operation = {m.operation: m.samples_ms for m in profiler.measurements()}
    assert by_operation == {
        "h2d": pytest.approx([1.0, 1.0]),
        "kernel": pytest.approx([2.0, 2.0]),
        "d2h": pytest.approx([1.0, 1.0]),
    }


def test_a_paused_run_is_placed_but_neither_recorded_nor_tagged(gpu):
    profiler = profiler_on(gpu, cupti=True)
    with profiler.paused():
        warmup = profiler.on_streams(pipeline(gpu, chunks=2, lanes=2), span=TOTAL)
    assert warmup.source == "events" and len(warmup.timeline) == 6
    assert profiler.measurements() == [] and profiler.activity.pushed == []


def test_a_pageable_run_is_not_gated_and_its_events_include_the_calls(gpu):
    # Copies from pageable memory block the host: behind a closed gate they would wait for
    # its timeout. Ungated, events time each copy from when it was queued.
    profiler = profiler_on(gpu)
    profiler.event_overhead_ms()  # measured behind the gate once, before the run
    gates, since = len(gpu.flag_writes), len(gpu.ops)
    run = profiler.on_streams(pipeline(gpu, 3, 3, pageable=True), synchronous=True, span=TOTAL)
    assert len(gpu.flag_writes) == gates and gpu.flag[1] == 0  # no gate closed or opened
    truth = by_chunk(gpu.truth(since))
    assert approx_rows(run.timeline, abs_ms=2 * HOST_CALL_MS) == truth
    assert run.total_ms > 3 * sum(DURATIONS_MS.values()) - 1e-9  # nothing overlapped


def test_a_pageable_run_with_cupti_is_placed_exactly(gpu):
    profiler = profiler_on(gpu, cupti=True)
    since = len(gpu.ops)
    run = profiler.on_streams(pipeline(gpu, 3, 2, pageable=True), synchronous=True)
    assert run.source == "cupti"
    assert approx_rows(run.timeline) == by_chunk(gpu.truth(since))


def test_the_small_gpu_times_a_blocking_call_behind_a_closed_gate_out(gpu):
    # What the core must never do: the gate gives up, and the run is refused.
    profiler = profiler_on(gpu)
    with pytest.raises(MemprofError, match="gate timed out"):
        profiler.on_streams(pipeline(gpu, 2, 2, pageable=True), synchronous=False)


def test_several_runs_reuse_the_lanes_streams(gpu):
    profiler = profiler_on(gpu)
    profiler.on_streams(pipeline(gpu, 4, 4))
    made = len(gpu.streams)
    profiler.on_streams(pipeline(gpu, 2, 2))
    profiler.on_streams(pipeline(gpu, 4, 4))
    assert len(gpu.streams) == made


# -- the streams experiment's pipeline ---------------------------------------------------------


def test_streams_queues_each_chunk_on_its_lane_in_program_order():
    import numpy as np

    calls = []
    cuda = SimpleNamespace(
        memcpy_htod_async=lambda dst, src, stream: calls.append(("h2d", dst, src.size, stream)),
        memcpy_dtoh_async=lambda dst, src, stream: calls.append(("d2h", src, dst.size, stream)),
    )

    def launch(grid, block, stream, device_in, device_out, count, iterations):
        calls.append(("kernel", device_in, count, stream))
        assert (device_out - device_in, iterations, grid) == (0x1000, 9, (-(-count // 256), 1))

    kernel = SimpleNamespace(
        function=SimpleNamespace(prepared_async_call=launch),
        signature=SimpleNamespace(display="busyWork(float*, float*, int, int)"),
    )
    device = (SimpleNamespace(device_pointer=0x1000), SimpleNamespace(device_pointer=0x2000))
    arrays = (np.zeros(10, np.float32), np.zeros(10, np.float32))
    chunks = streams_module.chunk_bounds(10, 3)
    ops = streams_module._pipeline(cuda, kernel, arrays, device, chunks, 9, 2, "pinned, 2 streams")
    assert [(op.lane, op.chunk, op.operation) for op in ops] == [
        (lane, chunk, stage)
        for chunk, lane in ((0, 0), (1, 1), (2, 0))
        for stage in ("h2d", "kernel", "d2h")
    ]
    assert [op.nbytes for op in ops[::3]] == [16, 16, 8]
    assert {op.kind for op in ops} == {"pinned, 2 streams"}
    assert [op.name for op in ops[:3]] == [
        "[CUDA memcpy HtoD]", "busyWork(float*, float*, int, int)", "[CUDA memcpy DtoH]",
    ]  # fmt: skip
    for op in ops:
        op.action(f"stream {op.lane}")
    assert calls[6:9] == [  # chunk 2: elements 8 and 9, 32 bytes in
        ("h2d", 0x1000 + 32, 2, "stream 0"),
        ("kernel", 0x1000 + 32, 2, "stream 0"),
        ("d2h", 0x2000 + 32, 2, "stream 0"),
    ]


# -- what the user sees --------------------------------------------------------------------------


def rendered(result, width: int) -> list[str]:
    console = Console(width=width, record=True, color_system=None)
    render_result(result, summarize(result), console)
    return console.export_text().splitlines()


def timeline_rows(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("stream ")]


@pytest.mark.parametrize("fixture", ["h200_streams", "legacy_v1_streams"])
@pytest.mark.parametrize(("width", "columns"), [(60, 48), (80, 68), (120, 72), (200, 72)])
def test_timelines_fit_the_console(fixture, width, columns):
    lines = rendered(load(FIXTURES / f"{fixture}.json"), width)
    rows = timeline_rows(lines)
    assert len(rows) == 1 + 4 + 4  # serial, then 4 streams twice
    assert {len(row) for row in rows} == {len("stream 0  |") + columns + len("|")}
    axes = [line for line in lines if line.lstrip().startswith("0 ") and line.endswith("ms")]
    assert len(axes) == 3 and all(len(axis) <= width for axis in axes)


def test_a_narrow_timeline_still_shows_the_overlap():
    result = load(FIXTURES / "h200_streams.json")
    rows = timeline_rows(rendered(result, 60))[1:5]  # the overlapped run
    # the GPU picks which stream's copy goes first once the gate opens: in the order they ran
    ran = sorted(rows, key=lambda row: row.index("H"))
    assert ran[0].index("H") < ran[-1].index("H")
    kernel_first = range(ran[0].index("K"), ran[0].rindex("K") + 1)
    assert ran[1].index("H") in kernel_first or ran[1].rindex("H") in kernel_first


def test_text_timeline_is_the_width_it_is_given():
    timeline = [[0, 0, "h2d", 0.0, 1.0], [0, 0, "kernel", 1.0, 2.0], [1, 1, "d2h", 2.0, 4.0]]
    assert streams_module.fitted_timeline_lines(timeline, 2, 20)[0] == (
        "stream 0  |" + "H" * 6 + "K" * 6 + " " * 12 + "|"  # never narrower than 24 columns
    )
    lines = streams_module.fitted_timeline_lines(timeline, 2, 52)
    assert lines[1] == "stream 1  |" + " " * 20 + "D" * 20 + "|"
    assert lines[2] == " " * 10 + "0" + "4.0000ms".rjust(41)


def with_source(source: str, timing_source: str | None = "cupti"):
    """The recorded fixture as if its timelines had come from `source` (notes only)."""
    result = load(FIXTURES / "legacy_v2_streams.json")
    timing = result.timing and replace(result.timing, source=timing_source)
    extra = replace(result.extra, timeline_source=source)
    return replace(result, extra=extra, timing=timing)


def test_the_notes_say_where_the_rows_and_timelines_came_from():
    summary = summarize(load(FIXTURES / "legacy_v2_streams.json"))  # recorded before: ungated
    assert "not held behind a gate" in summary.timing_note
    assert "legacy default stream" in summary.tables[1].notes[1]
    assert summary.charts[-1].notes == [
        "H = copy in (HtoD), K = kernel, D = copy out (DtoH), from CUDA events."
    ]
    cupti = summarize(with_source("cupti"))
    assert cupti.timing_note is None  # the run-wide note (CUPTI's records) is then true
    assert cupti.tables[0].notes[1].startswith("CUPTI's record of each chunk's copy and kernel")
    assert "legacy default stream" not in cupti.tables[1].notes[1]
    assert "pageable run cannot wait behind the gate" in cupti.tables[1].notes[1]
    assert "where CUPTI's records place them" in cupti.charts[-1].notes[0]
    events = summarize(with_source("gated events", "events"))
    assert events.timing_note is None  # the run-wide note (gated events) is then true
    assert "held behind one gate" in events.tables[0].notes[1]
    assert "one engine per kind assumed" in events.charts[-1].notes[0]
    rendered_footnote = " ".join(rendered(with_source("ungated events", "events"), 200))
    assert "not held behind a gate" in rendered_footnote


def test_older_files_mean_ungated_events_and_the_source_round_trips(tmp_path):
    data = json.loads((FIXTURES / "legacy_v2_streams.json").read_text())
    assert "timeline_source" not in data["extra"]
    assert load(FIXTURES / "legacy_v2_streams.json").extra.timeline_source == "ungated events"
    data["extra"]["timeline_source"] = "cupti"
    path = tmp_path / "cupti.json"
    path.write_text(json.dumps(data))
    assert load(path).extra.timeline_source == "cupti"
    data["extra"]["timeline_source"] = "guessed"
    path.write_text(json.dumps(data))
    with pytest.raises(InvalidArgument, match="timeline_source"):
        load(path)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ([4, 0, "h2d", 0.0, 1.0], r"overlapped\[0\]\[0\] is stream 4, but overlapped uses 4"),
        ([0, 0, "memset", 0.0, 1.0], r"overlapped\[0\]\[2\] is the string 'memset'"),
        ([0, 0, "h2d", 2.0, 1.0], r"overlapped\[0\] ends at 1.0 ms, before it starts \(2.0\)"),
    ],
)
def test_a_timeline_that_cannot_be_drawn_is_refused_in_one_line(tmp_path, row, message):
    data = json.loads((FIXTURES / "h200_streams.json").read_text())
    data["extra"]["timelines"]["overlapped"][0] = row
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InvalidArgument, match=message):
        load(path)


def test_the_kernel_is_calibrated_over_all_the_data_to_the_target_time():
    """busyWork over every element on the profiler's stream, its iterations scaled three
    times toward the target (0.01 ms per iteration beside a fixed 0.5 ms)."""
    launches = []

    def launch(grid, block, stream, device_in, device_out, count, iterations):
        launches.append((stream, device_in, device_out, count, iterations))

    def time_once(action):
        action()
        return launches[-1][-1] * 0.01 + 0.5  # a fixed cost beside the loop's

    kernel = SimpleNamespace(function=SimpleNamespace(prepared_async_call=launch))
    session = SimpleNamespace(profiler=SimpleNamespace(stream="stream", time_once=time_once))
    d_in, d_out = SimpleNamespace(device_pointer=0x1000), SimpleNamespace(device_pointer=0x2000)
    iterations = streams_module._calibrate(session, kernel, d_in, d_out, 1000, 5.0)
    assert [launch[:4] for launch in launches] == [("stream", 0x1000, 0x2000, 1000)] * 3
    assert [launch[4] for launch in launches] == [64, 281, 424]
    assert iterations == 447


def test_busywork_runs_at_least_once_and_on_blocks_of_256_threads():
    """A target far below one loop's time calibrates to 1 iteration, never 0 (nor 2); and each
    launch covers `count` elements with one-dimensional blocks of 256 (257 take 2)."""
    launches = []

    def launch(grid, block, stream, device_in, device_out, count, iterations):
        launches.append((grid, block, count, iterations))

    kernel = SimpleNamespace(function=SimpleNamespace(prepared_async_call=launch))
    session = SimpleNamespace(
        profiler=SimpleNamespace(stream="stream", time_once=lambda action: action() or 100.0)
    )
    d_in, d_out = SimpleNamespace(device_pointer=0x1000), SimpleNamespace(device_pointer=0x2000)
    assert streams_module._calibrate(session, kernel, d_in, d_out, 257, 0.001) == 1
    assert launches[0] == ((2, 1), (256, 1, 1), 257, 64)
    assert [iterations for *_, iterations in launches] == [64, 1, 1]


# -- what a mutation round found untested (issue 37) -------------------------------------------


def test_an_engine_takes_operations_of_its_kind_in_the_order_they_finished_not_were_given():
    # Lane 0's copy was given first but finished last: lane 1's (done at 1) went before it.
    rows = [Placed(0, 0, "h2d", 0.0, 3.0), Placed(1, 1, "h2d", 0.0, 1.0)]
    assert engine_timeline(rows) == [Placed(0, 0, "h2d", 1.0, 3.0), Placed(1, 1, "h2d", 0.0, 1.0)]


def test_missing_records_say_what_to_do_in_one_line():
    ops = [StreamOperation(0, 0, "h2d", "c", "pinned", 8, print)]
    with pytest.raises(MissingRecords) as refused:
        records_timeline([(ops[0], None)], {})
    assert str(refused.value) == (
        "CUPTI recorded nothing for 1 of the 1 operations queued on several streams (its "
        "buffers may have overflowed), so they cannot be placed on its clock: run again, or "
        "use --timing events"
    )


def test_each_operation_and_the_span_are_recorded_by_name_and_kind_with_events_beside(gpu):
    gpu.event_ms = 0.003
    profiler = profiler_on(gpu, cupti=True)
    profiler.on_streams(pipeline(gpu, chunks=2, lanes=2), span=TOTAL)
    recorded = [m for m in profiler.measurements() if m.group != "api"]
    assert {(m.group, m.name, m.operation, m.kind, m.bytes) for m in recorded} == {
        *(("gpu", stage, stage, "pinned", 64) for stage in DURATIONS_MS),
        ("span", "all chunks", "total", "pinned", 256),
    }
    for measurement in (m for m in recorded if m.group == "gpu"):
        assert len(measurement.events_ms) == len(measurement.samples_ms) == 2
        # the events' own times beside: within an event's 3 us of the records'
        assert measurement.events_ms == pytest.approx(measurement.samples_ms, abs=0.004)


def test_events_samples_lose_the_overhead_and_none_is_negative(gpu):
    profiler = profiler_on(gpu)
    profiler._event_overhead_ms = 0.25  # measured once per profiler
    operations = [
        StreamOperation(0, 0, "kernel", "k", "device", 4, gpu.operation(0, "kernel", 0.5)),
        StreamOperation(0, 1, "kernel", "empty", "device", 4, gpu.operation(1, "kernel", 0.0)),
    ]
    profiler.on_streams(operations)
    found = {m.name: m.samples_ms for m in profiler.measurements()}
    assert found == {"k": [pytest.approx(0.25)], "empty": [0.0]}  # under a ms; clamped at 0


def test_a_paused_run_does_not_measure_the_event_overhead_it_does_not_subtract(gpu):
    profiler = profiler_on(gpu)
    with profiler.paused():
        profiler.on_streams(pipeline(gpu, chunks=1, lanes=1))
    assert profiler._event_overhead_ms is None


def test_a_run_of_one_operation_is_placed_at_zero(gpu):
    profiler = profiler_on(gpu)
    run = profiler.on_streams(
        [StreamOperation(0, 0, "h2d", "c", "pinned", 8, gpu.operation(0, "h2d", 1.0))]
    )
    assert approx_rows(run.timeline) == [(0, "h2d", 0.0, 1.0)]
    assert run.total_ms == pytest.approx(1.0)


def test_a_run_makes_one_stream_per_lane_beyond_the_first_and_gates_only_its_own(gpu):
    profiler = profiler_on(gpu)
    made = len(gpu.streams)
    profiler.on_streams(pipeline(gpu, 2, 2))
    assert len(gpu.streams) == made + 1
    profiler.on_streams(pipeline(gpu, 3, 3))
    assert len(gpu.streams) == made + 2
    third = profiler._more_streams[1]
    gates = sum(item.kind == "gate" for item in third.items)
    profiler.on_streams(pipeline(gpu, 2, 2))  # two lanes: the third stream is not held
    assert sum(item.kind == "gate" for item in third.items) == gates
