"""The state a GPU was in during a run, as NVML reported it (memprof.core.nvml reads it), and
what in it is worth a warning. Any field may be unknown (None): never taken for good or bad.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import msgspec

from memprof.model.device import PcieGeneration, PcieWidth, known_link, pcie_bandwidth_gb_per_s
from memprof.model.formatting import format_bytes, format_gb_per_s, gpu_names
from memprof.model.schema import Count, GpuIndex, Range, SchemaError

Megahertz = Annotated[int, Range(0, 100_000)]  # a clock: far above any GPU's


@dataclass(frozen=True)
class ClockReason:
    """One of NVML's clock-event (throttle) reasons: its bit, its words, what it means here."""

    name: str  # as recorded in a Result
    bit: int  # nvmlClocksEventReason* (the same bits as the older ClocksThrottleReason*)
    words: str  # as shown
    limits: bool  # holds the clocks below what the work asks for (idle and sync boost do not)
    severe: bool  # the hardware slowed itself down: `check` fails on it, warns on the others


CLOCK_REASONS = (
    ClockReason("gpu_idle", 0x1, "idle", False, False),
    ClockReason("applications_clocks_setting", 0x2, "applications clocks setting", True, False),
    ClockReason("sw_power_cap", 0x4, "software power cap", True, False),
    ClockReason("hw_slowdown", 0x8, "hardware slowdown", True, True),
    ClockReason("sync_boost", 0x10, "sync boost", False, False),
    ClockReason("sw_thermal_slowdown", 0x20, "software thermal slowdown", True, True),
    ClockReason("hw_thermal_slowdown", 0x40, "hardware thermal slowdown", True, True),
    ClockReason("hw_power_brake_slowdown", 0x80, "hardware power brake", True, True),
    ClockReason("display_clock_setting", 0x100, "display clock setting", False, False),
)
_REASONS = {reason.name: reason for reason in CLOCK_REASONS}


def reasons_in(mask: int) -> list[str]:
    """The names of the reasons whose bits are set in an NVML reasons mask."""
    return [reason.name for reason in CLOCK_REASONS if mask & reason.bit]


def reason_words(name: str) -> str:
    return _REASONS[name].words if name in _REASONS else name


def normalize_bus_id(text: str) -> str:
    """A PCI bus id as CUDA writes it ('0000:00:06.0'): NVML writes the domain with 8 digits."""
    domain, _, rest = text.strip().lower().partition(":")
    if not rest:
        return text.strip().lower()
    try:
        return f"{int(domain, 16):04x}:{rest}"
    except ValueError:
        return text.strip().lower()


# NVML numbers a GPU's links from 0 (an H200 has 18, each 26,562 MB/s a direction): room for
# GPUs far beyond it, and no more, since ceilings of peer copies are made of these rates
NvLinkIndex = Annotated[int, Range(0, 63)]
NvLinkSpeed = Annotated[int, Range(0, 1_000_000)]


class NvLink(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One NVLink of a GPU, as NVML reports it."""

    link: NvLinkIndex
    active: bool | None
    version: str | None  # "4.0"
    speed_mb_per_s: NvLinkSpeed | None  # NVML's link speed per direction, 10^6 bytes/s, raw
    remote_pci_bus_id: str | None  # the device at the other end
    remote_kind: Literal["gpu", "switch", "npu", "unknown"] | None


class OtherProcess(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A process other than memprof with a context on the GPU."""

    pid: Count
    kind: Literal["compute", "graphics"]
    memory_bytes: Count | None  # device memory it holds, where NVML says


class GpuState(msgspec.Struct, forbid_unknown_fields=True):
    """One GPU during a run: clocks, throttle reasons, links, modes and other processes.

    Sampled when the run starts (before memprof's context exists) and when it ends; see
    memprof.core.nvml for how events in between are seen.
    """

    index: GpuIndex
    pci_bus_id: str
    unavailable: str | None = None  # why NVML could not be read at all; None: it was
    sm_clock_mhz: Megahertz | None = None  # when the run ended
    sm_clock_max_mhz: Megahertz | None = None
    memory_clock_mhz: Megahertz | None = None
    memory_clock_max_mhz: Megahertz | None = None
    clock_reasons: list[str] | None = None  # every reason seen during the run (CLOCK_REASONS)
    clock_reasons_basis: str = ""  # how they were seen
    pcie_generation: PcieGeneration | None = None  # the fastest the link ran at in the samples
    pcie_width: PcieWidth | None = None
    pcie_max_generation: PcieGeneration | None = None  # the most this GPU and its slot allow
    pcie_max_width: PcieWidth | None = None
    pcie_gpu_max_generation: PcieGeneration | None = None  # the most the GPU itself allows
    nvlinks: list[NvLink] | None = None  # [] where the GPU has none
    ecc_enabled: bool | None = None
    persistence_mode: bool | None = None
    mig_enabled: bool | None = None
    other_processes: list[OtherProcess] | None = None
    processes_note: str = ""  # what the process list could not see

    def check_consistency(self) -> None:
        """A link never runs above what the GPU and its slot allow (schema runs it)."""
        for lower, higher in (
            ("pcie_generation", "pcie_max_generation"),
            ("pcie_width", "pcie_max_width"),
            ("pcie_max_generation", "pcie_gpu_max_generation"),
        ):
            low, high = getattr(self, lower), getattr(self, higher)
            if low is not None and high is not None and low > high:
                raise SchemaError(lower, f"is {low}, more than {higher} ({high})")
        numbers = [link.link for link in self.nvlinks or []]
        for index, number in enumerate(numbers):
            if number in numbers[:index]:
                raise SchemaError(f"nvlinks[{index}].link", f"is {number} again")
        for index, name in enumerate(self.clock_reasons or []):  # NVML's, as reasons_in names
            if name not in _REASONS:  # an unknown reason would read as none: a PASS
                raise SchemaError(
                    f"clock_reasons[{index}]",
                    f"is {name!r}, not a reason NVML gives: one of "
                    + ", ".join(reason.name for reason in CLOCK_REASONS),
                )
        for clock in ("sm_clock_mhz", "memory_clock_mhz"):  # NVML's maximum is the most it runs
            now, most = getattr(self, clock), getattr(self, clock.replace("_mhz", "_max_mhz"))
            if now is not None and most is not None and now > most:
                raise SchemaError(clock, f"is {now} MHz, above its maximum ({most} MHz)")

    @property
    def limiting_reasons(self) -> list[str] | None:
        """The reasons seen that hold the clocks down (idle, sync boost... left out)."""
        if self.clock_reasons is None:
            return None
        return [name for name in self.clock_reasons if name in _REASONS and _REASONS[name].limits]

    @property
    def severe_reasons(self) -> list[str] | None:
        if self.clock_reasons is None:
            return None
        return [name for name in self.clock_reasons if name in _REASONS and _REASONS[name].severe]

    @property
    def link(self) -> tuple[int, int] | None:
        return known_link(self.pcie_generation, self.pcie_width)

    @property
    def link_max(self) -> tuple[int, int] | None:
        return known_link(self.pcie_max_generation, self.pcie_max_width)

    @property
    def link_below_max(self) -> bool | None:
        """True where the link ran slower or narrower than it can; None: unknown."""
        if self.link is None or self.link_max is None:
            return None
        return self.link[0] < self.link_max[0] or self.link[1] < self.link_max[1]

    @property
    def memory_clock_below_max(self) -> bool | None:
        if not self.memory_clock_mhz or not self.memory_clock_max_mhz:
            return None
        return self.memory_clock_mhz < self.memory_clock_max_mhz

    @property
    def active_nvlinks(self) -> list[NvLink]:
        return [link for link in self.nvlinks or [] if link.active]


# -- words -------------------------------------------------------------------------------------


def link_words(link: tuple[int, int] | None) -> str:
    return f"Gen{link[0]} x{link[1]}" if link else "unknown"


def link_rate_words(link: tuple[int, int]) -> str:
    """A known link's rate per direction; 'unknown' for a generation memprof has no rate for."""
    rate = pcie_bandwidth_gb_per_s(*link)
    return f"{format_gb_per_s(rate)} GB/s" if rate else "unknown"


def pcie_words(state: GpuState) -> str:
    """The link during the run against its maximum: 'Gen5 x16 (its maximum): 63.0 GB/s ...'."""
    if state.link is None:
        return "unknown"
    rate = f"{link_rate_words(state.link)} per direction"
    if state.link_below_max:
        text = (
            f"{link_words(state.link)}, below its {link_words(state.link_max)} maximum: "
            f"{rate} instead of {link_rate_words(state.link_max)}"
        )
    elif state.link_max is None:
        text = f"{link_words(state.link)} (maximum unknown): {rate}"
    else:
        text = f"{link_words(state.link)} (its maximum): {rate}"
    gpu_max = state.pcie_gpu_max_generation
    if gpu_max and state.pcie_max_generation and gpu_max > state.pcie_max_generation:
        text += f"; the GPU could do Gen{gpu_max}, its slot allows Gen{state.pcie_max_generation}"
    return text


def clocks_words(state: GpuState) -> str:
    def one(name: str, now: int | None, most: int | None) -> str:
        if now is None and most is None:
            return f"{name} unknown"
        return f"{name} {now if now is not None else '?'} of {most if most else '?'} MHz"

    return (
        one("SM", state.sm_clock_mhz, state.sm_clock_max_mhz)
        + ", "
        + one("memory", state.memory_clock_mhz, state.memory_clock_max_mhz)
    )


def reasons_words(state: GpuState) -> str:
    if state.clock_reasons is None:
        return "unknown"
    shown = [reason_words(name) for name in state.clock_reasons if name != "gpu_idle"]
    return ", ".join(shown) if shown else "none"


def nvlink_words(state: GpuState) -> str:
    if state.nvlinks is None:
        return "unknown"
    if not state.nvlinks:
        return "none"
    active = state.active_nvlinks
    text = f"{len(active)} of {len(state.nvlinks)} links active"
    versions = sorted({link.version for link in active if link.version})
    if versions:
        text += f", NVLink {'/'.join(versions)}"
    speeds = [link.speed_mb_per_s for link in active if link.speed_mb_per_s]
    if speeds and len(speeds) == len(active):
        total = sum(speeds) / 1000
        each = sorted(set(speeds))
        rate = f"{each[0] / 1000:.1f} GB/s" if len(each) == 1 else "various rates"
        text += f", {rate} each = {total:.0f} GB/s per direction"
    return text


def modes_words(state: GpuState) -> str:
    def on(value: bool | None) -> str:
        return "unknown" if value is None else ("on" if value else "off")

    return (
        f"ECC {on(state.ecc_enabled)}, persistence {on(state.persistence_mode)}, "
        f"MIG {on(state.mig_enabled)}"
    )


def processes_words(state: GpuState) -> str:
    if state.other_processes is None:
        return "unknown"
    if not state.other_processes:
        text = "none"
    else:
        text = ", ".join(_process_words(process) for process in state.other_processes)
    return f"{text} ({state.processes_note})" if state.processes_note else text


def _process_words(process: OtherProcess) -> str:
    memory = f", {format_bytes(process.memory_bytes)}" if process.memory_bytes else ""
    return f"pid {process.pid} ({process.kind}{memory})"


def state_line(state: GpuState) -> str:
    """One line for a run's header: the GPU's link and clocks, as NVML saw them."""
    if state.unavailable:
        return f"NVML: GPU {state.index} state unknown ({state.unavailable})"
    return f"NVML: GPU {state.index} {_state_words(state)}"


def _state_words(state: GpuState) -> str:
    def pair(now: int | None, most: int | None) -> str:
        return f"{now if now is not None else '?'}/{most if most else '?'}"

    return (
        f"PCIe {link_words(state.link)} (max {link_words(state.link_max)}), SM "
        f"{pair(state.sm_clock_mhz, state.sm_clock_max_mhz)} MHz, memory "
        f"{pair(state.memory_clock_mhz, state.memory_clock_max_mhz)} MHz"
    )


LINK_LABEL = "PCIe link during the run"


def state_rows(state: GpuState | None) -> list[tuple[str, str]]:
    """`memprof info`'s rows of a GPU's state."""
    label = "GPU state (NVML)"
    if state is None:
        return [(label, "not recorded (a file from an older memprof)")]
    if state.unavailable:
        return [(label, f"unknown: {state.unavailable}")]
    return [
        (LINK_LABEL, pcie_words(state) + " [NVML]"),
        ("Clocks: when the run ended, of maximum", clocks_words(state)),
        ("Clock events during the run", reasons_words(state)),
        ("NVLink", nvlink_words(state)),
        ("ECC, persistence, MIG", modes_words(state)),
        ("Other processes on the GPU", processes_words(state)),
    ]


def state_warnings(state: GpuState) -> list[str]:
    """One line per thing that makes this run's figures suspect."""
    if state.unavailable:
        return []
    gpu = f"GPU {state.index}"
    lines = []
    if state.link_below_max:
        lines.append(
            f"{gpu}'s PCIe link ran at {link_words(state.link)}, below its "
            f"{link_words(state.link_max)} maximum: host copies are capped at "
            f"{link_rate_words(state.link)} per direction instead of "
            f"{link_rate_words(state.link_max)}."
        )
    if state.memory_clock_below_max:
        lines.append(
            f"{gpu}'s memory clock was {state.memory_clock_mhz} MHz, below its "
            f"{state.memory_clock_max_mhz} MHz maximum: device-memory figures are held down."
        )
    limiting = state.limiting_reasons
    if limiting:
        words = ", ".join(reason_words(name) for name in limiting)
        lines.append(f"{gpu}'s clocks were held down during the run ({words}).")
    if state.other_processes:
        who = ", ".join(_process_words(process) for process in state.other_processes)
        lines.append(f"another process used {gpu} during the run: {who}.")
    return lines


def describe_all(states: list[GpuState] | None) -> list[tuple[str, list[str]]]:
    """(state line, warnings) per GPU; one line for the GPUs alike without warnings."""
    alike: dict[str, list[int]] = {}
    lines: list[tuple[str | int, list[str]]] = []
    for state in states or []:
        warnings = state_warnings(state)
        if warnings or state.unavailable:
            lines.append((state_line(state), warnings))
            continue
        words = _state_words(state)
        if words not in alike:
            lines.append((len(alike), []))
            alike[words] = []
        alike[words].append(state.index)
    said = [f"NVML: {gpu_names(indices)} {words}" for words, indices in alike.items()]
    return [(said[line] if isinstance(line, int) else line, warnings) for line, warnings in lines]
