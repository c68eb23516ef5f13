"""What the GPU is and what it can do: read once per session, stored in every Result."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memprof.results import DeviceFacts


@dataclass(frozen=True)
class Capability:
    """One device flag that decides what memory works: its names and what it decides."""

    name: str  # as CUDA programmers know it from cudaDeviceProp
    attribute: str  # PyCUDA's device_attribute name (cuda.h's without the prefix)
    meaning: str  # in the words a person choosing a memory kind needs


# The one table of capability flags: info prints it, Results record it, memory kinds name
# the flag they need by its attribute (a test checks each is here).
CAPABILITIES = (
    Capability("canMapHostMemory", "CAN_MAP_HOST_MEMORY", "mapped (zero-copy) host memory"),
    Capability(
        "unifiedAddressing",
        "UNIFIED_ADDRESSING",
        "UVA: host pointers usable in kernels as they are",
    ),
    Capability("managedMemory", "MANAGED_MEMORY", "managed (unified) memory"),
    Capability(
        "concurrentManagedAccess",
        "CONCURRENT_MANAGED_ACCESS",
        "CPU and GPU may touch managed memory at once; prefetch/advise work",
    ),
    Capability(
        "pageableMemoryAccess",
        "PAGEABLE_MEMORY_ACCESS",
        "kernels may read plain malloc'd memory",
    ),
    Capability(
        "pageableMemoryAccessUsesHostPageTables",
        "PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES",
        "…through the host's page tables (HMM/ATS)",
    ),
    Capability(
        "hostRegisterSupported",
        "HOST_REGISTER_SUPPORTED",
        "cuMemHostRegister: pin an existing buffer",
    ),
    Capability(
        "asyncEngineCount",
        "ASYNC_ENGINE_COUNT",
        "copy engines: 2 lets HtoD and DtoH overlap each other and kernels",
    ),
    Capability(
        "concurrentKernels", "CONCURRENT_KERNELS", "kernels of different streams may run at once"
    ),
)
CAPABILITY_ATTRIBUTES = {capability.name: capability.attribute for capability in CAPABILITIES}


def capability_name(attribute: str) -> str:
    """cudaDeviceProp's name of a device attribute (the attribute itself if not in the table)."""
    for capability in CAPABILITIES:
        if capability.attribute == attribute:
            return capability.name
    return attribute


def capability_meaning(name: str) -> str:
    """What a recorded flag decides ('' for one this memprof does not describe)."""
    return next((c.meaning for c in CAPABILITIES if c.name == name), "")


# PCIe generation by per-lane transfer rate (GT/s), and the share of the raw rate
# that carries data after line encoding (8b/10b up to Gen2, 128b/130b from Gen3;
# Gen6's FLIT mode carries 242 of every 256 bytes).
PCIE_GENERATION_BY_RATE = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}
PCIE_RATE_GT_PER_S = {gen: rate for rate, gen in PCIE_GENERATION_BY_RATE.items()}
PCIE_ENCODING_EFFICIENCY = {1: 0.8, 2: 0.8, 3: 128 / 130, 4: 128 / 130, 5: 128 / 130, 6: 242 / 256}


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


def _sysfs_link(pci_bus_id: str, root: Path = Path("/sys/bus/pci/devices")) -> dict | None:
    domain, _, rest = pci_bus_id.lower().partition(":")
    device_dir = root / f"{int(domain, 16):04x}:{rest}"
    try:
        return {
            "generation": parse_link_speed((device_dir / "current_link_speed").read_text()),
            "width": int((device_dir / "current_link_width").read_text()),
            "max_generation": parse_link_speed((device_dir / "max_link_speed").read_text()),
            "max_width": int((device_dir / "max_link_width").read_text()),
        }
    except (OSError, ValueError):
        return None


def _nvml_link(pci_bus_id: str) -> dict | None:
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id.encode())
            return {
                "generation": pynvml.nvmlDeviceGetCurrPcieLinkGeneration(handle),
                "width": pynvml.nvmlDeviceGetCurrPcieLinkWidth(handle),
                "max_generation": pynvml.nvmlDeviceGetMaxPcieLinkGeneration(handle),
                "max_width": pynvml.nvmlDeviceGetMaxPcieLinkWidth(handle),
            }
        finally:
            pynvml.nvmlShutdown()
    except pynvml.NVMLError:
        return None


def _kernel_driver_version(path: Path = Path("/proc/driver/nvidia/version")) -> str | None:
    """The NVIDIA kernel module's version (580.95.05), from its proc file."""
    with contextlib.suppress(OSError):
        words = path.read_text().split()
        for word in words:
            if word.count(".") >= 1 and word.replace(".", "").isdigit():
                return word
    return None


def _version_text(encoded: int) -> str:
    """CUDA's integer version (13000) as text (13.0)."""
    return f"{encoded // 1000}.{(encoded % 1000) // 10}"


def collect(session: Any) -> DeviceFacts:
    """Read the device facts through the session's context."""
    import pycuda

    cuda, device = session.cuda, session.device
    attribute = session.attribute
    pci_bus_id = device.pci_bus_id()
    link = _sysfs_link(pci_bus_id)
    source = "sysfs"
    if link is None or link["generation"] is None:
        link, source = _nvml_link(pci_bus_id), "nvml"
    if link is None:
        link, source = {}, "unavailable"
    free, total = session.memory_info()
    return DeviceFacts(
        index=session.device_index,
        name=device.name(),
        pci_bus_id=pci_bus_id,
        compute_capability=tuple(device.compute_capability()),
        multiprocessors=attribute("MULTIPROCESSOR_COUNT"),
        memory_total_bytes=total,
        memory_free_bytes=free,
        memory_clock_khz=attribute("MEMORY_CLOCK_RATE"),
        memory_bus_width_bits=attribute("GLOBAL_MEMORY_BUS_WIDTH"),
        l2_cache_bytes=attribute("L2_CACHE_SIZE"),
        pcie_generation=link.get("generation"),
        pcie_width=link.get("width"),
        pcie_max_generation=link.get("max_generation"),
        pcie_max_width=link.get("max_width"),
        pcie_source=source,
        driver_version=_kernel_driver_version() or _version_text(cuda.get_driver_version()),
        cuda_driver_api_version=_version_text(cuda.get_driver_version()),
        cuda_build_version=".".join(str(v) for v in cuda.get_version()),
        pycuda_version=pycuda.VERSION_TEXT,
        attributes={
            camel: attribute(pycuda_name) for camel, pycuda_name in CAPABILITY_ATTRIBUTES.items()
        },
    )
