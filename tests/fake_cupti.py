"""A stand-in for cupti-python's `cupti` module, with a driver that makes records as CUPTI does.

Only what memprof.core.activity and memprof.trace.stacks read is here, named as cupti-python
names it; CUPTI's callbacks are libcupti's (FakeLibcupti, as memprof.core.api_callbacks
reaches them). A subscriber's callback runs at the entry and exit of each enabled call, on the
calling thread, with the call's correlation id, as CUPTI's Callback API does. The records
are the unit inputs CUPTI would deliver: every driver call gets a correlation id (unrelated
to memprof's external ids, as in CUPTI), an API record, the GPU records of what it enqueued,
and, while an external id is pushed, an EXTERNAL_CORRELATION record linking the two.
Records of kinds that are not enabled are dropped, as CUPTI drops them; flush delivers the
rest through the registered callback, in the order a test chooses (CUPTI's buffers do not
keep records of different kinds in the order they happened).
"""

from __future__ import annotations

import ctypes
import enum
from types import SimpleNamespace


class ActivityKind(enum.IntEnum):
    MEMCPY = 1
    MEMCPY2 = 22  # copies between GPUs
    MEMSET = 2
    DRIVER = 5
    RUNTIME = 6
    CONCURRENT_KERNEL = 10
    EXTERNAL_CORRELATION = 33
    UNIFIED_MEMORY_COUNTER = 25


class ActivityMemcpyKind(enum.IntEnum):
    UNKNOWN = 0
    HTOD = 1
    DTOH = 2
    DTOD = 8
    HTOH = 9
    PTOP = 10


class ActivityUnifiedMemoryCounterKind(enum.IntEnum):
    BYTES_TRANSFER_HTOD = 1
    BYTES_TRANSFER_DTOH = 2
    CPU_PAGE_FAULT_COUNT = 3
    GPU_PAGE_FAULT = 4


class ActivityUnifiedMemoryCounterScope(enum.IntEnum):
    PROCESS_SINGLE_DEVICE = 1


class CallbackDomain(enum.IntEnum):
    DRIVER_API = 1
    RUNTIME_API = 2


class ApiCallbackSite(enum.IntEnum):
    API_ENTER = 0
    API_EXIT = 1


class ExternalCorrelationKind(enum.IntEnum):
    CUSTOM0 = 2


CALLBACK_IDS = {  # (domain, cbid) -> name, as cupti.get_callback_name answers
    (CallbackDomain.DRIVER_API, 279): "cuMemcpyHtoDAsync_v2",
    (CallbackDomain.DRIVER_API, 281): "cuMemcpyDtoHAsync_v2",
    (CallbackDomain.DRIVER_API, 276): "cuMemcpyHtoD_v2",
    (CallbackDomain.DRIVER_API, 277): "cuMemcpyDtoH_v2",
    (CallbackDomain.DRIVER_API, 307): "cuLaunchKernel",
    (CallbackDomain.DRIVER_API, 288): "cuMemsetD8Async",
    (CallbackDomain.DRIVER_API, 272): "cuMemAlloc_v2",
    (CallbackDomain.DRIVER_API, 274): "cuMemFree_v2",
    (CallbackDomain.DRIVER_API, 17): "cuCtxSynchronize",
    (CallbackDomain.DRIVER_API, 139): "cuEventRecord",
    (CallbackDomain.DRIVER_API, 440): "cuMemcpyAsync",
    (CallbackDomain.RUNTIME_API, 51): "cudaMemcpyAsync",
    (CallbackDomain.RUNTIME_API, 131): "cudaStreamSynchronize_v3020",
    (CallbackDomain.RUNTIME_API, 3): "cudaGetDevice_v3020",
}
CBID = {name: cbid for (_, cbid), name in CALLBACK_IDS.items()}
DOMAIN = {name: domain for (domain, _), name in CALLBACK_IDS.items()}
# cupti-python's tables of callback ids, one enum per domain, members named as the calls
driver_api_trace_cbid = enum.IntEnum(
    "driver_api_trace_cbid",
    {"INVALID": 0}
    | {name: cbid for (d, cbid), name in CALLBACK_IDS.items() if d == CallbackDomain.DRIVER_API},
)
runtime_api_trace_cbid = enum.IntEnum(
    "runtime_api_trace_cbid",
    {"INVALID": 0}
    | {name: cbid for (d, cbid), name in CALLBACK_IDS.items() if d == CallbackDomain.RUNTIME_API},
)


class UnifiedMemoryConfig:
    """cupti.ActivityUnifiedMemoryCounterConfig(n): n settable entries and a pointer."""

    def __init__(self, count: int) -> None:
        self.entries = [SimpleNamespace() for _ in range(count)]
        self.ptr = id(self)

    def __getitem__(self, index: int) -> SimpleNamespace:
        return self.entries[index]


class FakeCupti:
    ActivityKind = ActivityKind
    ActivityMemcpyKind = ActivityMemcpyKind
    ActivityUnifiedMemoryCounterKind = ActivityUnifiedMemoryCounterKind
    ActivityUnifiedMemoryCounterScope = ActivityUnifiedMemoryCounterScope
    CallbackDomain = CallbackDomain
    ApiCallbackSite = ApiCallbackSite
    ExternalCorrelationKind = ExternalCorrelationKind
    driver_api_trace_cbid = driver_api_trace_cbid
    runtime_api_trace_cbid = runtime_api_trace_cbid

    def __init__(self, refuse: set[ActivityKind] = frozenset(), first_correlation: int = 5000):
        self.refuse = set(refuse)
        self.enabled: set[ActivityKind] = set()
        self.disabled_log: list[ActivityKind] = []
        self.stack: list[int] = []
        self.pending: list[SimpleNamespace] = []
        self.correlation = first_correlation
        self.clock_ns = 1_000_000
        self.callbacks = None
        self.configured: UnifiedMemoryConfig | None = None
        self.names_asked = 0
        self.flushes = 0
        self.subscriber: tuple | None = None  # (callback, userdata) while subscribed
        self.subscribed = 0  # subscriptions made, unsubscribed or not
        self.callbacks_on: set[tuple[int, int]] = set()  # (domain, cbid) enabled
        self.domains_on: set[int] = set()
        self.records_off: set[tuple[ActivityKind, int]] = set()  # (DRIVER or RUNTIME, cbid)
        self.refuse_switch: set[int] = set()  # cbids whose records cannot be switched off
        self.library = FakeLibcupti(self)  # its callbacks, through libcupti's C functions
        self.thread_id = 4242  # the calling thread's id in API records
        self.device_id = 0  # the GPU of GPU records

    # -- the API memprof calls ----------------------------------------------------------

    def activity_enable(self, kind: ActivityKind) -> None:
        if kind in self.refuse:
            raise RuntimeError("CUPTI_ERROR_NOT_COMPATIBLE (41)")
        self.enabled.add(kind)
        # as CUPTI does: every call of the kind is recorded again (seen on the H100: a sweep's
        # event calls, switched off at the start, recorded after its first pause)
        self.records_off = {(off, cbid) for off, cbid in self.records_off if off != kind}

    def activity_disable(self, kind: ActivityKind) -> None:
        self.enabled.discard(kind)
        self.disabled_log.append(kind)

    def activity_enable_driver_api(self, cbid: int, enable: int) -> None:
        self._switch(ActivityKind.DRIVER, cbid, enable)

    def activity_enable_runtime_api(self, cbid: int, enable: int) -> None:
        self._switch(ActivityKind.RUNTIME, cbid, enable)

    def _switch(self, kind: ActivityKind, cbid: int, enable: int) -> None:
        assert isinstance(cbid, int)
        if cbid <= 0 or cbid in self.refuse_switch:  # INVALID is no call
            raise RuntimeError("CUPTI_ERROR_NOT_SUPPORTED (27)")
        if enable:
            self.records_off.discard((kind, cbid))
        else:
            self.records_off.add((kind, cbid))

    def activity_register_callbacks(self, requested, completed) -> None:
        self.callbacks = (requested, completed)

    def activity_push_external_correlation_id(self, kind, external_id: int) -> None:
        assert kind == ExternalCorrelationKind.CUSTOM0
        self.stack.append(external_id)

    def activity_pop_external_correlation_id(self, kind) -> None:
        assert kind == ExternalCorrelationKind.CUSTOM0
        self.stack.pop()

    def activity_flush_all(self, flag: int) -> None:
        self.flushes += 1
        records, self.pending = self.pending, []
        if records:
            self.callbacks[1](records)

    def ActivityUnifiedMemoryCounterConfig(self, count: int) -> UnifiedMemoryConfig:
        self.configured = UnifiedMemoryConfig(count)
        return self.configured

    def activity_configure_unified_memory_counter(self, pointer: int, count: int) -> None:
        assert self.configured is not None and pointer == self.configured.ptr
        assert count == len(self.configured.entries)

    def get_callback_name(self, domain: CallbackDomain, cbid: int) -> str:
        self.names_asked += 1
        return CALLBACK_IDS[domain, cbid]

    def _callback(self, name: str, site: ApiCallbackSite, correlation: int) -> None:
        """The subscriber's callback, if this call's is enabled, as CUPTI calls it."""
        domain, cbid = int(DOMAIN[name]), CBID[name]
        if self.subscriber is None:
            return
        if (domain, cbid) not in self.callbacks_on and domain not in self.domains_on:
            return
        callback, userdata = self.subscriber
        data = callback_data(site, correlation)  # a CUpti_CallbackData in C memory
        callback(userdata, domain, cbid, ctypes.addressof(data))

    def enter_from_a_c_thread(self, name: str) -> int:
        """The entry callback of a call made by a thread with no Python frame at all (the
        driver calling back into Python from a thread PyTorch's autograd engine started in
        C++): the callback's own frame is the only one on that thread. Returns its id."""
        import functools

        self.correlation += 7
        domain, cbid = int(DOMAIN[name]), CBID[name]
        callback, userdata = self.subscriber
        struct = callback_data(ApiCallbackSite.API_ENTER, self.correlation)
        start_routine = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
        # a C function object calls the callback: no Python frame under it (the library's
        # callback is a ctypes function itself, called through C again)
        routine = start_routine(functools.partial(callback, userdata, domain, cbid))
        libc = ctypes.CDLL(None)
        create, join = libc.pthread_create, libc.pthread_join
        create.argtypes = [ctypes.POINTER(ctypes.c_ulong), ctypes.c_void_p, start_routine,
                           ctypes.c_void_p]  # fmt: skip
        join.argtypes = [ctypes.c_ulong, ctypes.c_void_p]
        thread = ctypes.c_ulong()
        assert create(ctypes.byref(thread), None, routine, ctypes.addressof(struct)) == 0
        assert join(thread, None) == 0
        return self.correlation

    # -- what the driver and the GPU do -------------------------------------------------

    def _record(self, kind: ActivityKind, **fields) -> None:
        if kind in self.enabled and (kind, fields.get("cbid")) not in self.records_off:
            self.pending.append(SimpleNamespace(kind=kind, **fields))

    def call(
        self, name: str, duration_ns: int = 2_000, runtime: bool = False, inner: str = ""
    ) -> int:
        """A driver (or runtime) call: its callbacks, its API record and, while an id is
        pushed, the external correlation. A runtime call's `inner` driver call shares its
        correlation id and runs inside it. Returns its correlation id."""
        self.correlation += 7  # never equal to memprof's small external ids
        correlation, start = self.correlation, self.clock_ns
        self._callback(name, ApiCallbackSite.API_ENTER, correlation)
        if inner:  # inside, a nanosecond after the entry and before the exit
            self.clock_ns = start + 1
            self._callback(inner, ApiCallbackSite.API_ENTER, correlation)
            self._record(
                ActivityKind.DRIVER,
                cbid=CBID[inner],
                correlation_id=correlation,
                start=start + 1,
                end=start + duration_ns - 1,
                thread_id=self.thread_id,
            )
            self.clock_ns = start + duration_ns - 1
            self._callback(inner, ApiCallbackSite.API_EXIT, correlation)
        self.clock_ns = start + duration_ns
        kind = ActivityKind.RUNTIME if runtime else ActivityKind.DRIVER
        self._record(
            kind,
            cbid=CBID[name],
            correlation_id=correlation,
            start=start,
            end=start + duration_ns,
            thread_id=self.thread_id,
        )
        self._callback(name, ApiCallbackSite.API_EXIT, correlation)
        if self.stack:
            self._record(
                ActivityKind.EXTERNAL_CORRELATION,
                correlation_id=correlation,
                external_id=self.stack[-1],
                external_kind=ExternalCorrelationKind.CUSTOM0,
            )
        return correlation

    def memcpy(
        self,
        direction: str,
        nbytes: int,
        duration_ns: int,
        src: int = 2,
        dst: int = 3,
        flags: int = 1,
        call: str = "cuMemcpyHtoDAsync_v2",
        call_ns: int = 2_000,
        inner: str = "",
        stream: int = 7,
    ) -> int:
        correlation = self.call(call, call_ns, call.startswith("cuda"), inner)
        start = self.clock_ns
        self.clock_ns += duration_ns
        self._record(
            ActivityKind.MEMCPY,
            correlation_id=correlation,
            copy_kind=int(ActivityMemcpyKind[direction]),
            start=start,
            end=start + duration_ns,
            bytes=nbytes,
            src_kind=src,
            dst_kind=dst,
            flags_=flags,
            device_id=self.device_id,
            stream_id=stream,
        )
        return correlation

    def kernel(self, name: str, duration_ns: int, stream: int = 7) -> int:
        correlation = self.call("cuLaunchKernel")
        start = self.clock_ns
        self.clock_ns += duration_ns
        self._record(
            ActivityKind.CONCURRENT_KERNEL,
            correlation_id=correlation,
            name=name,
            start=start,
            end=start + duration_ns,
            device_id=self.device_id,
            stream_id=stream,
        )
        return correlation

    def memset(self, nbytes: int, duration_ns: int, flags: int = 1, stream: int = 7) -> int:
        correlation = self.call("cuMemsetD8Async")
        start = self.clock_ns
        self.clock_ns += duration_ns
        self._record(
            ActivityKind.MEMSET,
            correlation_id=correlation,
            start=start,
            end=start + duration_ns,
            bytes=nbytes,
            flags_=flags,
            device_id=self.device_id,
            stream_id=stream,
        )
        return correlation

    def counter(self, name: str, value: int, start: int = 0, end: int = 0) -> None:
        self._record(
            ActivityKind.UNIFIED_MEMORY_COUNTER,
            counter_kind=int(ActivityUnifiedMemoryCounterKind[name]),
            value=value,
            start=start,
            end=end,
        )


class CallbackData(ctypes.Structure):
    """CUpti_CallbackData as cupti_callbacks.h lays it out (64-bit Linux)."""

    _fields_ = [
        ("callbackSite", ctypes.c_int32),
        ("functionName", ctypes.c_char_p),
        ("functionParams", ctypes.c_void_p),
        ("functionReturnValue", ctypes.c_void_p),
        ("symbolName", ctypes.c_char_p),
        ("context", ctypes.c_void_p),
        ("contextUid", ctypes.c_uint32),
        ("correlationData", ctypes.c_void_p),
        ("correlationId", ctypes.c_uint32),
    ]


def callback_data(site: int, correlation: int) -> CallbackData:
    return CallbackData(callbackSite=int(site), correlationId=correlation)


# libcupti's functions as C declares them (cupti_callbacks.h, cupti_result.h); the fake's are
# real C function pointers of these types, so the argtypes memprof sets convert its arguments
# as they would for libcupti, and a callback reaches the fake as an address
_SUBSCRIBE = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_void_p
)
_ENABLE_CALLBACK = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32
)
_ENABLE_DOMAIN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_int)
_UNSUBSCRIBE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
_RESULT_STRING = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p))
_TIMESTAMP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_uint64))
# void (*)(void *userdata, CUpti_CallbackDomain, CUpti_CallbackId, const void *cbdata)
_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p)


def c_function(prototype, implementation):
    """A C function pointer to `implementation`, as ctypes.CDLL hands out a library's: no
    argtypes until the caller sets them. Returns (the function, what keeps it alive)."""
    thunk = prototype(implementation)
    address = ctypes.cast(thunk, ctypes.c_void_p).value
    return ctypes.CFUNCTYPE(ctypes.c_int)(address), thunk


NO_LIBCUPTI = SimpleNamespace()  # a library without libcupti's functions


class FakeLibcupti:
    """libcupti's callback functions (cuptiSubscribe, cuptiEnableCallback, cuptiEnableDomain,
    cuptiUnsubscribe, cuptiGetResultString, cuptiGetTimestamp: the fake's clock) over a
    FakeCupti's state, called as C functions:
    a subscriber is kept as the address CUPTI would keep, and called through it with the
    address of a CUpti_CallbackData, so a callback its maker let go of is not kept alive."""

    HANDLE = 77

    def __init__(self, cupti: FakeCupti) -> None:
        self.cupti = cupti
        self.refuse_subscribe = 0  # a CUPTI error code
        self.refuse_ids: set[int] = set()  # cbids whose callbacks cannot be switched on
        self.names = {39: b"CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"}
        self.callback_address = 0  # the subscriber's function, as CUPTI holds it
        self._thunks = []
        for name, prototype in (
            ("cuptiSubscribe", _SUBSCRIBE),
            ("cuptiEnableCallback", _ENABLE_CALLBACK),
            ("cuptiEnableDomain", _ENABLE_DOMAIN),
            ("cuptiUnsubscribe", _UNSUBSCRIBE),
            ("cuptiGetResultString", _RESULT_STRING),
            ("cuptiGetTimestamp", _TIMESTAMP),
        ):
            function, thunk = c_function(prototype, getattr(self, "_" + name))
            setattr(self, name, function)
            self._thunks.append(thunk)

    def _cuptiSubscribe(self, handle, function_address, userdata) -> int:
        if self.refuse_subscribe:
            return self.refuse_subscribe
        handle[0] = self.HANDLE
        self.callback_address = function_address
        self.cupti.subscriber = (_CALLBACK(function_address), userdata)
        self.cupti.subscribed += 1
        return 0

    def _cuptiEnableCallback(self, enable, handle, domain, cbid) -> int:
        assert handle == self.HANDLE and enable == 1
        if cbid in self.refuse_ids:
            return 1  # CUPTI_ERROR_INVALID_PARAMETER
        self.cupti.callbacks_on.add((int(domain), int(cbid)))
        return 0

    def _cuptiEnableDomain(self, enable, handle, domain) -> int:
        assert handle == self.HANDLE and enable == 1
        self.cupti.domains_on.add(int(domain))
        return 0

    def _cuptiUnsubscribe(self, handle) -> int:
        assert handle == self.HANDLE
        self.cupti.subscriber = None
        return 0

    def _cuptiGetTimestamp(self, stamp) -> int:
        stamp[0] = self.cupti.clock_ns
        return 0

    def _cuptiGetResultString(self, code, text) -> int:
        if code not in self.names:
            return 1
        text[0] = self.names[code]
        return 0
