"""The memory kinds memprof measures, and the copies between them.

Each kind is one class: how it is allocated, addressed and freed, and the traits experiments
ask about; adding one is a class and an entry in MEMORY_KINDS. Every allocation, free, copy
and memset is timed through the session's profiler and owned by the session: nothing leaks.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from memprof.errors import EnvironmentProblem, OutOfMemory
from memprof.model.device import KIND_NEEDS
from memprof.model.formatting import format_bytes
from memprof.model.measures import COPY_NAMES
from memprof.model.results import Group

if TYPE_CHECKING:
    import numpy as np

    from memprof.core.session import GpuSession

PAGE_BYTES = 4096  # the host's page: memory the OS provides one page at a time


@dataclass
class Buffer:
    """An allocation of one memory kind: its host view and/or the address kernels use."""

    kind: MemoryKind
    nbytes: int
    array: np.ndarray | None  # host view (None for device memory)
    device_pointer: int | None  # address a kernel or a copy uses on the device side
    _release: Callable[[], None] = field(repr=False)
    _session: GpuSession = field(repr=False)
    _handle: int = field(repr=False)

    @property
    def on_device(self) -> bool:
        return self.kind.on_device

    def free(self) -> None:
        """Release the memory now, timing the call like the allocation."""
        if self._session is None:
            return
        session, self._session = self._session, None
        session.disown(self._handle)
        profiler = session.profiler
        with profiler.host_clock(
            self.kind.call_group, self.kind.free_call, "free", self.kind.name, self.nbytes
        ):
            self._release()  # unregister or free the driver's side first
            self.array = None  # then the last reference: numpy frees host memory here


class MemoryKind(ABC):
    """How one kind of memory is allocated, addressed and freed."""

    name: ClassVar[str]
    label: ClassVar[str]  # how tables name it: "pinned (cuMemHostAlloc)"
    marker: ClassVar[str]  # one letter in text charts, unique among kinds
    on_device: ClassVar[bool] = False
    alloc_call: ClassVar[str]
    free_call: ClassVar[str]
    call_group: ClassVar[Group] = "api"  # driver calls; "host" for plain host work
    host_copies: ClassVar[bool] = False  # host memory that explicit copies move to the GPU
    synchronous_copies: ClassVar[bool] = False  # the driver stages copies: they block the host
    kernel_access: ClassVar[bool] = False  # a kernel reads and writes it via device_pointer
    migrates: ClassVar[bool] = False  # pages move between host and GPU on demand (managed)
    devices_needed: ClassVar[int] = 1  # peer memory needs a second GPU
    required_attribute: ClassVar[str | None] = None  # device attribute that must be non-zero
    via_bindings: ClassVar[bool] = False  # allocated through cuda-bindings (PyCUDA lacks it)

    def unsupported_reason(self, attributes: Mapping[str, int]) -> str | None:
        """Why this GPU cannot use the kind, from DeviceFacts.attributes (None: it can); a flag
        not recorded counts as missing."""
        if not self.required_attribute:
            return None
        from memprof.model.device import capability_name

        flag = capability_name(self.required_attribute)
        if attributes.get(flag, 0):
            return None
        return f"{self.name} memory needs {flag} ({self.required_attribute}), which is 0 here"

    def check_supported(self, session: GpuSession) -> None:
        if self.required_attribute and not session.attribute(self.required_attribute):
            raise EnvironmentProblem(
                f"{self.name} memory needs {self.required_attribute}, which this GPU "
                f"({session.device.name()}) does not have"
            )

    @abstractmethod
    def allocate_in(
        self, session: GpuSession, count: int, dtype: np.dtype
    ) -> tuple[np.ndarray | None, int | None, Callable[[], None]]:
        """Allocate in a session: (host view, device address, release function)."""


class Pageable(MemoryKind):
    """Ordinary host memory (numpy): the driver stages every copy through its own pinned buffer."""

    name = "pageable"
    label = "pageable (numpy)"
    marker = "p"
    host_copies = True
    alloc_call = "numpy.empty + first touch"
    free_call = "numpy free"
    call_group = "host"
    synchronous_copies = True

    def allocate_in(self, session, count, dtype):
        import numpy as np

        # numpy's empty() only reserves address space: touching it costs what cuMemHostAlloc does
        return _touched(np.empty(count, dtype)), None, lambda: None


class MallocPageable(Pageable):
    """Pageable memory as a C program gets it: libc malloc, every page written."""

    alloc_call = "malloc + first touch"
    free_call = "free"

    def allocate_in(self, session, count, dtype):
        import numpy as np

        libc = _libc()
        nbytes = count * dtype.itemsize
        address = libc.malloc(max(nbytes, 1))
        if not address:
            raise MemoryError(f"malloc of {nbytes} bytes failed")
        raw = (ctypes.c_uint8 * max(nbytes, 1)).from_address(address)
        array = np.frombuffer(raw, np.uint8, count=nbytes).view(dtype)
        return _touched(array), None, lambda: libc.free(address)


class HugepagePageable(Pageable):
    """Pageable memory on transparent huge pages: anonymous mmap with MADV_HUGEPAGE."""

    alloc_call = "mmap + madvise(HUGEPAGE) + first touch"
    free_call = "munmap"

    def allocate_in(self, session, count, dtype):
        import numpy as np

        nbytes = max(count * dtype.itemsize, 1)
        mapping = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        if hasattr(mmap, "MADV_HUGEPAGE"):
            mapping.madvise(mmap.MADV_HUGEPAGE)
        array = np.frombuffer(mapping, np.uint8, count=count * dtype.itemsize).view(dtype)
        # The mapping goes when the last view of it does (Buffer.free drops the array).
        return _touched(array), None, lambda: None


class HostAlloc(MemoryKind):
    """Page-locked host memory from cuMemHostAlloc: the kinds differ by their flags."""

    host_copies = True
    alloc_call = "cuMemHostAlloc"
    free_call = "cuMemFreeHost"
    flags: ClassVar[tuple[str, ...]] = ()  # PyCUDA's host_alloc_flags by name

    def allocate_in(self, session, count, dtype):
        flags = 0
        for name in self.flags:
            flags |= getattr(session.cuda.host_alloc_flags, name)
        array = session.cuda.pagelocked_empty(count, dtype, mem_flags=flags)
        # a mapped buffer's device address may differ from its host one (write-combined, UVA)
        mapped = "DEVICEMAP" in self.flags
        return array, int(array.base.get_device_pointer()) if mapped else None, array.base.free


class Pinned(HostAlloc):
    """Page-locked host memory: DMA straight from it, costly to allocate."""

    name = "pinned"
    label = "pinned (cuMemHostAlloc)"
    marker = "P"


class Mapped(HostAlloc):
    """Pinned host memory mapped into the GPU's address space (DEVICEMAP): zero-copy."""

    name = "mapped"
    label = "mapped, zero-copy"
    marker = "M"
    kernel_access = True
    required_attribute = KIND_NEEDS["mapped"]
    flags = ("DEVICEMAP",)


class Device(MemoryKind):
    """GPU global memory: the fastest for kernels, reached by explicit copies."""

    name = "device"
    label = "device (cuMemAlloc)"
    marker = "D"
    kernel_access = True
    on_device = True
    alloc_call = "cuMemAlloc"
    free_call = "cuMemFree"

    def allocate_in(self, session, count, dtype):
        allocation = session.cuda.mem_alloc(int(count * dtype.itemsize))
        return None, int(allocation), allocation.free


class WriteCombined(HostAlloc):
    """Pinned, mapped and not cached by the CPU: fast to fill and send, very slow to read."""

    name = "writecombined"
    label = "write-combined pinned"
    marker = "W"
    kernel_access = True
    required_attribute = KIND_NEEDS["writecombined"]
    flags = ("WRITECOMBINED", "DEVICEMAP")


class Portable(HostAlloc):
    """Pinned memory every CUDA context treats as pinned: one buffer for several GPUs."""

    name = "portable"
    label = "portable pinned (every context)"
    marker = "O"
    flags = ("PORTABLE",)


class Registered(MemoryKind):
    """An existing numpy array page-locked in place (cuMemHostRegister, mapped)."""

    name = "registered"
    label = "registered (cuMemHostRegister)"
    marker = "R"
    host_copies = True
    kernel_access = True
    alloc_call = "numpy.empty + first touch + cuMemHostRegister"
    free_call = "cuMemHostUnregister"
    call_group = "host"  # the allocation is numpy's plus a driver call
    required_attribute = KIND_NEEDS["registered"]

    def allocate_in(self, session, count, dtype):
        from memprof.core import bindings

        array = page_aligned_empty(count, dtype)
        address = array.ctypes.data
        bindings.host_register(address, array.nbytes, bindings.HOST_REGISTER_MAPPED_PORTABLE)
        # The closure keeps the array alive until it is unregistered.
        return (
            array,
            bindings.host_device_pointer(address),
            lambda: bindings.host_unregister(array.ctypes.data),
        )


class Managed(MemoryKind):
    """Unified memory: one pointer, pages migrate on demand."""

    name = "managed"
    label = "managed (cuMemAllocManaged)"
    marker = "U"
    kernel_access = True
    migrates = True
    alloc_call = "cuMemAllocManaged"
    free_call = "cuMemFree"
    required_attribute = KIND_NEEDS["managed"]

    def allocate_in(self, session, count, dtype):
        # PyCUDA's default mem_flags=0 is invalid for cuMemAllocManaged: attach globally.
        cuda = session.cuda
        array = cuda.managed_empty(count, dtype, mem_flags=cuda.mem_attach_flags.GLOBAL)
        return array, int(array.base), array.base.free


class Peer(Device):
    """Device memory of another GPU, as the GPU measuring sees it (memprof peer)."""

    name = "peer"
    label = "peer device memory"
    marker = "X"
    devices_needed = 2


class StreamOrdered(MemoryKind):
    """Device memory from the device's default pool, in stream order (cuMemAllocAsync)."""

    name = "pool"
    label = "stream-ordered (cuMemAllocAsync)"
    marker = "S"
    on_device = True
    kernel_access = True
    via_bindings = True
    alloc_call = "cuMemAllocAsync"
    free_call = "cuMemFreeAsync"
    required_attribute = KIND_NEEDS["pool"]

    def pool(self, session: GpuSession) -> Any:
        """The pool it allocates from (None: the device's current one, cuMemAllocAsync)."""
        return None

    def allocate_in(self, session, count, dtype):
        from memprof.core import bindings

        stream = session.profiler.stream  # kept by the release, which may outlive the profiler
        cu_stream = bindings.stream(stream)
        address = bindings.alloc_async(int(count * dtype.itemsize), cu_stream, self.pool(session))
        return None, address, lambda: bindings.free_async(address, bindings.stream(stream))


class KeptPool(StreamOrdered):
    """A pool of its own that keeps freed memory across synchronizations."""

    name = "pool_kept"
    label = "pool keeping memory (threshold)"
    marker = "K"
    alloc_call = "cuMemAllocFromPoolAsync"

    def pool(self, session: GpuSession) -> Any:
        from memprof.core import bindings

        def build() -> Any:
            pool = bindings.create_pool(session.device_index, bindings.KEEP_EVERYTHING)
            session.own(lambda: bindings.destroy_pool(pool))
            return pool

        return session.once("kept memory pool", build)


class Virtual(MemoryKind):
    """Virtual memory management: an address range, physical memory, mapped, accessible."""

    name = "vmm"
    label = "virtual memory (cuMemMap)"
    marker = "V"
    on_device = True
    kernel_access = True
    via_bindings = True
    alloc_call = "cuMemAddressReserve + cuMemCreate + cuMemMap + cuMemSetAccess"
    free_call = "cuMemUnmap + cuMemRelease + cuMemAddressFree"
    required_attribute = KIND_NEEDS["vmm"]

    def allocate_in(self, session, count, dtype):
        from memprof.core import bindings

        ordinal = session.device_index
        unit = session.once("allocation granularity", lambda: bindings.granularity(ordinal))
        nbytes = bindings.rounded(int(count * dtype.itemsize), unit)
        address = bindings.reserve(nbytes)
        handles, mapped = [], 0
        try:
            handles.append(bindings.create(nbytes, ordinal))
            bindings.map_memory(address, nbytes, handles[0])
            mapped = nbytes
            bindings.set_access(address, nbytes, ordinal)
        except BaseException:
            bindings.take_apart(address, nbytes, handles, mapped)
            raise
        return None, address, lambda: bindings.take_apart(address, nbytes, handles, nbytes)


# In the order tables show them: host kinds from plain to special, then the GPU's own.
MEMORY_KINDS: dict[str, MemoryKind] = {
    kind.name: kind
    for kind in (
        Pageable(),
        Pinned(),
        Portable(),
        WriteCombined(),
        Mapped(),
        Registered(),
        Managed(),
        Device(),
        StreamOrdered(),
        KeptPool(),
        Virtual(),
        Peer(),
    )
}


def kinds_where(predicate: Callable[[MemoryKind], bool]) -> list[MemoryKind]:
    """The registered kinds (in table order) for which `predicate` holds."""
    return [kind for kind in MEMORY_KINDS.values() if predicate(kind)]


def single_gpu_kinds() -> list[MemoryKind]:
    """Every kind one GPU allocates by itself, in table order (peer memory needs two)."""
    return kinds_where(lambda kind: kind.devices_needed == 1)


def supported_kinds(
    attributes: Mapping[str, int], kinds: Iterable[MemoryKind]
) -> tuple[list[MemoryKind], list[str]]:
    """(kinds this GPU supports, one reason for each it does not), from its capability flags."""
    reasons = [(kind, kind.unsupported_reason(attributes)) for kind in kinds]
    supported = [kind for kind, reason in reasons if reason is None]
    return supported, [reason for _, reason in reasons if reason is not None]


def marker(name: str) -> str:
    """A kind's chart letter; '?' for a name this memprof does not know (an old result)."""
    return getattr(MEMORY_KINDS.get(name), "marker", "?")


def label(name: str) -> str:
    """A kind's table label; the name itself for one this memprof does not know."""
    return getattr(MEMORY_KINDS.get(name), "label", name)


# Where pageable buffers come from (--host-buffer); numpy madvises huge pages from 4 MiB.
PAGEABLE_BUFFERS: dict[str, MemoryKind] = {
    "numpy": MEMORY_KINDS["pageable"],
    "malloc": MallocPageable(),
    "hugepages": HugepagePageable(),
}


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    return libc


def page_aligned_empty(count: int, dtype: np.dtype | str) -> np.ndarray:
    """A numpy array starting on a page boundary, every page touched (for registration)."""
    import numpy as np

    nbytes = count * np.dtype(dtype).itemsize
    raw = np.empty(nbytes + PAGE_BYTES, np.uint8)
    offset = -raw.ctypes.data % PAGE_BYTES
    return _touched(raw[offset : offset + nbytes].view(dtype))


def _touched(array: np.ndarray) -> np.ndarray:
    """The array with a byte written in every page: the OS provides host memory at its first
    touch, so the allocation's cost is counted where it is made."""
    import numpy as np

    array.view(np.uint8)[::PAGE_BYTES] = 0
    return array


def allocate(
    session: GpuSession,
    kind_name: str,
    count: int,
    dtype: np.dtype | type | str = "float32",
    host_buffer: str = "numpy",
) -> Buffer:
    """`count` elements of one memory kind (pageable from `host_buffer`), timed and owned."""
    kind = PAGEABLE_BUFFERS[host_buffer] if kind_name == "pageable" else MEMORY_KINDS[kind_name]
    kind.check_supported(session)
    import numpy as np

    dtype = np.dtype(dtype)
    nbytes = count * dtype.itemsize
    try:
        with session.profiler.host_clock(
            kind.call_group, kind.alloc_call, "alloc", kind.name, nbytes
        ):
            array, device_pointer, release = kind.allocate_in(session, count, dtype)
    except (session.cuda.MemoryError, MemoryError, OutOfMemory) as error:
        raise OutOfMemory(_allocation_failure(session, kind, nbytes)) from error
    handle = session.own(release)
    return Buffer(kind, nbytes, array, device_pointer, release, session, handle)


def adopt(
    session: GpuSession,
    kind_name: str,
    array: np.ndarray,
    device_pointer: int | None = None,
    release: Callable[[], None] = lambda: None,
) -> Buffer:
    """Wrap memory the caller already has (an array it registered itself) as a Buffer."""
    handle = session.own(release)
    return Buffer(
        MEMORY_KINDS[kind_name], array.nbytes, array, device_pointer, release, session, handle
    )


def _allocation_failure(session: GpuSession, kind: MemoryKind, nbytes: int) -> str:
    if kind.on_device:
        free, total = session.memory_info()
        where = f"{format_bytes(free)} of {format_bytes(total)} device memory free"
    else:
        available = host_available_bytes()
        where = f"{format_bytes(available)} host memory available" if available else "host memory"
    return (
        f"{kind.alloc_call} of {format_bytes(nbytes)} ({kind.name}) failed: out of memory ({where})"
    )


def copy(
    session: GpuSession,
    destination: Buffer,
    source: Buffer,
    stream: Any = None,
    operation: str | None = None,
) -> None:
    """Copy a whole buffer on `stream` (the profiler's by default), named as nvprof would;
    `operation`: a key other than its direction (pinlimit's). Pageable copies are synchronous."""
    cuda, profiler = session.cuda, session.profiler
    stream = stream if stream is not None else profiler.stream
    nbytes = min(destination.nbytes, source.nbytes)
    if source.on_device and destination.on_device:
        name, call, default_operation, host = "[CUDA memcpy DtoD]", "cuMemcpyDtoDAsync", "d2d", None
        action = lambda stream: cuda.memcpy_dtod_async(  # noqa: E731
            destination.device_pointer, source.device_pointer, nbytes, stream
        )
    elif destination.on_device:
        name, default_operation, host = COPY_NAMES["h2d"], "h2d", source
        call, action = host_copy(cuda, "h2d", source, destination.device_pointer)
    elif source.on_device:
        name, default_operation, host = COPY_NAMES["d2h"], "d2h", destination
        call, action = host_copy(cuda, "d2h", destination, source.device_pointer)
    else:
        raise ValueError("host-to-host copies are not something memprof measures")
    operation = operation or default_operation
    kind = host.kind.name if host is not None else "device"
    synchronous = host is not None and host.kind.synchronous_copies
    with (
        profiler.events("gpu", name, operation, kind, nbytes, stream, synchronous=synchronous),
        profiler.api(call, operation, kind, nbytes),
    ):
        action(None if synchronous else stream)
    if not profiler.gate_closed:  # callers may use the host buffer next, as after a cuMemcpy
        stream.synchronize()


def host_copy(
    cuda: Any, direction: str, host: Buffer, device_pointer: int, elements: int | None = None
) -> tuple[str, Callable[[Any], None]]:
    """(driver call, action(stream)) copying `elements` (all) between host and device memory;
    pageable memory the synchronous call programs use (its async form stages more slowly)."""
    array = host.array if elements is None else host.array[:elements]
    if host.kind.synchronous_copies:
        if direction == "h2d":
            return "cuMemcpyHtoD", lambda stream: cuda.memcpy_htod(device_pointer, array)
        return "cuMemcpyDtoH", lambda stream: cuda.memcpy_dtoh(array, device_pointer)
    if direction == "h2d":
        return "cuMemcpyHtoDAsync", lambda stream: cuda.memcpy_htod_async(
            device_pointer, array, stream
        )
    return "cuMemcpyDtoHAsync", lambda stream: cuda.memcpy_dtoh_async(array, device_pointer, stream)


def memset(session: GpuSession, buffer: Buffer, byte_value: int, stream: Any = None) -> None:
    """Fill device memory with one byte value (memprof poisons outputs before kernels)."""
    profiler = session.profiler
    stream = stream if stream is not None else profiler.stream
    with (
        profiler.events("gpu", "[CUDA memset]", "memset", buffer.kind.name, buffer.nbytes, stream),
        profiler.api("cuMemsetD8Async", "memset", buffer.kind.name, buffer.nbytes),
    ):
        session.cuda.memset_d8_async(buffer.device_pointer, byte_value, buffer.nbytes, stream)


HOST_MARGIN_BYTES = 1 << 30  # keep 1 GiB of host memory for the system and Python
DEVICE_MARGIN_BYTES = 256 << 20  # and 256 MiB of device memory for the context and kernels


def host_available_bytes() -> int | None:
    """MemAvailable from the kernel: what can be allocated without swapping."""
    from memprof.core.hostlimits import meminfo_bytes

    return meminfo_bytes(Path("/proc"), "MemAvailable")


def check_fits(what: str, needed_bytes: int, free_bytes: int | None, margin_bytes: int) -> None:
    """Refuse, before allocating anything, a size that cannot fit (with a safety margin)."""
    if free_bytes is None:
        return
    if needed_bytes > free_bytes - margin_bytes:
        raise OutOfMemory(
            f"this size needs {format_bytes(needed_bytes)} of {what} but only "
            f"{format_bytes(free_bytes)} is free (memprof keeps {format_bytes(margin_bytes)} "
            f"spare): choose a smaller size"
        )


def require_memory(session: GpuSession, device_bytes: int = 0, host_bytes: int = 0) -> None:
    """Check device and host memory before an experiment allocates anything."""
    free, _total = session.memory_info()
    check_fits("device memory", device_bytes, free, DEVICE_MARGIN_BYTES)
    check_fits("host memory", host_bytes, host_available_bytes(), HOST_MARGIN_BYTES)
