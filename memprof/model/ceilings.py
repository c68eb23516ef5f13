"""Every throughput figure against its ceiling: what bounds it, how fast that is, how much of it
was reached. The one place the ceiling arithmetic lives (docs/ceilings.md explains it): pure
functions of a Result's recorded facts, no GPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from memprof.model.device import (
    PCIE_ENCODING_EFFICIENCY,
    PCIE_RATE_GT_PER_S,
    DeviceFacts,
    known_link,
    pcie_bandwidth_gb_per_s,
)
from memprof.model.formatting import format_gb_per_s
from memprof.model.gpustate import GpuState, normalize_bus_id
from memprof.model.results import Result

FAR_BELOW = 0.5  # a figure under half its ceiling is named: something else limits it
ABOVE = 1.05  # a figure over its ceiling beyond noise is named: the model does not hold
OVER = "over"  # a table's cell in place of a share above ABOVE: "over staging"
ENCODING_WORDS = {1: "8b/10b", 2: "8b/10b", 3: "128b/130b", 4: "128b/130b", 5: "128b/130b"}


@dataclass(frozen=True)
class Ceiling:
    """What bounds a throughput figure: its rate, the limiter's short name and how it is made."""

    gb_per_s: float
    limiter: str  # one word the tables show: "PCIe", "HBM", "NVLink", "staging"
    detail: str  # for notes: where the rate comes from

    def fraction(self, figure_gb_per_s: float) -> float:
        return figure_gb_per_s / self.gb_per_s if self.gb_per_s > 0 else math.inf

    def cell(self, figure_gb_per_s: float) -> str:
        """'85% PCIe'; never above 100%: '~100% PCIe' within noise (ABOVE), else 'over PCIe'."""
        fraction = self.fraction(figure_gb_per_s)
        if not math.isfinite(fraction):
            return "-"
        if fraction > ABOVE:
            return f"{OVER} {self.limiter}"
        share = f"{fraction:.0%}"
        return f"{'~100%' if int(share[:-1]) > 100 else share} {self.limiter}"

    def far_below(self, figure_gb_per_s: float) -> bool:
        return self.fraction(figure_gb_per_s) < FAR_BELOW


UNKNOWN_LINK = "unknown (no link figures recorded)"
NO_GPU_STATE = "not recorded in this file (no GPU state from NVML)"  # a GPU but the run's own


def detail_of(ceiling: Ceiling | None, unknown: str = UNKNOWN_LINK) -> str:
    """A note's words for a ceiling: its detail, or `unknown` where the file lacks its figures."""
    return ceiling.detail if ceiling is not None else unknown


# -- PCIe ----------------------------------------------------------------------------------------


def pcie_formula(generation: int, width: int) -> str:
    """'32 GT/s x 16 lanes x 128/130 / 8': how the per-direction rate is made."""
    efficiency = PCIE_ENCODING_EFFICIENCY[generation]
    encoding = ENCODING_WORDS.get(generation, f"{efficiency:.3f}")
    return f"{PCIE_RATE_GT_PER_S[generation]:g} GT/s x {width} lanes x {encoding} / 8"


@dataclass(frozen=True)
class Link:
    """A GPU's PCIe link: as negotiated during the run, and the most it can do."""

    now: tuple[int, int] | None
    most: tuple[int, int] | None
    source: str  # "NVML", "sysfs", "nvml": where the figures come from


def link_of(result: Result, index: int | None = None) -> Link | None:
    """GPU `index`'s link (the run's own where None): NVML's, else the device facts'."""
    state = result.gpu_state(index)
    if state is not None and state.link is not None:
        return Link(state.link, state.link_max, "NVML")
    facts = result.device
    if facts is None or (index is not None and facts.index != index):
        return None
    now = known_link(facts.pcie_generation, facts.pcie_width)
    most = known_link(facts.pcie_max_generation, facts.pcie_max_width)
    return Link(now, most, facts.pcie_source) if now is not None else None


def pcie_ceiling(result: Result, index: int | None = None) -> Ceiling | None:
    """Host <-> device and zero-copy: the negotiated link, per direction."""
    link = link_of(result, index)
    if link is None or link.now is None:
        return None
    rate = pcie_bandwidth_gb_per_s(*link.now)
    if rate is None:
        return None
    generation, width = link.now
    detail = (
        f"PCIe Gen{generation} x{width} as negotiated, {pcie_formula(generation, width)} = "
        f"{format_gb_per_s(rate)} GB/s per direction"
    )
    most = pcie_bandwidth_gb_per_s(*link.most) if link.most is not None else None
    if most and link.most != link.now:
        detail += (
            f", below what the link can do (Gen{link.most[0]} x{link.most[1]}: "
            f"{format_gb_per_s(most)} GB/s)"
        )
    elif most:
        detail += " (its maximum)"
    return Ceiling(rate, "PCIe", f"{detail} [{link.source}]")


# -- device memory and peers ----------------------------------------------------------------


def hbm_ceiling(facts: DeviceFacts | None) -> Ceiling | None:
    """Device memory: 2 transfers per memory clock x bus width / 8 (from the device facts)."""
    if facts is None or not facts.memory_clock_khz or not facts.memory_bus_width_bits:
        return None
    rate = facts.theoretical_memory_bandwidth_gb_per_s
    detail = (
        f"HBM, 2 x {facts.memory_clock_khz / 1000:.0f} MHz x "
        f"{facts.memory_bus_width_bits}-bit bus / 8 = {rate:,.0f} GB/s (theoretical)"
    )
    return Ceiling(rate, "HBM", detail)


def nvlink_ceiling(source: GpuState | None, destination: GpuState | None) -> Ceiling | None:
    """The active NVLinks of `source` reaching `destination` (directly or by NVSwitch), at
    NVML's per-direction rate; None: unknown."""
    if source is None or destination is None or source.nvlinks is None:
        return None
    target = normalize_bus_id(destination.pci_bus_id) or None  # unknown: no direct link reaches
    reaching = [
        link
        for link in source.active_nvlinks
        if link.remote_kind == "switch"
        or (
            link.remote_pci_bus_id is not None
            and normalize_bus_id(link.remote_pci_bus_id) == target
        )
    ]
    if not reaching or any(not link.speed_mb_per_s for link in reaching):
        return None
    rate = sum(link.speed_mb_per_s or 0 for link in reaching) / 1000
    speeds = sorted({link.speed_mb_per_s or 0 for link in reaching})
    each = f"{len(reaching)} x {speeds[0] / 1000:.2f} GB/s" if len(speeds) == 1 else "summed"
    through = " through NVSwitch" if any(link.remote_kind == "switch" for link in reaching) else ""
    detail = (
        f"NVLink, {len(reaching)} active links to the other GPU{through}, {each} = "
        f"{format_gb_per_s(rate)} GB/s per direction "
        "(NVML's raw link rate, protocol overhead included) [NVML]"
    )
    return Ceiling(rate, "NVLink", detail)


def peer_ceiling(result: Result, source: int, destination: int) -> Ceiling | None:
    """Copies between two GPUs: their NVLinks, else (none, says NVML) the slower PCIe link."""
    a, b = result.gpu_state(source), result.gpu_state(destination)
    nvlink = nvlink_ceiling(a, b)
    if nvlink is not None:
        return nvlink
    if a is None or b is None or a.nvlinks is None or b.nvlinks is None:
        return None  # NVLink unknown: PCIe would be a wrong guess
    links = [pcie_ceiling(result, source), pcie_ceiling(result, destination)]
    if None in links:
        return None
    slower = min(links, key=lambda ceiling: ceiling.gb_per_s)
    return Ceiling(
        slower.gb_per_s, "PCIe", "no NVLink between the two: the slower PCIe link, " + slower.detail
    )


# -- pageable copies -------------------------------------------------------------------------


def host_ceiling(
    host_gb_per_s: float | None, link: Ceiling | None, staged: bool = True
) -> Ceiling | None:
    """Pageable copies: one host thread stages them through a small pinned buffer, so the
    lower of its staging and the link bounds them (staged=False: an older file's memcpy)."""
    if host_gb_per_s is None or not math.isfinite(host_gb_per_s) or host_gb_per_s <= 0:
        return link
    limiter, words = (
        ("staging", "one host thread staging the copy through a 256 KiB buffer")
        if staged
        else ("memcpy", "host memcpy, one thread, pageable to pageable, same size")
    )
    host = Ceiling(
        host_gb_per_s, limiter, f"{words}, this run: {format_gb_per_s(host_gb_per_s)} GB/s"
    )
    if link is not None and link.gb_per_s < host.gb_per_s:
        return link
    return host


def ceiling_remark(what: str, figure_gb_per_s: float, ceiling: Ceiling | None) -> str | None:
    """A sentence naming a figure far below its ceiling or above it, else None."""
    if ceiling is None:
        return None
    figure, limit = format_gb_per_s(figure_gb_per_s), format_gb_per_s(ceiling.gb_per_s)
    share = ceiling.fraction(figure_gb_per_s)
    if ceiling.far_below(figure_gb_per_s):
        return (
            f"{what} reached {figure} GB/s, only {share:.0%} of its {ceiling.limiter} ceiling "
            f"of {limit} GB/s: something other than the {ceiling.limiter} held it back."
        )
    if share > ABOVE:
        return (
            f"{what} reached {figure} GB/s, {share:.0%} of its {ceiling.limiter} ceiling of "
            f"{limit} GB/s: above it, so the ceiling's model does not hold here "
            "(docs/ceilings.md)."
        )
    return None
