"""A traced program's source lines: which line of the user's program asked the GPU for each
copy, memset, allocation, free, registration, prefetch and wait, and what that cost (recorded
by memprof.trace.where; plain data here, so reading them needs none of the trace's code).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from memprof.model.schema import ByteCount, Count, Milliseconds, Range, SchemaError, totals_possible

# The kinds of calls whose line is recorded, as the Where tables name them. A copy's activity
# is its direction and memory kinds instead ("HtoD pageable -> device"): COPY_ACTIVITY.
CALL_KINDS = ("copy", "memset", "alloc", "free", "register", "prefetch", "wait")
COPY_ACTIVITY = re.compile(r"^(\w+) ([\w ]+) -> ([\w ]+)$")

# Where a line's frames came from: "program", its innermost on the calling thread; "thread",
# a thread without Python frames (PyTorch's autograd): the main thread's then, a best guess;
# "library", none of the program's on the calling thread: the innermost library frame; "none".
Origin = Literal["program", "thread", "library", "none"]
LineNumber = Annotated[int, Range(0, 10**9)]


@dataclass
class Frame:
    """One frame: its file (relative to the program's folder where it is inside it), line
    and function."""

    file: str
    line: LineNumber
    function: str


@dataclass
class CallChain:
    """The program's frames that called a line's function, innermost first, and how many of
    the line's calls came through them."""

    calls: Count
    frames: list[Frame]


@dataclass
class SourceLine:
    """Every call of one activity that one source line made, and what it cost.

    Per call, not per record: a batched copy is one call. The GPU time of a call is its
    work's CUPTI records summed; the host time is the call, entry to exit (what the line
    waited: for a copy from pageable memory, its staging; for a wait, the GPU's work).
    """

    activity: str  # a CALL_KINDS entry, or a copy's "HtoD pageable -> device"
    file: str  # "" where origin is "none"
    line: LineNumber
    function: str
    origin: Origin
    calls: Annotated[int, Range(1, 10**15)]
    api: list[str]  # the calls it made, by name without version ("cudaMemcpyAsync")
    bytes: ByteCount = 0  # copies and memsets: bytes moved or set, summed
    smallest_bytes: ByteCount = 0  # the smallest and largest single call's bytes
    largest_bytes: ByteCount = 0
    gpu_ms_each: list[Milliseconds] = field(default_factory=list)  # one per call with GPU work
    host_ms_each: list[Milliseconds] = field(default_factory=list)  # one per recorded call
    chains: list[CallChain] = field(default_factory=list)  # callers, most calls first

    @property
    def gpu_ms(self) -> float:
        return math.fsum(self.gpu_ms_each)

    @property
    def host_ms(self) -> float:
        return math.fsum(self.host_ms_each)

    @property
    def key(self) -> tuple[str, str, str, int, str]:
        """What makes it one line: its activity and site (memprof.trace.where.line_key)."""
        return (self.activity, self.origin, self.file, self.line, self.function)

    @property
    def place(self) -> str:
        """`train.py:42`, or what stands for it where the line is not the program's."""
        if self.origin == "none":
            return "(no stack recorded)"
        whose = {"thread": " (other thread)", "library": " (library)"}.get(self.origin, "")
        return f"{self.file}:{self.line}{whose}"

    @property
    def timed_on_gpu(self) -> bool:
        """Copies and memsets are timed by their GPU work; the other calls by the host's."""
        return self.activity not in CALL_KINDS or self.activity == "memset"

    @property
    def is_copy(self) -> bool:
        return self.copy_ends() is not None

    def copy_ends(self) -> tuple[str, ...] | None:
        """(direction, source kind, destination kind) of a copy line; None otherwise."""
        matched = COPY_ACTIVITY.match(self.activity)
        return matched.groups() if matched else None

    def host_kind(self) -> str | None:
        """The host side's memory kind, for copies between host and device."""
        direction, source, destination = self.copy_ends() or ("", "", "")
        return {"HtoD": source, "DtoH": destination}.get(direction)

    def check_consistency(self) -> None:
        """What the recording always makes true (schema.check runs it)."""
        if self.activity not in CALL_KINDS and not self.is_copy:
            raise SchemaError("activity", f"is {self.activity!r}, not an activity memprof names")
        if (self.origin == "none") != (self.file == ""):
            raise SchemaError("file", f"is {self.file!r} on a line of origin {self.origin!r}")
        samples_by_name = (("gpu_ms_each", self.gpu_ms_each), ("host_ms_each", self.host_ms_each))
        for name, samples in samples_by_name:
            if len(samples) > self.calls:
                raise SchemaError(name, f"has {len(samples)} samples for {self.calls} calls")
        chained = sum(chain.calls for chain in self.chains)
        if chained > self.calls:
            raise SchemaError("chains", f"hold {chained} calls, more than the line's {self.calls}")
        if self.smallest_bytes > self.largest_bytes:
            raise SchemaError(
                "smallest_bytes", f"is {self.smallest_bytes}, more than largest_bytes"
            )
        low, high = totals_possible(self.calls, self.smallest_bytes, self.largest_bytes)
        if not low <= self.bytes <= high:
            raise SchemaError(
                "bytes",
                f"is {self.bytes}, but {self.calls} calls of {self.smallest_bytes} to "
                f"{self.largest_bytes} bytes make {low} to {high}",
            )


def lines_of(result: Any) -> list[SourceLine] | None:
    """A trace's source lines, where it recorded them (None: none recorded, or no trace)."""
    if getattr(result, "command", None) != "trace":
        return None
    return getattr(result.extra, "lines", None)
