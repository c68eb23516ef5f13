"""ActivityLog's whole-program mode (keep_all), fed records shaped as cupti-python's.

The fake module below only has the names ActivityLog reads; the records are unit inputs.
"""

from __future__ import annotations

import enum
from types import SimpleNamespace

from memprof.core.activity import ActivityLog


class Kind(enum.IntEnum):
    CONCURRENT_KERNEL = 1
    MEMCPY = 2
    MEMSET = 3
    DRIVER = 4
    RUNTIME = 5
    EXTERNAL_CORRELATION = 6
    UNIFIED_MEMORY_COUNTER = 7
    MEMCPY2 = 8


class MemcpyKind(enum.IntEnum):
    HTOD = 1
    DTOH = 2
    PTOP = 10


class Domain(enum.IntEnum):
    DRIVER_API = 1
    RUNTIME_API = 2


NAMES = {(Domain.DRIVER_API, 7): "cuMemcpyHtoD_v2", (Domain.RUNTIME_API, 7): "cudaMemcpyAsync"}
FAKE_CUPTI = SimpleNamespace(
    ActivityKind=Kind,
    ActivityMemcpyKind=MemcpyKind,
    CallbackDomain=Domain,
    get_callback_name=lambda domain, cbid: NAMES[domain, cbid],
)


def api(kind: Kind, correlation: int, start: int) -> SimpleNamespace:
    return SimpleNamespace(
        kind=kind, cbid=7, correlation_id=correlation, start=start, end=start + 2000
    )


def memcpy(correlation: int, start: int, flags: int) -> SimpleNamespace:
    return SimpleNamespace(
        kind=Kind.MEMCPY,
        correlation_id=correlation,
        copy_kind=MemcpyKind.HTOD,
        start=start,
        end=start + 1000,
        bytes=4096,
        src_kind=1,
        dst_kind=3,
        flags_=flags,
    )


RECORDS = [
    memcpy(2, 9000, flags=1),
    api(Kind.DRIVER, 1, 100),
    memcpy(1, 5000, flags=0),
]


def test_a_whole_program_log_keeps_every_copy_in_order_of_start_and_the_async_flag():
    log = ActivityLog(FAKE_CUPTI, keep_all=True)
    log._buffer_completed(RECORDS)
    copies = log.all_gpu_records()
    assert [(c.start_ns, c.asynchronous, c.correlation_id) for c in copies] == [
        (5000, False, 1),
        (9000, True, 2),
    ]
    assert (copies[0].name, copies[0].src_kind, copies[0].dst_kind) == (
        "HTOD",
        "pageable",
        "device",
    )
    assert log.gpu_records() == {}  # nothing tagged with memprof's external ids


def test_memprofs_own_log_reads_driver_calls_by_name():
    log = ActivityLog(FAKE_CUPTI)
    log._buffer_completed(RECORDS)
    assert log._api[1].name == "cuMemcpyHtoD_v2" and log._api[1].duration_ms == 0.002
    assert log._buffer_requested() == (4 << 20, 0)


def test_a_copy_between_gpus_is_recorded_from_its_own_kind_of_record():
    log = ActivityLog(FAKE_CUPTI)
    peer = SimpleNamespace(
        kind=Kind.MEMCPY2,
        correlation_id=4,
        copy_kind=MemcpyKind.PTOP,
        start=100,
        end=2100,
        bytes=1 << 20,
        src_kind=3,
        dst_kind=3,
        flags_=1,
    )
    external = SimpleNamespace(kind=Kind.EXTERNAL_CORRELATION, correlation_id=4, external_id=9)
    log._buffer_completed([external, peer])
    [record] = log.gpu_records()[9]
    assert (record.name, record.bytes, record.duration_ms) == ("PTOP", 1 << 20, 0.002)
    assert (record.src_kind, record.dst_kind, record.asynchronous) == ("device", "device", True)
