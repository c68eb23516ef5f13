"""`memprof info`: the GPU, its theoretical bandwidths, and which memory kinds work on it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from memprof.experiments import base
from memprof.model.device import CAPABILITIES, DeviceFact, pcie_bandwidth_gb_per_s
from memprof.model.formatting import format_bytes, format_gb_per_s
from memprof.model.gpustate import LINK_LABEL, GpuState, state_rows
from memprof.model.results import Result
from memprof.model.schema import DISTINCT, Count
from memprof.model.summary import Column, Summary, table


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
    fact = DeviceFact  # each printed figure's declaration: its cell's source, a CSV row
    capability = fact("compute capability", value=float(f"{major}.{minor}"))
    sms = fact("multiprocessors", value=d.multiprocessors)
    total = fact("memory total", bytes=d.memory_total_bytes)
    free = fact("memory free", bytes=d.memory_free_bytes)
    l2 = fact("L2 cache", bytes=d.l2_cache_bytes)
    rate = fact("memory bandwidth (theoretical)", gb_per_s=d.theoretical_memory_bandwidth_gb_per_s)
    clock = fact("memory clock (MHz)", value=d.memory_clock_khz / 1000)
    bus = fact("memory bus width (bits)", value=d.memory_bus_width_bits)
    link = pcie_bandwidth_gb_per_s(d.pcie_max_generation, d.pcie_max_width)
    link_fact = fact(f"PCIe link (theoretical, per direction) [{d.pcie_source}]", gb_per_s=link)
    state = result.gpu_state()
    memory = f"{format_bytes(total.bytes)} total, {format_bytes(free.bytes)} free"
    bandwidth = f"{rate.gb_per_s:,.0f} GB/s ({clock.value:g} MHz, {bus.value}-bit bus)"
    stated = [
        ("Compute capability", Stated(f"{major}.{minor}", (capability,))),
        ("Multiprocessors (SMs)", Stated(str(sms.value), (sms,))),
        ("Memory", Stated(memory, (total, free))),
        ("L2 cache", Stated(format_bytes(l2.bytes), (l2,))),
        ("Device memory bandwidth (theoretical)", Stated(bandwidth, (rate, clock, bus))),
        ("PCIe link", Stated(_link_text(d, link), (link_fact,) if link else ())),
        *((label, Stated(text, _state_facts(label, state))) for label, text in state_rows(state)),
        ("PCI bus id", Stated(d.pci_bus_id)),
        ("NUMA node, local CPUs", Stated(_affinity_text(result.extra.affinity))),
        ("Driver", Stated(f"{d.driver_version} (CUDA {d.cuda_driver_api_version})")),
        ("PyCUDA", Stated(f"{d.pycuda_version}, built against CUDA {d.cuda_build_version}")),
    ]
    notes = [
        "GB/s = 10^9 bytes per second; theoretical figures are upper bounds. Device memory "
        "bandwidth: two transfers per memory clock over the bus, 8 bits a byte."
    ]
    properties = [{"property": label, "value": value} for label, value in stated]
    device = table(f"Device {d.index}: {d.name}", DEVICE, properties, notes)

    rows = [  # what the result recorded, never a lookup
        {"flag": name, "fact": fact(name, value=value), "decides": CAPABILITIES.get(name, "")}
        for name, value in d.attributes.items()
    ]
    return Summary(tables=[device, table("Memory capabilities", FLAGS, rows)], show_profile=False)


@dataclass(frozen=True)
class Stated:
    """A Value cell of the device table: its words and the facts they print (its CSV rows)."""

    text: str
    sources: tuple[DeviceFact, ...] = ()


DEVICE = (Column("Property", "property"), Column("Value", "value", lambda value: value.text))
FLAGS = (
    Column("Flag", "flag"),
    Column("Value", "fact", lambda fact: str(fact.value)),
    Column("Decides", "decides"),
)


def _state_facts(label: str, state: GpuState | None) -> tuple[DeviceFact, ...]:
    """The NVML link row's rates: during the run, and the maximum where it ran below it."""
    if label != LINK_LABEL or state is None or state.link is None:
        return ()
    during = [("PCIe link during the run (per direction) [NVML]", state.link)]
    if state.link_below_max:
        during.append(("PCIe link's maximum (per direction) [NVML]", state.link_max))
    return tuple(DeviceFact(name, gb_per_s=pcie_bandwidth_gb_per_s(*link)) for name, link in during)


def _affinity_text(recorded: AffinityRecord | None) -> str:
    if recorded is None:
        return "not recorded (sysfs did not say)"
    from memprof.core.affinity import Affinity

    return Affinity(recorded.numa_node, tuple(recorded.local_cpus)).describe() + " [sysfs]"


def _link_text(d, gb_per_s: float | None) -> str:
    """The link at its maximum and its rate (the "PCIe link" fact's), as sysfs or NVML said."""
    if d.pcie_max_generation is None:
        return f"unknown (no link figures from {d.pcie_source})"
    rate = f"{format_gb_per_s(gb_per_s)} GB/s" if gb_per_s else "unknown rate"
    text = f"Gen{d.pcie_max_generation} x{d.pcie_max_width}: {rate} per direction (theoretical)"
    if (d.pcie_generation, d.pcie_width) != (d.pcie_max_generation, d.pcie_max_width):
        text += (
            f"; running at Gen{d.pcie_generation} x{d.pcie_width} now (links slow down when idle)"
        )
    return text + f" [{d.pcie_source}]"
