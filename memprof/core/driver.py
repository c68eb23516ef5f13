"""Direct calls into the CUDA driver (libcuda) for what PyCUDA lacks or gets wrong.

They act on the current context, which is PyCUDA's: the GpuSession makes it current.
Every CUresult is checked and turned into an exception naming the call.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import functools
import signal
import threading

# CUdevice_attribute numbers from cuda.h for attributes PyCUDA 2026.1 does not name.
DEVICE_ATTRIBUTE_NUMBERS = {
    "HOST_REGISTER_SUPPORTED": 99,
    "VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED": 102,
    "MEMORY_POOLS_SUPPORTED": 115,
}


class DriverCallFailed(RuntimeError):
    """A libcuda call returned an error code."""


@functools.cache
def libcuda() -> ctypes.CDLL:
    return ctypes.CDLL("libcuda.so.1")


# -- the driver's start, begun early ----------------------------------------------------------
_start_lock = threading.Lock()
_start_ended: threading.Event | None = None  # set once the early cuInit has returned


def start_in_background() -> None:
    """Begin cuInit, the driver's start (0.1 s on an H100, spent outside Python's lock), on a
    daemon thread of its own, so that the imports a run does next (PyCUDA and numpy, CUPTI)
    are done meanwhile. Once per process. PyCUDA's own cuInit, after wait_for_start(), then
    finds the driver started, or fails as it would have (no driver, no GPU): its error is the
    one memprof reports. The process never ends while the start runs (atexit waits for it)."""
    global _start_ended
    with _start_lock:
        if _start_ended is not None:
            return
        _start_ended = ended = threading.Event()

    def start() -> None:
        try:
            with contextlib.suppress(Exception):  # Ctrl-C goes to the main thread, at once
                signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
            with contextlib.suppress(Exception):  # no libcuda: PyCUDA's import says so
                libcuda().cuInit(0)
        finally:
            ended.set()

    try:
        threading.Thread(target=start, name="memprof-cuinit", daemon=True).start()
    except RuntimeError:  # no thread to be had: PyCUDA's cuInit starts the driver instead
        ended.set()
    # An event, not the thread's join: a Ctrl-C inside Thread.join marks a thread that still
    # runs as ended (Python 3.10 to 3.12), and the process would not wait for it.
    atexit.register(ended.wait)


def wait_for_start() -> None:
    """Until the start begun by start_in_background() (if any) has ended."""
    if _start_ended is not None:
        _start_ended.wait()


def error_text(code: int) -> str:
    name = ctypes.c_char_p()
    libcuda().cuGetErrorName(code, ctypes.byref(name))
    return name.value.decode() if name.value else f"CUresult {code}"


def check(call: str, code: int) -> None:
    if code != 0:
        raise DriverCallFailed(f"{call} failed: {error_text(code)}")


def device_attribute(attribute_number: int, device_ordinal: int) -> int:
    """cuDeviceGetAttribute for an attribute given by its number in cuda.h."""
    device = ctypes.c_int()
    check("cuDeviceGet", libcuda().cuDeviceGet(ctypes.byref(device), device_ordinal))
    value = ctypes.c_int()
    check(
        "cuDeviceGetAttribute",
        libcuda().cuDeviceGetAttribute(ctypes.byref(value), attribute_number, device),
    )
    return value.value


# Host memory registration (PyCUDA's register_host_memory is broken with numpy 2).
HOST_REGISTER_PORTABLE = 0x01
HOST_REGISTER_DEVICEMAP = 0x02
# What memprof registers with: usable by every context, and mapped for kernels.
HOST_REGISTER_MAPPED_PORTABLE = HOST_REGISTER_DEVICEMAP | HOST_REGISTER_PORTABLE


def _function(*names: str) -> ctypes._CFuncPtr:
    """The first of `names` libcuda exports (newer versioned symbols first)."""
    for name in names:
        function = getattr(libcuda(), name, None)
        if function is not None:
            return function
    raise DriverCallFailed(f"the CUDA driver exports none of {', '.join(names)}: update the driver")


def host_register(address: int, nbytes: int, flags: int) -> None:
    """Page-lock existing host memory (cuMemHostRegister)."""
    register = _function("cuMemHostRegister_v2", "cuMemHostRegister")
    register.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint]
    check("cuMemHostRegister", register(address, nbytes, flags))


def host_unregister(address: int) -> None:
    unregister = _function("cuMemHostUnregister")
    unregister.argtypes = [ctypes.c_void_p]
    check("cuMemHostUnregister", unregister(address))


def host_device_pointer(address: int) -> int:
    """The device address of page-locked, mapped host memory (cuMemHostGetDevicePointer)."""
    get_pointer = _function("cuMemHostGetDevicePointer_v2", "cuMemHostGetDevicePointer")
    get_pointer.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_void_p, ctypes.c_uint]
    pointer = ctypes.c_uint64()
    check("cuMemHostGetDevicePointer", get_pointer(ctypes.byref(pointer), address, 0))
    return pointer.value


# Managed memory: PyCUDA wraps neither prefetch nor advise.
class MemLocation(ctypes.Structure):
    """CUmemLocation: where memory should live (a device ordinal, or the host)."""

    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


LOCATION_DEVICE, LOCATION_HOST = 1, 2
CU_DEVICE_CPU = -1
# CUmem_advise "set" values; the matching "unset" is one more.
ADVICE = {"read-mostly": 1, "preferred-location": 3, "accessed-by": 5}


def _location(device_ordinal: int | None) -> MemLocation:
    if device_ordinal is None:
        return MemLocation(LOCATION_HOST, 0)
    return MemLocation(LOCATION_DEVICE, device_ordinal)


def prefetch(address: int, nbytes: int, device_ordinal: int | None, stream_handle: int = 0) -> None:
    """Migrate managed memory to a device (or to the host for None) on a stream."""
    try:
        function = _function("cuMemPrefetchAsync_v2")
    except DriverCallFailed:
        function = _function("cuMemPrefetchAsync")  # before CUDA 12.2: a device ordinal
        function.argtypes = [ctypes.c_uint64, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
        target = CU_DEVICE_CPU if device_ordinal is None else device_ordinal
        check("cuMemPrefetchAsync", function(address, nbytes, target, stream_handle))
        return
    function.argtypes = [
        ctypes.c_uint64,
        ctypes.c_size_t,
        MemLocation,
        ctypes.c_uint,
        ctypes.c_void_p,
    ]
    check(
        "cuMemPrefetchAsync", function(address, nbytes, _location(device_ordinal), 0, stream_handle)
    )


def advise(
    address: int, nbytes: int, advice: str, device_ordinal: int | None, unset: bool = False
) -> None:
    """cuMemAdvise one of ADVICE for a managed range (unset=True undoes it)."""
    value = ADVICE[advice] + (1 if unset else 0)
    try:
        function = _function("cuMemAdvise_v2")
    except DriverCallFailed:
        function = _function("cuMemAdvise")
        function.argtypes = [ctypes.c_uint64, ctypes.c_size_t, ctypes.c_int, ctypes.c_int]
        target = CU_DEVICE_CPU if device_ordinal is None else device_ordinal
        check("cuMemAdvise", function(address, nbytes, value, target))
        return
    function.argtypes = [ctypes.c_uint64, ctypes.c_size_t, ctypes.c_int, MemLocation]
    check("cuMemAdvise", function(address, nbytes, value, _location(device_ordinal)))


# -- several GPUs: peer access and copies (PyCUDA's memcpy_peer crashes with default arguments)


def _device(ordinal: int) -> int:
    device = ctypes.c_int()
    check("cuDeviceGet", libcuda().cuDeviceGet(ctypes.byref(device), ordinal))
    return device.value


def can_access_peer(accessor: int, owner: int) -> bool:
    """cuDeviceCanAccessPeer: can `accessor` map `owner`'s memory (NVLink or PCIe P2P)?"""
    result = ctypes.c_int()
    check(
        "cuDeviceCanAccessPeer",
        libcuda().cuDeviceCanAccessPeer(ctypes.byref(result), _device(accessor), _device(owner)),
    )
    return bool(result.value)


def enable_peer_access(peer_context_handle: int) -> None:
    """cuCtxEnablePeerAccess from the current context to the peer's (already on: fine)."""
    function = libcuda().cuCtxEnablePeerAccess
    function.argtypes = [ctypes.c_void_p, ctypes.c_uint]
    code = function(ctypes.c_void_p(peer_context_handle), 0)
    if code != 0 and error_text(code) != "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED":
        check("cuCtxEnablePeerAccess", code)


def memcpy_peer_async(
    destination: int,
    destination_context: int,
    source: int,
    source_context: int,
    nbytes: int,
    stream_handle: int,
) -> None:
    """cuMemcpyPeerAsync: direct over the link with peer access on, staged by the driver off."""
    function = libcuda().cuMemcpyPeerAsync
    function.argtypes = [
        ctypes.c_uint64,
        ctypes.c_void_p,
        ctypes.c_uint64,
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_void_p,
    ]
    check(
        "cuMemcpyPeerAsync",
        function(
            destination,
            ctypes.c_void_p(destination_context),
            source,
            ctypes.c_void_p(source_context),
            nbytes,
            ctypes.c_void_p(stream_handle),
        ),
    )
