"""`memprof info`: the GPU, its theoretical bandwidths, and which memory kinds work on it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from memprof.experiments import base
from memprof.model.device import capability_meaning, pcie_bandwidth_gb_per_s
from memprof.model.formatting import format_bytes
from memprof.model.gpustate import state_rows
from memprof.model.results import Result
from memprof.model.schema import DISTINCT, Count
from memprof.model.summary import Summary, Table


@dataclass(frozen=True)
class InfoParams:
    pass


@dataclass(frozen=True)
class AffinityRecord:
    """The GPU's NUMA node (None: not NUMA) and its local CPUs, as sysfs says."""

    numa_node: Count | None
    local_cpus: Annotated[list[Count], DISTINCT]


@dataclass(frozen=True)
class InfoExtra:
    affinity: AffinityRecord | None = None  # None: sysfs did not say (and older files)


class Info(base.Experiment):
    name = "info"
    Params = InfoParams
    Extra = InfoExtra
    timing_option = False
    affinity_option = False

    def run(self, ctx: base.RunContext) -> InfoExtra:
        from memprof.core.affinity import gpu_affinity

        affinity = gpu_affinity(ctx.facts[ctx.session.device_index].pci_bus_id)
        if affinity is None:
            return InfoExtra()
        return InfoExtra(AffinityRecord(affinity.numa_node, list(affinity.local_cpus)))


def summarize(result: Result) -> Summary:
    d = result.device
    major, minor = d.compute_capability
    device = Table(f"Device {d.index}: {d.name}", ["Property", "Value"])
    device.add_row("Compute capability", f"{major}.{minor}")
    device.add_row("Multiprocessors (SMs)", str(d.multiprocessors))
    device.add_row(
        "Memory",
        f"{format_bytes(d.memory_total_bytes)} total, {format_bytes(d.memory_free_bytes)} free",
    )
    device.add_row("L2 cache", format_bytes(d.l2_cache_bytes))
    device.add_row(
        "Device memory bandwidth (theoretical)",
        f"{d.theoretical_memory_bandwidth_gb_per_s:,.0f} GB/s = 2 x "
        f"{d.memory_clock_khz / 1000:.0f} MHz x {d.memory_bus_width_bits}-bit bus / 8",
    )
    device.add_row("PCIe link", _link_text(d))
    for label, text in state_rows(result.gpu_state()):
        device.add_row(label, text)
    device.add_row("PCI bus id", d.pci_bus_id)
    device.add_row("NUMA node, local CPUs", _affinity_text(result.extra.affinity))
    device.add_row("Driver", f"{d.driver_version} (CUDA {d.cuda_driver_api_version})")
    device.add_row("PyCUDA", f"{d.pycuda_version}, built against CUDA {d.cuda_build_version}")
    device.notes.append("GB/s = 10^9 bytes per second; theoretical figures are upper bounds.")

    flags = Table("Memory capabilities", ["Flag", "Value", "Decides"])
    for name, value in d.attributes.items():  # what the result recorded, never a lookup
        flags.add_row(name, str(value), capability_meaning(name))
    return Summary(tables=[device, flags], show_profile=False)


def _affinity_text(recorded: AffinityRecord | None) -> str:
    if recorded is None:
        return "not recorded (sysfs did not say)"
    from memprof.core.affinity import Affinity

    return Affinity(recorded.numa_node, tuple(recorded.local_cpus)).describe() + " [sysfs]"


def _link_text(d) -> str:
    if d.pcie_max_generation is None:
        return f"unknown (no link figures from {d.pcie_source})"
    bandwidth = pcie_bandwidth_gb_per_s(d.pcie_max_generation, d.pcie_max_width)
    text = (
        f"Gen{d.pcie_max_generation} x{d.pcie_max_width}: {bandwidth:.1f} GB/s per direction "
        "(theoretical)"
    )
    if (d.pcie_generation, d.pcie_width) != (d.pcie_max_generation, d.pcie_max_width):
        text += (
            f"; running at Gen{d.pcie_generation} x{d.pcie_width} now (links slow down when idle)"
        )
    return text + f" [{d.pcie_source}]"
