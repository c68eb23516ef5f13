"""What a GPU is, as a Result records it (memprof.core.devicefacts reads it): its facts, the
capability flags that decide which memory kinds work, and its links' theoretical rates."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Literal

import msgspec

from memprof.model.schema import MAX_COUNT, Count, GpuIndex, Range, SchemaError

AtLeastOne = Annotated[int, Range(1, MAX_COUNT)]
PcieGeneration = Annotated[int, Range(0, 16)]  # 0: what a tool may say where it cannot tell
PcieWidth = Annotated[int, Range(0, 64)]  # lanes
# What a GPU has, with room far beyond an H200's (132 multiprocessors, 3,201,000 kHz on a
# 6016-bit bus, 60 MiB of L2, 3 copy engines): a figure past these is not a GPU's, and ceilings
# are made of them. A clock or a width of 0 is what a driver says where it cannot tell.
Multiprocessors = Annotated[int, Range(1, 4096)]
MemoryClockKhz = Annotated[int, Range(0, 50_000_000)]
BusWidthBits = Annotated[int, Range(0, 65_536)]
L2CacheBytes = Annotated[int, Range(0, 2**32)]
MAX_COPY_ENGINES = 64
ComputeCapability = tuple[Annotated[int, Range(1, 99)], Annotated[int, Range(0, 99)]]


# The one table of capability flags, by cudaDeviceProp's name, with what each decides for a
# person choosing a memory kind (memory kinds name theirs by PyCUDA attribute: a test checks).
CAPABILITIES = {
    "canMapHostMemory": "mapped (zero-copy) host memory",
    "unifiedAddressing": "UVA: host pointers usable in kernels as they are",
    "managedMemory": "managed (unified) memory",
    "concurrentManagedAccess": "CPU and GPU may touch managed memory at once; prefetch/advise work",
    "pageableMemoryAccess": "kernels may read plain malloc'd memory",
    "pageableMemoryAccessUsesHostPageTables": "…through the host's page tables (HMM/ATS)",
    "hostRegisterSupported": "cuMemHostRegister: pin an existing buffer",
    "asyncEngineCount": "copy engines: 2 lets HtoD and DtoH overlap each other and kernels",
    "concurrentKernels": "kernels of different streams may run at once",
    "memoryPoolsSupported": "stream-ordered pools: cuMemAllocAsync, cuMemPool*",
    "virtualMemoryManagementSupported": "virtual memory management: cuMemCreate, cuMemMap",
}
# PyCUDA's device_attribute name of each flag, as cuda.h's: CAN_MAP_HOST_MEMORY.
CAPABILITY_ATTRIBUTES = {
    name: re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper() for name in CAPABILITIES
}
# The memory kinds a GPU has only where a flag is 1 (memprof.core.memory's kinds name the same).
KIND_NEEDS = {
    "mapped": "CAN_MAP_HOST_MEMORY",
    "writecombined": "CAN_MAP_HOST_MEMORY",
    "registered": "HOST_REGISTER_SUPPORTED",
    "managed": "MANAGED_MEMORY",
    "pool": "MEMORY_POOLS_SUPPORTED",
    "pool_kept": "MEMORY_POOLS_SUPPORTED",
    "vmm": "VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED",
}
COUNTED_ATTRIBUTES = {"asyncEngineCount"}  # the flags that count something; the rest are 0 or 1


def capability_name(attribute: str) -> str:
    """cudaDeviceProp's name of a device attribute (the attribute itself if not in the table)."""
    return next((n for n, a in CAPABILITY_ATTRIBUTES.items() if a == attribute), attribute)


# PCIe generation by per-lane transfer rate (GT/s), and the share of the raw rate
# that carries data after line encoding (8b/10b up to Gen2, 128b/130b from Gen3;
# Gen6's FLIT mode carries 242 of every 256 bytes).
PCIE_GENERATION_BY_RATE = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}
PCIE_RATE_GT_PER_S = {gen: rate for rate, gen in PCIE_GENERATION_BY_RATE.items()}
PCIE_ENCODING_EFFICIENCY = {1: 0.8, 2: 0.8, 3: 128 / 130, 4: 128 / 130, 5: 128 / 130, 6: 242 / 256}


def known_link(generation: int | None, width: int | None) -> tuple[int, int] | None:
    """(generation, width) where both are known (0 is what a tool says where it cannot tell)."""
    return (generation, width) if generation and width else None


def pcie_bandwidth_gb_per_s(generation: int | None, width: int | None) -> float | None:
    """Theoretical PCIe bandwidth per direction in GB/s: Gen5 x16 gives 63.0."""
    if not generation or not width or generation not in PCIE_RATE_GT_PER_S:
        return None
    rate = PCIE_RATE_GT_PER_S[generation] * PCIE_ENCODING_EFFICIENCY[generation]
    return rate * width / 8


def parse_link_speed(text: str) -> int | None:
    """sysfs' current_link_speed ("32.0 GT/s PCIe") to a PCIe generation."""
    try:
        rate = float(text.split()[0])
    except (ValueError, IndexError):
        return None
    return PCIE_GENERATION_BY_RATE.get(rate)


class DeviceFacts(msgspec.Struct, forbid_unknown_fields=True):
    """What `memprof info` prints and every Result records about the GPU it ran on."""

    index: GpuIndex
    name: str
    pci_bus_id: str
    compute_capability: ComputeCapability
    multiprocessors: Multiprocessors
    memory_total_bytes: AtLeastOne
    memory_free_bytes: Count
    memory_clock_khz: MemoryClockKhz
    memory_bus_width_bits: BusWidthBits
    l2_cache_bytes: L2CacheBytes
    pcie_generation: PcieGeneration | None
    pcie_width: PcieWidth | None
    pcie_max_generation: PcieGeneration | None
    pcie_max_width: PcieWidth | None
    pcie_source: Literal["sysfs", "nvml", "unavailable"]  # where the link figures came from
    driver_version: str
    cuda_driver_api_version: str
    cuda_build_version: str
    pycuda_version: str
    attributes: dict[str, Count]  # the capability flags, by CUDA's attribute name

    def check_consistency(self) -> None:
        """What the driver's figures always agree on (the loader runs it)."""
        if self.memory_free_bytes > self.memory_total_bytes:
            raise SchemaError(
                "memory_free_bytes",
                f"is {self.memory_free_bytes}, more than memory_total_bytes "
                f"({self.memory_total_bytes})",
            )
        names = ("pcie_generation", "pcie_width", "pcie_max_generation", "pcie_max_width")
        link = {name: getattr(self, name) for name in names}
        for name, value in self.attributes.items():
            if name not in COUNTED_ATTRIBUTES and value not in (0, 1):
                raise SchemaError(f"attributes.{name}", f"is {value}: a capability flag is 0 or 1")
            if name in COUNTED_ATTRIBUTES and value > MAX_COPY_ENGINES:
                raise SchemaError(
                    f"attributes.{name}", f"is {value}: no GPU has over {MAX_COPY_ENGINES}"
                )
        known = [name for name, value in link.items() if value is not None]
        if self.pcie_source == "unavailable" and known:
            raise SchemaError(known[0], "is given, but pcie_source says the link was unavailable")
        for now, most in (
            ("pcie_generation", "pcie_max_generation"),
            ("pcie_width", "pcie_max_width"),
        ):
            if link[now] is not None and link[most] is not None and link[now] > link[most]:
                raise SchemaError(now, f"is {link[now]}, more than {most} ({link[most]})")

    def kinds_it_lacks(self) -> dict[str, str]:
        """The memory kinds this GPU's recorded flags rule out: kind -> the flag that is 0."""
        flags = {kind: capability_name(attribute) for kind, attribute in KIND_NEEDS.items()}
        return {kind: flag for kind, flag in flags.items() if self.attributes.get(flag) == 0}

    @property
    def theoretical_memory_bandwidth_gb_per_s(self) -> float:
        """Double data rate: 2 transfers per memory clock, bus width in bytes."""
        return 2 * self.memory_clock_khz * 1e3 * self.memory_bus_width_bits / 8 / 1e9


@dataclass(frozen=True)
class DeviceFact:
    """One fact `memprof info` prints, once for its cell and its CSV row: a value in the unit
    its name says, a size (bytes) or a rate (gb_per_s)."""

    name: str
    value: float | None = None
    bytes: int | None = None
    gb_per_s: float | None = None


@dataclass(frozen=True)
class DeviceRecord:
    """One GPU of a run on several (peer, hostlink, portable): its index, name and bus id."""

    index: GpuIndex
    name: str
    pci_bus_id: str

    @classmethod
    def of(cls, facts: DeviceFacts) -> DeviceRecord:
        return cls(facts.index, facts.name, facts.pci_bus_id)
