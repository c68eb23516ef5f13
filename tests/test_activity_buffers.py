"""CUPTI's buffers read where CUPTI wrote them (memprof.core.activity_buffers), on a fake
libcupti: its three buffer calls as C function pointers around Python, which ctypes calls as
it calls the library's, filling buffers memprof's own callback asked for with records laid
out as cupti-python's dtypes say."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from memprof.core import activity_buffers
from memprof.core.activity import ActivityLog, ApiRecord, FieldReader, GpuRecord
from tests.fake_cupti import CBID, ActivityKind, FakeCupti


def layout(fields: list[tuple[str, str, int]], itemsize: int) -> np.dtype:
    names, formats, offsets = zip(*fields, strict=True)
    return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": itemsize})


# As cupti-python 13's dtypes lay them out: snake_case names, `flags_`, a signed kind; with
# padding between the fields read.
API = layout([("kind", "<i4", 0), ("cbid", "<u4", 4), ("start", "<u8", 8), ("end", "<u8", 16),
              ("thread_id", "<u4", 28), ("correlation_id", "<u4", 32)], 40)  # fmt: skip
EXTERNAL = layout([("kind", "<i4", 0), ("external_id", "<u8", 8),
                   ("correlation_id", "<u4", 16)], 24)  # fmt: skip
COUNTER = layout([("kind", "<i4", 0), ("counter_kind", "<i4", 4), ("value", "<u8", 8),
                  ("start", "<u8", 16), ("end", "<u8", 24)], 48)  # fmt: skip
MEMCPY = layout([("kind", "<i4", 0), ("copy_kind", "u1", 4), ("src_kind", "u1", 5),
                 ("dst_kind", "u1", 6), ("flags_", "u1", 7), ("bytes", "<u8", 8),
                 ("start", "<u8", 16), ("end", "<u8", 24), ("device_id", "<u4", 32),
                 ("stream_id", "<u4", 40), ("correlation_id", "<u4", 44)], 64)  # fmt: skip
KERNEL = layout([("kind", "<i4", 0), ("start", "<u8", 24), ("end", "<u8", 32),
                 ("device_id", "<u4", 84), ("stream_id", "<u4", 92),
                 ("correlation_id", "<u4", 96), ("name", "<i8", 104)], 128)  # fmt: skip
MEMSET = layout([("kind", "<i4", 0), ("bytes", "<u8", 8), ("start", "<u8", 16),
                 ("end", "<u8", 24), ("device_id", "<u4", 32), ("stream_id", "<u4", 36),
                 ("flags_", "<u2", 40), ("correlation_id", "<u4", 44)], 48)  # fmt: skip
CLASSES = {  # cupti-python's class and dtype attribute of each
    "ActivityAPI": ("activity_api_dtype", API),
    "ActivityExternalCorrelation": ("activity_external_correlation_dtype", EXTERNAL),
    "ActivityUnifiedMemoryCounter3": ("activity_unified_memory_counter3_dtype", COUNTER),
    "ActivityMemcpy6": ("activity_memcpy6_dtype", MEMCPY),
    "ActivityKernel10": ("activity_kernel10_dtype", KERNEL),
    "ActivityMemset4": ("activity_memset4_dtype", MEMSET),
    "ActivityMemcpyPtoP4": ("activity_memcpy_pto_p4_dtype", MEMCPY),
}


def record_class(class_name: str) -> type:
    """cupti-python's class of one record layout (memprof makes none where it reads CUPTI's
    buffers itself: its attributes must never be asked for)."""

    def unasked(self, name):
        raise AssertionError(f"{class_name}.{name} read: the buffer is read in place")

    return type(class_name, (), {"__getattr__": unasked})


NEXT = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)
)
FLUSH = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint32)
REGISTER = ctypes.CFUNCTYPE(ctypes.c_int, activity_buffers._REQUESTED, activity_buffers._COMPLETED)
MAX_LIMIT_REACHED = 12  # CUPTI_ERROR_MAX_LIMIT_REACHED: the buffer has no more records
INVALID_KIND = 21  # CUPTI_ERROR_INVALID_KIND: a record CUPTI cannot step over
STALE = 999  # the correlation id of a record past a buffer's valid bytes


class FakeLibcupti:
    """libcupti's buffer calls: flush asks the registered callback for a buffer, writes the
    pending records into it one after another (8-byte aligned, as CUPTI does) and hands it
    back; cuptiActivityGetNextRecord walks them."""

    def __init__(self) -> None:
        self.pending: list[bytes] = []
        self.records_in: dict[int, list[int]] = {}  # buffer -> its records' addresses
        self.callbacks: tuple = ()
        self.given_back: list[int] = []
        self.refuse_register = 0
        self.corrupt_at: int | None = None  # the index of a record CUPTI cannot step over
        self.cuptiActivityGetNextRecord = NEXT(self._next)
        self.cuptiActivityFlushAll = FLUSH(self._flush)
        self.cuptiActivityRegisterCallbacks = REGISTER(self._register)

    def add(self, dtype: np.dtype, **fields: int) -> None:
        item = np.zeros(1, dtype)
        for name, value in fields.items():
            item[name] = value
        self.pending.append(item.tobytes())

    def _register(self, requested, completed) -> int:
        self.callbacks = (requested, completed)
        return self.refuse_register

    def _flush(self, flag: int) -> int:
        if not self.pending:
            return 0
        requested, completed = self.callbacks
        buffer, size, most = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_size_t()
        requested(ctypes.byref(buffer), ctypes.byref(size), ctypes.byref(most))
        assert buffer.value % 8 == 0 and most.value == 0
        at, addresses = 0, []
        for data in self.pending:
            assert at + len(data) <= size.value
            ctypes.memmove(buffer.value + at, data, len(data))
            addresses.append(buffer.value + at)
            at += len(data)
        self.pending = []
        # past the valid bytes: what an earlier use of the memory left (never to be read)
        stale = np.zeros(1, API)
        stale[0] = (int(ActivityKind.DRIVER), 1, 0, 1, 0, STALE)
        ctypes.memmove(buffer.value + at, stale.tobytes(), API.itemsize)
        self.records_in[buffer.value] = [*addresses, buffer.value + at]
        self.given_back.append(buffer.value)
        completed(None, 0, buffer.value, size.value, at)
        return 0

    def _next(self, buffer: int, valid: int, record) -> int:
        """The record after record[0] (the first where it is NULL) within `valid` bytes."""
        addresses = [a for a in self.records_in[buffer] if a < buffer + valid]
        index = 0 if not record[0] else addresses.index(record[0]) + 1
        if index == self.corrupt_at:
            return INVALID_KIND
        if index == len(addresses):
            return MAX_LIMIT_REACHED
        record[0] = addresses[index]
        return 0


@pytest.fixture
def cupti(monkeypatch):
    """The fake cupti-python, with the record classes and dtypes of cupti-python 13."""
    fake = FakeCupti()
    for class_name, (dtype_name, dtype) in CLASSES.items():
        setattr(fake, class_name, record_class(class_name))
        setattr(fake, dtype_name, dtype)
    module = type("module", (), {"cupti": fake})
    monkeypatch.setitem(__import__("sys").modules, "cupti", module)
    return fake


@pytest.fixture
def library(monkeypatch):
    fake = FakeLibcupti()
    monkeypatch.setattr(activity_buffers, "_BUFFERS", [activity_buffers.Buffers(fake)])
    return fake


def kernel_name(text: bytes, keep: list) -> int:
    characters = ctypes.create_string_buffer(text)
    keep.append(characters)
    return ctypes.addressof(characters)


def test_every_kind_memprof_keeps_is_read_from_the_buffer_as_numpy_reads_it(
    cupti, library, monkeypatch
):
    slow_reads = []
    numpy_fields = FieldReader.numpy_fields

    def counted(reader, memory, offset):
        slow_reads.append(reader.names)
        return numpy_fields(reader, memory, offset)

    monkeypatch.setattr(FieldReader, "numpy_fields", counted)
    log, why_not = ActivityLog.start(0)
    assert why_not is None and log._buffers is not None
    assert cupti.callbacks is None  # cupti-python's callbacks never registered
    keep: list = []
    driver, memcpy_kind = int(ActivityKind.DRIVER), int(ActivityKind.MEMCPY)
    library.add(API, kind=driver, cbid=CBID["cuMemcpyHtoDAsync_v2"], start=100, end=2100,
                correlation_id=7, thread_id=31337)  # fmt: skip
    library.add(EXTERNAL, kind=int(ActivityKind.EXTERNAL_CORRELATION), external_id=41,
                correlation_id=7)  # fmt: skip
    library.add(MEMCPY, kind=memcpy_kind, copy_kind=1, src_kind=2, dst_kind=3, flags_=1,
                bytes=4096, start=3000, end=5000, correlation_id=7, device_id=1,
                stream_id=13)  # fmt: skip
    library.add(KERNEL, kind=int(ActivityKind.CONCURRENT_KERNEL), start=6000, end=6500,
                correlation_id=8, name=kernel_name(b"readSum", keep), device_id=1,
                stream_id=14)  # fmt: skip
    library.add(EXTERNAL, kind=int(ActivityKind.EXTERNAL_CORRELATION), external_id=42,
                correlation_id=8)  # fmt: skip
    library.add(MEMSET, kind=int(ActivityKind.MEMSET), bytes=256, start=7000, end=7100,
                flags_=1, correlation_id=9, device_id=2, stream_id=15)  # fmt: skip
    library.add(
        MEMSET,
        kind=int(ActivityKind.MEMSET),
        bytes=64,
        start=7200,
        end=7300,
        flags_=0,
        correlation_id=12,
    )  # a blocking memset (cuMemsetD32)
    library.add(MEMCPY, kind=int(ActivityKind.MEMCPY2), copy_kind=10, src_kind=3, dst_kind=3,
                flags_=1, bytes=512, start=8000, end=8400, correlation_id=11)  # fmt: skip
    library.add(COUNTER, kind=int(ActivityKind.UNIFIED_MEMORY_COUNTER), counter_kind=1,
                value=65536, start=10, end=30)  # fmt: skip
    library.add(API, kind=999, cbid=1, start=1, end=2, correlation_id=10)  # a kind not kept
    log.flush()
    assert log._gpu == {
        7: [GpuRecord("memcpy", "HTOD", 3000, 5000, 4096, "pinned", "device", True, 7, 1, 13)],
        8: [GpuRecord("kernel", "readSum", 6000, 6500, correlation_id=8, device=1, stream=14)],
        9: [GpuRecord("memset", "memset", 7000, 7100, 256, correlation_id=9, device=2, stream=15)],
        11: [GpuRecord("memcpy", "PTOP", 8000, 8400, 512, "device", "device", True, 11)],
        12: [GpuRecord("memset", "memset", 7200, 7300, 64, asynchronous=False, correlation_id=12)],
    }
    # none past `valid`
    assert log._api == {7: ApiRecord("cuMemcpyHtoDAsync_v2", 0.002, 7, 100, 31337)}
    assert log._external == {7: 41, 8: 42}
    assert log._unified_memory == {"BYTES_TRANSFER_HTOD": [(65536, 20)]}
    assert all(log._readers[which].unpack is not None for which in log._readers)
    assert library.records_in and not library.pending
    assert len(slow_reads) == 7  # the first record of each kind, and only that
    # from then on, a kind's records are read by struct alone
    for correlation in (20, 21, 22):
        library.add(API, kind=driver, cbid=CBID["cuLaunchKernel"], start=0, end=1000,
                    correlation_id=correlation)  # fmt: skip
        library.add(MEMCPY, kind=memcpy_kind, copy_kind=2, src_kind=3, dst_kind=1, bytes=8,
                    start=1, end=3, correlation_id=correlation)  # fmt: skip
    log.flush()
    assert len(slow_reads) == 7
    assert [log._api[c].name for c in (20, 21, 22)] == ["cuLaunchKernel"] * 3
    assert log._gpu[21] == [GpuRecord("memcpy", "DTOH", 1, 3, 8, "device", "pageable", False, 21)]


def test_a_kind_whose_struct_reading_contradicts_numpys_is_read_by_numpy(cupti, library):
    swapped = layout(  # start written big-endian: struct's little-endian reading differs
        [("kind", "<i4", 0), ("copy_kind", "u1", 4), ("src_kind", "u1", 5),
         ("dst_kind", "u1", 6), ("flags_", "u1", 7), ("bytes", "<u8", 8), ("start", ">u8", 16),
         ("end", "<u8", 24), ("device_id", "<u4", 32), ("stream_id", "<u4", 40),
         ("correlation_id", "<u4", 44)], 64)  # fmt: skip
    cupti.activity_memcpy6_dtype = swapped
    log, _ = ActivityLog.start(0)
    assert log._buffers is not None
    for correlation in (1, 2):
        library.add(swapped, kind=int(ActivityKind.MEMCPY), copy_kind=1, src_kind=2, dst_kind=3,
                    bytes=64, start=100 * correlation, end=100 * correlation + 50,
                    correlation_id=correlation)  # fmt: skip
    log.flush()
    assert [log._gpu[c][0].start_ns for c in (1, 2)] == [100, 200]
    assert log._readers["memcpy"].unpack is None


def test_a_layout_that_is_not_plain_integers_keeps_cupti_pythons_callbacks(cupti, library):
    cupti.activity_kernel10_dtype = layout(
        [("kind", "<i4", 0), ("start", "<u8", 24), ("end", "<u8", 32), ("device_id", "<u4", 84),
         ("stream_id", "<u4", 92), ("correlation_id", "<u4", 96), ("name", "V8", 104)],
        128)  # fmt: skip
    log, why_not = ActivityLog.start(0)
    assert why_not is None and log._buffers is None
    assert cupti.callbacks == (log._buffer_requested, log._buffer_completed)


def test_a_failure_inside_cuptis_callback_is_raised_by_flush_and_the_buffer_still_freed(
    cupti, library, monkeypatch
):
    log, _ = ActivityLog.start(0)
    freed = []
    buffers = activity_buffers._BUFFERS[0]
    free = buffers._free
    monkeypatch.setattr(buffers, "_free", lambda address: (freed.append(address), free(address)))

    def broken(memory, base, addresses):
        raise ValueError("a reading bug")

    buffers.deliver = broken
    library.add(API, kind=int(ActivityKind.DRIVER), cbid=1, start=1, end=2, correlation_id=1)
    with pytest.raises(ValueError, match="a reading bug"):
        log.flush()
    assert freed == library.given_back
    buffers.deliver = log._records_at
    library.add(API, kind=int(ActivityKind.DRIVER), cbid=CBID["cuLaunchKernel"], start=1,
                end=2, correlation_id=1)  # fmt: skip
    log.flush()  # the error was raised once, and is gone
    assert log._api[1].name == "cuLaunchKernel"


# cupti-python 13.4's newest classes: the fields memprof reads at other offsets here
KERNEL13 = layout([("kind", "<i4", 0), ("start", "<u8", 8), ("end", "<u8", 16),
                   ("device_id", "<u4", 100), ("stream_id", "<u4", 108),
                   ("correlation_id", "<u4", 200), ("name", "<i8", 208)], 256)  # fmt: skip


def test_the_newest_class_cupti_python_has_of_a_kind_is_the_one_read(cupti, library):
    cupti.ActivityKernel13 = record_class("ActivityKernel13")
    cupti.activity_kernel13_dtype = KERNEL13
    log, _ = ActivityLog.start(0)
    assert log._buffers is not None
    keep: list = []
    library.add(KERNEL13, kind=int(ActivityKind.CONCURRENT_KERNEL), start=50, end=80,
                correlation_id=4, name=kernel_name(b"fillValue", keep))  # fmt: skip
    log.flush()
    assert log._gpu == {4: [GpuRecord("kernel", "fillValue", 50, 80, correlation_id=4)]}


def test_cupti_pythons_objects_of_the_newest_class_are_read_by_its_dtype(cupti):
    """The same where cupti-python's callbacks stay: its objects of the newest class."""
    cupti.ActivityKernel13 = type("ActivityKernel13", (), {})
    cupti.activity_kernel13_dtype = KERNEL13
    log, _ = ActivityLog.start(0)  # no libcupti here: cupti-python's callbacks
    assert log._buffers is None
    memory = np.zeros(1, KERNEL13)
    name = ctypes.create_string_buffer(b"readSum")
    memory[0] = (int(ActivityKind.CONCURRENT_KERNEL), 5, 9, 1, 21, 3, ctypes.addressof(name))
    record = cupti.ActivityKernel13()
    record.ptr, record.start, record.end = memory.ctypes.data, 5, 9
    record.correlation_id, record.name, record.device_id, record.stream_id = 3, "readSum", 1, 21
    log._buffer_completed([record])
    expected = GpuRecord("kernel", "readSum", 5, 9, correlation_id=3, device=1, stream=21)
    assert log._gpu == {3: [expected]}
    assert log._readers["kernel"].unpack is not None


def test_a_newest_class_without_its_dtype_keeps_cupti_pythons_callbacks(cupti, library):
    cupti.ActivityMemcpy7 = record_class("ActivityMemcpy7")  # no activity_memcpy7_dtype
    log, why_not = ActivityLog.start(0)
    assert why_not is None and log._buffers is None
    assert cupti.callbacks == (log._buffer_requested, log._buffer_completed)
    assert library.callbacks == ()


def test_a_record_cupti_cannot_step_over_is_raised_by_flush_after_those_before(cupti, library):
    log, _ = ActivityLog.start(0)
    for correlation in (1, 2, 3):
        library.add(API, kind=int(ActivityKind.DRIVER), cbid=CBID["cuLaunchKernel"], start=0,
                    end=1000, correlation_id=correlation)  # fmt: skip
    library.corrupt_at = 2
    with pytest.raises(RuntimeError, match=r"past record 2 \(.*CUPTI error 21\)"):
        log.flush()
    assert sorted(log._api) == [1, 2]


def test_an_error_left_from_an_earlier_log_is_not_the_next_ones(cupti, library):
    ActivityLog.start(0)
    activity_buffers._BUFFERS[0].error = ValueError("the earlier log's")
    log, _ = ActivityLog.start(0)
    log.flush()


def test_no_memory_for_a_buffer_gives_cupti_none(library):
    buffers = activity_buffers._BUFFERS[0]
    buffers._allocate = lambda alignment, size: None
    buffer, size, most = ctypes.c_void_p(1), ctypes.c_size_t(5), ctypes.c_size_t(7)
    buffers._requested(ctypes.pointer(buffer), ctypes.pointer(size), ctypes.pointer(most))
    assert not buffer.value and size.value == 0


def test_a_copy_kind_this_cupti_python_does_not_name_is_kept_by_its_number(cupti, library):
    log, _ = ActivityLog.start(0)
    library.add(MEMCPY, kind=int(ActivityKind.MEMCPY), copy_kind=77, src_kind=3, dst_kind=3,
                bytes=8, start=1, end=2, correlation_id=6)  # fmt: skip
    log.flush()
    assert log._gpu[6][0].name == "copy kind 77"


def test_a_cupti_python_without_a_class_memprof_reads_keeps_its_own_callbacks(cupti, library):
    del cupti.ActivityMemset4
    log, _ = ActivityLog.start(0)
    assert log._buffers is None and cupti.callbacks is not None


def test_cuptis_refusal_of_memprofs_callbacks_leaves_cupti_pythons(cupti, library):
    library.refuse_register = 1
    log, why_not = ActivityLog.start(0)
    assert why_not is None and log._buffers is None
    assert cupti.callbacks == (log._buffer_requested, log._buffer_completed)


def test_without_libcupti_in_the_process_nothing_is_registered(monkeypatch):
    monkeypatch.setattr(activity_buffers, "_BUFFERS", [])
    monkeypatch.setattr(activity_buffers, "loaded_library", lambda prefix: None)
    assert activity_buffers.register(lambda *a: None, 1 << 20) is None
    assert activity_buffers._BUFFERS == []


def test_two_libcuptis_in_one_process_are_not_told_apart(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text(
        "7f00-7f01 r-xp 00000000 08:01 1 /usr/local/cuda/lib64/libcupti.so.13\n"
        "7f02-7f03 r--p 00001000 08:01 1 /usr/local/cuda/lib64/libcupti.so.13\n"
        "7f04-7f05 r-xp 00000000 08:01 2 /venv/torch/lib/libcupti.so.12\n"
    )
    assert activity_buffers.loaded_library("libcupti.so", maps) is None


def test_the_library_is_found_by_its_name_in_the_process_map(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text(
        "7f00-7f01 r-xp 00000000 08:01 1 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
        "7f02-7f03 rw-p 00000000 00:00 0 \n"
        "7f04-7f05 r-xp 00000000 08:01 2 /opt/cuda lib/libcupti.so.2026.1.0\n"
        "7f06-7f07 r--p 00009000 08:01 2 /opt/cuda lib/libcupti.so.2026.1.0\n"
    )
    path = activity_buffers.loaded_library("libcupti.so", maps)
    assert path == "/opt/cuda lib/libcupti.so.2026.1.0"
    assert activity_buffers.loaded_library("libnvperf", maps) is None
    assert activity_buffers.loaded_library("libcupti.so", tmp_path / "none") is None


def test_buffers_are_whole_records_aligned_as_cupti_requires(library):
    buffers = activity_buffers._BUFFERS[0]
    assert buffers.start(lambda *a: None, (1 << 20) + 5)
    buffer, size, most = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_size_t(7)
    buffers._requested(ctypes.pointer(buffer), ctypes.pointer(size), ctypes.pointer(most))
    assert buffer.value % 8 == 0 and size.value == 1 << 20 and most.value == 0
    freed = []
    buffers._free = freed.append
    buffers._completed(0, 0, buffer.value, size.value, 0)  # no records: freed all the same
    assert freed == [buffer.value]
