"""Plain Result data and its JSON round trip. Experiments produce it, renderers read it.

A Result file may come from anywhere (another machine, an older memprof, a hand edit), so loading
checks every value against the annotations below (see memprof/schema.py) and builds the command's
summary once: a bad file is one line naming the file and the field, before anything is printed.
"""

from __future__ import annotations

import json
import os
import platform
import stat
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any, Literal, TypedDict

from memprof.errors import InvalidArgument
from memprof.model.device import DeviceFacts
from memprof.model.gpustate import GpuState
from memprof.model.schema import (
    ByteCount,
    Count,
    GpuIndex,
    Milliseconds,
    Range,
    Samples,
    SchemaError,
    Seconds,
    check,
    check_dataclass,
    describe,
)
from memprof.model.statistics import Statistics
from memprof.version import __version__

# 2: `extra` is declared per experiment; compare's and streams' "bytes" is "bytes_per_array".
# 3: a measurement names its GPUs (`gpus`) instead of writing them into its operation.
SCHEMA_VERSION = 3
READABLE_SCHEMA_VERSIONS = (1, 2, 3)  # older versions are upgraded when loaded (_upgrade)
# A result of 100,000 measurements is about 20 MB: anything this large is not one.
MAX_RESULT_BYTES = 256 << 20

# gpu: timed on the GPU with CUDA events (nvprof's "GPU activities")
# api: a driver call timed on the host clock (nvprof's "API calls")
# host: host-only work timed on the host clock (numpy allocation, CPU reads)
# span: several operations timed together with events (an end-to-end flow)
Group = Literal["gpu", "api", "host", "span"]
# where samples_ms came from: "cupti" (the GPU's record), "events" (gated CUDA events),
# "host" (the host clock)
Source = Literal["cupti", "events", "host"]


# Operations whose profile rows must stay apart from the plain ones of the same name.
OPERATION_QUALIFIERS = {"kernel_first": "first launch"}


@dataclass
class Measurement:
    """Every timed sample of one operation on one memory kind at one size."""

    group: Group
    name: str  # as the profile shows it: "[CUDA memcpy HtoD]", "cuMemAlloc", "sumArraysGPU(...)"
    operation: str  # stable key the summaries look up: "h2d", "d2h", "kernel", "alloc", ...
    kind: str | None  # memory kind ("pageable", "pinned", ...) or None
    bytes: ByteCount  # bytes each call moves or allocates (0 where that means nothing)
    samples_ms: Samples = field(default_factory=list)  # one operation each (latency)
    source: Source = "events"  # where samples_ms came from
    events_ms: list[Milliseconds] = field(default_factory=list)  # gated events beside CUPTI's
    throughput_ms: list[Milliseconds] = field(default_factory=list)  # per operation, back to back
    batch: Count = 0  # operations per throughput batch
    # The GPUs it ran between, in the order the operation names them: (1,) for GPU 1's copy
    # from the host, (0, 1) for data moving from GPU 0 to GPU 1; () on a run of one GPU.
    gpus: tuple[GpuIndex, ...] = ()

    def check_consistency(self) -> None:
        """What the measuring core always makes true (schema.check_dataclass runs it)."""
        if bool(self.batch) != bool(self.throughput_ms):
            found = "is 0" if not self.batch else f"is {self.batch}"
            what = "back-to-back batches" if self.throughput_ms else "no back-to-back batch"
            raise SchemaError("batch", f"{found}, but throughput_ms holds {what}")
        if self.events_ms and self.source != "cupti":
            raise SchemaError(
                "events_ms", f"holds events beside CUPTI's records, but source is {self.source!r}"
            )
        if self.events_ms and len(self.events_ms) != len(self.samples_ms):
            raise SchemaError(
                "events_ms",
                f"has {len(self.events_ms)} samples, one per operation, but samples_ms has "
                f"{len(self.samples_ms)}",
            )
        if len(self.gpus) > 2:
            raise SchemaError("gpus", f"names {len(self.gpus)} GPUs: an operation runs on 1 or 2")

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
        route = " → ".join(f"GPU {index}" for index in self.gpus)
        qualifiers = [q for q in (self.kind, OPERATION_QUALIFIERS.get(self.operation), route) if q]
        return f"{self.name} ({', '.join(qualifiers)})" if qualifiers else self.name


class UnifiedMemoryCounter(TypedDict):
    """One of CUPTI's unified-memory counters over a run: its records' count, the total,
    smallest and largest value (bytes migrated, faults per group) and their time."""

    count: Count
    total: Count
    min: Count
    max: Count
    time_ms: Milliseconds


Percent = Annotated[float, Range(0, 100, low_open=True, unit="%")]


@dataclass
class TimingInfo:
    """Where a run's figures came from, and what CUPTI added."""

    source: Literal["cupti", "events"]  # GPU activities: CUPTI's records or gated CUDA events
    note: str  # why events were used, or ""
    event_overhead_ms: Milliseconds | None  # median interval of gated empty event pairs
    # CUPTI's unified-memory counters over the whole run, by name
    unified_memory: dict[str, UnifiedMemoryCounter] | None
    unified_memory_note: str | None  # why the counters are missing, if they are
    # where the host thread ran (memprof.affinity's line); None: not recorded (older files)
    host_affinity: str | None = None
    # Repetitions until the noise target (memprof.core.measure.Repetitions): each measurement
    # repeated until its median's noise was at most max_noise_pct percent, or time_cap_s was
    # spent on it, or max_count repetitions were done. None: exactly --repeat N times (and in
    # files of older memprof).
    max_noise_pct: Percent | None = None
    time_cap_s: Seconds | None = None
    max_count: Count | None = None

    def check_consistency(self) -> None:
        """A counter's count, total, smallest and largest value agree (schema runs it)."""
        for name, counter in (self.unified_memory or {}).items():
            _check_counter(counter, f"unified_memory.{name}")


def _check_counter(counter: UnifiedMemoryCounter, where: str) -> None:
    count, total, smallest, largest = (counter[k] for k in ("count", "total", "min", "max"))
    if count == 0:
        for key in ("total", "min", "max", "time_ms"):
            if counter[key]:
                raise SchemaError(f"{where}.{key}", f"is {counter[key]}, but count is 0")
        return
    if smallest < 1:  # a record migrates bytes, or counts a fault: never nothing
        raise SchemaError(f"{where}.min", f"is {smallest}, but each of its {count} records is one")
    if smallest > largest:
        raise SchemaError(f"{where}.min", f"is {smallest}, more than max ({largest})")
    if not count * smallest <= total <= count * largest:
        raise SchemaError(
            f"{where}.total",
            f"is {total}, but {count} records of {smallest} to {largest} make "
            f"{count * smallest} to {count * largest}",
        )


@dataclass
class Check:
    """One verification of a GPU result against numpy."""

    name: str
    passed: bool
    elements: Count
    detail: str  # "Check result success!" or the first mismatch


def _plain(value: Any) -> Any:
    """numpy values (a bool from a comparison, an int64, an array) as plain Python values."""
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} cannot be saved in a result")


class MissingMeasurement(KeyError):
    """Result.find found no measurement, or several, where a summary needs exactly one."""

    def __init__(self, command: str, wanted: str, count: int) -> None:
        super().__init__(command, wanted, count)
        self.command, self.wanted, self.count = command, wanted, count

    def __str__(self) -> str:
        return (
            f"{self.count} measurements with {self.wanted} in the {self.command!r} result "
            "(expected exactly one)"
        )


@dataclass(frozen=True)
class ResultShape:
    """What one command's saved Result must hold (its experiment declares it): the types of
    its parameters and extra, the (group, operation) pairs it may record, and those every
    run records."""

    params: type
    extra: type
    allowed: frozenset[tuple[str, str]]
    required: frozenset[tuple[str, str]]
    # what its values must say together: SchemaError naming the field that contradicts
    check: Callable[[Result], None] = lambda result: None


ShapeOf = Callable[[str], "ResultShape | None"]  # a command's shape; None: not a known command


@dataclass
class Result:
    """Everything one command measured, enough to render it again on any machine."""

    command: str
    parameters: Any  # the experiment's Params (a frozen dataclass)
    device: DeviceFacts | None
    measurements: list[Measurement] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    extra: Any = None  # the experiment's Extra (a dataclass): what its summary needs besides
    timing: TimingInfo | None = None
    # each GPU the run used, as NVML saw it (memprof.core.nvml); None: files from before it
    gpu_states: list[GpuState] | None = None
    schema_version: Count = SCHEMA_VERSION
    # Made for this process (never taken for a file that lacks them: see schema.check_dataclass).
    memprof_version: str = field(default_factory=lambda: __version__)
    pid: Count = field(default_factory=os.getpid)
    created_at: str = field(
        default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds")
    )
    host: str = field(default_factory=platform.node)

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)

    def gpu_state(self, index: int | None = None) -> GpuState | None:
        """The recorded state of GPU `index` (the run's own GPU where None), if any."""
        if index is None and self.device is not None:
            index = self.device.index
        return next((s for s in self.gpu_states or [] if s.index == index), None)

    def find(
        self,
        operation: str,
        kind: str | None = None,
        group: Group | None = None,
        byte_count: int | None = None,
    ) -> Measurement:
        """The one measurement of this operation (and kind, group, size): MissingMeasurement
        (a KeyError) if there is none or more than one."""
        matches = [
            m
            for m in self._by_operation().get(operation, ())
            if m.operation == operation
            and (kind is None or m.kind == kind)
            and (group is None or m.group == group)
            and (byte_count is None or m.bytes == byte_count)
        ]
        if len(matches) != 1:
            wanted = {"operation": operation, "kind": kind, "group": group, "bytes": byte_count}
            described = ", ".join(f"{k}={v!r}" for k, v in wanted.items() if v is not None)
            raise MissingMeasurement(self.command, described, len(matches))
        return matches[0]

    def _by_operation(self) -> dict[str, list[Measurement]]:
        """The measurements by operation, made once per list: a summary looks up a row per
        size and kind, and a large file must not cost a pass over everything per row."""
        key = (id(self.measurements), len(self.measurements))
        cached = self.__dict__.get("_index")
        if cached is None or cached[0] != key:
            index: dict[str, list[Measurement]] = {}
            for m in self.measurements:
                index.setdefault(m.operation, []).append(m)
            cached = self.__dict__["_index"] = (key, index)
        return cached[1]

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, default=_plain)

    def save(self, path: Path) -> None:
        path.write_text(self.to_json() + "\n")

    @classmethod
    def from_json(cls, text: str, shape_of: ShapeOf, name: str = "result") -> Result:
        """A Result from JSON text, every value checked against the command's shape:
        InvalidArgument naming `name` and the field if not."""
        try:
            return _checked_result(_parse(text), shape_of)
        except SchemaError as error:
            # "run.json is not a memprof result: ...", "run.json: measurements[3].bytes is ..."
            raise InvalidArgument(f"{name}{': ' if error.where else ' '}{error}") from None

    @classmethod
    def load(cls, path: Path, shape_of: ShapeOf) -> Result:
        """A Result file, checked as from_json does; any problem is one line naming the file."""
        raw = _read_result_bytes(path)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            byte = raw[error.start]
            raise InvalidArgument(
                f"{path} is not a memprof result: not UTF-8 text "
                f"(byte 0x{byte:02x} at offset {error.start})"
            ) from None
        return cls.from_json(text, shape_of, str(path))


# What a path that is not a file is, for the refusal: a pipe (`<(...)`, /dev/stdin piped) is
# read like a file, at most MAX_RESULT_BYTES of it.
_NOT_FILES = {
    stat.S_ISCHR: "a character device",
    stat.S_ISBLK: "a block device",
    stat.S_ISSOCK: "a socket",
}


def _read_result_bytes(path: Path) -> bytes:
    """The bytes of a result file or pipe: InvalidArgument for a device (/dev/zero, a
    terminal) or anything larger than a result can be, before reading it whole."""
    try:
        # O_NONBLOCK: opening a FIFO nobody writes to does not wait for a writer
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as error:
        raise InvalidArgument(f"cannot read {path}: {error.strerror}") from error
    try:
        mode = os.fstat(descriptor).st_mode
        for is_kind, what in _NOT_FILES.items():
            if is_kind(mode):
                raise InvalidArgument(f"cannot read {path}: it is {what}, not a result file")
        if stat.S_ISDIR(mode):
            raise InvalidArgument(f"cannot read {path}: Is a directory")
        os.set_blocking(descriptor, True)
        with open(descriptor, "rb", closefd=False) as file:
            raw = file.read(MAX_RESULT_BYTES + 1)
    except OSError as error:
        raise InvalidArgument(f"cannot read {path}: {error.strerror}") from error
    finally:
        os.close(descriptor)
    if len(raw) > MAX_RESULT_BYTES:
        raise InvalidArgument(
            f"{path} is not a memprof result: larger than {MAX_RESULT_BYTES >> 20} MiB"
        )
    if not raw:
        raise InvalidArgument(f"{path} is not a memprof result: it is empty")
    return raw


def _parse(text: str) -> dict[str, Any]:
    """The JSON object of a result file, at the schema version this memprof writes."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise SchemaError(
            "",
            f"is not a memprof result: invalid JSON at line {error.lineno} column "
            f"{error.colno} ({error.msg})",
        ) from None
    except RecursionError:
        raise SchemaError("", "is not a memprof result: JSON nested too deeply") from None
    except ValueError:  # an integer longer than Python converts (4300 digits by default)
        digits = sys.get_int_max_str_digits()
        raise SchemaError(
            "", f"is not a memprof result: it holds a number of more than {digits} digits"
        ) from None
    if not isinstance(data, dict):
        raise SchemaError(
            "", f"is not a memprof result: the JSON is {describe(data)}, not an object"
        )
    if "schema_version" not in data:
        raise SchemaError("", "is not a memprof result: no schema_version")
    version = check(data["schema_version"], int, "schema_version")
    if version not in READABLE_SCHEMA_VERSIONS:
        raise SchemaError(
            "",
            f"has result schema version {version}, which this memprof {__version__} cannot read "
            f"(it reads versions {', '.join(map(str, READABLE_SCHEMA_VERSIONS))})",
        )
    return _upgrade(data)


def _upgrade(data: dict[str, Any]) -> dict[str, Any]:
    """An older file in today's shape, so one schema checks them all."""
    if data["schema_version"] == 1:
        extra = data.get("extra")
        if data.get("command") in ("compare", "streams") and isinstance(extra, dict):
            extra = {("bytes_per_array" if k == "bytes" else k): v for k, v in extra.items()}
            data = {**data, "extra": extra}
    if data["schema_version"] in (1, 2) and isinstance(data.get("measurements"), list):
        data = {**data, "measurements": [_gpus_apart(m) for m in data["measurements"]]}
    return {**data, "schema_version": SCHEMA_VERSION}


# Version 2 wrote the GPUs into the operation: "ce_on 0->1" (peer), "together h2d 1"
# (hostlink), "portable d2h 0" (portable).
_OPERATION_OF_MODE = {"alone": "{direction}", "together": "{direction}_at_once"}


def _gpus_apart(measurement: Any) -> Any:
    """A version-2 multi-GPU measurement with its GPUs in `gpus`; anything else as it was."""
    if not isinstance(measurement, dict) or not isinstance(measurement.get("operation"), str):
        return measurement
    words = measurement["operation"].split(" ")
    if len(words) == 2 and "->" in words[1]:  # peer: "ce_on 0->1"
        source, _, destination = words[1].partition("->")
        if source.isdigit() and destination.isdigit():
            return {**measurement, "operation": words[0], "gpus": [int(source), int(destination)]}
    if len(words) == 3 and words[1] in ("h2d", "d2h") and words[2].isdigit():
        mode = _OPERATION_OF_MODE.get(words[0], "{direction}")  # portable: the buffer's kind
        operation = mode.format(direction=words[1])
        return {**measurement, "operation": operation, "gpus": [int(words[2])]}
    return measurement


def _checked_result(data: dict[str, Any], shape_of: ShapeOf) -> Result:
    """Result from a parsed file: the command first, since parameters and extra depend on it."""
    for key in ("command", "parameters"):
        if key not in data:
            raise SchemaError(key, "is missing")
    command = check(data["command"], str, "command")
    shape = shape_of(command)
    if shape is None:
        raise SchemaError("command", f"is {describe(command)}, which this memprof cannot render")
    # A parameter added after the file was written takes its default: what memprof did before.
    parameters = check_dataclass(data["parameters"], shape.params, "parameters")
    extra = check_dataclass(data.get("extra", {}), shape.extra, "extra")
    rest = {k: v for k, v in data.items() if k not in ("parameters", "extra")}
    result = check_dataclass(rest | {"parameters": {}, "extra": {}}, Result, "")  # checked above
    result.parameters, result.extra = parameters, extra
    _check_declared(result, shape)
    shape.check(result)
    return result


def _check_declared(result: Result, shape: ResultShape) -> None:
    """Every measurement one the command records, and every one it always records present."""
    found = set()
    for index, m in enumerate(result.measurements):
        if (m.group, m.operation) not in shape.allowed:
            raise SchemaError(
                f"measurements[{index}]",
                f"is {m.group} {m.operation!r}, which {result.command} does not record",
            )
        found.add((m.group, m.operation))
    for group, operation in sorted(shape.required - found):
        raise SchemaError(
            "measurements",
            f"has no {group} {operation!r}, which every {result.command} run records",
        )
