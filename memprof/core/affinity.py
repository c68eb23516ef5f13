"""Which CPUs and NUMA node a GPU hangs off, and running the host thread there.

Pinned memory on the far socket's node costs up to 3x in copy bandwidth. Linux places a page
on the node of the CPU that first touches it, and the driver pins in the calling thread: so
running it on the GPU's local CPUs (sysfs' numa_node and local_cpulist) places memory there.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

PCI_DEVICES = Path("/sys/bus/pci/devices")


@dataclass(frozen=True)
class Affinity:
    """A GPU's place in the machine: its NUMA node (None: not NUMA) and its local CPUs."""

    numa_node: int | None
    local_cpus: tuple[int, ...]

    def describe(self) -> str:
        node = "no NUMA node" if self.numa_node is None else f"NUMA node {self.numa_node}"
        cpus = format_cpulist(self.local_cpus) if self.local_cpus else "unknown"
        return f"{node}, local CPUs {cpus}"


def parse_cpulist(text: str) -> tuple[int, ...]:
    """sysfs' CPU list ('0-3,8,10-11') as CPU numbers; '' gives none."""
    runs = [part.partition("-") for part in text.strip().split(",") if part]
    return tuple(
        cpu for first, _, last in runs for cpu in range(int(first), int(last or first) + 1)
    )


def format_cpulist(cpus: tuple[int, ...]) -> str:
    """CPU numbers as sysfs writes them: runs collapsed ('0-3,8')."""
    runs = []  # consecutive CPUs keep the same difference from their place in the order
    for _, run in itertools.groupby(enumerate(sorted(set(cpus))), lambda at: at[1] - at[0]):
        members = [cpu for _, cpu in run]
        first, last = members[0], members[-1]
        runs.append(str(first) if first == last else f"{first}-{last}")
    return ",".join(runs)


def device_directory(pci_bus_id: str, root: Path = PCI_DEVICES) -> Path:
    """sysfs' directory of a GPU: CUDA writes 0000:1B:00.0, sysfs 0000:1b:00.0."""
    domain, _, rest = pci_bus_id.lower().partition(":")
    return root / f"{int(domain, 16):04x}:{rest}"


def gpu_affinity(pci_bus_id: str, root: Path = PCI_DEVICES) -> Affinity | None:
    """The GPU's node and local CPUs from sysfs, None where sysfs does not say."""
    directory = device_directory(pci_bus_id, root)
    try:
        node = int((directory / "numa_node").read_text())
        cpus = parse_cpulist((directory / "local_cpulist").read_text())
    except (OSError, ValueError):
        return None
    return Affinity(node if node >= 0 else None, cpus)


CpuSet = set[int]


def pin_thread(
    affinity: Affinity | None,
    get_cpus: Callable[[int], CpuSet] = os.sched_getaffinity,
    set_cpus: Callable[[int, CpuSet], None] = os.sched_setaffinity,
) -> str:
    """Run this process' thread on the GPU's local CPUs; says what was done, for the header."""
    if affinity is None or not affinity.local_cpus:
        return "affinity: not set (sysfs does not say which CPUs are local to this GPU)"
    usable = set(affinity.local_cpus) & get_cpus(0)
    if not usable:
        return "affinity: not set (none of the GPU's local CPUs is available to memprof)"
    set_cpus(0, usable)
    node = "no NUMA node" if affinity.numa_node is None else f"NUMA node {affinity.numa_node}"
    return (
        f"affinity: host thread on CPUs {format_cpulist(tuple(usable))}, local to the GPU ({node})"
    )


NOT_ASKED = "affinity: off (--no-affinity): the host thread ran wherever the OS put it"


@contextmanager
def near_gpu(
    pci_bus_id: str,
    enabled: bool = True,
    root: Path = PCI_DEVICES,
    get_cpus: Callable[[int], CpuSet] = os.sched_getaffinity,
    set_cpus: Callable[[int, CpuSet], None] = os.sched_setaffinity,
) -> Iterator[str]:
    """The host thread on the GPU's local CPUs inside, yielding the header's line; its CPUs
    before come back after, so the next GPU of `--device all` starts from the same set."""
    if not enabled:
        yield NOT_ASKED
        return
    before = get_cpus(0)
    note = pin_thread(gpu_affinity(pci_bus_id, root), get_cpus, set_cpus)
    try:
        yield note
    finally:
        if get_cpus(0) != before:
            set_cpus(0, before)
