"""What the GPU is and what it can do: read once per session, stored in every Result."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from memprof.core.affinity import PCI_DEVICES, device_directory
from memprof.core.bindings import version_text
from memprof.model.device import CAPABILITY_ATTRIBUTES, DeviceFacts, parse_link_speed


def _sysfs_link(pci_bus_id: str, root: Path = PCI_DEVICES) -> dict | None:
    device_dir = device_directory(pci_bus_id, root)
    with contextlib.suppress(OSError, ValueError):
        return {
            "generation": parse_link_speed((device_dir / "current_link_speed").read_text()),
            "width": int((device_dir / "current_link_width").read_text()),
            "max_generation": parse_link_speed((device_dir / "max_link_speed").read_text()),
            "max_width": int((device_dir / "max_link_width").read_text()),
        }
    return None


def _nvml_link(pci_bus_id: str, module: Any = None) -> dict | None:
    """The link as NVML reports it, or None where NVML cannot say all of it."""
    from memprof.core.nvml import opened

    nvml, _ = opened(module)
    if nvml is None:
        return None
    handle = nvml.call("nvmlDeviceGetHandleByPciBusId", pci_bus_id)
    if handle is None:
        return None
    link = {
        "generation": nvml.call("nvmlDeviceGetCurrPcieLinkGeneration", handle),
        "width": nvml.call("nvmlDeviceGetCurrPcieLinkWidth", handle),
        "max_generation": nvml.call("nvmlDeviceGetMaxPcieLinkGeneration", handle),
        "max_width": nvml.call("nvmlDeviceGetMaxPcieLinkWidth", handle),
    }
    return link if None not in link.values() else None


def _kernel_driver_version(path: Path = Path("/proc/driver/nvidia/version")) -> str | None:
    """The NVIDIA kernel module's version (580.95.05), from its proc file."""
    with contextlib.suppress(OSError):
        for word in path.read_text().split():
            if word.count(".") >= 1 and word.replace(".", "").isdigit():
                return word
    return None


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
        driver_version=_kernel_driver_version() or version_text(cuda.get_driver_version()),
        cuda_driver_api_version=version_text(cuda.get_driver_version()),
        cuda_build_version=".".join(str(v) for v in cuda.get_version()),
        pycuda_version=pycuda.VERSION_TEXT,
        attributes={
            camel: attribute(pycuda_name) for camel, pycuda_name in CAPABILITY_ATTRIBUTES.items()
        },
    )
