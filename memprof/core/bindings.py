"""NVIDIA's cuda-bindings for every driver call PyCUDA lacks or gets wrong, on PyCUDA's current
context and streams. `call` turns a failed CUresult into one line naming the call and CUDA's
error. Imported on first use. cuMemcpyBatchAsync goes through ctypes (BatchCopy says why).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from memprof.errors import EnvironmentProblem, MemprofError, OutOfMemory, install_command

BINDINGS = '"cuda-bindings>=12.8"'


def install_hint() -> str:
    """The line a command that needs cuda-bindings ends with where it is missing."""
    return (
        f"cuda-bindings is not installed: {install_command(BINDINGS)} (NVIDIA's cuda-bindings, "
        "for the driver calls PyCUDA lacks: registered and managed memory, peers, pools, "
        "virtual memory and batched copies)"
    )


BATCH_COPY_DRIVER = 12080  # cuMemcpyBatchAsync came with CUDA 12.8
KEEP_EVERYTHING = (1 << 64) - 1  # a release threshold no pool ever reaches


@functools.cache
def _import() -> tuple[ModuleType | None, str | None]:
    try:
        from cuda.bindings import driver
    except ImportError as error:
        if getattr(error, "name", None) and error.name.split(".")[0] == "cuda":
            return None, f"cuda-bindings is not installed ({install_command(BINDINGS)})"
        return None, f"cuda-bindings cannot be imported: {error}"
    return driver, None


def missing_reason() -> str | None:
    """Why cuda-bindings cannot be used here (None: it can)."""
    return _import()[1]


def driver() -> ModuleType:
    """cuda.bindings.driver, or one clear line saying how to install it."""
    module, why_not = _import()
    if module is None:
        raise EnvironmentProblem(install_hint() if "not installed" in (why_not or "") else why_not)
    return module


def error_name(status: Any) -> str:
    """CUDA's name of a CUresult (CUDA_ERROR_OUT_OF_MEMORY), whatever form it came in."""
    name = getattr(status, "name", None)
    if isinstance(name, str):
        return name
    with contextlib.suppress(ValueError, TypeError):
        return driver().CUresult(int(status)).name
    return f"CUresult {status}"


def failure(call_name: str, status: Any) -> MemprofError:
    """The one-line error for a call that returned `status`."""
    name = error_name(status)
    if name == "CUDA_ERROR_OUT_OF_MEMORY":
        return OutOfMemory(f"{call_name} failed: out of memory ({name})")
    if name == "CUDA_ERROR_NOT_SUPPORTED":
        return EnvironmentProblem(
            f"{call_name} failed: this GPU or driver does not support it ({name})"
        )
    return MemprofError(f"{call_name} failed: {name}")


def unpack(call_name: str, returned: Any) -> Any:
    """A cuda-bindings call's values after its CUresult (checked): None, one, or a tuple."""
    if not isinstance(returned, tuple):
        returned = (returned,)
    status, values = returned[0], returned[1:]
    if int(status) != 0:
        raise failure(call_name, status)
    if not values:
        return None
    return values[0] if len(values) == 1 else values


def call(name: str, *arguments: Any) -> Any:
    """cuda.bindings.driver.<name>(*arguments), its CUresult checked (see unpack)."""
    function = getattr(driver(), name, None)
    if function is None:
        raise EnvironmentProblem(
            f"{name} is missing from this cuda-bindings ({bindings_version()}): "
            "pip install -U cuda-bindings"
        )
    try:
        returned = function(*arguments)
    except RuntimeError as error:  # cuda-bindings: the driver does not export the function
        supports = "" if name == "cuDriverGetVersion" else _supported_version()
        raise EnvironmentProblem(f"{name} is not in this CUDA driver{supports}: {error}") from error
    return unpack(name, returned)


def _supported_version() -> str:
    """' (it supports CUDA 12.8)', or nothing where the driver cannot say."""
    with contextlib.suppress(MemprofError):
        return f" (it supports CUDA {version_text(driver_version())})"
    return ""


def bindings_version() -> str:
    """cuda-bindings and its version, as pip knows it."""
    from importlib.metadata import PackageNotFoundError, version

    with contextlib.suppress(PackageNotFoundError):
        return f"cuda-bindings {version('cuda-bindings')}"
    return "cuda-bindings (version unknown)"


def driver_version() -> int:
    """The CUDA version the driver supports, as CUDA encodes it (13000 for 13.0)."""
    return int(call("cuDriverGetVersion"))


def version_text(encoded: int) -> str:
    """CUDA's integer version (13000) as text (13.0)."""
    return f"{encoded // 1000}.{encoded % 1000 // 10}"


def current_device() -> int:
    """cuCtxGetDevice: next to nothing, so its time is the timing's floor (pools)."""
    return int(call("cuCtxGetDevice"))


def stream(pycuda_stream: Any) -> Any:
    """A PyCUDA stream as a CUstream (its handle is an int)."""
    return driver().CUstream(int(pycuda_stream.handle))


def pointer(address: int) -> Any:
    return driver().CUdeviceptr(int(address))


def device_attribute(name: str, ordinal: int) -> int:
    """cuDeviceGetAttribute by cuda.h name without prefix (HOST_REGISTER_SUPPORTED)."""
    cu = driver()
    attribute = getattr(cu.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{name}")
    return int(call("cuDeviceGetAttribute", attribute, call("cuDeviceGet", ordinal)))


# -- host memory registration (PyCUDA's register_host_memory is broken with numpy 2) ----------

HOST_REGISTER_PORTABLE = 0x01
HOST_REGISTER_DEVICEMAP = 0x02
# What memprof registers with: usable by every context, and mapped for kernels.
HOST_REGISTER_MAPPED_PORTABLE = HOST_REGISTER_DEVICEMAP | HOST_REGISTER_PORTABLE


def host_register(address: int, nbytes: int, flags: int) -> None:
    """Page-lock existing host memory (cuMemHostRegister)."""
    call("cuMemHostRegister", int(address), nbytes, flags)


def host_unregister(address: int) -> None:
    call("cuMemHostUnregister", int(address))


def host_device_pointer(address: int) -> int:
    """The device address of page-locked, mapped host memory (cuMemHostGetDevicePointer)."""
    return int(call("cuMemHostGetDevicePointer", int(address), 0))


# -- managed memory: PyCUDA wraps neither prefetch nor advise ---------------------------------

# CUmem_advise "set" values; the matching "unset" is one more.
ADVICE = {"read-mostly": 1, "preferred-location": 3, "accessed-by": 5}


def _location(device_ordinal: int | None) -> Any:
    """CUmemLocation: a device by its ordinal, or the host for None."""
    cu = driver()
    location = cu.CUmemLocation()
    types = cu.CUmemLocationType
    if device_ordinal is None:
        location.type, location.id = types.CU_MEM_LOCATION_TYPE_HOST, 0
    else:
        location.type, location.id = types.CU_MEM_LOCATION_TYPE_DEVICE, device_ordinal
    return location


def _by_location(name: str) -> str:
    """The form of `name` taking a CUmemLocation: `name`_v2 in cuda-bindings 12, else `name`."""
    return f"{name}_v2" if hasattr(driver(), f"{name}_v2") else name


def prefetch(address: int, nbytes: int, device_ordinal: int | None, stream_handle: int = 0) -> None:
    """Migrate managed memory to a device (or to the host for None) on a stream."""
    location = _location(device_ordinal)
    cu_stream = driver().CUstream(int(stream_handle))
    call(_by_location("cuMemPrefetchAsync"), pointer(address), nbytes, location, 0, cu_stream)


def advise(
    address: int, nbytes: int, advice: str, device_ordinal: int | None, unset: bool = False
) -> None:
    """cuMemAdvise one of ADVICE for a managed range (unset=True undoes it)."""
    value = driver().CUmem_advise(ADVICE[advice] + (1 if unset else 0))
    location = _location(device_ordinal)
    call(_by_location("cuMemAdvise"), pointer(address), nbytes, value, location)


# -- several GPUs: peer access and copies (PyCUDA's memcpy_peer crashes with default arguments)


def can_access_peer(accessor: int, owner: int) -> bool:
    """cuDeviceCanAccessPeer: can `accessor` map `owner`'s memory (NVLink or PCIe P2P)?"""
    devices = call("cuDeviceGet", accessor), call("cuDeviceGet", owner)
    return bool(call("cuDeviceCanAccessPeer", *devices))


def enable_peer_access(peer_context_handle: int) -> None:
    """cuCtxEnablePeerAccess from the current context to the peer's (already on: fine)."""
    cu = driver()
    returned = cu.cuCtxEnablePeerAccess(cu.CUcontext(int(peer_context_handle)), 0)
    status = returned[0] if isinstance(returned, tuple) else returned
    if error_name(status) != "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED":
        unpack("cuCtxEnablePeerAccess", returned)


def memcpy_peer_async(
    destination: int,
    destination_context: int,
    source: int,
    source_context: int,
    nbytes: int,
    stream_handle: int,
) -> None:
    """cuMemcpyPeerAsync: direct over the link with peer access on, staged by the driver off."""
    cu = driver()
    into = (pointer(destination), cu.CUcontext(int(destination_context)))
    out_of = (pointer(source), cu.CUcontext(int(source_context)))
    call("cuMemcpyPeerAsync", *into, *out_of, nbytes, cu.CUstream(int(stream_handle)))


# -- stream-ordered pools -------------------------------------------------------------------


def default_pool(ordinal: int) -> Any:
    """The device's default memory pool (what cuMemAllocAsync allocates from)."""
    return call("cuDeviceGetDefaultMemPool", call("cuDeviceGet", ordinal))


def create_pool(ordinal: int, release_threshold_bytes: int) -> Any:
    """A device pool keeping up to `release_threshold_bytes` freed across synchronizations."""
    cu = driver()
    properties = cu.CUmemPoolProps()
    properties.allocType = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
    properties.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    properties.location.id = ordinal
    pool = call("cuMemPoolCreate", properties)
    try:
        set_release_threshold(pool, release_threshold_bytes)
    except MemprofError:
        call("cuMemPoolDestroy", pool)
        raise
    return pool


def _pool_attribute(name: str) -> Any:
    return getattr(driver().CUmemPool_attribute, f"CU_MEMPOOL_ATTR_{name}")


def set_release_threshold(pool: Any, nbytes: int) -> None:
    attribute = _pool_attribute("RELEASE_THRESHOLD")
    call("cuMemPoolSetAttribute", pool, attribute, driver().cuuint64_t(nbytes))


def release_threshold(pool: Any) -> int:
    return int(call("cuMemPoolGetAttribute", pool, _pool_attribute("RELEASE_THRESHOLD")))


def trim(pool: Any, keep_bytes: int = 0) -> None:
    """Give the pool's unused memory back to the driver, down to keep_bytes."""
    call("cuMemPoolTrimTo", pool, keep_bytes)


def destroy_pool(pool: Any) -> None:
    call("cuMemPoolDestroy", pool)


def alloc_async(nbytes: int, cu_stream: Any, pool: Any = None) -> int:
    """cuMemAllocAsync (the device's current pool) or cuMemAllocFromPoolAsync (`pool`)."""
    if pool is None:
        return int(call("cuMemAllocAsync", nbytes, cu_stream))
    return int(call("cuMemAllocFromPoolAsync", nbytes, pool, cu_stream))


def free_async(address: int, cu_stream: Any) -> None:
    call("cuMemFreeAsync", pointer(address), cu_stream)


# -- virtual memory management --------------------------------------------------------------


@functools.cache
def _allocation_properties(ordinal: int) -> Any:
    cu = driver()
    properties = cu.CUmemAllocationProp()
    properties.type = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
    properties.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    properties.location.id = ordinal
    return properties


@functools.cache
def _access(ordinal: int) -> list[Any]:
    cu = driver()
    access = cu.CUmemAccessDesc()
    access.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    access.location.id = ordinal
    access.flags = cu.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
    return [access]


def granularity(ordinal: int) -> int:
    """The size every physical allocation and mapping is a multiple of (2 MiB on Hopper)."""
    option = driver().CUmemAllocationGranularity_flags.CU_MEM_ALLOC_GRANULARITY_MINIMUM
    return int(call("cuMemGetAllocationGranularity", _allocation_properties(ordinal), option))


def rounded(nbytes: int, unit: int) -> int:
    """nbytes rounded up to a multiple of unit (at least one unit)."""
    return max(unit, -(-nbytes // unit) * unit)


def reserve(nbytes: int) -> int:
    """Reserve a range of virtual addresses (no memory behind it yet)."""
    return int(call("cuMemAddressReserve", nbytes, 0, 0, 0))


def create(nbytes: int, ordinal: int) -> Any:
    """Physical device memory, not mapped anywhere yet: its handle."""
    return call("cuMemCreate", nbytes, _allocation_properties(ordinal), 0)


def map_memory(address: int, nbytes: int, handle: Any, offset: int = 0) -> None:
    call("cuMemMap", pointer(address), nbytes, offset, handle, 0)


def set_access(address: int, nbytes: int, ordinal: int) -> None:
    """Let the device read and write a mapped range (mappings start with no access)."""
    call("cuMemSetAccess", pointer(address), nbytes, _access(ordinal), 1)


def unmap(address: int, nbytes: int) -> None:
    call("cuMemUnmap", pointer(address), nbytes)


def release(handle: Any) -> None:
    call("cuMemRelease", handle)


def address_free(address: int, nbytes: int) -> None:
    call("cuMemAddressFree", pointer(address), nbytes)


def take_apart(address: int, reserved_bytes: int, handles: list[Any], mapped_bytes: int) -> None:
    """Undo virtual memory built by hand, as far as it got (mapped_bytes of the range)."""
    try:
        if mapped_bytes:
            unmap(address, mapped_bytes)
        for handle in handles:
            release(handle)
    finally:
        address_free(address, reserved_bytes)


# -- batched copies ---------------------------------------------------------------------------


def batch_copy_missing_reason() -> str | None:
    """Why this driver and cuda-bindings cannot do cuMemcpyBatchAsync (None: they can)."""
    why_not = missing_reason()
    if why_not:
        return why_not
    if getattr(driver(), "cuMemcpyBatchAsync", None) is None:
        return (
            f"cuMemcpyBatchAsync is missing from {bindings_version()} (it came with 12.8): "
            "pip install -U cuda-bindings"
        )
    version = driver_version()
    if version < BATCH_COPY_DRIVER:
        return (
            f"cuMemcpyBatchAsync needs a driver for CUDA 12.8 or newer; this one supports "
            f"CUDA {version_text(version)}"
        )
    try:
        _batch_function()
    except EnvironmentProblem as error:
        return str(error)
    return None


class _MemcpyAttributes(ctypes.Structure):
    """CUmemcpyAttributes (cuda.h, CUDA 12.8 and newer)."""

    _fields_ = [
        ("src_access_order", ctypes.c_int),
        ("src_location_type", ctypes.c_int),
        ("src_location_id", ctypes.c_int),
        ("dst_location_type", ctypes.c_int),
        ("dst_location_id", ctypes.c_int),
        ("flags", ctypes.c_uint),
    ]


SRC_ACCESS_ORDER_STREAM = 1  # CU_MEMCPY_SRC_ACCESS_ORDER_STREAM: sources read in stream order


def _batch_function() -> tuple[Any, bool]:
    """libcuda's cuMemcpyBatchAsync (ctypes), and whether it takes failIdx (13's _v2 does not)."""
    from memprof.core.driver import libcuda

    library = libcuda()
    for name, fail_index in (("cuMemcpyBatchAsync_v2", False), ("cuMemcpyBatchAsync", True)):
        function = getattr(library, name, None)
        if function is None:
            continue
        pointer = ctypes.c_void_p
        arrays = [pointer, pointer, pointer, ctypes.c_size_t, pointer, pointer, ctypes.c_size_t]
        function.argtypes = [*arrays, *([pointer] if fail_index else []), pointer]
        function.restype = ctypes.c_int
        return function, fail_index
    raise EnvironmentProblem(
        "the CUDA driver exports no cuMemcpyBatchAsync (it came with CUDA 12.8): update the driver"
    )


@dataclass(frozen=True)
class BatchCopy:
    """One cuMemcpyBatchAsync of many pieces, its argument arrays built once, as a program
    reusing them does (cuda-bindings converts its lists on every call: Python's cost)."""

    function: Any  # the driver's function, through ctypes
    arguments: tuple[int, ...]  # every argument before the stream: addresses and counts
    arrays: tuple[Any, ...]  # what the addresses point into, alive as long as this

    @classmethod
    def of(cls, destinations: list[int], sources: list[int], sizes: list[int]) -> BatchCopy:
        """Copies source[i] -> destination[i] of sizes[i] bytes, read in stream order."""
        function, fail_index = _batch_function()
        count = len(sizes)
        targets = (ctypes.c_uint64 * count)(*destinations)
        origins = (ctypes.c_uint64 * count)(*sources)
        lengths = (ctypes.c_size_t * count)(*sizes)
        attribute = _MemcpyAttributes(src_access_order=SRC_ACCESS_ORDER_STREAM)
        first = (ctypes.c_size_t * 1)(0)  # the attribute applies from copy 0 on
        failed = ctypes.c_size_t(0)
        arrays = (targets, origins, lengths, attribute, first, failed)
        pieces = [ctypes.addressof(array) for array in (targets, origins, lengths)]
        attributes = [ctypes.addressof(attribute), ctypes.addressof(first), 1]  # 1 attribute
        failed_at = [ctypes.addressof(failed)] if fail_index else []
        return cls(function, (*pieces, count, *attributes, *failed_at), arrays)

    def enqueue(self, stream_handle: int) -> None:
        """Queue every copy on the stream (its handle) with one driver call."""
        status = self.function(*self.arguments, stream_handle)
        if status != 0:
            raise failure("cuMemcpyBatchAsync", status)
