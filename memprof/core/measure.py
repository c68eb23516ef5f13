"""The one timing core: what memprof times, how, and the nvprof-style profile rows.

An experiment says what it times: `repeat(step, warmup, repeat)` runs the step's warm-ups
unrecorded, then its timed repetitions, and only those are recorded (so Calls is the count of
timed repetitions). Inside a step, `events()` marks one GPU operation, `host_clock()`/`api()`
host work or a driver call, and `events("span", ...)` several operations end to end.

How many repetitions: memprof.core.repetitions. Its stopping rule reads the samples known
while the loop runs (the gated events' times and the host clock): CUPTI's records arrive when
its buffers are flushed, after the loop, so a measurement timed by CUPTI stops on its gated
events (which time the same operation), and its saved samples and their noise are CUPTI's.

How a GPU operation is timed:
- It is queued behind a GPU-side gate (memprof.gate) with a CUDA event before and after, so
  the events bracket GPU work, never Python's launch cost. A span gates once, around all of it.
- With CUPTI (memprof.activity), the operation is tagged with an external correlation id
  while it is enqueued, and its sample is the GPU's own record of it: the kernel, memcpy or
  memset duration nvprof printed. The gated events are kept beside it as a check.
- Synchronous operations (copies from pageable memory) cannot wait behind a gate: their
  events bracket the call, staging included; CUPTI's record is the DMA alone.
- Back to back, as bandwidth tools time it: `throughput()` and `concurrent()` (several lanes
  at once, as nvbandwidth's doMemcpyCore); `on_streams()` places work spread over several
  streams of one GPU on one clock. Bandwidth columns use these, latency columns one operation.

An experiment declares the (group, operation) pairs it records (memprof.experiments.base);
recording anything else is a bug in memprof and raises, so a Result holds what it declares.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import math
import re
import statistics
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

from memprof.core.repetitions import THROUGHPUT_BATCHES, Repetitions
from memprof.errors import ExitCode, MemprofError
from memprof.model.results import Group, Measurement, Source, TimingInfo
from memprof.model.statistics import Statistics

_Key = tuple[str, str, str, "str | None", int, tuple[int, ...]]

BATCH_TARGET_MS = 1.0  # a throughput batch lasts about this long (event resolution ~0.5 us)
MAX_BATCH = 128  # operations queued behind one gate: well within a stream's queue


def batch_size(one_operation_ms: float, target_ms: float = BATCH_TARGET_MS) -> int:
    """Operations per batch so a batch lasts about target_ms: at least 1, at most MAX_BATCH."""
    return max(1, min(MAX_BATCH, math.ceil(target_ms / max(one_operation_ms, 1e-4))))


class UndeclaredMeasurement(MemprofError):
    """An experiment recorded a (group, operation) it does not declare: a bug in memprof."""

    exit_code = ExitCode.INTERNAL


@dataclass(frozen=True)
class Lane:
    """One stream of back-to-back work in a concurrent batch, and its measurement."""

    profiler: Profiler
    action: Callable[[Any], None]
    name: str
    operation: str
    kind: str | None
    nbytes: int
    gpus: tuple[int, ...] = ()  # the GPUs it runs between, as Measurement.gpus
    stream: Any = None  # the profiler's stream unless given (both directions of a link)


@dataclass(frozen=True)
class StreamOperation:
    """One GPU operation of work spread over several streams of one GPU (Profiler.on_streams),
    queued by action(stream)."""

    lane: int  # the stream it is queued on
    chunk: int  # the piece of the work it belongs to
    operation: str  # the stage ("h2d", "kernel", "d2h"): its Measurement's operation
    name: str  # the profile row's name
    kind: str | None
    nbytes: int
    action: Callable[[Any], None]


@dataclass(frozen=True)
class Span:
    """The measurement (group "span") a run's end-to-end time goes to."""

    name: str
    operation: str
    kind: str | None
    nbytes: int


@dataclass(frozen=True)
class Placed:
    """When one operation of a run on several streams ran, in milliseconds on one clock."""

    lane: int
    chunk: int
    operation: str
    start_ms: float
    end_ms: float


@dataclass(frozen=True)
class StreamsRun:
    """A run on several streams: every operation placed on one clock, from the earliest start."""

    timeline: list[Placed]  # by lane, then start; the earliest start is 0
    total_ms: float  # the earliest start to the latest end
    source: Source  # "cupti": the GPU's records; "events": CUDA events, engine-corrected


class MissingRecords(MemprofError):
    """CUPTI recorded nothing for an operation of a run that must be placed on its clock."""


class Profiler:
    """Records the timed repetitions of an experiment into Measurements."""

    def __init__(
        self,
        session: Any,
        activity: Any = None,
        fallback_reason: str = "",
        gate: Any = None,
        declared: frozenset[tuple[str, str]] | None = None,
    ) -> None:
        self._session = session
        self.declared = declared  # (group, operation) pairs it may record; None: any
        self._cuda = session.cuda
        self.stream = self._cuda.Stream()
        self._more_streams: list[Any] = []  # on_streams' lanes beyond the first, made once
        self.activity = activity  # memprof.activity.ActivityLog, or None: events only
        self.fallback_reason = fallback_reason
        self._gate: Any = gate  # made on first use: it compiles a kernel
        self._measurements: dict[_Key, Measurement] = {}
        # queued events: measurement, start, end, CUPTI tag, a GPU operation timed alone?
        self._pending: list[tuple[Measurement, Any, Any, int | None, bool]] = []
        self._open_events = 0  # events() contexts open now (a span's operations: 1 and more)
        # gated events of GPU operations timed alone, by id(measurement): throughput()'s batches
        self._singles: dict[int, list[float]] = {}
        self._timed: list[tuple[Measurement, float, int | None]] = []  # events sample, tag
        self._tags: list[int] = []  # external ids of every timed operation
        self._active_tag: int | None = None  # the outermost tag being recorded
        self._calls: list[tuple[Measurement, float, int | None]] = []  # driver_call(): host, tag
        self._recording = 0
        self._paused = 0
        self._event_overhead_ms: float | None = None
        self._gpus: tuple[int, ...] = ()  # what on_gpus() labels measurements with
        self.repetitions = Repetitions()  # the run's (memprof.experiments.base.run sets it)
        # the running repeat() loop's samples known before CUPTI's flush, by id(measurement)
        self._loop: dict[int, tuple[Measurement, list[float]]] | None = None

    # -- what is recorded ------------------------------------------------------------------

    @property
    def recording(self) -> bool:
        return self._recording > 0 and not self._paused

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Work that must not be recorded even inside a timed step (set-up, verification)."""
        self._paused += 1
        try:
            yield
        finally:
            self._paused -= 1

    @contextmanager
    def on_gpus(self, *indices: int) -> Iterator[None]:
        """Label what is recorded inside with the GPUs it runs between (several GPUs)."""
        outer, self._gpus = self._gpus, tuple(indices)
        try:
            yield
        finally:
            self._gpus = outer

    @contextmanager
    def timed(self) -> Iterator[None]:
        """Record what happens inside (repeat() uses it for the timed repetitions)."""
        self._recording += 1
        try:
            yield
        finally:
            self._recording -= 1
            if not self._recording:
                self.release_gate()

    def repeat(self, step: Callable[[], None], warmup: int, repeat: int | None = None) -> None:
        """Run `step` warmup times unrecorded, then recorded: exactly `repeat` times where it
        is given, else as self.repetitions says (driver calls timed beside GPU or host work
        do not hold the loop up: _loop_series)."""
        for _ in range(warmup):
            step()
        loop = self.repetitions.given(repeat).loop()
        outer, self._loop = self._loop, {}
        try:
            with self.timed():
                while loop.more(self._loop_series):
                    step()
            self.resolve()
        finally:
            self._loop = outer

    def _loop_series(self) -> list[list[float]]:
        """The samples so far of the running loop's measurements but driver calls ("api"),
        where it records anything else."""
        assert self._loop is not None
        self.resolve()
        seen = self._loop.values()
        figures = [samples for measurement, samples in seen if measurement.group != "api"]
        return figures or [samples for _, samples in seen]

    def _seen(self, measurement: Measurement, sample_ms: float) -> None:
        """A sample known during the loop (gated events, host clock), for its stopping rule."""
        if self._loop is not None:
            self._loop.setdefault(id(measurement), (measurement, []))[1].append(sample_ms)

    # -- timing one thing --------------------------------------------------------------------

    @contextmanager
    def host_clock(
        self, group: Group, name: str, operation: str, kind: str | None = None, nbytes: int = 0
    ) -> Iterator[None]:
        """Time a driver call ("api") or host work ("host") on the host's monotonic clock."""
        if not self.recording:
            yield
            return
        with self._tag():
            start_ns = time.perf_counter_ns()
            yield
            elapsed_ns = time.perf_counter_ns() - start_ns
        measurement = self._measurement(group, name, operation, kind, nbytes)
        measurement.samples_ms.append(elapsed_ns / 1e6)
        measurement.source = "host"
        self._seen(measurement, elapsed_ns / 1e6)

    def api(
        self, name: str, operation: str, kind: str | None = None, nbytes: int = 0
    ) -> AbstractContextManager[None]:
        return self.host_clock("api", name, operation, kind, nbytes)

    @contextmanager
    def driver_call(
        self, name: str, operation: str, kind: str | None = None, nbytes: int = 0
    ) -> Iterator[None]:
        """Time one driver call named `name` made inside: CUPTI's record of it where CUPTI
        runs (without Python's microsecond of making it), else the host clock around it."""
        if not self.recording:
            yield
            return
        measurement = self._measurement("api", name, operation, kind, nbytes)
        with self._tag():
            tag = self._active_tag
            start_ns = time.perf_counter_ns()
            yield
            elapsed_ns = time.perf_counter_ns() - start_ns
        self._calls.append((measurement, elapsed_ns / 1e6, tag))
        self._seen(measurement, elapsed_ns / 1e6)

    @contextmanager
    def untraced(self) -> Iterator[None]:
        """CUPTI paused inside: its timestamps add about a microsecond to every small
        operation, which back-to-back work timed as a whole with gated events must not pay."""
        with self.activity.paused() if self.activity is not None else contextlib.nullcontext():
            yield

    @contextmanager
    def events(
        self,
        group: Group,
        name: str,
        operation: str,
        kind: str | None = None,
        nbytes: int = 0,
        stream: Any = None,
        synchronous: bool = False,
    ) -> Iterator[None]:
        """Time GPU work on `stream` between two CUDA events, gated unless synchronous."""
        if not self.recording:
            yield
            return
        stream = stream if stream is not None else self.stream
        gate = self.gate()
        if synchronous and gate.closed:
            self.release_gate()  # a blocking call behind a closed gate would wait forever
        # A span gates once, around all of it; an operation after a blocking call inside it
        # (which had to open the gate) is gated on its own, so its events never time Python.
        gate_here = not synchronous and not gate.closed
        if gate_here:
            gate.close(stream)
        start, end = self._cuda.Event(), self._cuda.Event()
        start.record(stream)
        alone = group == "gpu" and not self._open_events
        self._open_events += 1
        try:
            with self._tag() if group == "gpu" else contextlib.nullcontext() as tag:
                yield
        finally:
            self._open_events -= 1
        end.record(stream)
        if gate_here:
            self.release_gate()
        measurement = self._measurement(group, name, operation, kind, nbytes)
        self._pending.append((measurement, start, end, tag, alone))

    @contextmanager
    def _tag(self) -> Iterator[int | None]:
        """Tag the driver calls made inside with a fresh CUPTI external id (outermost only)."""
        if self.activity is None or self._active_tag is not None:
            yield None
            return
        tag = self.activity.new_tag()
        self._tags.append(tag)
        self.activity.push(tag)
        self._active_tag = tag
        try:
            yield tag
        finally:
            self._active_tag = None
            self.activity.pop()

    def throughput(
        self,
        name: str,
        operation: str,
        kind: str | None,
        nbytes: int,
        action: Callable[[Any], None],
        synchronous: bool = False,
    ) -> None:
        """Per-operation time of back-to-back batches of `action(stream)` (concurrent() on
        one lane); where one operation lasts a batch or more, the single operations just
        timed are its batches."""
        if self._paused:
            return
        measurement = self._measurement("gpu", name, operation, kind, nbytes)
        singles = self._singles.get(id(measurement), [])
        if len(singles) >= THROUGHPUT_BATCHES and statistics.median(singles) >= BATCH_TARGET_MS:
            measurement.throughput_ms += singles
            measurement.batch = 1
            return
        concurrent([Lane(self, action, name, operation, kind, nbytes)], synchronous)

    def host_throughput(
        self,
        name: str,
        operation: str,
        kind: str | None,
        nbytes: int,
        action: Callable[[], None],
        target_ms: float = BATCH_TARGET_MS,
        batches: int | None = None,
    ) -> None:
        """throughput() for host work (the memcpy that bounds pageable copies), on the host's
        monotonic clock."""
        if self._paused:
            return
        measurement = self._measurement("host", name, operation, kind, nbytes)
        action()  # first touch and caches, untimed
        start_ns = time.perf_counter_ns()
        action()
        one_ms = (time.perf_counter_ns() - start_ns) / 1e6
        count = batch_size(one_ms, target_ms)
        loop, per_operation = self.repetitions.batches(batches).loop(), []
        if count == 1:  # the operation that sized the batches was one: the first batch
            per_operation.append(one_ms)
            loop.count = 1
        while loop.more(lambda: [per_operation]):
            start_ns = time.perf_counter_ns()
            for _ in range(count):
                action()
            per_operation.append((time.perf_counter_ns() - start_ns) / 1e6 / count)
        measurement.throughput_ms += per_operation
        measurement.batch = count
        if not measurement.samples_ms:
            measurement.samples_ms = list(measurement.throughput_ms)
        measurement.source = "host"

    def time_once(self, action: Callable[[], None], stream: Any = None) -> float:
        """Milliseconds `action` takes on the GPU, gated between two events; never recorded."""
        stream = stream if stream is not None else self.stream
        gate = self.gate()
        gate.close(stream)
        start, end = self._cuda.Event(), self._cuda.Event()
        start.record(stream)
        action()
        end.record(stream)
        self.release_gate()
        end.synchronize()
        gate.check()
        return end.time_since(start)

    # -- work on several streams at once --------------------------------------------------------

    def on_streams(
        self,
        operations: list[StreamOperation],
        synchronous: bool = False,
        span: Span | None = None,
    ) -> StreamsRun:
        """Queue every operation on its lane's stream, wait, and place each on one clock:
        CUPTI's records, else its events moved to when its engine was free (engine_timeline).
        Unless paused, each duration is a sample of its measurement and the total one of
        `span`. Synchronous operations (pageable copies) are timed as the calls return."""
        recording = not self._paused
        tagged = recording and self.activity is not None
        lanes = 1 + max(operation.lane for operation in operations)
        while len(self._more_streams) < lanes - 1:  # made once: PyCUDA cannot destroy a stream
            self._more_streams.append(self._cuda.Stream())
        streams = [self.stream, *self._more_streams[: lanes - 1]]
        stamped = self._queue_on_streams(operations, streams, synchronous, tagged)
        placed = [Placed(op.lane, op.chunk, op.operation, *ms) for op, *ms, _ in stamped]
        events_rows = engine_timeline(placed)
        events_ms = [row.end_ms - row.start_ms for row in events_rows]
        if tagged:
            self.activity.flush()
            rows, durations = records_timeline(
                [(op, tag) for op, _, _, tag in stamped], self.activity.gpu_records()
            )
            source: Source = "cupti"
        else:
            overhead_ms = self.event_overhead_ms() if recording else 0.0
            rows, durations = events_rows, [max(ms - overhead_ms, 0.0) for ms in events_ms]
            source = "events"
        timeline, total_ms = on_one_clock(rows)
        if recording:
            for (op, *_), sample_ms, beside_ms in zip(stamped, durations, events_ms, strict=True):
                measurement = self._measurement("gpu", op.name, op.operation, op.kind, op.nbytes)
                measurement.samples_ms.append(sample_ms)
                measurement.source = source
                if source == "cupti":
                    measurement.events_ms.append(beside_ms)
            if span is not None:
                measurement = self._measurement("span", *dataclasses.astuple(span))
                measurement.samples_ms.append(total_ms)
                measurement.source = source
        return StreamsRun(timeline, total_ms, source)

    def _queue_on_streams(
        self, operations: list[StreamOperation], streams: list[Any], synchronous: bool, tagged: bool
    ) -> list[tuple[StreamOperation, float, float, int | None]]:
        """(operation, start, end in ms from the first event, CUPTI tag) of each, queued
        between two events of its stream (one ends an operation and starts the next), behind
        one gate unless synchronous."""
        gate = self.gate()
        if synchronous:
            self.release_gate()  # a blocking call behind a closed gate would wait forever
        else:
            gate.close(*streams)
        boundary: dict[int, Any] = {}  # lane -> its last event
        queued = []
        try:
            for operation in operations:
                stream = streams[operation.lane]
                if operation.lane not in boundary:
                    boundary[operation.lane] = self._cuda.Event()
                    boundary[operation.lane].record(stream)
                start = boundary[operation.lane]
                with self._tag() if tagged else contextlib.nullcontext() as tag:
                    operation.action(stream)
                boundary[operation.lane] = end = self._cuda.Event()
                end.record(stream)
                queued.append((operation, start, end, tag))
        finally:
            self.release_gate()
        for last in boundary.values():
            last.synchronize()
        gate.check()
        first = queued[0][1]
        return [
            (operation, start.time_since(first), end.time_since(first), tag)
            for operation, start, end, tag in queued
        ]

    # -- results -------------------------------------------------------------------------------

    @property
    def gate_closed(self) -> bool:
        """True inside a span whose operations wait behind the gate: nothing may block."""
        return self._gate is not None and self._gate.closed

    def gate(self) -> Any:
        if self._gate is None:
            from memprof.core.gate import Gate

            self._gate = Gate(self._session)
        return self._gate

    def release_gate(self) -> None:
        if self._gate is not None and self._gate.closed:
            self._gate.open()

    def resolve(self) -> None:
        """Wait for every recorded event and turn event pairs into samples."""
        self.release_gate()
        for measurement, start, end, tag, alone in self._pending:
            end.synchronize()
            events_ms = end.time_since(start)
            self._timed.append((measurement, events_ms, tag))
            self._seen(measurement, events_ms)
            if alone:
                self._singles.setdefault(id(measurement), []).append(events_ms)
        self._pending.clear()
        if self._gate is not None:
            self._gate.check()

    def measurements(self) -> list[Measurement]:
        """Every measurement, GPU activities from CUPTI where it recorded them."""
        self.resolve()
        gpu_records: dict[int, list] = {}
        api_records: dict[int, list] = {}
        if self.activity is not None:
            self.activity.flush()
            gpu_records, api_records = self.activity.gpu_records(), self.activity.api_records()
        timed = [(m, events_ms, gpu_records.get(tag, [])) for m, events_ms, tag in self._timed]
        for measurement, events_samples in _settle(timed, "events"):
            if measurement.source == "cupti":
                measurement.events_ms = events_samples
            elif measurement.group == "gpu":
                # gated single operations without CUPTI: less the interval an empty gated
                # event pair measures, so a microsecond kernel is not read as three
                overhead_ms = self.event_overhead_ms()
                measurement.samples_ms = [max(ms - overhead_ms, 0.0) for ms in events_samples]
        calls = [
            (m, host_ms, [r for r in api_records.get(tag, ()) if same_call(r.name, m.name)])
            for m, host_ms, tag in self._calls
        ]
        _settle(calls, "host")  # driver_call(): CUPTI's record of each call, else the host's
        self._timed.clear()
        self._calls.clear()
        made = [r for tag in self._tags for r in api_records.get(tag, ())]  # by timed operations
        return [m for m in self._measurements.values() if m.samples_ms] + call_rows(made)

    def timing_info(self) -> TimingInfo:
        """Where this run's figures came from, for the Result."""
        if self.activity is None:
            unified_memory, unified_memory_note = None, self.fallback_reason or None
        else:
            unified_memory_note = self.activity.unified_memory_refusal
            unified_memory = (
                self.activity.unified_memory_totals() if unified_memory_note is None else None
            )
        adaptive = self.repetitions.exactly is None
        return TimingInfo(
            source="cupti" if self.activity is not None else "events",
            note=self.fallback_reason,
            event_overhead_ms=self.event_overhead_ms(),
            unified_memory=unified_memory,
            unified_memory_note=unified_memory_note,
            max_noise_pct=self.repetitions.max_noise_pct if adaptive else None,
            time_cap_s=self.repetitions.cap_s if adaptive else None,
            max_count=self.repetitions.most if adaptive else None,
        )

    def event_overhead_ms(self) -> float:
        """Median interval between gated back-to-back events with nothing between them."""
        if self._event_overhead_ms is None:
            events = [self._cuda.Event() for _ in range(33)]
            self.time_once(lambda: [event.record(self.stream) for event in events])
            intervals = [b.time_since(a) for a, b in itertools.pairwise(events)]
            self._event_overhead_ms = Statistics.of(intervals).median_ms
        return self._event_overhead_ms

    def discard_pending(self) -> None:
        """Drop unresolved events (after an error) so nothing holds the context."""
        self.release_gate()
        self._pending.clear()

    def release(self) -> None:
        """Let go of the stream and the gate before the context is popped."""
        self.release_gate()
        self._gate = None
        self.stream = None
        self._more_streams = []

    def _measurement(
        self,
        group: Group,
        name: str,
        operation: str,
        kind: str | None,
        nbytes: int,
        gpus: tuple[int, ...] | None = None,
    ) -> Measurement:
        gpus = self._gpus if gpus is None else gpus
        key = (group, name, operation, kind, nbytes, gpus)
        if key not in self._measurements:
            if self.declared is not None and (group, operation) not in self.declared:
                raise UndeclaredMeasurement(
                    f"recorded {group} {operation!r} ({name}), which the experiment does not "
                    "declare: a bug in memprof"
                )
            self._measurements[key] = Measurement(group, name, operation, kind, nbytes, gpus=gpus)
        return self._measurements[key]


def _settle(
    samples: list[tuple[Measurement, float, list]], clock: Source
) -> list[tuple[Measurement, list[float]]]:
    """Each measurement's samples: CUPTI's records' durations where every sample has records,
    else what `clock` read, which is returned beside each measurement."""
    by_measurement: dict[int, tuple[Measurement, list[float], list[list]]] = {}
    for measurement, clock_ms, records in samples:
        _, read, recorded = by_measurement.setdefault(id(measurement), (measurement, [], []))
        read.append(clock_ms)
        recorded.append(records)
    for measurement, read, recorded in by_measurement.values():
        if all(recorded):
            measurement.samples_ms = [math.fsum(r.duration_ms for r in rs) for rs in recorded]
            measurement.source = "cupti"
        else:
            measurement.samples_ms, measurement.source = list(read), clock
    return [(measurement, read) for measurement, read, _ in by_measurement.values()]


def call_rows(records: Iterable[Any], operation: str = "driver_call") -> list[Measurement]:
    """nvprof's API-calls rows: each driver call's CUPTI records (ApiRecord), by name."""
    rows: dict[str, Measurement] = {}
    for record in records:
        if record.name not in rows:
            rows[record.name] = Measurement("api", record.name, operation, None, 0, source="cupti")
        rows[record.name].samples_ms.append(record.duration_ms)
    return sorted(rows.values(), key=lambda m: m.name)


def same_call(recorded: str, name: str) -> bool:
    """Is CUPTI's name of a driver call (cuMemAlloc_v2, cuMemcpyBatchAsync_v2,
    cuMemAllocAsync_ptsz) the call memprof made (cuMemAlloc)?"""
    return re.fullmatch(re.escape(name) + r"(_v\d+)?(_ptsz|_ptds)?", recorded) is not None


def concurrent(
    lanes: list[Lane],
    synchronous: bool = False,
    target_ms: float = BATCH_TARGET_MS,
    batches: int | None = None,
    warmup: int = 0,
) -> None:
    """Back-to-back batches on every lane at once, each lane's time per operation recorded as
    its measurement's throughput (and samples where it has no others). A batch lasts about
    target_ms, which makes the skew of opening the gates one after another negligible.
    Synchronous operations cannot be gated: one lane, timed as the calls return."""
    if synchronous and len(lanes) > 1:
        raise ValueError("synchronous operations block the host: they cannot run concurrently")
    measurements = [
        lane.profiler._measurement(
            "gpu", lane.name, lane.operation, lane.kind, lane.nbytes, lane.gpus or None
        )
        for lane in lanes
    ]
    activities = {id(lane.profiler.activity): lane.profiler.activity for lane in lanes}
    with contextlib.ExitStack() as stack:
        for activity in activities.values():  # CUPTI's timestamps would slow small operations
            if activity is not None:
                stack.enter_context(activity.paused())
        sizing = _batch_times(lanes, 1, synchronous)
        count = batch_size(max(sizing), target_ms)
        for _ in range(warmup):
            _batch_times(lanes, count, synchronous)
        loop = lanes[0].profiler.repetitions.batches(batches).loop()
        series: list[list[float]] = [[] for _ in lanes]  # this call's batches, lane by lane
        if count == 1 and not warmup:  # the batch that sized them was one: the first
            for measurement, samples, batch_ms in zip(measurements, series, sizing, strict=True):
                measurement.throughput_ms.append(batch_ms)
                samples.append(batch_ms)
            loop.count = 1
        while loop.more(lambda: series):
            batch_times = _batch_times(lanes, count, synchronous)
            for measurement, samples, batch_ms in zip(
                measurements, series, batch_times, strict=True
            ):
                measurement.throughput_ms.append(batch_ms / count)
                samples.append(batch_ms / count)
    for measurement in measurements:
        measurement.batch = count
        if not measurement.samples_ms:  # no single operations: its batches stand for it
            measurement.samples_ms = list(measurement.throughput_ms)
            measurement.source = "events"


def _batch_times(lanes: list[Lane], count: int, synchronous: bool) -> list[float]:
    """Milliseconds of `count` operations on each lane, queued behind each lane's gate and
    released back to back (synchronous: timed as the calls return)."""
    queued = []  # a profiler's gate holds all its lanes' streams (generations only grow)
    for lane in lanes:
        profiler = lane.profiler
        with profiler._session.active():  # its GPU's context current (several GPUs at once)
            gate = profiler.gate()
            stream = lane.stream if lane.stream is not None else profiler.stream
            if not synchronous:
                gate.close(stream)
            start, end = profiler._cuda.Event(), profiler._cuda.Event()
            start.record(stream)
            for _ in range(count):
                lane.action(stream)
            end.record(stream)
        queued.append((profiler, start, end))
    for profiler, _, _ in queued:  # the gates open one right after the other
        profiler.release_gate()
    times = []
    for profiler, start, end in queued:
        with profiler._session.active():
            end.synchronize()
            profiler.gate().check()
            times.append(end.time_since(start))
    return times


# -- placing operations on one clock (pure: tested without a GPU) --------------------------------


def engine_timeline(rows: list[Placed]) -> list[Placed]:
    """Events' times moved to when an engine took each operation, in the order given: an
    event records when its stream reached the operation, so each starts at the later of that
    and the end of the one of its kind (one engine per kind) that finished before it."""
    corrected: dict[int, Placed] = {}
    for operation in {row.operation for row in rows}:
        previous_end = -math.inf
        same_kind = [(i, row) for i, row in enumerate(rows) if row.operation == operation]
        for index, row in sorted(same_kind, key=lambda pair: pair[1].end_ms):
            start_ms = max(row.start_ms, previous_end)
            corrected[index] = Placed(row.lane, row.chunk, row.operation, start_ms, row.end_ms)
            previous_end = row.end_ms
    return [corrected[index] for index in range(len(rows))]


def records_timeline(
    tagged: list[tuple[StreamOperation, int | None]], records: dict[int, list]
) -> tuple[list[Placed], list[float]]:
    """Each operation where CUPTI's records place it (ms from the earliest start) and its
    duration (the records' own), in the order given. Every operation needs a record: a
    timeline on one clock cannot fill a gap with another clock's time."""
    missing = [op for op, tag in tagged if tag is None or not records.get(tag)]
    if missing:
        raise MissingRecords(
            f"CUPTI recorded nothing for {len(missing)} of the {len(tagged)} operations "
            "queued on several streams (its buffers may have overflowed), so they cannot be "
            "placed on its clock: run again, or use --timing events"
        )
    spans = [
        (min(r.start_ns for r in records[tag]), max(r.end_ns for r in records[tag]))
        for _, tag in tagged
    ]
    origin_ns = min(start_ns for start_ns, _ in spans)  # ns stay integers: no rounding
    rows = [
        Placed(op.lane, op.chunk, op.operation, (start - origin_ns) / 1e6, (end - origin_ns) / 1e6)
        for (op, _), (start, end) in zip(tagged, spans, strict=True)
    ]
    durations = [math.fsum(r.duration_ms for r in records[tag]) for _, tag in tagged]
    return rows, durations


def on_one_clock(rows: list[Placed]) -> tuple[list[Placed], float]:
    """The rows in ms from the earliest start, by lane then start, and the latest end."""
    origin_ms = min(row.start_ms for row in rows)
    shifted = [
        Placed(r.lane, r.chunk, r.operation, r.start_ms - origin_ms, r.end_ms - origin_ms)
        for r in rows
    ]
    shifted.sort(key=lambda row: (row.lane, row.start_ms, row.end_ms))
    return shifted, max(row.end_ms for row in shifted)
