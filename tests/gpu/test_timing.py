"""The timing core on the GPU: CUPTI as the source where present, gated events otherwise."""

import pytest

from memprof import api
from memprof.core.activity import cupti_unavailable_reason

pytestmark = pytest.mark.gpu
needs_cupti = pytest.mark.skipif(
    cupti_unavailable_reason() is not None, reason=f"needs CUPTI: {cupti_unavailable_reason()}"
)


def run(command, timing, **params):
    return api.run(command, timing=timing, **params)


@needs_cupti
def test_with_cupti_every_gpu_row_is_cuptis_record_of_exactly_the_timed_operations():
    result = run("pinned", "cupti", power=16, repeat=4, warmup=1)
    assert result.timing.source == "cupti" and result.timing.note == ""
    gpu = [m for m in result.measurements if m.group == "gpu"]
    assert gpu and all(m.source == "cupti" for m in gpu)
    for m in gpu:
        assert len(m.samples_ms) == len(m.events_ms)  # events kept beside, one per operation
        assert len(m.samples_ms) in (4, 8)  # --repeat, or a and b copied in every repeat
        # the GPU's own duration is never longer than the gated events around it
        assert sorted(m.samples_ms)[len(m.samples_ms) // 2] <= sorted(m.events_ms)[-1]
    api = {m.name for m in result.measurements if m.group == "api" and m.source == "cupti"}
    assert "cuLaunchKernel" in api and "cuMemHostAlloc" in api


def test_events_mode_says_so_and_never_uses_cupti():
    result = run("pinned", "events", power=16, repeat=3, warmup=1)
    assert result.timing.source == "events" and result.timing.note == "--timing events"
    assert {m.source for m in result.measurements if m.group == "gpu"} == {"events"}
    assert not [m for m in result.measurements if m.source == "cupti"]
    assert result.passed


@needs_cupti
def test_managed_memory_reports_migrations_or_cuptis_refusal():
    result = run("managed", "cupti", power=18, repeat=2, warmup=1)
    timing = result.timing
    if timing.unified_memory_note is None:
        migrated = timing.unified_memory["BYTES_TRANSFER_HTOD"]
        assert migrated["total"] >= migrated["max"] > 0 and migrated["count"] > 0
        assert timing.unified_memory["GPU_PAGE_FAULT"]["count"] > 0
    else:
        assert "CUPTI refused unified-memory counters" in timing.unified_memory_note


@needs_cupti
def test_cuptis_copy_kernel_and_call_records_are_read_from_memory_as_their_fields_say():
    """FieldReader reads each record kind from its memory only where the first record's
    fields agree with cupti-python's attributes; else it reads the attributes (slowly)."""
    import numpy as np

    from memprof.core import memory
    from memprof.core.access import DirectAccess
    from memprof.core.session import GpuSession

    with GpuSession(0, timing="cupti") as session:
        profiler, log = session.profiler, session.activity
        pinned = memory.allocate(session, "pinned", 1 << 16)
        pinned.array[:] = np.arange(1 << 16, dtype=np.float32)
        device = memory.allocate(session, "device", 1 << 16)
        access = DirectAccess(session)
        with profiler.timed():
            memory.copy(session, device, pinned)
            access.read(device.device_pointer, 1 << 16, "device")
        measured = profiler.measurements()
        readers = {kind: log._readers[kind].unpack is not None for kind in log._readers}
    assert all(readers.get(kind) for kind in ("api", "external", "memcpy", "kernel")), readers
    copy = next(m for m in measured if m.name == "[CUDA memcpy HtoD]")
    kernel = next(m for m in measured if m.name.startswith("readSum"))
    assert copy.source == kernel.source == "cupti"
    assert 0 < copy.samples_ms[0] <= copy.events_ms[0] and kernel.samples_ms[0] > 0


def _records_of_some_work() -> tuple[list, list, bool]:
    """Copies both ways, a kernel and a memset, timed in a session of their own: the GPU
    records (all but their times) and the driver calls CUPTI recorded for them, and whether
    memprof read CUPTI's buffers itself."""
    import numpy as np

    from memprof.core import memory
    from memprof.core.access import DirectAccess
    from memprof.core.session import GpuSession

    with GpuSession(0, timing="cupti") as session:
        profiler, log = session.profiler, session.activity
        pinned = memory.allocate(session, "pinned", 1 << 16)
        pinned.array[:] = np.arange(1 << 16, dtype=np.float32)
        device = memory.allocate(session, "device", 1 << 16)
        access, stream = DirectAccess(session), profiler.stream
        with profiler.timed():
            for _ in range(3):
                memory.copy(session, device, pinned)
                memory.copy(session, pinned, device)
                access.read(device.device_pointer, 1 << 16, "device")
                with profiler.events("gpu", "memset", "memset", "device", 1 << 18):
                    session.cuda.memset_d32_async(device.device_pointer, 0, 1 << 16, stream)
        session.synchronize()
        profiler.resolve()
        log.flush()
        gpu = sorted(
            (r.category, r.name, r.bytes, r.src_kind, r.dst_kind, r.asynchronous)
            for records in log.gpu_records().values()
            for r in records
        )
        calls = sorted(r.name for records in log.api_records().values() for r in records)
        return gpu, calls, log._buffers is not None


@needs_cupti
def test_memprof_reads_cuptis_buffers_itself_and_finds_what_cupti_python_finds(monkeypatch):
    """activity_buffers walks CUPTI's buffers and unpacks the records where they lie; the
    same work recorded through cupti-python's objects gives the same records and calls."""
    from memprof.core.activity import ActivityLog

    gpu, calls, read_here = _records_of_some_work()
    assert read_here
    kinds = {record[0] for record in gpu}
    assert kinds == {"memcpy", "kernel", "memset"} and len(gpu) == 12
    monkeypatch.setattr(ActivityLog, "_read_buffers_here", lambda self: None)
    assert _records_of_some_work() == (gpu, calls, False)
    monkeypatch.undo()
    assert _records_of_some_work() == (gpu, calls, True)  # memprof's callbacks back again


@needs_cupti
def test_every_record_read_in_place_is_what_cupti_pythons_object_of_it_says(monkeypatch):
    """Each record memprof unpacks from CUPTI's buffer (times, ids, sizes, kinds, names) is
    held against cupti-python's own object of the same memory (from_ptr), on this CUPTI."""
    import collections
    import ctypes

    from memprof.core import activity
    from memprof.core.activity import ActivityLog

    compared: collections.Counter[str] = collections.Counter()
    differ: list = []
    records_at = ActivityLog._records_at

    def checked(self, memory, base, addresses):
        records_at(self, memory, base, addresses)
        named = self.cupti.ActivityKind
        kinds = {
            int(getattr(named, kind)): which
            for kind, which in activity._READ_BY_KIND.items()
            if hasattr(named, kind)
        }
        for address in addresses:
            which = kinds.get(activity._KIND.unpack_from(memory, address - base)[0])
            if which is None or compared[which] >= 300:
                continue
            record = self._record_classes()[which][0].from_ptr(address)
            # an object of a record cupti-python did not make reports, when freed, a buffer
            # it never had: kept for the process's life
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(record))
            reader = self._reader(which)
            mine, theirs = reader.read_at(memory, address - base), reader.attributes(record)
            compared[which] += 1
            if mine != theirs:
                differ.append((which, mine, theirs))

    monkeypatch.setattr(ActivityLog, "_records_at", checked)
    *_records, read_here = _records_of_some_work()
    assert read_here
    result = run("managed", "cupti", power=18, repeat=2, warmup=1)
    assert result.passed
    assert not differ, differ[:5]
    assert {"api", "external", "memcpy", "kernel", "memset"} <= set(compared), compared
    if result.timing.unified_memory_note is None:
        assert compared["counter"] > 0
