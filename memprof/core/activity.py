"""The GPU's own record of what memprof timed: CUPTI activity records, as nvprof printed them.

Each timed operation is enqueued under a CUPTI external correlation id, which CUPTI links to
its driver call and to what the GPU did (start and end in GPU nanoseconds). Unified-memory
counters are process-wide and configured before the context. Without cupti-python, or where
the driver refuses, start() says why and memprof times with gated CUDA events instead.
"""

from __future__ import annotations

import contextlib
import ctypes
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from memprof.errors import error_words

# CUPTI's memory kinds (CUpti_ActivityMemoryKind) by number, as nvprof named them.
MEMORY_KIND_NAMES = {
    0: "unknown",
    1: "pageable",
    2: "pinned",
    3: "device",
    4: "array",
    5: "managed",
    6: "device static",
    7: "managed static",
}

# The activity kinds of GPU work and the driver calls that queue it (paused() stops them).
GPU_WORK = ("CONCURRENT_KERNEL", "MEMCPY", "MEMSET", "DRIVER")
UNIFIED_MEMORY_COUNTERS = (
    "BYTES_TRANSFER_HTOD",
    "BYTES_TRANSFER_DTOH",
    "CPU_PAGE_FAULT_COUNT",
    "GPU_PAGE_FAULT",
)


@dataclass(frozen=True)
class GpuRecord:
    """One thing the GPU did: a kernel, a memcpy or a memset, in GPU nanoseconds."""

    category: str  # "kernel", "memcpy", "memset"
    name: str  # kernel name, or "HTOD"/"DTOH"/... for copies
    start_ns: int
    end_ns: int
    bytes: int = 0
    src_kind: str = ""
    dst_kind: str = ""
    asynchronous: bool = True  # made with an ...Async call (CUPTI's MEMCPY_ASYNC flag)
    correlation_id: int = 0  # links it to the driver or runtime call that issued it
    device: int = 0  # CUPTI's device id
    stream: int = 0  # CUPTI's stream id: where it ran in order (a timeline's row)

    @property
    def duration_ms(self) -> float:
        return (self.end_ns - self.start_ns) / 1e6


@dataclass(frozen=True)
class ApiRecord:
    """One driver call as CUPTI saw it."""

    name: str
    duration_ms: float
    correlation_id: int = 0
    start_ns: int = 0  # CUPTI's clock, as GpuRecord's
    thread: int = 0  # the system's id of the thread that made the call


_STRUCT_CODES = {"u1": "B", "i1": "b", "u2": "H", "i2": "h"} | {
    "u4": "I", "i4": "i", "u8": "Q", "i8": "q"
}  # fmt: skip
# The records FieldReader reads: cupti-python's class (its name and the oldest version memprof
# knows: its newest is used), its dtype's stem, and the fields (a kernel's name: a pointer).
_COPY_FIELDS = ("copy_kind", "start", "end", "bytes", "src_kind", "dst_kind", "flags_")
_PLACE = ("correlation_id", "device_id", "stream_id")  # whose call, which GPU and stream
_API_FIELDS = ("kind", "cbid", "start", "end", "correlation_id", "thread_id")
_COUNTER_FIELDS = ("counter_kind", "value", "start", "end")
_EXTERNAL_FIELDS = ("correlation_id", "external_id")
_READ = {
    "api": ("ActivityAPI", None, "api", _API_FIELDS),
    "external": ("ActivityExternalCorrelation", None, "external_correlation", _EXTERNAL_FIELDS),
    "counter": ("ActivityUnifiedMemoryCounter", 3, "unified_memory_counter", _COUNTER_FIELDS),
    "memcpy": ("ActivityMemcpy", 6, "memcpy", (*_COPY_FIELDS, *_PLACE)),
    "memcpy2": ("ActivityMemcpyPtoP", 4, "memcpy_pto_p", (*_COPY_FIELDS, *_PLACE)),
    "kernel": ("ActivityKernel", 10, "kernel", ("start", "end", "name", *_PLACE)),
    "memset": ("ActivityMemset", 4, "memset", ("start", "end", "bytes", "flags_", *_PLACE)),
}
NEWER_VERSIONS = 16  # how far past the oldest version memprof looks for cupti-python's newest
STRING_FIELDS = frozenset({"name"})
# Where a record happened, for a timeline only: 0 where a record has no such attribute
TIMELINE_FIELDS = frozenset({"device_id", "stream_id", "thread_id"})
# What each kind of record is read as, by CUPTI's activity kind names.
_READ_BY_KIND = {
    "DRIVER": "api",
    "EXTERNAL_CORRELATION": "external",
    "UNIFIED_MEMORY_COUNTER": "counter",
    "MEMCPY": "memcpy",
    "MEMCPY2": "memcpy2",
    "CONCURRENT_KERNEL": "kernel",
    "MEMSET": "memset",
}
_KIND = struct.Struct("<I")  # every record begins with its kind (CUpti_Activity)


class FieldReader:
    """Some fields of one kind of CUPTI record, read at the offsets of cupti-python's dtype (an
    attribute costs microseconds, and a sweep makes 21,000 records); where the first record's
    slow reading differs, or the layout is not plain integers, every record is read slowly."""

    def __init__(self, dtype: Any, names: tuple[str, ...]) -> None:
        self.names = names  # the records' attribute names, snake_case
        self.dtype = dtype
        self.unpack: Any = None
        self.checked = False
        with contextlib.suppress(AttributeError, KeyError, TypeError):  # read slowly
            self.fields = [_c_name(name, dtype) for name in names]  # the dtype's names
            layout = sorted(
                (dtype.fields[field][1], name, dtype.fields[field][0])
                for name, field in zip(names, self.fields, strict=True)
            )
            code, at, order = "<", 0, []
            for offset, name, kind in layout:
                code += "x" * (offset - at) + _STRUCT_CODES[kind.str[1:]]
                at = offset + kind.itemsize
                order.append(name)
            self.order = [order.index(name) for name in names]
            self.strings = [index for index, name in enumerate(names) if name in STRING_FIELDS]
            self.size = at
            self.unpack = struct.Struct(code).unpack_from

    def read(self, record: Any) -> tuple:
        """The fields of a cupti-python record, in the order of `names`."""
        if self.unpack is not None:
            try:
                memory = (ctypes.c_char * self.size).from_address(record.ptr)
            except (AttributeError, TypeError, ValueError, OverflowError):
                self.unpack = None  # no pointer to read from: the attributes, from now on
            else:
                return self.read_in(memory, 0, lambda: self.attributes(record))
        return self.attributes(record)

    def read_at(self, memory: Any, offset: int) -> tuple:
        """The fields of the record at `offset` in a buffer CUPTI filled (`memory`)."""
        return self.read_in(memory, offset, lambda: self.numpy_fields(memory, offset))

    def read_in(self, memory: Any, offset: int, slowly: Callable[[], tuple]) -> tuple:
        """The fields of the record at `offset` in `memory`; slowly() reads them the slow way."""
        if self.unpack is None:
            return slowly()
        found = self.unpack(memory, offset)
        fields = [found[index] for index in self.order]
        if self.checked:
            for index in self.strings:
                fields[index] = _text_at(fields[index])
            return tuple(fields)
        self.checked = True
        expected = slowly()
        numbers = [i for i in range(len(fields)) if i not in self.strings]
        # where the numbers agree, the layout holds: its pointers can be followed
        if any(fields[i] != expected[i] for i in numbers) or any(
            _text_at(fields[i]) != expected[i] for i in self.strings
        ):
            self.unpack = None  # not the layout the slow reading finds: never again
        return expected

    def numpy_fields(self, memory: Any, offset: int) -> tuple:
        """The fields of the record at `offset`, as cupti-python reads them (numpy, dtype)."""
        import numpy as np

        item = np.frombuffer(memory, self.dtype, count=1, offset=offset)[0]
        values = [int(item[field]) for field in self.fields]
        for index in self.strings:
            values[index] = _text_at(values[index])
        return tuple(values)

    def attributes(self, record: Any) -> tuple:
        """The fields read through the record's attributes (the slow way)."""
        return tuple(
            _flags(record)
            if n == "flags_"
            else getattr(record, n, 0)
            if n in TIMELINE_FIELDS
            else getattr(record, n)
            for n in self.names
        )


def _text_at(address: int) -> str:
    """The NUL-terminated characters at `address` ('' where there are none)."""
    return ctypes.string_at(address).decode("utf-8", "replace") if address else ""


def record_class(module: Any, which: str) -> tuple[Any, Any] | None:
    """cupti-python's newest class of one kind of record memprof reads (_READ's key) and its
    dtype (None where it has no dtype), or None where it has no such class."""
    family, oldest, stem, _names = _READ[which]
    versions = [""] if oldest is None else [str(v) for v in range(oldest, oldest + NEWER_VERSIONS)]
    present = [v for v in versions if hasattr(module, f"{family}{v}")]
    if not present:
        return None
    version = present[-1]
    dtype = getattr(module, f"activity_{stem}{version}_dtype", None)
    return getattr(module, f"{family}{version}"), dtype


def _c_name(name: str, dtype: Any) -> str:
    """A field's name in cupti-python's dtype: as the attribute, or CUPTI's camelCase."""
    if name in dtype.fields:
        return name
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def callback_name(cupti: Any, domain: int, cbid: int) -> str:
    """CUPTI's name of a driver or runtime call by its callback id (cuMemcpyHtoDAsync_v2), or
    words that say which id it was where this CUPTI has no name for it."""
    try:
        return str(cupti.get_callback_name(domain, cbid))
    except Exception:
        driver = int(domain) == int(cupti.CallbackDomain.DRIVER_API)
        return f"{'driver' if driver else 'runtime'} call {cbid}"


def experiment_call(name: str) -> bool:
    """The calls memprof's experiments record: all but the timing core's cuEvent calls, which
    lie outside every tagged operation yet were four in five API records (34,000 in a sweep)."""
    return not name.startswith("cuEvent")


@dataclass
class ActivityLog:
    """CUPTI activity recording for one process, with memprof's external correlation ids."""

    cupti: Any
    unified_memory_refusal: str | None = None  # why the counters are missing, if they are
    keep_all: bool = False  # memprof trace: every GPU record kept, no calls recorded
    buffer_bytes: int = 4 << 20
    _gpu: dict[int, list[GpuRecord]] = field(default_factory=dict)  # by correlation id
    _api: dict[int, ApiRecord] = field(default_factory=dict)  # by correlation id
    _external: dict[int, int] = field(default_factory=dict)  # correlation id -> external id
    _unified_memory: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    _callback_names: dict[int, str] = field(default_factory=dict)  # by callback id
    _last_tag: int = 0
    _readers: dict[str, FieldReader] = field(default_factory=dict)
    _kind_numbers: dict[int, str] | None = None  # _kinds_read()
    _classes: dict[str, tuple[Any, Any] | None] | None = None  # _record_classes()
    _buffers: Any = None  # activity_buffers.Buffers where memprof reads CUPTI's buffers
    _counter_names: dict[int, str] = field(default_factory=dict)
    _copy_kind_names: dict[int, str] = field(default_factory=dict)
    peer_copies_traced: bool = False  # CUPTI's MEMCPY2 records (copies between GPUs) enabled
    # (switch, callback id) of each call _record_only switched off
    _switched_off: list[tuple[Callable[[int, int], Any], int]] = field(default_factory=list)

    @classmethod
    def start(
        cls,
        device_index: int,
        keep_all: bool = False,
        record_call: Callable[[str], bool] | None = None,
    ) -> tuple[ActivityLog | None, str | None]:
        """Enable CUPTI (after cuInit, before the context): (log, None) or (None, why not).
        keep_all: a whole program's trace, every GPU record kept in larger buffers (its calls
        are memprof.trace.stacks'); record_call: which driver calls (by name) are recorded."""
        cupti, why_not = _import_cupti()
        if cupti is None:
            return None, why_not
        log = cls(cupti, keep_all=keep_all, buffer_bytes=(32 << 20) if keep_all else (4 << 20))
        kinds = cupti.ActivityKind
        traced = [*log.work_kinds, "EXTERNAL_CORRELATION"]
        try:
            for name in traced:
                cupti.activity_enable(getattr(kinds, name))
            log._buffers = log._read_buffers_here()
            if log._buffers is None:
                cupti.activity_register_callbacks(log._buffer_requested, log._buffer_completed)
        except Exception as error:
            for name in (*GPU_WORK, "MEMCPY2", "EXTERNAL_CORRELATION", "UNIFIED_MEMORY_COUNTER"):
                with contextlib.suppress(Exception):  # one this CUPTI lacks (MEMCPY2) included
                    cupti.activity_disable(getattr(kinds, name))
            return None, f"CUPTI refused activity tracing: {error_words(error)}"
        # Copies between two GPUs come as records of their own kind (without it, peer
        # copies have no record and are timed by events); a CUPTI without it still traces.
        with contextlib.suppress(Exception):
            cupti.activity_enable(kinds.MEMCPY2)
            log.peer_copies_traced = True
        log.unified_memory_refusal = log._enable_unified_memory(device_index)
        if record_call is not None:
            log._record_only(record_call)
        return log, None

    @property
    def work_kinds(self) -> tuple[str, ...]:
        """The activity kinds switched on (and off in paused()): the GPU's work, and the
        driver calls that queue it except in a whole-program trace."""
        return tuple(k for k in GPU_WORK if k != "DRIVER") if self.keep_all else GPU_WORK

    def _read_buffers_here(self) -> Any:
        """activity_buffers' reading of CUPTI's buffers where every kind memprof keeps has a
        plain-integer dtype; None: cupti-python's callbacks."""
        for which in set(self._kinds_read().values()):
            if self._record_classes().get(which) is None or self._reader(which).unpack is None:
                return None
        from memprof.core import activity_buffers

        return activity_buffers.register(self._records_at, self.buffer_bytes)

    def _kinds_read(self) -> dict[int, str]:
        """Activity kind number -> _READ's key, for the kinds this cupti-python has."""
        if self._kind_numbers is None:
            kinds = self.cupti.ActivityKind
            self._kind_numbers = {
                int(getattr(kinds, kind)): which
                for kind, which in _READ_BY_KIND.items()
                if hasattr(kinds, kind)
            }
        return self._kind_numbers

    def _record_classes(self) -> dict[str, tuple[Any, Any] | None]:
        """_READ's key -> cupti-python's newest class of those records and its dtype."""
        if self._classes is None:
            self._classes = {which: record_class(self.cupti, which) for which in _READ}
        return self._classes

    def _record_only(self, wanted: Callable[[str], bool]) -> None:
        """Switch off the records of every driver call `wanted` refuses: each costs time at
        its call and when read. One this CUPTI cannot switch off stays (dropped by name)."""
        table = getattr(self.cupti, "driver_api_trace_cbid", None)
        switch = getattr(self.cupti, "activity_enable_driver_api", None)
        if table is None or switch is None:
            return
        for member in table:
            if not wanted(member.name):
                with contextlib.suppress(Exception):  # an id this driver lacks; INVALID
                    switch(int(member), 0)
                    self._switched_off.append((switch, int(member)))

    def _switch_calls(self, enable: int) -> None:
        """Switch _record_only's calls on (1) or off (0) again: enabling the DRIVER kind
        (paused(), as it ends) records every call of it once more."""
        for switch, callback_id in self._switched_off:
            with contextlib.suppress(Exception):
                switch(callback_id, enable)

    def _enable_unified_memory(self, device_index: int) -> str | None:
        cupti = self.cupti
        try:
            counters = [
                getattr(cupti.ActivityUnifiedMemoryCounterKind, n) for n in UNIFIED_MEMORY_COUNTERS
            ]
            config = cupti.ActivityUnifiedMemoryCounterConfig(len(counters))
            for index, counter in enumerate(counters):
                config[index].scope = int(
                    cupti.ActivityUnifiedMemoryCounterScope.PROCESS_SINGLE_DEVICE
                )
                config[index].device_id = device_index
                config[index].enable = 1
                config[index].kind = counter
            cupti.activity_configure_unified_memory_counter(config.ptr, len(counters))
            cupti.activity_enable(cupti.ActivityKind.UNIFIED_MEMORY_COUNTER)
        except Exception as error:
            return f"CUPTI refused unified-memory counters: {error_words(error)}"
        return None

    # -- tagging --------------------------------------------------------------------------

    def new_tag(self) -> int:
        """A fresh external id, unique in the process (every GPU's profiler shares this log)."""
        self._last_tag += 1
        return self._last_tag

    def push(self, external_id: int) -> None:
        self.cupti.activity_push_external_correlation_id(
            self.cupti.ExternalCorrelationKind.CUSTOM0, external_id
        )

    def pop(self) -> None:
        self.cupti.activity_pop_external_correlation_id(self.cupti.ExternalCorrelationKind.CUSTOM0)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Stop tracing GPU work meanwhile: CUPTI's per-operation timestamps slow
        back-to-back small operations by about a microsecond each."""
        names = [*self.work_kinds, *(["MEMCPY2"] if self.peer_copies_traced else [])]
        traced = [getattr(self.cupti.ActivityKind, name) for name in names]
        for kind in traced:
            self.cupti.activity_disable(kind)
        try:
            yield
        finally:
            for kind in traced:
                self.cupti.activity_enable(kind)
            self._switch_calls(0)

    # -- reading ----------------------------------------------------------------------------

    def flush(self) -> None:
        """Deliver every record CUPTI holds (the GPU work must be finished)."""
        if self._buffers is not None:
            self._buffers.flush()
        else:
            self.cupti.activity_flush_all(1)

    def gpu_records(self) -> dict[int, list[GpuRecord]]:
        """What the GPU did for each external id."""
        return self._by_external(self._gpu)

    def api_records(self) -> dict[int, list[ApiRecord]]:
        """The driver calls made for each external id."""
        return self._by_external({call: [api] for call, api in self._api.items()})

    def _by_external(self, by_correlation: dict[int, list]) -> dict[int, list]:
        """Records kept by correlation id, gathered under the external id of their call."""
        by_external: dict[int, list] = {}
        for correlation, records in by_correlation.items():
            external = self._external.get(correlation)
            if external is not None:
                by_external.setdefault(external, []).extend(records)
        return by_external

    def all_gpu_records(self) -> list[GpuRecord]:
        """Everything the GPU did while recording, tagged or not, in order of start."""
        records = [record for group in self._gpu.values() for record in group]
        return sorted(records, key=lambda record: record.start_ns)

    def unified_memory_totals(self) -> dict[str, dict[str, float]]:
        """Counter name -> count, total, min, max and time (ms) of its records: nvprof's
        Unified Memory section."""
        totals = {}
        for name in UNIFIED_MEMORY_COUNTERS:
            records = self._unified_memory.get(name, [])
            values = [value for value, _ in records]
            totals[name] = {
                "count": len(records),
                "total": sum(values),
                "min": min(values, default=0),
                "max": max(values, default=0),
                "time_ms": sum(duration for _, duration in records) / 1e6,
            }
        return totals

    def stop(self) -> None:
        """Deliver what CUPTI still holds, _record_only's calls on again. Tracing stays enabled:
        switching it off costs two seconds on the H200."""
        self.flush()
        self._switch_calls(1)
        self._switched_off.clear()

    # -- CUPTI callbacks ------------------------------------------------------------------

    def _buffer_requested(self) -> tuple[int, int]:
        return self.buffer_bytes, 0

    def _buffer_completed(self, activities: list) -> None:
        """cupti-python's records of one buffer (where memprof reads no buffer itself)."""
        classes = {found[0]: which for which, found in self._record_classes().items() if found}
        kinds_read = self._kinds_read()
        for record in activities:
            which = classes.get(type(record))  # the record's class: no field read
            if which is not None:
                self._keep(which, self._reader(which).read(record))
                continue
            which = kinds_read.get(int(record.kind))  # another class: its attributes
            if which is not None:
                self._keep(which, self._reader(which).attributes(record))

    def _records_at(self, memory: Any, base: int, addresses: list[int]) -> None:
        """The records of one buffer CUPTI filled (activity_buffers): `memory` holds the
        buffer that begins at address `base`; kinds memprof does not keep are passed over."""
        kinds_read = self._kinds_read()
        readers = {which: self._reader(which) for which in set(kinds_read.values())}
        for address in addresses:
            offset = address - base
            which = kinds_read.get(_KIND.unpack_from(memory, offset)[0])
            if which is not None:
                self._keep(which, readers[which].read_at(memory, offset))

    def _reader(self, which: str) -> FieldReader:
        """The FieldReader of one kind of _READ's records."""
        if which not in self._readers:
            found = self._record_classes().get(which)
            self._readers[which] = FieldReader(found[1] if found else None, _READ[which][3])
        return self._readers[which]

    def _keep(self, which: str, fields: tuple) -> None:
        """One record of _READ's kinds, from its fields (in _READ's order)."""
        if which == "api":
            _, cbid, start, end, correlation, thread = fields
            name = self._callback_name(cbid)
            self._api[correlation] = ApiRecord(
                name, (end - start) / 1e6, correlation, start, thread
            )
        elif which == "external":
            correlation, external = fields
            self._external[correlation] = external
        elif which == "counter":
            self._add_counter(*fields)
        elif which == "kernel":
            start, end, name, correlation, device, stream = fields
            record = GpuRecord(
                "kernel", name, start, end, correlation_id=correlation, device=device,
                stream=stream,
            )  # fmt: skip
            self._gpu.setdefault(correlation, []).append(record)
        elif which == "memset":
            start, end, nbytes, flags, correlation, device, stream = fields
            record = GpuRecord(
                "memset", "memset", start, end, nbytes,
                asynchronous=bool(flags & ASYNC_FLAG), correlation_id=correlation,
                device=device, stream=stream,
            )  # fmt: skip
            self._gpu.setdefault(correlation, []).append(record)
        else:  # a copy: "memcpy", or "memcpy2" between GPUs
            copy_kind, start, end, nbytes, src, dst, flags, correlation, device, stream = fields
            record = GpuRecord(
                "memcpy", self._copy_kind_name(copy_kind), start, end, nbytes,
                MEMORY_KIND_NAMES.get(src, "unknown"), MEMORY_KIND_NAMES.get(dst, "unknown"),
                bool(flags & ASYNC_FLAG), correlation, device, stream,
            )  # fmt: skip
            self._gpu.setdefault(correlation, []).append(record)

    def _copy_kind_name(self, copy_kind: int) -> str:
        """CUPTI's name of a copy's kind (HTOD), or its number where cupti-python has none."""
        if copy_kind not in self._copy_kind_names:
            kinds = self.cupti.ActivityMemcpyKind
            known = copy_kind in kinds._value2member_map_
            name = kinds(copy_kind).name if known else f"copy kind {copy_kind}"
            self._copy_kind_names[copy_kind] = name
        return self._copy_kind_names[copy_kind]

    def _add_counter(self, counter_kind: int, value: int, start: int, end: int) -> None:
        """A unified memory counter record: its value and duration, by counter."""
        name = self._counter_names.get(counter_kind)
        if name is None:
            name = self.cupti.ActivityUnifiedMemoryCounterKind(counter_kind).name
            self._counter_names[counter_kind] = name
        # bytes for transfers; one record per GPU fault group (value: its faults);
        # one record per CPU fault (value: not a count, so 1)
        value = 1 if name == "CPU_PAGE_FAULT_COUNT" else int(value)
        duration = max(int(end) - int(start), 0)
        self._unified_memory.setdefault(name, []).append((value, duration))

    def _callback_name(self, cbid: int) -> str:
        """CUPTI's name of a driver call (cuMemAlloc_v2), asked once per call."""
        if cbid not in self._callback_names:
            domain = self.cupti.CallbackDomain.DRIVER_API
            self._callback_names[cbid] = callback_name(self.cupti, domain, cbid)
        return self._callback_names[cbid]


# CUpti_ActivityFlag's bit of memcpy and memset records alike (cupti_activity.h).
ASYNC_FLAG = 1 << 0


def _flags(record: Any) -> int:
    """A record's flags: cupti-python names the field `flags_` (`flags` in older builds)."""
    flags = getattr(record, "flags_", None)
    return int(flags if flags is not None else getattr(record, "flags", 1))


def _import_cupti() -> tuple[Any, str | None]:
    """cupti-python's module, or None and why it cannot be loaded."""
    try:
        from cupti import cupti
    except ImportError as error:
        return None, f"cupti-python is not installed ({error.name or error})"
    except Exception as error:  # a broken libcupti raises at import
        return None, f"cupti-python cannot be loaded: {error}"
    return cupti, None


def cupti_unavailable_reason() -> str | None:
    """Why CUPTI cannot be used here, without touching the GPU (None: importable)."""
    return _import_cupti()[1]
