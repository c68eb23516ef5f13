"""Plain Result data and its JSON round trip. Experiments produce it, renderers read it.

A file may come from anywhere: loading decodes it (model.schema), upgrades an older version
(model.upgrade) and runs its command's checks; a bad file is one line naming the field.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import os
import platform
import re
import stat
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from operator import attrgetter
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, TypedDict

import msgspec

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
    describe,
    from_msgspec,
    text_fields,
    totals_possible,
)
from memprof.model.statistics import Statistics
from memprof.version import __version__

# 2: `extra` is declared per experiment; compare's and streams' "bytes" is "bytes_per_array".
# 3: a measurement names its GPUs (`gpus`) instead of writing them into its operation.
# 4: `extra` holds nothing the parameters or the measurements determine (sizes, counts...).
SCHEMA_VERSION = 4
READABLE_SCHEMA_VERSIONS = (1, 2, 3, 4)  # older versions are upgraded when loaded
# A result of 100,000 measurements is about 40 MB: anything this large is not one.
MAX_RESULT_BYTES = 256 << 20
# A file of several Results: what `--json` saves for `--device all` (each GPU's, then all's).
RUN_SET_FORMAT = "memprof results"
RUN_SET_VERSION = 1

# gpu: an operation on the GPU (nvprof's "GPU activities")
# api: a driver call timed on the host clock or by CUPTI (nvprof's "API calls")
# host: host-only work timed on the host clock (numpy allocation, CPU reads)
# span: several operations timed together with events (an end-to-end flow)
Group = Literal["gpu", "api", "host", "span"]
# where samples_ms came from: "cupti" (the GPU's record), "events" (gated CUDA events),
# "host" (the host clock)
Source = Literal["cupti", "events", "host"]


# Operations whose profile rows must stay apart from the plain ones of the same name.
OPERATION_QUALIFIERS = {
    "kernel_first": "first launch",
    # pinlimit's: the same copies with nothing and with everything pinned, and one call over
    # what was registered in chunks
    "copy_idle": "nothing pinned",
    "h2d_idle": "nothing pinned",
    "copy_held": "all pinned",
    "h2d_held": "all pinned",
    "register_whole": "at once",
    "unregister_whole": "at once",
}


class Measurement(msgspec.Struct, forbid_unknown_fields=True):
    """Every timed sample of one operation on one memory kind at one size."""

    group: Group
    name: str  # as the profile shows it: "[CUDA memcpy HtoD]", "cuMemAlloc", "sumArraysGPU(...)"
    operation: str  # stable key the summaries look up: "h2d", "d2h", "kernel", "alloc", ...
    kind: str | None  # memory kind ("pageable", "pinned", ...) or None
    bytes: ByteCount  # bytes each call moves or allocates (0 where that means nothing)
    samples_ms: Samples = []  # one operation each (latency)
    source: Source = "events"  # where samples_ms came from
    events_ms: list[Milliseconds] = []  # gated events beside CUPTI's
    throughput_ms: list[Milliseconds] = []  # per operation, back to back
    batch: Count = 0  # operations per throughput batch
    # The GPUs it ran between, in the order the operation names them: (1,) for GPU 1's copy
    # from the host, (0, 1) for data moving from GPU 0 to GPU 1; () on a run of one GPU.
    gpus: Annotated[tuple[GpuIndex, ...], msgspec.Meta(max_length=2)] = ()

    def check_consistency(self) -> None:
        """What the measuring core always makes true (the loader runs it on every one)."""
        if not self.samples_ms:  # its default, where a file leaves it out
            raise SchemaError("samples_ms", "is missing or empty: a measurement holds a sample")
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


class TimingInfo(msgspec.Struct, forbid_unknown_fields=True):
    """Where a run's figures came from, and what CUPTI added."""

    source: Literal["cupti", "events"]  # GPU activities: CUPTI's records or gated CUDA events
    note: str  # why events were used, or ""
    event_overhead_ms: Milliseconds | None  # median interval of gated empty event pairs
    # CUPTI's unified-memory counters over the whole run, by name
    unified_memory: dict[str, UnifiedMemoryCounter] | None
    unified_memory_note: str | None  # why the counters are missing, if they are
    # where the host thread ran (memprof.affinity's line); None: not recorded (older files)
    host_affinity: str | None = None
    # The noise target (memprof.core.repetitions): repeated until the median's noise is at most
    # max_noise_pct, or time_cap_s, or max_count. None: exactly --repeat N (and older files).
    max_noise_pct: Percent | None = None
    time_cap_s: Seconds | None = None
    max_count: Count | None = None

    def check_consistency(self) -> None:
        """A counter's count, total, smallest and largest value agree."""
        for name, counter in (self.unified_memory or {}).items():
            where = f"unified_memory.{name}"
            count, total, least, most = (counter[k] for k in ("count", "total", "min", "max"))
            if count == 0:
                for key in ("total", "min", "max", "time_ms"):
                    if counter[key]:
                        raise SchemaError(f"{where}.{key}", f"is {counter[key]}, but count is 0")
                continue
            if least < 1:  # a record migrates bytes, or counts a fault: never nothing
                raise SchemaError(
                    f"{where}.min", f"is {least}, but each of its {count} records is one"
                )
            if least > most:
                raise SchemaError(f"{where}.min", f"is {least}, more than max ({most})")
            low, high = totals_possible(count, least, most)
            if not low <= total <= high:
                raise SchemaError(
                    f"{where}.total",
                    f"is {total}, but {count} records of {least} to {most} make {low} to {high}",
                )


class Check(msgspec.Struct, forbid_unknown_fields=True):
    """One verification of a GPU result against numpy."""

    name: str
    passed: bool
    elements: Count
    detail: str  # "Check result success!" or the first mismatch

    def check_consistency(self) -> None:
        """A check that passed never reads as a failure, nor one that failed as a success."""
        said = self.detail.lower()
        if self.passed and any(word in said for word in FAILURE_WORDS):
            raise SchemaError("passed", f"is true, but detail says it failed: {self.detail!r}")
        if not self.passed and self.detail.startswith(PASSED_DETAIL):
            raise SchemaError("passed", f"is false, but detail says {self.detail!r}")


PASSED_DETAIL = "Check result success!"  # the seeds' words for a result that matched
# How memprof's verifications say they failed (memprof.core.verify and each experiment's).
FAILURE_WORDS = ("mismatch", "do not match", "differ", "not written", "never", "nan or inf", "!=")


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
    """What one command's saved Result must hold: its parameters' and extra's types, its
    cross-checks, and what an older file's extra held that is now derived (model.upgrade)."""

    params: type
    extra: type
    check: Callable[[Result], None] = lambda result: None
    derived: Callable[[Result], dict[str, Any]] = lambda result: {}


ShapeOf = Callable[[str], "ResultShape | None"]  # a command's shape; None: not a known command

# An ISO 8601 time with its offset, as datetime.isoformat() writes it (ASCII digits only).
CreatedAt = Annotated[
    str,
    msgspec.Meta(
        pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?"
        r"(Z|[+-][0-9]{2}:[0-9]{2})$",
        description="a date and time with its offset, as 2026-11-25T15:26:52+00:00",
    ),
]

# A version as memprof's package writes it (0.1.0, 0.2.0.dev3+gabc1234): one word, not prose
MemprofVersion = Annotated[
    str,
    msgspec.Meta(
        pattern=r"^[0-9][0-9A-Za-z.+-]*$",
        max_length=64,
        description="the version of memprof that saved it, as 0.1.0",
    ),
]
# The machine's name as platform.node() gives it (a DNS name is at most 253 characters)
HostName = Annotated[str, msgspec.Meta(max_length=253, description="the machine's name")]


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class Result(msgspec.Struct, dict=True):
    """Everything one command measured, enough to render it again on any machine."""

    command: str
    parameters: Any  # the experiment's Params (a frozen dataclass)
    device: DeviceFacts | None
    measurements: list[Measurement] = []
    checks: list[Check] = []
    extra: Any = None  # the experiment's Extra (a dataclass): what its summary needs besides
    timing: TimingInfo | None = None
    # each GPU the run used, as NVML saw it (memprof.core.nvml); None: files from before it
    gpu_states: list[GpuState] | None = None
    schema_version: Count = SCHEMA_VERSION
    # the schema version the run was first saved in, where an older memprof saved it: what
    # its values can be held to (before version 2, warm-ups were recorded too)
    first_schema_version: Annotated[int, msgspec.Meta(ge=1, le=SCHEMA_VERSION)] | None = None
    # Made for this process: a file must hold its own (never taken from these defaults).
    memprof_version: MemprofVersion = msgspec.field(default_factory=lambda: __version__)
    pid: Count = msgspec.field(default_factory=os.getpid)
    created_at: CreatedAt = msgspec.field(default_factory=_now)
    host: HostName = msgspec.field(default_factory=platform.node)

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)

    @property
    def written_as(self) -> int:
        """The schema version the run was first saved in (this one's, for a fresh Result)."""
        return self.first_schema_version or self.schema_version

    @property
    def gpu_index(self) -> int | None:
        """The GPU the run measured: its facts' index, else (a trace has none) the one asked."""
        if self.device is not None:
            return self.device.index
        asked = getattr(self.parameters, "device", None)
        return asked if isinstance(asked, int) and not isinstance(asked, bool) else None

    @property
    def gpu_name(self) -> str | None:
        """The GPU's name: its device facts', else the one a traced program's run recorded."""
        if self.device is not None:
            return self.device.name
        name = getattr(self.extra, "gpu_name", None)
        return name if isinstance(name, str) and name else None

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
        """The one measurement of this operation (and kind, group, size), or MissingMeasurement."""
        matches = [
            m
            for m in self._by_operation().get(operation, ())
            if (kind is None or m.kind == kind)
            and (group is None or m.group == group)
            and (byte_count is None or m.bytes == byte_count)
        ]
        if len(matches) != 1:
            wanted = {"operation": operation, "kind": kind, "group": group, "bytes": byte_count}
            described = ", ".join(f"{k}={v!r}" for k, v in wanted.items() if v is not None)
            raise MissingMeasurement(self.command, described, len(matches))
        return matches[0]

    def _by_operation(self) -> dict[str, list[Measurement]]:
        """The measurements by operation, made once per list, not once per row looked up."""
        key = (id(self.measurements), len(self.measurements))
        cached = self.__dict__.get("_index")
        if cached is None or cached[0] != key:
            index: dict[str, list[Measurement]] = {}
            for m in self.measurements:
                index.setdefault(m.operation, []).append(m)
            cached = self.__dict__["_index"] = (key, index)
        return cached[1]

    def __repr__(self) -> str:
        """Short: the command, GPU, date and size, and a line per table of its summary."""
        headline = (
            f"<memprof {self.command!r} Result: {self.gpu_name or 'no GPU recorded'}, "
            f"{self.created_at}, {len(self.measurements)} measurements, "
            f"{'verified' if self.passed else 'FAILED verification'}>"
        )
        lines = Result.views.table_lines(self) if Result.views is not None else []
        return "\n".join([headline, *(f"  {line}" for line in lines)])

    # The registry, which this layer may not import: memprof.experiments.base sets it.
    views: ClassVar[Any] = None

    def to_frame(self) -> Any:
        """A pandas DataFrame of the CSV's rows and columns (memprof.output.frames)."""
        return self._views().result_frame(self)

    def _repr_html_(self) -> str | None:
        """What a notebook shows (memprof.output.notebook)."""
        return self._views().result_html(self) if Result.views is not None else None

    def _views(self) -> Any:
        if Result.views is None:
            raise TypeError(
                "this Result's frame and tables need memprof.experiments: import memprof "
                "and use memprof.load or memprof.run, which load it"
            )
        return Result.views

    def to_json(self) -> str:
        return _ascii_json(self)

    def save(self, path: Path) -> None:
        path.write_text(self.to_json() + "\n")

    @classmethod
    def from_json(cls, text: str | bytes, shape_of: ShapeOf, name: str = "result") -> Result:
        """A Result from JSON text, every value checked: InvalidArgument naming the field."""
        raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
        _require_utf8(raw, name)  # a str's lone surrogate too: msgspec's error names no place
        with _collector_paused():
            return _checked(raw, _as_today(raw), shape_of, name)

    @classmethod
    def load(cls, path: Path, shape_of: ShapeOf) -> Result:
        """A Result file, checked as from_json does; a file of several is refused."""
        found = cls.load_all(path, shape_of)
        if len(found) > 1:
            raise InvalidArgument(
                f"{path} holds {len(found)} results (a run of --device all), not one: "
                "memprof report shows them all, memprof.load_all reads them"
            )
        return found[0]

    @classmethod
    def load_all(cls, path: Path, shape_of: ShapeOf) -> list[Result]:
        """Every Result of a file (one, or each of a RUN_SET_FORMAT file), each checked."""
        raw = _read_result_bytes(path)
        _require_utf8(raw, str(path))
        if raw.startswith(b"\xef\xbb\xbf"):  # memprof never writes one; an editor may
            raise InvalidArgument(
                f"{path} is not a memprof result as saved: it starts with a UTF-8 byte-order "
                "mark (an editor's): save it without one"
            )
        with _collector_paused():
            today = _as_today(raw)  # a Result (most files): no file of several, read once
            if today is None and _is_run_set(raw):
                found = [
                    cls.from_json(bytes(member), shape_of, f"{path}: results[{index}]")
                    for index, member in enumerate(_run_set_members(raw, str(path)))
                ]
            else:
                found = [_checked(raw, today, shape_of, str(path))]
        for result in found:
            result.__dict__["_loaded_from"] = Path(os.path.abspath(path))
        return found

    @property
    def loaded_from(self) -> Path | None:
        """The file this Result was read from (None: made otherwise): never written over."""
        return self.__dict__.get("_loaded_from")


def results_to_json(results: Sequence[Result]) -> str:
    """Several Results as one file (RUN_SET_FORMAT), ASCII only as Result.to_json writes."""
    document = {"format": RUN_SET_FORMAT, "format_version": RUN_SET_VERSION, "results": results}
    return _ascii_json(document)


def _ascii_json(value: Any) -> str:
    """JSON, ASCII only: a file people `cat` never carries a control or bidi character."""
    encoded = msgspec.json.format(msgspec.json.encode(value, enc_hook=_plain), indent=1)
    return _NOT_PLAIN_ASCII.sub(_escaped, encoded.decode())


_NOT_PLAIN_ASCII = re.compile(r"[^\x00-\x7e]")  # msgspec already escapes what is under 0x20


def _escaped(found: re.Match) -> str:
    return json.dumps(found[0])[1:-1]  # "\\u2192", or a surrogate pair beyond the BMP


def _plain(value: Any) -> Any:
    """numpy values (a bool from a comparison, an int64, an array) as plain Python values."""
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} cannot be saved in a result")


# -- reading a file --------------------------------------------------------------------------------

# Paths refused as no file; a pipe (`<(...)`) is read like one, at most MAX_RESULT_BYTES.
_NOT_FILES = {
    stat.S_ISCHR: "a character device",
    stat.S_ISBLK: "a block device",
    stat.S_ISSOCK: "a socket",
}
_READ_CHUNK = 1 << 20  # a pipe is read in chunks: no buffer of MAX_RESULT_BYTES up front


def _read_result_bytes(path: Path) -> bytes:
    """The bytes of a result file or pipe; a device or anything too large is refused first."""
    try:
        # O_NONBLOCK: opening a FIFO nobody writes to does not wait for a writer
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as error:
        stdin = " (standard input is /dev/stdin)" if str(path) == "-" else ""
        raise InvalidArgument(f"cannot read {path}: {error.strerror}{stdin}") from error
    except ValueError as error:  # a NUL in the name (from Python: no shell passes one)
        raise InvalidArgument(f"cannot read {path}: {error}") from error
    try:
        status = os.fstat(descriptor)
        for is_kind, what in _NOT_FILES.items():
            if is_kind(status.st_mode):
                raise InvalidArgument(f"cannot read {path}: it is {what}, not a result file")
        if stat.S_ISDIR(status.st_mode):
            raise InvalidArgument(f"cannot read {path}: Is a directory")
        too_large = f"{path} is not a memprof result: larger than {MAX_RESULT_BYTES >> 20} MiB"
        if stat.S_ISREG(status.st_mode) and status.st_size > MAX_RESULT_BYTES:
            raise InvalidArgument(too_large)
        os.set_blocking(descriptor, True)
        chunks, size = [], 0
        # a file in one read (and no join), as large as it says it is and one byte more
        wanted = status.st_size + 1 if stat.S_ISREG(status.st_mode) else _READ_CHUNK
        while size <= MAX_RESULT_BYTES:
            chunk = os.read(descriptor, max(wanted, _READ_CHUNK))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as error:
        raise InvalidArgument(f"cannot read {path}: {error.strerror}") from error
    finally:
        os.close(descriptor)
    if size > MAX_RESULT_BYTES:
        raise InvalidArgument(too_large)
    if not size:
        raise InvalidArgument(f"{path} is not a memprof result: it is empty")
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


class _RunSetFile(msgspec.Struct, forbid_unknown_fields=True):
    format: str
    format_version: int
    results: list[msgspec.Raw]


def _is_run_set(raw: bytes) -> bool:
    """Whether the bytes are a JSON object naming a `format` (a Result has none)."""
    try:
        return msgspec.json.decode(raw, type=_Head).format is not msgspec.UNSET
    except (msgspec.DecodeError, RecursionError):  # a ValidationError too: not an object
        return False


def _run_set_members(raw: bytes, name: str) -> list[msgspec.Raw]:
    """The members of a file of several Results, its envelope checked first."""
    try:
        found = msgspec.json.decode(raw, type=_RunSetFile)
    except msgspec.ValidationError as error:
        problem = from_msgspec(error, _plain_json(raw))
        raise InvalidArgument(f"{name}: {problem}") from None
    if found.format != RUN_SET_FORMAT:
        raise InvalidArgument(
            f"{name} is not a memprof result: its format is {describe(found.format)}, "
            f"not {RUN_SET_FORMAT!r}"
        )
    if found.format_version != RUN_SET_VERSION:
        raise InvalidArgument(
            f"{name} has {RUN_SET_FORMAT!r} version {found.format_version}, which this memprof "
            f"{__version__} cannot read (it reads version {RUN_SET_VERSION})"
        )
    if not found.results:
        raise InvalidArgument(f"{name}: results is empty: expected one Result or more")
    try:
        _refuse_repeated_keys(raw, found)
    except SchemaError as error:
        raise InvalidArgument(f"{name} {error}") from None
    return found.results


class _Head(msgspec.Struct):
    """What a file says first: its version and command (a file of several: its format)."""

    schema_version: Any = msgspec.UNSET
    command: Any = msgspec.UNSET
    format: Any = msgspec.UNSET


@functools.cache
def _result_file() -> type:
    """Result as a file holds it: no default for the fields made per process (pid, host...)."""
    fields: list[tuple] = []
    for field in msgspec.structs.fields(Result):
        made_here = field.default_factory not in (msgspec.NODEFAULT, list, dict)
        if field.required or made_here:
            fields.append((field.name, field.type))
        else:
            default = field.default
            if default is msgspec.NODEFAULT:
                default = msgspec.field(default_factory=field.default_factory)
            fields.append((field.name, field.type, default))
    return msgspec.defstruct(
        "ResultFile", fields, forbid_unknown_fields=True, kw_only=True, module=__name__
    )


def _require_utf8(raw: bytes, name: str) -> None:
    """InvalidArgument naming the first byte that is not UTF-8 (memprof writes ASCII)."""
    try:
        if not raw.isascii():
            raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidArgument(
            f"{name} is not a memprof result: not UTF-8 text "
            f"(byte 0x{raw[error.start]:02x} at offset {error.start})"
        ) from None


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cycle collector off while a file is read and checked: decoding makes objects
    by the 10^5, none in a cycle, and each collection the allocations trigger walks all made
    so far (on a 100,000-measurement trace's decode, 270 ms with it, 130 ms without)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _as_today(raw: bytes) -> Any:
    """The bytes as a Result file of today's version holds them (most files), read once;
    None where they are not (an older version, a file of several, no Result at all)."""
    try:
        return msgspec.json.decode(raw, type=_result_file())
    except (msgspec.DecodeError, RecursionError):
        return None


def _checked(raw: bytes, today: Any, shape_of: ShapeOf, name: str) -> Result:
    """_decoded's Result, or InvalidArgument naming the file and the field."""
    try:
        return _decoded(raw, today, shape_of)
    except SchemaError as error:
        # "run.json is not a memprof result: ...", "run.json: measurements[3].bytes is ..."
        raise InvalidArgument(f"{name}{': ' if error.where else ' '}{error}") from None


def _decoded(raw: bytes, found: Any, shape_of: ShapeOf) -> Result:
    """A Result from a file's bytes and _as_today's reading of them: version and command
    first (the rest depends on them), an older version upgraded, then every check."""
    upgraded = found is None or found.schema_version != SCHEMA_VERSION
    if upgraded and (head := _head(raw)).schema_version == SCHEMA_VERSION:
        try:
            found = msgspec.json.decode(raw, type=_result_file())
        except msgspec.ValidationError as error:
            raise from_msgspec(error, _plain_json(raw), hint=_result_file()) from None
        upgraded = False
    if not upgraded:
        _refuse_repeated_keys(raw, found)
    else:
        from memprof.model import upgrade  # here: today's files (most) need none of it

        plain = _plain_json(raw)
        _refuse_repeated_keys(raw, plain)
        data = upgrade.to_today(plain, SCHEMA_VERSION)
        try:
            found = msgspec.convert(data, _result_file())
        except msgspec.ValidationError as error:
            raise from_msgspec(error, data, hint=_result_file()) from None
    command = found.command
    shape = shape_of(command)
    if shape is None:
        raise SchemaError("command", f"is {describe(command)}, which this memprof cannot render")
    result = Result(**{name: getattr(found, name) for name in Result.__struct_fields__})
    if upgraded and result.first_schema_version is None:
        result.first_schema_version = head.schema_version
    result.parameters = check(found.parameters, shape.params, "parameters")
    extra = found.extra if found.extra is not None else {}
    if upgraded:
        extra = upgrade.without_derived(extra, result, shape)
    result.extra = check(extra, shape.extra, "extra")
    _check_values(result)
    shape.check(result)
    if upgraded:
        upgrade.check_derived(found.extra or {}, result, shape)
    return result


def _head(raw: bytes) -> _Head:
    """The file's schema version and command, or why it is not a memprof result."""
    try:
        head = msgspec.json.decode(raw, type=_Head)
    except (msgspec.DecodeError, RecursionError) as error:  # a ValidationError too
        found = _plain_json(raw)  # where the JSON itself is wrong, refused here
        if not isinstance(found, dict):
            raise SchemaError(
                "", f"is not a memprof result: the JSON is {describe(found)}, not an object"
            ) from None
        raise from_msgspec(error, found) from None
    if head.schema_version is msgspec.UNSET:
        raise SchemaError("", "is not a memprof result: no schema_version")
    version = head.schema_version
    if type(version) is not int:
        raise SchemaError("schema_version", f"is {describe(version)}", "an integer")
    if version not in READABLE_SCHEMA_VERSIONS:
        raise SchemaError(
            "",
            f"has result schema version {version}, which this memprof {__version__} cannot read "
            f"(it reads versions {', '.join(map(str, READABLE_SCHEMA_VERSIONS))})",
        )
    if head.command is msgspec.UNSET:
        raise SchemaError("command", "is missing")
    if not isinstance(head.command, str):
        raise SchemaError("command", f"is {describe(head.command)}", "a string")
    return head


def _refuse_numbers_json_lacks(raw: bytes) -> None:
    """A file with NaN or Infinity (Python's json writes them): refused naming the field."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return  # not that: the caller says what is wrong
    if isinstance(data, dict) and data.get("schema_version") in READABLE_SCHEMA_VERSIONS:
        from memprof.model import upgrade

        today = upgrade.to_today(data, SCHEMA_VERSION)
        try:
            msgspec.convert(today, _result_file())
        except msgspec.ValidationError as error:
            raise from_msgspec(error, today, hint=_result_file()) from None


def _refuse_repeated_keys(raw: bytes, decoded: Any) -> None:
    """Refuse a key twice in one object: JSON readers differ on which one counts. Only a file
    with more colons (':' or '\\u003a') than its decoded form re-encoded is searched: a file
    leaving out fields that have defaults can hide a repeated key from the count."""
    colons = raw.count(b":")
    if b"\\" in raw and b"\\u003" in raw:  # rare (memprof escapes only control bytes); memchr first
        colons += raw.count(b"\\u003a") + raw.count(b"\\u003A")
    if colons <= _encoded_colons(decoded):
        return
    repeated: list[str] = []

    def pairs(found: list[tuple[str, Any]]) -> dict[str, Any]:
        made = dict(found)
        if len(made) < len(found):
            seen: set[str] = set()
            repeated.extend(key for key, _ in found if key in seen or seen.add(key))
        return made

    json.loads(raw, object_pairs_hook=pairs)
    if repeated:
        raise SchemaError(
            "",
            f"is not a memprof result: it names {describe(repeated[0])} as a key twice in one "
            "object (readers differ on which one counts)",
        )


def _encoded_colons(decoded: Any) -> int:
    """The colons of `decoded` written as JSON; a Result's measurements counted unwritten: a
    colon a field and those in their strings, as no number holds one (a 100,000-measurement
    trace's: 69 -> 41 ms, most of it writing its floats)."""
    texts = text_fields(Measurement)
    if (
        not isinstance(decoded, _result_file())  # its measurements: Measurements, decoded
        or texts is None
        or Measurement.__struct_config__.omit_defaults  # then not every field is written
    ):
        return msgspec.json.encode(decoded).count(b":")
    measurements = decoded.measurements
    rest = msgspec.json.encode(msgspec.structs.replace(decoded, measurements=[]))
    fields = len(Measurement.__struct_fields__) * len(measurements)
    strings = (filter(None, map(attrgetter(name), measurements)) for name in texts)
    return rest.count(b":") + fields + sum("".join(each).count(":") for each in strings)


def _plain_json(raw: bytes) -> Any:
    """The file as plain JSON data (lists, dicts, numbers, strings)."""
    try:
        return msgspec.json.decode(raw)
    except msgspec.DecodeError as error:
        _refuse_numbers_json_lacks(raw)
        raise SchemaError("", f"is not a memprof result: {_not_json(raw, error)}") from None
    except RecursionError:
        raise SchemaError("", "is not a memprof result: JSON nested too deeply") from None


# A UTF-16 surrogate escape that is not half of a pair: no character at all.
_LONE_SURROGATE = re.compile(
    rb"(?<!\\)(?:\\\\)*\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])"
    rb"|(?<![0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)


def _not_json(raw: bytes, error: msgspec.DecodeError) -> str:
    """Why a file's bytes are no JSON memprof reads, where as an editor counts: 'invalid JSON
    at line 3 column 7 (...)'."""
    message = str(error)
    found = re.search(r"\(byte (\d+)\)", message)
    reason = re.sub(r"^JSON is malformed: |\s*\(byte \d+\)$", "", message)
    lone = _LONE_SURROGATE.search(raw)
    if reason.startswith("Integer value out of range"):
        return "it holds an integer beyond 64 bits: no figure is that large"
    if lone is not None:
        found, reason = None, "a lone UTF-16 surrogate in a string, which is no character"
        offset = lone.end() - 6
    elif reason.startswith("Number out of range"):  # msgspec adds " - at `$[...][...]`"
        return "it holds a number beyond a 64-bit float's range: no figure is that large"
    elif found is None:
        return f"invalid JSON ({reason[0].lower() + reason[1:]})" if reason else "invalid JSON "
    else:
        offset = int(found[1])
    line = raw.count(b"\n", 0, offset) + 1
    column = offset - (raw.rfind(b"\n", 0, offset) + 1) + 1
    return f"invalid JSON at line {line} column {column} ({reason})"


def _check_values(result: Result) -> None:
    """The check_consistency() of every part each Result has (msgspec does not run it)."""
    for index, m in enumerate(result.measurements):
        try:
            m.check_consistency()
        except SchemaError as error:
            raise error.within(f"measurements[{index}]") from None
    parts = [("device", result.device), ("timing", result.timing)]
    parts += [(f"gpu_states[{i}]", state) for i, state in enumerate(result.gpu_states or [])]
    parts += [(f"checks[{i}]", one) for i, one in enumerate(result.checks)]
    for where, part in parts:
        if part is not None:
            try:
                part.check_consistency()
            except SchemaError as error:
                raise error.within(where) from None
    try:
        datetime.fromisoformat(result.created_at.replace("Z", "+00:00"))
    except ValueError:
        raise SchemaError("created_at", f"is {describe(result.created_at)}: not a date") from None
