"""Plain Result data and its JSON round trip. Experiments produce it, renderers read it.

A Result file may come from anywhere (another machine, an older memprof, a hand edit), so loading
checks every value against the annotations below (see memprof/schema.py) and builds the command's
summary once: a bad file is one line naming the file and the field, before anything is printed.
"""

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
from memprof.model.device import DeviceFacts
from memprof.model.schema import (
    ByteCount,
    Count,
    Milliseconds,
    NonNegative,
    Samples,
    SchemaError,
    check,
    check_dataclass,
    check_record,
    describe,
)
from memprof.model.statistics import Statistics

# 2: `extra` is declared per experiment; compare's and streams' "bytes" is "bytes_per_array".
SCHEMA_VERSION = 2
READABLE_SCHEMA_VERSIONS = (1, 2)  # older versions are upgraded when loaded (_upgrade)

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

    source: Literal["cupti", "events"]  # GPU activities: CUPTI's records or gated CUDA events
    note: str  # why events were used, or ""
    event_overhead_ms: Milliseconds | None  # median interval of gated empty event pairs
    # CUPTI's unified-memory counters over the whole run: name -> count, total, min, max, time_ms
    unified_memory: dict[str, dict[str, NonNegative]] | None
    unified_memory_note: str | None  # why the counters are missing, if they are
    # where the host thread ran (memprof.affinity's line); None: not recorded (older files)
    host_affinity: str | None = None


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
            for m in self.measurements
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

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, default=_plain)

    @classmethod
    def from_json(cls, text: str, name: str = "result") -> Result:
        """A Result from JSON text, every value checked: InvalidArgument naming `name` if not."""
        try:
            result = _checked_result(_parse(text))
        except SchemaError as error:
            # "run.json is not a memprof result: ...", "run.json: measurements[3].bytes is ..."
            raise InvalidArgument(f"{name}{': ' if error.where else ' '}{error}") from None
        _check_summary(result, name)
        return result

    def save(self, path: Path) -> None:
        path.write_text(self.to_json() + "\n")

    @classmethod
    def load(cls, path: Path) -> Result:
        """A Result file, checked as from_json does; any problem is one line naming the file."""
        try:
            raw = path.read_bytes()
        except OSError as error:
            raise InvalidArgument(f"cannot read {path}: {error.strerror}") from error
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            byte = raw[error.start]
            raise InvalidArgument(
                f"{path} is not a memprof result: not UTF-8 text "
                f"(byte 0x{byte:02x} at offset {error.start})"
            ) from None
        return cls.from_json(text, str(path))


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
        data = {**data, "schema_version": SCHEMA_VERSION}
    return data


def _checked_result(data: dict[str, Any]) -> Result:
    """Result from a parsed file: the command first, since parameters and extra depend on it."""
    from memprof.experiments import EXPERIMENTS

    for key in ("command", "parameters"):
        if key not in data:
            raise SchemaError(key, "is missing")
    command = check(data["command"], Literal[tuple(EXPERIMENTS)], "command")
    module = EXPERIMENTS[command]
    # A parameter added after the file was written takes its default: what memprof did before.
    parameters = check_dataclass(data["parameters"], module.PARAMS, "parameters")
    optional = getattr(module, "OPTIONAL_EXTRA", frozenset())  # added later, or not always known
    extra = check_record(data.get("extra", {}), module.EXTRA_FIELDS, "extra", optional)
    rest = {k: v for k, v in data.items() if k not in ("parameters", "extra")}
    result = check_dataclass(rest | {"parameters": {}, "extra": {}}, Result, "")  # checked above
    result.parameters = asdict(parameters)
    result.extra = extra
    return result


def _check_summary(result: Result, name: str) -> None:
    """Build the command's summary once, so a file lacking what it needs fails here, in one line."""
    from memprof.experiments import EXPERIMENTS

    try:
        EXPERIMENTS[result.command].summarize(result)
    except MissingMeasurement as error:
        raise InvalidArgument(
            f"{name}: the {result.command} summary needs exactly one measurement with "
            f"{error.wanted}; the file has {error.count}"
        ) from None
    except (
        LookupError,  # a key or index the summary expected
        StopIteration,  # next() over rows that are not there
        ValueError,
        ArithmeticError,  # a zero median divided by
        TypeError,
        AttributeError,  # device null where the summary reads the GPU's facts
    ) as error:
        raise InvalidArgument(
            f"{name}: cannot build the {result.command} summary from this file "
            f"({type(error).__name__}: {error})"
        ) from None
