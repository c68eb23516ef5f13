"""CUPTI's records, without a GPU: parsed into memprof's records and attributed to the operation
that was tagged, through the profiler, as on the GPU machine (tests/fake_cupti.py makes them).

Attribution is the heart of memprof's figures: a record given to the wrong operation is a
wrong number in the profile, however good the timing. So every step is checked here with
correlation ids unlike the external ids, records delivered out of order and across buffers,
untagged work around the tagged, and each operation's own duration.
"""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from memprof.core.activity import (
    MEMORY_KIND_NAMES,
    UNIFIED_MEMORY_COUNTERS,
    ActivityLog,
    GpuRecord,
    callback_name,
    cupti_unavailable_reason,
)
from memprof.errors import error_words
from memprof.trace.stacks import is_work_call
from tests.fake_cupti import CBID, ActivityKind, ActivityUnifiedMemoryCounterScope, FakeCupti
from tests.test_profile import FakeEvent, make_profiler


def tagged(log: ActivityLog):
    """Push a fresh external id around what follows, as memprof's profiler does."""

    class Tag:
        def __enter__(self):
            self.id = log.new_tag()
            log.push(self.id)
            return self.id

        def __exit__(self, *exc):
            log.pop()

    return Tag()


@pytest.fixture
def cupti(monkeypatch) -> FakeCupti:
    """cupti-python replaced by the fake, for ActivityLog.start()."""
    fake = FakeCupti()
    monkeypatch.setitem(sys.modules, "cupti", SimpleNamespace(cupti=fake))
    return fake


def started(cupti: FakeCupti, keep_all: bool = False) -> ActivityLog:
    log, why_not = ActivityLog.start(0, keep_all=keep_all)
    assert why_not is None and log is not None
    return log


# -- attribution ---------------------------------------------------------------------------


def test_each_tagged_operation_gets_its_own_records_and_nothing_else(cupti):
    log = started(cupti)
    cupti.memcpy("HTOD", 4096, 1_000)  # untagged: memprof's set-up work
    with tagged(log) as first:
        h2d = cupti.memcpy("HTOD", 4096, 3_000)
    with tagged(log) as second:
        d2h = cupti.memcpy("DTOH", 8192, 5_000, src=3, dst=2, call="cuMemcpyDtoHAsync_v2")
        kernel = cupti.kernel("sumArraysGPU", 7_000)
    cupti.kernel("gate", 9_000)  # untagged again
    log.flush()
    gpu = log.gpu_records()
    assert set(gpu) == {first, second}
    assert [(r.name, r.duration_ms, r.correlation_id) for r in gpu[first]] == [("HTOD", 0.003, h2d)]
    assert [(r.name, r.duration_ms, r.correlation_id) for r in gpu[second]] == [
        ("DTOH", 0.005, d2h),
        ("sumArraysGPU", 0.007, kernel),
    ]
    api = log.api_records()
    assert [c.name for c in api[first]] == ["cuMemcpyHtoDAsync_v2"]
    assert [c.name for c in api[second]] == ["cuMemcpyDtoHAsync_v2", "cuLaunchKernel"]
    assert {c.correlation_id for c in api[second]} == {d2h, kernel}


def test_attribution_holds_whatever_order_and_buffers_the_records_arrive_in(cupti):
    log = started(cupti)
    with tagged(log) as first:
        cupti.memcpy("HTOD", 64, 1_000)
    with tagged(log) as second:
        cupti.memcpy("HTOD", 64, 2_000)
    records = cupti.pending
    correlations = [r for r in records if r.kind == ActivityKind.EXTERNAL_CORRELATION]
    others = [r for r in records if r.kind != ActivityKind.EXTERNAL_CORRELATION]
    log._buffer_completed(list(reversed(others)))  # GPU and API records first...
    assert log.gpu_records() == {}  # ...are nobody's until their external correlation comes
    log._buffer_completed(list(reversed(correlations)))
    durations = {tag: [r.duration_ms for r in rs] for tag, rs in log.gpu_records().items()}
    assert durations == {first: [0.001], second: [0.002]}


def test_an_external_id_is_never_taken_for_a_correlation_id(cupti):
    """Ids chosen to collide: external id 3 is also some other call's correlation id."""
    log = started(cupti)
    log._buffer_completed([
        SimpleNamespace(kind=ActivityKind.EXTERNAL_CORRELATION, correlation_id=7, external_id=3),
        SimpleNamespace(kind=ActivityKind.MEMSET, correlation_id=7, start=0, end=4_000,
                        bytes=16, flags_=1),
        SimpleNamespace(kind=ActivityKind.MEMSET, correlation_id=3, start=0, end=9_000,
                        bytes=32, flags_=1),
    ])  # fmt: skip
    assert {tag: [r.bytes for r in rs] for tag, rs in log.gpu_records().items()} == {3: [16]}


def test_the_profiler_gives_each_repetition_cuptis_own_duration(cupti):
    """The whole path: profiler tags -> CUPTI records -> measurements, warm-ups left out."""
    log = started(cupti)
    profiler = make_profiler(log)
    durations = iter([111_000, 222_000, 333_000, 444_000, 555_000, 666_000])

    def step():
        with profiler.events("gpu", "[CUDA memcpy HtoD]", "h2d", "pinned", 4096):
            cupti.memcpy("HTOD", 4096, next(durations))
            FakeEvent.clock_ms += 1.0
        with profiler.events("gpu", "[CUDA memcpy DtoH]", "d2h", "pinned", 4096):
            cupti.memcpy("DTOH", 4096, next(durations), call="cuMemcpyDtoHAsync_v2")
            FakeEvent.clock_ms += 2.0

    profiler.repeat(step, warmup=1, repeat=2)
    measurements = {(m.group, m.operation): m for m in profiler.measurements()}
    h2d, d2h = measurements["gpu", "h2d"], measurements["gpu", "d2h"]
    assert h2d.samples_ms == [0.333, 0.555] and d2h.samples_ms == [0.444, 0.666]
    assert h2d.source == d2h.source == "cupti"
    assert h2d.events_ms == [1.0, 1.0] and d2h.events_ms == [2.0, 2.0]
    rows = {m.name: m for m in profiler.measurements() if m.group == "api"}
    assert rows["cuMemcpyHtoDAsync_v2"].samples_ms == [0.002, 0.002]
    assert rows["cuMemcpyDtoHAsync_v2"].stats.count == 2


def test_an_operation_cupti_missed_falls_back_to_its_events_only(cupti):
    log = started(cupti)
    profiler = make_profiler(log)

    def step():
        with profiler.events("gpu", "k", "kernel", "device", 4):
            FakeEvent.clock_ms += 2.0  # no record: CUPTI lost it

    profiler.repeat(step, warmup=0, repeat=2)
    [kernel] = profiler.measurements()
    assert (kernel.source, kernel.samples_ms) == ("events", [2.0, 2.0])


def test_several_records_of_one_operation_are_summed(cupti):
    """A span's copies, or a copy CUPTI split in two: the operation took their sum."""
    log = started(cupti)
    profiler = make_profiler(log)

    def step():
        with profiler.events("gpu", "k", "kernel", "device", 4):
            cupti.kernel("part one", 1_500)
            cupti.kernel("part two", 2_500)

    profiler.repeat(step, warmup=0, repeat=1)
    [kernel, *_] = profiler.measurements()
    assert kernel.samples_ms == [pytest.approx(0.004)]


# -- parsing every kind of record ------------------------------------------------------------


def test_memcpy_records_keep_direction_bytes_memory_kinds_and_the_async_flag(cupti):
    log = started(cupti, keep_all=True)
    cupti.memcpy("HTOD", 4096, 1_000, src=1, dst=3, flags=0)
    cupti.memcpy("DTOH", 8192, 2_000, src=3, dst=5, flags=1)
    cupti.memcpy("PTOP", 16, 3_000, src=3, dst=99, flags=2)  # 99: a kind CUPTI added later
    log.flush()
    records = log.all_gpu_records()
    fields = [
        (r.category, r.name, r.bytes, r.src_kind, r.dst_kind, r.asynchronous) for r in records
    ]
    assert fields == [
        ("memcpy", "HTOD", 4096, "pageable", "device", False),
        ("memcpy", "DTOH", 8192, "device", "managed", True),
        ("memcpy", "PTOP", 16, "device", "unknown", False),
    ]  # fmt: skip
    assert [r.duration_ms for r in records] == [0.001, 0.002, 0.003]
    assert MEMORY_KIND_NAMES[2] == "pinned" and MEMORY_KIND_NAMES[6] == "device static"


def test_older_builds_name_the_flags_field_flags(cupti):
    log = started(cupti)
    log._buffer_completed([
        SimpleNamespace(kind=ActivityKind.MEMSET, correlation_id=1, start=10, end=30, bytes=8,
                        flags=0),
        SimpleNamespace(kind=ActivityKind.MEMSET, correlation_id=2, start=40, end=50, bytes=8,
                        flags=1),
    ])  # fmt: skip
    records = log.all_gpu_records()
    assert [(r.category, r.asynchronous, r.start_ns, r.end_ns) for r in records] == [
        ("memset", False, 10, 30),
        ("memset", True, 40, 50),
    ]


def test_a_record_without_flags_is_taken_as_asynchronous(cupti):
    """A build naming neither field: no copy is called blocking on a guess."""
    log = started(cupti)
    log._buffer_completed([
        SimpleNamespace(kind=ActivityKind.MEMSET, correlation_id=1, start=10, end=30, bytes=8),
    ])  # fmt: skip
    (record,) = log.all_gpu_records()
    assert record.asynchronous is True


def test_kernel_and_memset_records(cupti):
    log = started(cupti)
    kernel = cupti.kernel("_Z3sumPfS_", 2_500)
    memset = cupti.memset(1 << 20, 700, flags=0)
    log.flush()
    kernel_record, memset_record = log.all_gpu_records()
    assert kernel_record == GpuRecord(
        "kernel", "_Z3sumPfS_", kernel_record.start_ns, kernel_record.start_ns + 2_500,
        correlation_id=kernel, stream=7,
    )  # fmt: skip
    assert (memset_record.category, memset_record.bytes, memset_record.asynchronous) == (
        "memset",
        1 << 20,
        False,
    )
    assert memset_record.correlation_id == memset and memset_record.name == "memset"
    assert memset_record.start_ns > kernel_record.start_ns


def test_gpu_records_come_in_order_of_start_whatever_their_order_of_arrival(cupti):
    log = started(cupti)
    log._buffer_completed([
        SimpleNamespace(kind=ActivityKind.CONCURRENT_KERNEL, correlation_id=2, name="b",
                        start=500, end=600),
        SimpleNamespace(kind=ActivityKind.CONCURRENT_KERNEL, correlation_id=1, name="a",
                        start=100, end=200),
        SimpleNamespace(kind=ActivityKind.CONCURRENT_KERNEL, correlation_id=2, name="c",
                        start=300, end=400),
    ])  # fmt: skip
    assert [r.name for r in log.all_gpu_records()] == ["a", "c", "b"]


def test_an_unknown_callback_id_gets_a_name_that_says_so(cupti):
    log = started(cupti)
    log._buffer_completed([
        SimpleNamespace(kind=ActivityKind.DRIVER, cbid=9999, correlation_id=1, start=0, end=1),
    ])  # fmt: skip
    assert log._api[1].name == "driver call 9999"


def test_a_call_cupti_cannot_name_is_named_by_its_domain_and_id(cupti):
    """One rule names calls for the experiments' records and trace's callbacks alike."""
    assert callback_name(cupti, 1, CBID["cuMemAlloc_v2"]) == "cuMemAlloc_v2"
    assert callback_name(cupti, 1, 9999) == "driver call 9999"
    assert callback_name(cupti, 2, 9999) == "runtime call 9999"


def test_a_whole_program_log_records_the_gpus_work_and_no_call(cupti):
    """memprof trace times calls by CUPTI's callbacks (memprof.trace.stacks): the DRIVER and
    RUNTIME records are not switched on at all, in the trace or after a pause."""
    whole = started(cupti, keep_all=True)
    assert ActivityKind.DRIVER not in cupti.enabled
    assert ActivityKind.RUNTIME not in cupti.enabled
    assert {
        ActivityKind.CONCURRENT_KERNEL,
        ActivityKind.MEMCPY,
        ActivityKind.MEMSET,
    } <= cupti.enabled
    with whole.paused():
        pass
    assert ActivityKind.DRIVER not in cupti.enabled
    cupti.call("cuMemcpyHtoDAsync_v2")
    whole.flush()
    assert whole._api == {} and whole.buffer_bytes == 32 << 20
    assert whole._buffer_requested() == (32 << 20, 0)
    experiments = started(cupti)
    assert experiments.buffer_bytes == 4 << 20 and "DRIVER" in experiments.work_kinds


# -- unified memory counters -------------------------------------------------------------------


def test_unified_memory_counters_are_configured_for_this_device(cupti):
    log, _ = ActivityLog.start(3)
    assert log.unified_memory_refusal is None
    entries = cupti.configured.entries
    assert [e.kind.name for e in entries] == list(UNIFIED_MEMORY_COUNTERS)
    assert {(e.device_id, e.enable) for e in entries} == {(3, 1)}
    assert {e.scope for e in entries} == {
        int(ActivityUnifiedMemoryCounterScope.PROCESS_SINGLE_DEVICE)
    }
    assert ActivityKind.UNIFIED_MEMORY_COUNTER in cupti.enabled


def test_unified_memory_totals_as_nvprof_printed_them(cupti):
    log = started(cupti)
    cupti.counter("BYTES_TRANSFER_HTOD", 4096, 100, 2_100)
    cupti.counter("BYTES_TRANSFER_HTOD", 65536, 3_000, 4_000)
    cupti.counter("GPU_PAGE_FAULT", 12, 0, 500)  # one record per fault group: its faults
    cupti.counter("CPU_PAGE_FAULT_COUNT", 77, 0, 0)  # one record per fault: value is no count
    cupti.counter("CPU_PAGE_FAULT_COUNT", 5, 10, 5)  # end before start: no negative time
    log.flush()
    totals = log.unified_memory_totals()
    assert totals["BYTES_TRANSFER_HTOD"] == {
        "count": 2, "total": 69632, "min": 4096, "max": 65536, "time_ms": 0.003,
    }  # fmt: skip
    assert totals["GPU_PAGE_FAULT"] == {
        "count": 1, "total": 12, "min": 12, "max": 12, "time_ms": 0.0005,
    }  # fmt: skip
    assert totals["CPU_PAGE_FAULT_COUNT"] == {
        "count": 2, "total": 2, "min": 1, "max": 1, "time_ms": 0.0,
    }  # fmt: skip
    assert totals["BYTES_TRANSFER_DTOH"] == {
        "count": 0, "total": 0, "min": 0, "max": 0, "time_ms": 0.0,
    }  # fmt: skip


def test_a_refused_unified_memory_counter_is_said_and_the_rest_works(cupti):
    cupti.refuse.add(ActivityKind.UNIFIED_MEMORY_COUNTER)
    log, why_not = ActivityLog.start(0)
    assert why_not is None
    assert log.unified_memory_refusal == (
        "CUPTI refused unified-memory counters: CUPTI_ERROR_NOT_COMPATIBLE (41)"
    )


# -- starting, pausing, refusing ---------------------------------------------------------------


def test_start_enables_what_memprof_reads_and_registers_its_buffers(cupti):
    log = started(cupti)
    assert {
        ActivityKind.CONCURRENT_KERNEL,
        ActivityKind.MEMCPY,
        ActivityKind.MEMSET,
        ActivityKind.DRIVER,
        ActivityKind.EXTERNAL_CORRELATION,
    } <= cupti.enabled
    assert cupti.callbacks == (log._buffer_requested, log._buffer_completed)


def test_a_refusal_disables_everything_and_says_why(cupti):
    cupti.refuse.add(ActivityKind.DRIVER)
    log, why_not = ActivityLog.start(0)
    assert log is None
    assert why_not == "CUPTI refused activity tracing: CUPTI_ERROR_NOT_COMPATIBLE (41)"
    assert cupti.enabled == set()  # what was enabled before the refusal is off again
    assert ActivityKind.UNIFIED_MEMORY_COUNTER in cupti.disabled_log


def test_without_cupti_python_memprof_says_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupti", None)
    log, why_not = ActivityLog.start(0)
    assert log is None and why_not.startswith("cupti-python is not installed")
    assert cupti_unavailable_reason().startswith("cupti-python is not installed")


def test_a_broken_cupti_install_is_said_in_one_line(monkeypatch):
    class Broken:
        def __getattr__(self, name):
            raise OSError("libcupti.so.13: cannot open shared object file")

    monkeypatch.setitem(sys.modules, "cupti", Broken())
    log, why_not = ActivityLog.start(0)
    assert log is None
    assert (
        why_not == "cupti-python cannot be loaded: libcupti.so.13: cannot open shared object file"
    )
    assert cupti_unavailable_reason() == why_not


def test_paused_stops_recording_gpu_work_and_resumes_even_after_an_error(cupti):
    log = started(cupti)
    with pytest.raises(RuntimeError), log.paused():
        with tagged(log):
            cupti.memcpy("HTOD", 64, 1_000)  # dropped: CUPTI is not recording copies
        assert ActivityKind.MEMCPY not in cupti.enabled
        assert ActivityKind.EXTERNAL_CORRELATION in cupti.enabled  # ids still flow
        raise RuntimeError("a batch failed")
    for kind in (ActivityKind.CONCURRENT_KERNEL, ActivityKind.MEMCPY, ActivityKind.MEMSET,
                 ActivityKind.DRIVER):  # fmt: skip
        assert kind in cupti.enabled
    with tagged(log) as tag:
        cupti.memcpy("HTOD", 64, 2_000)
    log.flush()
    assert {t: [r.duration_ms for r in rs] for t, rs in log.gpu_records().items()} == {tag: [0.002]}


def test_tags_are_fresh_and_pushed_as_memprofs_own_kind(cupti):
    log = started(cupti)
    tags = [log.new_tag() for _ in range(3)]
    assert tags == sorted(set(tags)) and tags[0] >= 1
    log.push(tags[1])
    assert cupti.stack == [tags[1]]
    log.pop()
    assert cupti.stack == []
    log.stop()  # delivers what is held
    assert cupti.flushes == 1


def test_reasons_are_cuptis_own_words():
    assert error_words(RuntimeError(" ERROR_NOT_READY (13) ")) == "ERROR_NOT_READY (13)"
    assert error_words(RuntimeError()) == "RuntimeError"


# -- reading records from their memory -----------------------------------------------------


def api_records(*rows):
    """CUPTI API records laid out as CUpti_ActivityAPI, each with .ptr and attributes."""
    import numpy as np

    dtype = np.dtype(
        [("kind", "<u4"), ("cbid", "<u4"), ("start", "<u8"), ("end", "<u8"),
         ("processId", "<u4"), ("threadId", "<u4"), ("correlationId", "<u4"),
         ("returnValue", "<u4")]
    )  # fmt: skip
    array = np.array([(*row[:4], 1, 2, row[4], 0) for row in rows], dtype=dtype)

    class Record:
        def __init__(self, index):
            self.ptr = array.ctypes.data + index * dtype.itemsize
            item = array[index]
            self.kind, self.cbid, self.start, self.end = (int(item[n]) for n in range(4))
            self.correlation_id = int(item["correlationId"])

    return dtype, array, [Record(i) for i in range(len(rows))]


def test_a_record_is_read_from_its_memory_as_its_attributes_say():
    from memprof.core.activity import FieldReader

    dtype, _array, records = api_records((6, 17, 1000, 4000, 7), (6, 18, 5000, 5500, 8))
    names = ("kind", "cbid", "start", "end", "correlation_id")
    reader = FieldReader(dtype, names)
    assert [reader.read(r) for r in records] == [(6, 17, 1000, 4000, 7), (6, 18, 5000, 5500, 8)]
    assert reader.unpack is not None  # the first agreed with its attributes: memory from then


def test_a_layout_the_attributes_contradict_is_never_read_again():
    import numpy as np

    from memprof.core.activity import FieldReader

    _dtype, _array, records = api_records((6, 17, 1000, 4000, 7))
    swapped = np.dtype(  # start and end where the record has them the other way round
        {"names": ["kind", "cbid", "start", "end", "correlationId"],
         "formats": ["<u4", "<u4", "<u8", "<u8", "<u4"], "offsets": [0, 4, 16, 8, 32]}
    )  # fmt: skip
    reader = FieldReader(swapped, ("kind", "cbid", "start", "end", "correlation_id"))
    assert reader.read(records[0]) == (6, 17, 1000, 4000, 7)  # the attributes' values
    assert reader.unpack is None
    no_pointer = type("Record", (), {"kind": 6, "cbid": 1, "start": 2, "end": 3,
                                     "correlation_id": 4})()  # fmt: skip
    fresh = FieldReader(_dtype, ("kind", "cbid", "start", "end", "correlation_id"))
    assert fresh.read(no_pointer) == (6, 1, 2, 3, 4) and fresh.unpack is None


def test_only_the_driver_calls_asked_for_are_recorded_where_cupti_can_switch_calls_off(cupti):
    log, why_not = ActivityLog.start(0, record_call=is_work_call)
    assert why_not is None and log is not None
    assert cupti.records_off == {(ActivityKind.DRIVER, CBID["cuEventRecord"])}
    first = cupti.call("cuEventRecord")
    second = cupti.call("cuMemcpyHtoD_v2")
    log.flush()
    assert list(log._api) == [second] and first not in log._api


def test_a_call_cupti_will_not_switch_off_stays_recorded_and_the_others_go(cupti):
    cupti.refuse_switch = {CBID["cuEventRecord"]}
    log, _ = ActivityLog.start(0, record_call=lambda n: n not in {"cuEventRecord", "cuMemAlloc_v2"})
    assert cupti.records_off == {(ActivityKind.DRIVER, CBID["cuMemAlloc_v2"])}
    event = cupti.call("cuEventRecord")
    cupti.call("cuMemAlloc_v2")
    log.flush()
    assert list(log._api) == [event]


def test_every_call_is_recorded_where_none_is_refused(cupti):
    started(cupti)
    assert cupti.records_off == set()


def test_an_experiments_log_leaves_out_the_event_calls_of_its_timing_and_keeps_the_rest(cupti):
    from memprof.core.session import start_activity

    log, why_not = start_activity("auto", 0)
    assert why_not == "" and log is not None
    assert cupti.records_off == {(ActivityKind.DRIVER, CBID["cuEventRecord"])}
    with tagged(log) as tag:
        cupti.call("cuEventRecord")  # switched off: no record
        cupti.memcpy("HTOD", 4096, 3_000)  # its call, cuMemcpyHtoDAsync_v2, is recorded
    with log.paused():  # the DRIVER kind off and on again: every call recorded, but for...
        pass
    assert cupti.records_off == {(ActivityKind.DRIVER, CBID["cuEventRecord"])}  # ...these
    with tagged(log) as later:
        cupti.call("cuEventRecord")
        cupti.memcpy("HTOD", 4096, 3_000)
    log.flush()
    assert [call.name for call in log.api_records()[tag]] == ["cuMemcpyHtoDAsync_v2"]
    assert [call.name for call in log.api_records()[later]] == ["cuMemcpyHtoDAsync_v2"]
    log.stop()  # tracing stays on for the next log, which records every call unless it says
    assert cupti.records_off == set()


@pytest.mark.parametrize(
    ("name", "untimed"),
    [("cuEventRecord", True), ("cuEventElapsedTime_v2", True), ("cuEventDestroy_v2", True),
     ("cuMemcpyHtoDAsync_v2", False), ("cuLaunchKernel", False), ("cuStreamSynchronize", False),
     ("cuCtxGetDevice", False), ("cudaEventRecord", False)],
)  # fmt: skip
def test_only_the_driver_event_calls_are_left_out_of_an_experiments_records(name, untimed):
    from memprof.core.activity import experiment_call

    assert experiment_call(name) is not untimed


def copy_and_kernel_records(cupti):
    """Records laid out as cupti-python's Memcpy6 and Kernel10 classes (their memory: the
    fields read, byte-wide ones among them, with padding between), on this fake CUPTI."""
    import ctypes

    import numpy as np

    memcpy = np.dtype(
        {"names": ["kind", "copyKind", "srcKind", "dstKind", "flags", "bytes", "start", "end",
                   "deviceId", "streamId", "correlationId"],
         "formats": ["<u4", "u1", "u1", "u1", "u1", "<u8", "<u8", "<u8", "<u4", "<u4", "<u4"],
         "offsets": [0, 4, 5, 6, 7, 8, 16, 24, 32, 40, 44], "itemsize": 64}
    )  # fmt: skip
    kernel = np.dtype(  # the name: a pointer to its characters
        {"names": ["kind", "start", "end", "deviceId", "streamId", "correlationId", "name"],
         "formats": ["<u4", "<u8", "<u8", "<u4", "<u4", "<u4", "<u8"],
         "offsets": [0, 24, 32, 84, 92, 96, 104], "itemsize": 128}
    )  # fmt: skip
    name = ctypes.create_string_buffer(b"sumArraysGPU")
    copies = np.zeros(2, memcpy)
    copies[0] = (1, 1, 2, 3, 1, 4096, 1000, 3000, 0, 13, 7)  # HtoD, pinned → device, async
    copies[1] = (1, 2, 3, 1, 0, 8192, 5000, 9000, 0, 14, 8)  # DtoH, device → pageable, blocking
    kernels = np.zeros(1, kernel)
    kernels[0] = (10, 11_000, 12_500, 1, 15, 9, ctypes.addressof(name))

    class ActivityMemcpy6:
        def __init__(self, index):
            item = copies[index]
            self.ptr = copies.ctypes.data + index * memcpy.itemsize
            self.kind, self.copy_kind, self.src_kind, self.dst_kind, self.flags_ = (
                int(item[n]) for n in ("kind", "copyKind", "srcKind", "dstKind", "flags")
            )
            self.bytes, self.start, self.end = (int(item[n]) for n in ("bytes", "start", "end"))
            self.correlation_id = int(item["correlationId"])
            self.device_id, self.stream_id = int(item["deviceId"]), int(item["streamId"])

    class ActivityKernel10:
        name = "sumArraysGPU"

        def __init__(self):
            item = kernels[0]
            self.ptr = kernels.ctypes.data
            self.kind, self.start, self.end = (int(item[n]) for n in ("kind", "start", "end"))
            self.correlation_id = int(item["correlationId"])
            self.device_id, self.stream_id = int(item["deviceId"]), int(item["streamId"])

    cupti.ActivityMemcpy6, cupti.activity_memcpy6_dtype = ActivityMemcpy6, memcpy
    cupti.ActivityKernel10, cupti.activity_kernel10_dtype = ActivityKernel10, kernel
    records = [ActivityMemcpy6(0), ActivityMemcpy6(1), ActivityKernel10()]
    return records, (copies, kernels, name)


@pytest.mark.parametrize("flags_name", ["flags_", "flags"])  # as older builds name it
def test_copy_and_kernel_records_are_read_from_their_memory_as_their_attributes_say(
    cupti, flags_name
):
    records, _memory = copy_and_kernel_records(cupti)
    for record in records[:2]:
        setattr(record, flags_name, record.__dict__.pop("flags_"))
    log = started(cupti)
    log._buffer_completed(records)
    assert log._gpu == {
        7: [GpuRecord("memcpy", "HTOD", 1000, 3000, 4096, "pinned", "device", True, 7, 0, 13)],
        8: [GpuRecord("memcpy", "DTOH", 5000, 9000, 8192, "device", "pageable", False, 8, 0, 14)],
        9: [
            GpuRecord(
                "kernel", "sumArraysGPU", 11_000, 12_500, correlation_id=9, device=1, stream=15
            )
        ],
    }
    assert log._readers["memcpy"].unpack is not None  # read from memory, not attributes
    assert log._readers["kernel"].unpack is not None
    # a second buffer is read from memory alone: attributes that disagree go unread
    for record in records:
        record.start = -1
    log._buffer_completed(records)
    starts = [record.start_ns for group in log._gpu.values() for record in group]
    assert starts == [1000, 1000, 5000, 5000, 11_000, 11_000]
