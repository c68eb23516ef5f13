"""Plain Result data and its JSON round trip. Experiments produce it, renderers read it."""

from __future__ import annotations

import json
import os
import platform
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from memprof import __version__
from memprof.errors import InvalidArgument
from memprof.timing import Statistics

SCHEMA_VERSION = 1

# gpu: timed on the GPU with CUDA events (nvprof's "GPU activities")
# api: a driver call timed on the host clock (nvprof's "API calls")
# host: host-only work timed on the host clock (numpy allocation, CPU reads)
# span: several operations timed together with events (an end-to-end flow)
Group = Literal["gpu", "api", "host", "span"]


# Operations whose profile rows must stay apart from the plain ones of the same name.
OPERATION_QUALIFIERS = {"kernel_first": "first launch"}


@dataclass
class Measurement:
    """Every timed sample of one operation on one memory kind at one size."""

    group: Group
    name: str  # as the profile shows it: "[CUDA memcpy HtoD]", "cuMemAlloc", "sumArraysGPU(...)"
    operation: str  # stable key the summaries look up: "h2d", "d2h", "kernel", "alloc", ...
    kind: str | None  # memory kind ("pageable", "pinned", ...) or None
    bytes: int  # bytes each call moves or allocates (0 where that means nothing)
    samples_ms: list[float] = field(default_factory=list)  # one operation each (latency)
    # where samples_ms came from: "cupti" (the GPU's record), "events" (gated CUDA events),
    # "host" (the host clock)
    source: str = "events"
    events_ms: list[float] = field(default_factory=list)  # gated events beside CUPTI's figures
    throughput_ms: list[float] = field(default_factory=list)  # per operation, back to back
    batch: int = 0  # operations per throughput batch

    @property
    def throughput_stats(self) -> Statistics | None:
        """Per-operation time of back-to-back batches (what bandwidth is computed from)."""
        return Statistics.of(self.throughput_ms) if self.throughput_ms else None

    @property
    def stats(self) -> Statistics:
        return Statistics.of(self.samples_ms)

    @property
    def display_name(self) -> str:
        """The profile name with the memory kind, so pageable and pinned rows stay apart."""
        qualifiers = [q for q in (self.kind, OPERATION_QUALIFIERS.get(self.operation)) if q]
        return f"{self.name} ({', '.join(qualifiers)})" if qualifiers else self.name


@dataclass
class TimingInfo:
    """Where a run's figures came from, and what CUPTI added."""

    source: str  # "cupti": GPU activities are CUPTI's records; "events": gated CUDA events
    note: str  # why events were used, or ""
    event_overhead_ms: float | None  # median interval of gated empty event pairs
    # CUPTI's unified-memory counters over the whole run: name -> count, total, min, max, time_ms
    unified_memory: dict[str, dict[str, float]] | None
    unified_memory_note: str | None  # why the counters are missing, if they are


@dataclass
class Check:
    """One verification of a GPU result against numpy."""

    name: str
    passed: bool
    elements: int
    detail: str  # "Check result success!" or the first mismatch


@dataclass
class DeviceFacts:
    """What `memprof info` prints and every Result records about the GPU it ran on."""

    index: int
    name: str
    pci_bus_id: str
    compute_capability: tuple[int, int]
    multiprocessors: int
    memory_total_bytes: int
    memory_free_bytes: int
    memory_clock_khz: int
    memory_bus_width_bits: int
    l2_cache_bytes: int
    pcie_generation: int | None
    pcie_width: int | None
    pcie_max_generation: int | None
    pcie_max_width: int | None
    pcie_source: str  # where the link figures came from: "sysfs", "nvml" or "unavailable"
    driver_version: str
    cuda_driver_api_version: str
    cuda_build_version: str
    pycuda_version: str
    attributes: dict[str, int]  # the capability flags, by CUDA's attribute name

    @property
    def theoretical_memory_bandwidth_gb_per_s(self) -> float:
        """Double data rate: 2 transfers per memory clock, bus width in bytes."""
        return 2 * self.memory_clock_khz * 1e3 * self.memory_bus_width_bits / 8 / 1e9


def _plain(value: Any) -> Any:
    """numpy scalars (a bool from a comparison, a float64) as the Python values they hold."""
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"{type(value).__name__} cannot be saved in a result")


@dataclass
class Result:
    """Everything one command measured, enough to render it again on any machine."""

    command: str
    parameters: dict[str, Any]
    device: DeviceFacts | None
    measurements: list[Measurement] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)  # command-specific plain data
    timing: TimingInfo | None = None
    schema_version: int = SCHEMA_VERSION
    memprof_version: str = __version__
    pid: int = field(default_factory=os.getpid)
    created_at: str = field(
        default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds")
    )
    host: str = field(default_factory=platform.node)

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)

    def find(
        self,
        operation: str,
        kind: str | None = None,
        group: Group | None = None,
        byte_count: int | None = None,
    ) -> Measurement:
        """The one measurement of this operation (and kind, group, size): KeyError if none."""
        matches = [
            m
            for m in self.measurements
            if m.operation == operation
            and (kind is None or m.kind == kind)
            and (group is None or m.group == group)
            and (byte_count is None or m.bytes == byte_count)
        ]
        if len(matches) != 1:
            raise KeyError(
                f"{len(matches)} measurements for operation={operation!r} kind={kind!r} "
                f"group={group!r} bytes={byte_count!r} in {self.command!r} result"
            )
        return matches[0]

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, default=_plain)

    @classmethod
    def from_json(cls, text: str) -> Result:
        data = json.loads(text)
        if not isinstance(data, dict) or "schema_version" not in data:
            raise InvalidArgument("not a memprof result: no schema_version")
        if data["schema_version"] != SCHEMA_VERSION:
            raise InvalidArgument(
                f"result schema version {data['schema_version']} is not supported "
                f"(this memprof {__version__} reads version {SCHEMA_VERSION})"
            )
        device = data.get("device")
        if device is not None:
            device["compute_capability"] = tuple(device["compute_capability"])
            device = DeviceFacts(**device)
        timing = data.get("timing")
        if timing is not None:
            timing = TimingInfo(**timing)
        return cls(
            command=data["command"],
            parameters=data["parameters"],
            device=device,
            measurements=[Measurement(**m) for m in data["measurements"]],
            checks=[Check(**c) for c in data["checks"]],
            extra=data.get("extra", {}),
            timing=timing,
            schema_version=data["schema_version"],
            memprof_version=data["memprof_version"],
            pid=data["pid"],
            created_at=data["created_at"],
            host=data["host"],
        )

    def save(self, path: Path) -> None:
        path.write_text(self.to_json() + "\n")

    @classmethod
    def load(cls, path: Path) -> Result:
        try:
            text = path.read_text()
        except OSError as error:
            raise InvalidArgument(f"cannot read {path}: {error.strerror}") from error
        try:
            return cls.from_json(text)
        except (json.JSONDecodeError, KeyError, TypeError) as error:
            raise InvalidArgument(f"{path} is not a memprof result: {error}") from error
