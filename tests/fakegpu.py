"""A stand-in GPU for CPU tests of memprof's GPU-side procedures (not of any figure).

"Device memory" is real host memory, so every copy, memset and kernel really moves bytes and
memprof's own verification checks real data. The driver calls keep the rules the real driver
keeps where memprof could break them: freeing twice or freeing what was never allocated,
mapping outside a reservation or over a mapping, granting access to an unmapped range,
unmapping part of a mapping, freeing a reservation with memory still mapped. Whatever is
still allocated when the test ends is a leak (FakeGpu.leaks). Times are made up and never
asserted: tests of this kind check what was done, never how long it took.
"""

from __future__ import annotations

import contextlib
import ctypes
import enum
import itertools
import math
import operator
import struct
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import numpy as np

from memprof.core.measure import Profiler

GRANULARITY = 2 << 20


class FakeDriverError(Exception):
    pass


class FakeGpu:
    """What is allocated, reserved, mapped and created, and the rules for each."""

    def __init__(self) -> None:
        self.device: dict[int, np.ndarray] = {}  # cuMemAlloc and pool allocations
        self.pool_allocations: dict[int, Any] = {}  # address -> pool
        self.host: dict[int, np.ndarray] = {}  # pinned and mapped host memory
        self.reserved: dict[int, np.ndarray] = {}  # address -> the range's bytes
        self.handles: dict[int, int] = {}  # handle -> size
        self.mappings: dict[int, tuple[int, int]] = {}  # address -> (size, handle)
        self.accessible: set[int] = set()  # mapped addresses with access granted
        self.pools: list[Any] = []
        self.registered: dict[
            int, tuple[int, int]
        ] = {}  # cuMemHostRegister: address -> (size, flags)
        self.peers: set[int] = set()  # contexts the current one has peer access to
        self.calls: list[str] = []
        self._handles = itertools.count(1)

    def leaks(self) -> dict[str, int]:
        found = {
            "device memory": len(self.device),
            "host memory": len(self.host),
            "reservations": len(self.reserved),
            "physical memory": len(self.handles),
            "mappings": len(self.mappings),
            "pools": sum(1 for pool in self.pools if not pool.default and not pool.destroyed),
            "registered host memory": len(self.registered),
        }
        return {what: count for what, count in found.items() if count}

    def allocate_device(self, nbytes: int) -> int:
        data = np.zeros(max(nbytes, 1), np.uint8)
        self.device[data.ctypes.data] = data
        return data.ctypes.data

    def free_device(self, address: int) -> None:
        if address not in self.device:
            raise FakeDriverError(f"free of {address:#x}, which is not allocated")
        del self.device[address]

    def within_allocation(self, address: int, nbytes: int) -> int:
        """The address, where its nbytes end inside the device allocation it starts in (the
        driver refuses a copy past one, CUDA_ERROR_INVALID_VALUE: here it would write over
        the test process's heap)."""
        for start, data in self.device.items():
            if start <= address < start + data.nbytes < address + nbytes:
                raise FakeDriverError(
                    f"{nbytes} bytes at {address:#x}, past the end of the {data.nbytes}-byte "
                    f"allocation at {start:#x}"
                )
        return address

    def mapped_range(self, address: int, nbytes: int) -> bool:
        """Is every byte of [address, address + nbytes) in a mapping?"""
        covered = 0
        for start, (size, _) in sorted(self.mappings.items()):
            if start <= address + covered < start + size:
                covered = start + size - address
        return covered >= nbytes


# -- pycuda.driver's part ---------------------------------------------------------------------


class FakeAllocation:
    def __init__(self, gpu: FakeGpu, nbytes: int) -> None:
        self.gpu, self.address, self.freed = gpu, gpu.allocate_device(nbytes), False

    def __int__(self) -> int:
        return self.address

    __index__ = __int__

    def free(self) -> None:
        if self.freed:
            raise FakeDriverError("cuMemFree of an allocation already freed")
        self.freed = True
        self.gpu.free_device(self.address)


class HostAllocation:
    """pagelocked_empty's base: .free() and .get_device_pointer()."""

    def __init__(self, gpu: FakeGpu, count: int, dtype: Any) -> None:
        self.gpu, self.data = gpu, np.zeros(count, dtype)
        self.__array_interface__ = self.data.__array_interface__
        gpu.host[self.data.ctypes.data] = self.data

    def free(self) -> None:
        if self.data.ctypes.data not in self.gpu.host:
            raise FakeDriverError("cuMemFreeHost of memory already freed")
        del self.gpu.host[self.data.ctypes.data]

    def get_device_pointer(self) -> int:
        return self.data.ctypes.data


class ManagedAllocation(HostAllocation):
    """managed_empty's base: int() its address (host and GPU see the same pages here)."""

    def __int__(self) -> int:
        return self.data.ctypes.data


class FakeStream:
    handles = itertools.count(0x1000)

    def __init__(self, flags: int = 0) -> None:
        self.handle = next(self.handles)

    def synchronize(self) -> None:
        pass


class FakeEvent:
    clock = itertools.count(1)

    def __init__(self) -> None:
        self.time = 0

    def record(self, stream: Any = None) -> FakeEvent:
        self.time = next(self.clock)
        return self

    def synchronize(self) -> None:
        pass

    def time_since(self, start: FakeEvent) -> float:
        return (self.time - start.time) * 1e-3  # made up: never asserted


def _address(pointer: Any) -> int:
    return int(pointer)


def _floats(address: int, count: int) -> np.ndarray:
    """`count` float32 at `address`, in place."""
    return np.ctypeslib.as_array((ctypes.c_float * count).from_address(address))


class FakeCuda:
    """The parts of pycuda.driver memprof uses."""

    Error = FakeDriverError
    MemoryError = type("MemoryError", (FakeDriverError,), {})
    host_alloc_flags = SimpleNamespace(PORTABLE=1, DEVICEMAP=2, WRITECOMBINED=4)
    mem_attach_flags = SimpleNamespace(GLOBAL=1)
    Stream, Event = FakeStream, FakeEvent

    def __init__(self, gpu: FakeGpu) -> None:
        self.gpu = gpu

    def mem_alloc(self, nbytes: int) -> FakeAllocation:
        if not isinstance(nbytes, int):
            raise TypeError("mem_alloc takes a Python int")
        return FakeAllocation(self.gpu, nbytes)

    def pagelocked_empty(self, count: int, dtype: Any, mem_flags: int = 0) -> np.ndarray:
        return np.asarray(HostAllocation(self.gpu, count, dtype))

    def managed_empty(self, count: int, dtype: Any, mem_flags: int = 0) -> np.ndarray:
        return np.asarray(ManagedAllocation(self.gpu, count, dtype))

    def mem_get_info(self) -> tuple[int, int]:
        return 64 << 30, 80 << 30

    def memset_d8(self, address: Any, value: int, nbytes: int) -> None:
        ctypes.memset(_address(address), value, nbytes)

    def memset_d8_async(self, address: Any, value: int, nbytes: int, stream: Any = None) -> None:
        self.memset_d8(address, value, nbytes)

    def memset_d32(self, address: Any, value: int, count: int) -> None:
        words = (ctypes.c_uint32 * count).from_address(_address(address))
        np.ctypeslib.as_array(words)[:] = value

    def memcpy_htod(self, destination: Any, source: np.ndarray) -> None:
        into = self.gpu.within_allocation(_address(destination), source.nbytes)
        ctypes.memmove(into, source.ctypes.data, source.nbytes)

    def memcpy_dtoh(self, destination: np.ndarray, source: Any) -> None:
        start = self.gpu.within_allocation(_address(source), destination.nbytes)
        ctypes.memmove(destination.ctypes.data, start, destination.nbytes)

    def memcpy_htod_async(self, destination: Any, source: np.ndarray, stream: Any = None) -> None:
        self.memcpy_htod(destination, source)

    def memcpy_dtoh_async(self, destination: np.ndarray, source: Any, stream: Any = None) -> None:
        self.memcpy_dtoh(destination, source)

    def memcpy_dtod_async(self, destination: Any, source: Any, nbytes: int, stream: Any) -> None:
        self.memcpy_dtod(destination, source, nbytes)

    def memcpy_dtod(self, destination: Any, source: Any, nbytes: int) -> None:
        within = self.gpu.within_allocation
        ctypes.memmove(
            within(_address(destination), nbytes), within(_address(source), nbytes), nbytes
        )

    class Context:
        @staticmethod
        def synchronize() -> None:
            pass


def _check_launch(grid: Any, block: Any, pack_format: str, arguments: tuple) -> None:
    """What PyCUDA and the driver refuse at a launch: a grid or block whose sizes are not whole
    numbers of at least one, a block of more than 1024 threads, arguments that do not pack as
    the kernel's parameters (a float, None)."""
    if len(grid) not in (2, 3) or len(block) != 3:
        raise ValueError(f"launch of grid {grid}, block {block}: (x, y[, z]) and (x, y, z)")
    if any(operator.index(size) < 1 for size in (*grid, *block)) or math.prod(block) > 1024:
        raise ValueError(f"launch of grid {grid}, block {block}")
    if pack_format:
        struct.pack(pack_format, *arguments)


def _stream_kernel(name: str, blocks: int, arguments: tuple) -> None:
    """stream.cu's BabelStream kernels; dot leaves one partial sum a block (here the first
    block's holds the whole sum, the others 0)."""
    _, operation, suffix = name.split("_")
    ctype = {"f32": ctypes.c_float, "f64": ctypes.c_double}[suffix]
    *used, count = arguments

    def array(pointer: Any, size: int = int(count)) -> np.ndarray:
        return np.ctypeslib.as_array((ctype * size).from_address(int(pointer)))

    if operation == "copy":
        a, c = used
        array(c)[:] = array(a)
    elif operation == "mul":
        b, c, scalar = used
        array(b)[:] = scalar * array(c)
    elif operation == "add":
        a, b, c = used
        array(c)[:] = array(a) + array(b)
    elif operation == "triad":
        a, b, c, scalar = used
        array(a)[:] = array(b) + scalar * array(c)
    elif operation == "dot":
        a, b, partial = used
        sums = array(partial, blocks)
        sums[:] = 0
        sums[0] = np.dot(array(a), array(b))
    else:
        raise FakeDriverError(f"no fake for kernel {name}")


class FakeFunction:
    """The kernels of small_copies.cu, sum_arrays.cu, direct_access.cu, verify.cu, stream.cu
    and peer.cu, as the .cu sources say they behave."""

    def __init__(self, name: str) -> None:
        self.name = name

    def prepare(self, pack_format: str) -> None:
        self.pack_format = pack_format

    def prepared_async_call(self, grid: Any, block: Any, stream: Any, *arguments: Any) -> None:
        _check_launch(grid, block, getattr(self, "pack_format", ""), arguments)
        if self.name == "gatherPieces":
            table, out, size, count = arguments
            pointers = np.ctypeslib.as_array((ctypes.c_uint64 * int(count)).from_address(table))
            for index, pointer in enumerate(pointers):
                ctypes.memmove(out + index * int(size), int(pointer), int(size))
        elif self.name == "scatterPieces":
            source, table, size, count = arguments
            pointers = np.ctypeslib.as_array((ctypes.c_uint64 * int(count)).from_address(table))
            for index, pointer in enumerate(pointers):
                ctypes.memmove(int(pointer), source + index * int(size), int(size))
        elif self.name == "firstDifferentWord":  # kernels/verify.cu
            got, expected, stride, count, first = (int(argument) for argument in arguments)
            if stride not in (0, 1):  # the kernel reads expected[i * stride]: memprof's are these
                raise ValueError(f"firstDifferentWord with stride {stride}: 0 or 1")
            words = np.ctypeslib.as_array((ctypes.c_uint32 * count).from_address(got))
            wanted = np.ctypeslib.as_array(
                (ctypes.c_uint32 * (count if stride else 1)).from_address(expected)
            )
            differ = np.flatnonzero(words != wanted)
            if differ.size:
                found = ctypes.c_uint64.from_address(first)
                found.value = min(found.value, int(differ[0]))
        elif self.name == "readSum":  # direct_access.cu: a partial sum per block
            source, partial, count = (int(argument) for argument in arguments)
            sums = _floats(partial, int(grid[0]))
            sums[:] = 0
            sums[0] = _floats(source, count).sum(dtype=np.float64)
        elif self.name == "fillValue":
            out, value, count = arguments
            _floats(int(out), int(count))[:] = value
        elif self.name == "chaseChain":  # peer.cu: `steps` dependent loads from index 0
            chain, steps, last = (int(argument) for argument in arguments)
            index = 0
            for _ in range(steps):
                index = ctypes.c_uint32.from_address(chain + 4 * index).value
            ctypes.c_uint32.from_address(last).value = index
        elif self.name == "sumArraysGPU":
            a, b, out, count = (int(argument) for argument in arguments)
            floats = [_floats(address, count) for address in (a, b, out)]
            np.add(floats[0], floats[1], out=floats[2])
        elif self.name.startswith("stream_"):
            _stream_kernel(self.name, int(grid[0]), arguments)
        else:
            raise FakeDriverError(f"no fake for kernel {self.name}")


class FakeModule:
    def get_function(self, name: str) -> FakeFunction:
        return FakeFunction(name)


class FakeGate:
    closed = False

    def close(self, stream: Any) -> None:
        self.closed = True

    def open(self) -> None:
        self.closed = False

    def check(self) -> None:
        pass


class FakeSession:
    """A GpuSession on the fake GPU: owns what is allocated and releases it at close()."""

    def __init__(
        self,
        attributes: dict[str, int],
        declared: frozenset[tuple[str, str]] | None = None,
        gpu: FakeGpu | None = None,
    ) -> None:
        self.gpu = gpu or FakeGpu()
        self.cuda = FakeCuda(self.gpu)
        self.device_index = 0
        self.device = SimpleNamespace(name=lambda: "fake GPU")
        self.attributes = attributes
        self._owned: dict[int, Any] = {}
        self._once: dict[str, Any] = {}
        self._handles = itertools.count()
        self.profiler = Profiler(self, declared=declared)
        self.profiler._gate = FakeGate()

    def own(self, release: Any) -> int:
        handle = next(self._handles)
        self._owned[handle] = release
        return handle

    def disown(self, handle: int) -> None:
        self._owned.pop(handle, None)

    def once(self, key: str, build: Any) -> Any:
        if key not in self._once:
            self._once[key] = build()
        return self._once[key]

    def module(self, key: str, build: Any) -> Any:
        return FakeModule()

    def memory_info(self) -> tuple[int, int]:
        return self.cuda.mem_get_info()

    def attribute(self, name: str) -> int:
        return {"MULTIPROCESSOR_COUNT": 132}.get(name, 1)

    def synchronize(self) -> None:
        self.profiler.release_gate()

    def active(self) -> Any:
        """The session's context current inside (one fake GPU: always)."""
        return contextlib.nullcontext(self)

    def close(self) -> None:
        for handle in sorted(self._owned, reverse=True):
            self._owned.pop(handle)()
        self._once.clear()


# -- cuda.bindings.driver's part --------------------------------------------------------------


class CUresult(enum.IntEnum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_INVALID_VALUE = 1
    CUDA_ERROR_OUT_OF_MEMORY = 2
    CUDA_ERROR_NO_DEVICE = 100
    CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704
    CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712
    CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED = 713
    CUDA_ERROR_NOT_SUPPORTED = 801


class CUmem_advise(enum.IntEnum):
    CU_MEM_ADVISE_SET_READ_MOSTLY = 1
    CU_MEM_ADVISE_UNSET_READ_MOSTLY = 2
    CU_MEM_ADVISE_SET_PREFERRED_LOCATION = 3
    CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION = 4
    CU_MEM_ADVISE_SET_ACCESSED_BY = 5
    CU_MEM_ADVISE_UNSET_ACCESSED_BY = 6


OK = CUresult.CUDA_SUCCESS
INVALID = CUresult.CUDA_ERROR_INVALID_VALUE


class Handle(int):
    """CUstream, CUdeviceptr, CUdevice, CUcontext, CUmemGenericAllocationHandle: an int
    underneath."""


class Location(SimpleNamespace):
    """CUmemLocation: a type (1 a device, 2 the host) and an id."""

    def __init__(self) -> None:
        super().__init__(type=0, id=0)


HOST_REGISTER_DEVICEMAP = 0x02


class FakePool:
    def __init__(self, default: bool) -> None:
        self.default, self.threshold, self.destroyed = default, 0, False


def _struct(**fields: Any) -> Any:
    return lambda: SimpleNamespace(location=SimpleNamespace(), **fields)


class FakeBindings:
    """cuda.bindings.driver: every call returns (CUresult, values...), as the real one does."""

    CUresult = CUresult
    CUstream = CUdeviceptr = CUcontext = Handle
    CUmemLocation = Location
    CUmem_advise = CUmem_advise
    CUdevice_attribute = SimpleNamespace(
        CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED=99,
        CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED=102,
        CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED=115,
    )
    CUmemPoolProps = CUmemAllocationProp = CUmemAccessDesc = staticmethod(_struct())
    CUmemcpyAttributes = staticmethod(_struct(srcAccessOrder=0))
    cuuint64_t = int
    CUmemAllocationType = SimpleNamespace(CU_MEM_ALLOCATION_TYPE_PINNED=1)
    CUmemLocationType = SimpleNamespace(CU_MEM_LOCATION_TYPE_DEVICE=1, CU_MEM_LOCATION_TYPE_HOST=2)
    CUmemPool_attribute = SimpleNamespace(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD=4)
    CUmemAccess_flags = SimpleNamespace(CU_MEM_ACCESS_FLAGS_PROT_READWRITE=3)
    CUmemAllocationGranularity_flags = SimpleNamespace(CU_MEM_ALLOC_GRANULARITY_MINIMUM=0)
    CUmemcpySrcAccessOrder = SimpleNamespace(CU_MEMCPY_SRC_ACCESS_ORDER_STREAM=1)

    def __init__(
        self,
        gpu: FakeGpu,
        driver_version: int = 13000,
        batch: bool = True,
        major: int = 13,
        devices: int = 1,
        attributes: dict[int, int] | None = None,
        names: dict[int, bytes] | None = None,
    ) -> None:
        """major: cuda-bindings 13 names the CUmemLocation forms of prefetch and advise
        cuMemPrefetchAsync and cuMemAdvise; 12 calls those ..._v2, its plain names taking a
        device ordinal. attributes: cuDeviceGetAttribute's answers by number (1 otherwise)."""
        self.gpu, self.version, self.devices = gpu, driver_version, devices
        self.attributes, self.names = attributes or {}, names or {}
        self.initialized, self.context = False, 0
        self.default_pool = FakePool(default=True)
        gpu.pools.append(self.default_pool)
        if not batch:
            self.cuMemcpyBatchAsync = None  # as a cuda-bindings older than 12.8
        if major < 13:
            self.cuMemPrefetchAsync_v2, self.cuMemAdvise_v2 = self._prefetch, self._advise
            self.cuMemPrefetchAsync, self.cuMemAdvise = self._prefetch_12, self._advise_12
        else:
            self.cuMemPrefetchAsync, self.cuMemAdvise = self._prefetch, self._advise

    def __getattribute__(self, name: str) -> Any:
        value = object.__getattribute__(self, name)
        if name.startswith("cu") and callable(value):
            object.__getattribute__(self, "gpu").calls.append(name)
        return value

    def cuDriverGetVersion(self):
        return OK, self.version

    def cuInit(self, flags):
        if flags != 0:
            return (INVALID,)
        self.initialized = True
        return (OK,) if self.devices else (CUresult.CUDA_ERROR_NO_DEVICE,)

    def cuDeviceGetCount(self):
        return OK, self.devices

    def cuDeviceGetName(self, length, device):
        name = self.names.get(int(device), b"Fake GPU")
        return OK, name[: length - 1].ljust(length, b"\0")  # the whole buffer, as CUDA's

    def cuCtxGetCurrent(self):
        return OK, Handle(self.context)

    def cuCtxSynchronize(self):
        self.gpu.calls.append("synchronized")
        return (OK,)

    def cuDeviceGetAttribute(self, attribute, device):
        if not isinstance(device, Handle) or int(device) >= self.devices:
            return INVALID, None
        return OK, self.attributes.get(int(attribute), 1)

    def cuMemHostRegister(self, address, nbytes, flags):
        # flags: CU_MEMHOSTREGISTER_PORTABLE, DEVICEMAP, IOMEMORY, READ_ONLY (an int, as the
        # driver's unsigned int; cuda-bindings refuses None)
        if (
            not isinstance(address, int)
            or nbytes <= 0
            or not isinstance(flags, int)
            or flags & ~0xF
        ):
            return (INVALID,)
        if any(
            a < address + nbytes and address < a + n for a, (n, _) in self.gpu.registered.items()
        ):
            return (CUresult.CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,)
        self.gpu.registered[address] = (nbytes, flags)
        return (OK,)

    def cuMemHostUnregister(self, address):
        if self.gpu.registered.pop(address, None) is None:
            return (CUresult.CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,)
        return (OK,)

    def cuMemHostGetDevicePointer(self, address, flags):
        registered = self.gpu.registered.get(address)
        if registered is None or flags != 0 or not registered[1] & HOST_REGISTER_DEVICEMAP:
            return INVALID, None
        return OK, Handle(address)  # under UVA: the host's address

    def _prefetch(self, pointer, nbytes, location, flags, stream):
        """cuMemPrefetchAsync with a CUmemLocation (CUDA 12.2 and newer)."""
        if not isinstance(location, Location) or location.type not in (1, 2) or flags != 0:
            return (INVALID,)
        if not isinstance(pointer, Handle) or not isinstance(stream, Handle):
            return (INVALID,)
        self.gpu.prefetched = getattr(self.gpu, "prefetched", [])
        self.gpu.prefetched.append((int(pointer), nbytes, location.type, location.id))
        return (OK,)

    def _prefetch_12(self, pointer, nbytes, device, stream):
        """cuda-bindings 12's cuMemPrefetchAsync: a device ordinal, never a location."""
        return (INVALID,)

    def _advise(self, pointer, nbytes, advice, location):
        if not isinstance(location, Location) or not isinstance(advice, CUmem_advise):
            return (INVALID,)
        self.gpu.advised = getattr(self.gpu, "advised", [])
        self.gpu.advised.append((int(pointer), nbytes, advice, location.type, location.id))
        return (OK,)

    def _advise_12(self, pointer, nbytes, advice, device):
        return (INVALID,)

    def cuDeviceCanAccessPeer(self, device, peer):
        if not isinstance(device, Handle) or not isinstance(peer, Handle) or device == peer:
            return INVALID, None
        return OK, 1

    def cuCtxEnablePeerAccess(self, context, flags):
        if not isinstance(context, Handle) or flags != 0:
            return (INVALID,)
        if int(context) in self.gpu.peers:
            return (CUresult.CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED,)
        self.gpu.peers.add(int(context))
        return (OK,)

    def cuMemcpyPeerAsync(self, destination, to_context, source, from_context, nbytes, stream):
        handles = (destination, to_context, source, from_context, stream)
        if not all(isinstance(handle, Handle) for handle in handles):
            return (INVALID,)
        ctypes.memmove(int(destination), int(source), nbytes)
        return (OK,)

    def cuCtxGetDevice(self):
        return OK, Handle(0)

    def cuDeviceGet(self, ordinal):
        return OK, Handle(ordinal)

    def cuDeviceGetDefaultMemPool(self, device):
        return OK, self.default_pool

    def cuMemPoolCreate(self, properties):
        pool = FakePool(default=False)
        self.gpu.pools.append(pool)
        return OK, pool

    def cuMemPoolSetAttribute(self, pool, attribute, value):
        pool.threshold = int(value)
        return (OK,)

    def cuMemPoolGetAttribute(self, pool, attribute):
        return OK, pool.threshold

    def cuMemPoolTrimTo(self, pool, keep):
        return (OK,)

    def cuMemPoolDestroy(self, pool):
        if pool.destroyed or pool.default:
            return (INVALID,)
        pool.destroyed = True
        return (OK,)

    def cuMemAllocAsync(self, nbytes, stream):
        return self.cuMemAllocFromPoolAsync(nbytes, self.default_pool, stream)

    def cuMemAllocFromPoolAsync(self, nbytes, pool, stream):
        if not isinstance(stream, Handle) or pool.destroyed:
            return INVALID, None
        address = self.gpu.allocate_device(nbytes)
        self.gpu.pool_allocations[address] = pool
        return OK, Handle(address)

    def cuMemFreeAsync(self, pointer, stream):
        address = int(pointer)
        if address not in self.gpu.pool_allocations or not isinstance(stream, Handle):
            return (INVALID,)
        del self.gpu.pool_allocations[address]
        self.gpu.free_device(address)
        return (OK,)

    def cuMemGetAllocationGranularity(self, properties, option):
        return OK, GRANULARITY

    def cuMemAddressReserve(self, nbytes, alignment, hint, flags):
        if nbytes % GRANULARITY:
            return INVALID, None
        data = np.zeros(nbytes + GRANULARITY, np.uint8)
        address = -(-data.ctypes.data // GRANULARITY) * GRANULARITY  # aligned, as the driver's
        self.gpu.reserved[address] = data
        self.gpu.reserved_sizes = getattr(self.gpu, "reserved_sizes", {})
        self.gpu.reserved_sizes[address] = nbytes
        return OK, Handle(address)

    def cuMemCreate(self, nbytes, properties, flags):
        if nbytes % GRANULARITY:
            return INVALID, None
        handle = next(self.gpu._handles)
        self.gpu.handles[handle] = nbytes
        return OK, Handle(handle)

    def cuMemMap(self, pointer, nbytes, offset, handle, flags):
        address = int(pointer)
        inside = any(
            start <= address and address + nbytes <= start + self.gpu.reserved_sizes[start]
            for start in self.gpu.reserved
        )
        overlaps = any(
            start < address + nbytes and address < start + size
            for start, (size, _) in self.gpu.mappings.items()
        )
        if not inside or overlaps or int(handle) not in self.gpu.handles or nbytes % GRANULARITY:
            return (INVALID,)
        if offset + nbytes > self.gpu.handles[int(handle)]:
            return (INVALID,)
        self.gpu.mappings[address] = (nbytes, int(handle))
        return (OK,)

    def cuMemSetAccess(self, pointer, nbytes, descriptions, count):
        if count != len(descriptions) or not self.gpu.mapped_range(int(pointer), nbytes):
            return (INVALID,)
        self.gpu.accessible.add(int(pointer))
        return (OK,)

    def cuMemUnmap(self, pointer, nbytes):
        address, end = int(pointer), int(pointer) + nbytes
        inside = [s for s, (size, _) in self.gpu.mappings.items() if address <= s < end]
        whole = sum(self.gpu.mappings[s][0] for s in inside) == nbytes
        if not inside or not whole or min(inside) != address:
            return (INVALID,)  # only whole mappings, and all of the range
        for start in inside:
            del self.gpu.mappings[start]
        return (OK,)

    def cuMemRelease(self, handle):
        if int(handle) not in self.gpu.handles:
            return (INVALID,)
        del self.gpu.handles[int(handle)]
        return (OK,)

    def cuMemAddressFree(self, pointer, nbytes):
        address = int(pointer)
        if self.gpu.reserved_sizes.get(address) != nbytes:
            return (INVALID,)
        size = self.gpu.reserved_sizes[address]
        if any(address <= s < address + size for s in self.gpu.mappings):
            return (INVALID,)  # memory still mapped there
        del self.gpu.reserved[address], self.gpu.reserved_sizes[address]
        return (OK,)

    def cuMemcpyBatchAsync(self, dsts, srcs, sizes, count, attrs, indices, number, stream):
        if not (len(dsts) == len(srcs) == len(sizes) == count) or indices[0] != 0:
            return (INVALID,)
        if len(attrs) != number or not isinstance(stream, Handle):
            return (INVALID,)
        for destination, source, size in zip(dsts, srcs, sizes, strict=True):
            ctypes.memmove(int(destination), int(source), size)
        return (OK,)


# -- libcuda through ctypes: the one call memprof makes around cuda-bindings -------------------

SOURCE_ORDER_STREAM = 1  # CU_MEMCPY_SRC_ACCESS_ORDER_STREAM, the first int of CUmemcpyAttributes


class FakeLibcuda:
    """ctypes.CDLL("libcuda.so.1") for cuMemcpyBatchAsync: a real C function pointer (a ctypes
    callback) that reads the argument arrays memprof built, as the driver reads them, and
    copies real bytes. CUDA 13 exports cuMemcpyBatchAsync_v2; a 12.8 driver only the
    unversioned form, which takes failIdx before the stream (fail_index=True)."""

    def __init__(self, gpu: FakeGpu, fail_index: bool = False) -> None:
        self.gpu = gpu
        pointer, size = ctypes.c_void_p, ctypes.c_size_t
        fail = [pointer] if fail_index else []
        prototype = ctypes.CFUNCTYPE(
            ctypes.c_int, pointer, pointer, pointer, size, pointer, pointer, size, *fail, pointer
        )
        self._callback = prototype(self._batch)  # kept alive: the driver's code, here
        function = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.cast(self._callback, pointer).value)
        name = "cuMemcpyBatchAsync" if fail_index else "cuMemcpyBatchAsync_v2"
        setattr(self, name, function)

    def _batch(self, dsts, srcs, sizes, count, attrs, indices, number, *rest) -> int:
        *fail, stream = rest
        self.gpu.calls.append("cuMemcpyBatchAsync")
        first_index = ctypes.c_size_t.from_address(indices).value
        order = ctypes.c_int.from_address(attrs).value
        if number != 1 or first_index != 0 or order != SOURCE_ORDER_STREAM or not stream:
            return int(INVALID)
        if fail and not fail[0]:
            return int(INVALID)
        targets = (ctypes.c_uint64 * count).from_address(dsts)
        origins = (ctypes.c_uint64 * count).from_address(srcs)
        lengths = (ctypes.c_size_t * count).from_address(sizes)
        for destination, source, length in zip(targets, origins, lengths, strict=True):
            ctypes.memmove(destination, source, length)
        return int(OK)


@contextlib.contextmanager
def driver_calls_on(gpu: FakeGpu, monkeypatch: Any) -> Iterator[None]:
    """Inside, cuda-bindings and libcuda's ctypes calls (cuMemcpyBatchAsync) are answered by
    `gpu`; bindings' caches are empty on the way in and out, so no fake outlives the test."""
    from memprof.core import bindings, driver

    fake, library = FakeBindings(gpu), FakeLibcuda(gpu)
    monkeypatch.setattr(bindings, "_import", lambda: (fake, None))
    monkeypatch.setattr(driver, "libcuda", lambda: library)
    caches = (bindings._allocation_properties, bindings._access)
    for cache in caches:
        cache.cache_clear()
    try:
        yield
    finally:
        for cache in caches:
            cache.cache_clear()
