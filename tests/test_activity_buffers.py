"""CUPTI's buffers read where CUPTI wrote them (memprof.core.activity_buffers), on a fake
libcupti: its three buffer calls as C function pointers around Python, which ctypes calls as
it calls the library's, filling buffers memprof's own callback asked for with records laid
out as cupti-python's dtypes say."""

from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest

from memprof.core import activity_buffers
from memprof.core.activity import ActivityLog, ApiRecord, FieldReader, GpuRecord
from tests.fake_cupti import CBID, ActivityKind, FakeCupti


def layout(fields: list[tuple[str, str, int]], itemsize: int) -> np.dtype:
    names, formats, offsets = zip(*fields, strict=True)
    return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": itemsize})


# As cupti-python's dtypes lay them out (names in CUPTI's camelCase), with padding between.
API = layout([("kind", "<u4", 0), ("cbid", "<u4", 4), ("start", "<u8", 8), ("end", "<u8", 16),
              ("correlationId", "<u4", 32)], 40)  # fmt: skip
EXTERNAL = layout([("kind", "<u4", 0), ("externalId", "<u8", 8), ("correlationId", "<u4", 16)],
                  24)  # fmt: skip
COUNTER = layout([("kind", "<u4", 0), ("counterKind", "<u4", 4), ("value", "<u8", 8),
                  ("start", "<u8", 16), ("end", "<u8", 24)], 48)  # fmt: skip
MEMCPY = layout([("kind", "<u4", 0), ("copyKind", "u1", 4), ("srcKind", "u1", 5),
                 ("dstKind", "u1", 6), ("flags", "u1", 7), ("bytes", "<u8", 8),
                 ("start", "<u8", 16), ("end", "<u8", 24), ("correlationId", "<u4", 44)],
                64)  # fmt: skip
KERNEL = layout([("kind", "<u4", 0), ("start", "<u8", 24), ("end", "<u8", 32),
                 ("correlationId", "<u4", 96), ("name", "<u8", 104)], 128)  # fmt: skip
MEMSET = layout([("kind", "<u4", 0), ("bytes", "<u8", 8), ("start", "<u8", 16),
                 ("end", "<u8", 24), ("flags", "<u4", 40), ("correlationId", "<u4", 44)],
                48)  # fmt: skip
CLASSES = {  # cupti-python's class and dtype attribute of each
    "ActivityAPI": ("activity_api_dtype", API),
    "ActivityExternalCorrelation": ("activity_external_correlation_dtype", EXTERNAL),
    "ActivityUnifiedMemoryCounter3": ("activity_unified_memory_counter3_dtype", COUNTER),
    "ActivityMemcpy6": ("activity_memcpy6_dtype", MEMCPY),
    "ActivityKernel10": ("activity_kernel10_dtype", KERNEL),
    "ActivityMemset4": ("activity_memset4_dtype", MEMSET),
    "ActivityMemcpyPtoP4": ("activity_memcpy_pto_p4_dtype", MEMCPY),
}


def snake(name: str) -> str:
    """cupti-python's attribute name of a dtype field (flags: flags_)."""
    return "flags_" if name == "flags" else re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


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
MAX_LIMIT_REACHED = 3  # CUPTI_ERROR_MAX_LIMIT_REACHED: the buffer has no more records


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
        self.records_in[buffer.value] = addresses
        self.given_back.append(buffer.value)
        completed(None, 0, buffer.value, size.value, at)
        return 0

    def _next(self, buffer: int, valid: int, record) -> int:
        addresses = self.records_in[buffer]
        index = 0 if not record[0] else addresses.index(record[0]) + 1
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
                correlationId=7)  # fmt: skip
    library.add(EXTERNAL, kind=int(ActivityKind.EXTERNAL_CORRELATION), externalId=41,
                correlationId=7)  # fmt: skip
    library.add(MEMCPY, kind=memcpy_kind, copyKind=1, srcKind=2, dstKind=3, flags=1,
                bytes=4096, start=3000, end=5000, correlationId=7)  # fmt: skip
    library.add(KERNEL, kind=int(ActivityKind.CONCURRENT_KERNEL), start=6000, end=6500,
                correlationId=8, name=kernel_name(b"readSum", keep))  # fmt: skip
    library.add(EXTERNAL, kind=int(ActivityKind.EXTERNAL_CORRELATION), externalId=42,
                correlationId=8)  # fmt: skip
    library.add(MEMSET, kind=int(ActivityKind.MEMSET), bytes=256, start=7000, end=7100,
                flags=1, correlationId=9)  # fmt: skip
    library.add(
        MEMSET,
        kind=int(ActivityKind.MEMSET),
        bytes=64,
        start=7200,
        end=7300,
        flags=0,
        correlationId=12,
    )  # a blocking memset (cuMemsetD32)
    library.add(MEMCPY, kind=int(ActivityKind.MEMCPY2), copyKind=10, srcKind=3, dstKind=3,
                flags=1, bytes=512, start=8000, end=8400, correlationId=11)  # fmt: skip
    library.add(COUNTER, kind=int(ActivityKind.UNIFIED_MEMORY_COUNTER), counterKind=1,
                value=65536, start=10, end=30)  # fmt: skip
    library.add(API, kind=999, cbid=1, start=1, end=2, correlationId=10)  # a kind not kept
    log.flush()
    assert log._gpu == {
        7: [GpuRecord("memcpy", "HTOD", 3000, 5000, 4096, "pinned", "device", True, 7)],
        8: [GpuRecord("kernel", "readSum", 6000, 6500, correlation_id=8)],
        9: [GpuRecord("memset", "memset", 7000, 7100, 256, correlation_id=9)],
        11: [GpuRecord("memcpy", "PTOP", 8000, 8400, 512, "device", "device", True, 11)],
        12: [GpuRecord("memset", "memset", 7200, 7300, 64, asynchronous=False, correlation_id=12)],
    }
    assert log._api == {7: ApiRecord("cuMemcpyHtoDAsync_v2", 0.002, 7)}
    assert log._external == {7: 41, 8: 42}
    assert log._unified_memory == {"BYTES_TRANSFER_HTOD": [(65536, 20)]}
    assert all(log._readers[which].unpack is not None for which in log._readers)
    assert library.records_in and not library.pending
    assert len(slow_reads) == 7  # the first record of each kind, and only that
    # from then on, a kind's records are read by struct alone
    for correlation in (20, 21, 22):
        library.add(API, kind=driver, cbid=CBID["cuLaunchKernel"], start=0, end=1000,
                    correlationId=correlation)  # fmt: skip
        library.add(MEMCPY, kind=memcpy_kind, copyKind=2, srcKind=3, dstKind=1, bytes=8,
                    start=1, end=3, correlationId=correlation)  # fmt: skip
    log.flush()
    assert len(slow_reads) == 7
    assert [log._api[c].name for c in (20, 21, 22)] == ["cuLaunchKernel"] * 3
    assert log._gpu[21] == [GpuRecord("memcpy", "DTOH", 1, 3, 8, "device", "pageable", False, 21)]


def test_a_kind_whose_struct_reading_contradicts_numpys_is_read_by_numpy(cupti, library):
    swapped = layout(  # start written big-endian: struct's little-endian reading differs
        [("kind", "<u4", 0), ("copyKind", "u1", 4), ("srcKind", "u1", 5), ("dstKind", "u1", 6),
         ("flags", "u1", 7), ("bytes", "<u8", 8), ("start", ">u8", 16), ("end", "<u8", 24),
         ("correlationId", "<u4", 44)], 64)  # fmt: skip
    cupti.activity_memcpy6_dtype = swapped
    log, _ = ActivityLog.start(0)
    assert log._buffers is not None
    for correlation in (1, 2):
        library.add(swapped, kind=int(ActivityKind.MEMCPY), copyKind=1, srcKind=2, dstKind=3,
                    bytes=64, start=100 * correlation, end=100 * correlation + 50,
                    correlationId=correlation)  # fmt: skip
    log.flush()
    assert [log._gpu[c][0].start_ns for c in (1, 2)] == [100, 200]
    assert log._readers["memcpy"].unpack is None


def test_a_layout_that_is_not_plain_integers_keeps_cupti_pythons_callbacks(cupti, library):
    cupti.activity_kernel10_dtype = layout(
        [("kind", "<u4", 0), ("start", "<u8", 24), ("end", "<u8", 32),
         ("correlationId", "<u4", 96), ("name", "V8", 104)], 128)  # fmt: skip
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
    library.add(API, kind=int(ActivityKind.DRIVER), cbid=1, start=1, end=2, correlationId=1)
    with pytest.raises(ValueError, match="a reading bug"):
        log.flush()
    assert freed == library.given_back
    buffers.deliver = log._records_at
    library.add(API, kind=int(ActivityKind.DRIVER), cbid=CBID["cuLaunchKernel"], start=1,
                end=2, correlationId=1)  # fmt: skip
    log.flush()  # the error was raised once, and is gone
    assert log._api[1].name == "cuLaunchKernel"


@pytest.mark.parametrize(
    "newer", ["ActivityKernel11", "ActivityMemcpy7", "ActivityMemset5", "ActivityMemcpyPtoP5"]
)
def test_a_cupti_python_with_a_newer_record_class_keeps_its_own_callbacks(cupti, library, newer):
    setattr(cupti, newer, object)
    log, why_not = ActivityLog.start(0)
    assert why_not is None and log._buffers is None
    assert cupti.callbacks == (log._buffer_requested, log._buffer_completed)
    assert library.callbacks == ()


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


def test_the_library_is_found_by_its_name_in_the_process_map(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text(
        "7f00-7f01 r-xp 00000000 08:01 1 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
        "7f02-7f03 rw-p 00000000 00:00 0 \n"
        "7f04-7f05 r-xp 00000000 08:01 2 /opt/cuda lib/libcupti.so.2026.1.0\n"
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
