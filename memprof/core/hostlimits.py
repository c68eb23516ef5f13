"""The host's limits on pinned memory, read without a GPU, and `memprof pinlimit`'s plan.

Pure: readings take /proc and /sys as paths and the rlimit and user id as values, so tests
hold planning on both sides of every boundary on any machine. Nothing here allocates.
"""

from __future__ import annotations

import contextlib
import os
import resource
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from memprof.errors import InvalidArgument, OutOfMemory
from memprof.model.formatting import format_bytes
from memprof.model.schema import ByteCount

GIB = 1 << 30
CAP_IPC_LOCK_BIT = 14  # linux/capability.h: lets a process lock memory beyond RLIMIT_MEMLOCK
# cgroup v1 writes "no limit" as the largest page-aligned signed 64-bit number
UNLIMITED_FROM_BYTES = 1 << 60
DEFAULT_SHARE = 0.25  # the default cap: a quarter of the memory available...
DEFAULT_MOST_BYTES = 32 * GIB  # ...and no more: 25 s on the H200's 128 GiB host (86 s at a
# quarter of a 512 GiB one); --cap climbs further
MARGIN_SHARE = 0.10  # the host keeps a tenth of its memory...
MARGIN_LEAST_BYTES = 4 * GIB  # ...and never less than 4 GiB


@dataclass(frozen=True)
class HostLimits:
    """What bounds pinned memory on this host, as this process sees it (None: none, or not
    readable here)."""

    memlock_soft_bytes: ByteCount | None  # RLIMIT_MEMLOCK (None: unlimited)
    memlock_hard_bytes: ByteCount | None
    root: bool
    cap_ipc_lock: bool  # CAP_IPC_LOCK in CapEff: RLIMIT_MEMLOCK does not bind mlock()
    cgroup_limit_bytes: ByteCount | None  # the lowest memory limit of this process's cgroups
    cgroup_usage_bytes: ByteCount | None  # what that cgroup holds now
    cgroup_version: Literal[1, 2] | None  # None where no memory controller was found
    mem_total_bytes: ByteCount
    mem_available_bytes: ByteCount

    @property
    def available_bytes(self) -> int:
        """What can still be pinned without swapping: MemAvailable, or the cgroup's room."""
        room = self.mem_available_bytes
        if self.cgroup_limit_bytes is not None and self.cgroup_usage_bytes is not None:
            room = min(room, max(self.cgroup_limit_bytes - self.cgroup_usage_bytes, 0))
        return room

    @property
    def memlock_binds(self) -> bool:
        """Whether RLIMIT_MEMLOCK applies to this process's mlock() at all."""
        return not (self.root or self.cap_ipc_lock) and self.memlock_soft_bytes is not None


def meminfo_bytes(proc: Path, field: str) -> int | None:
    """One field of /proc/meminfo ("MemAvailable"), in bytes."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in (proc / "meminfo").read_text().splitlines():
            name, _, rest = line.partition(":")
            if name == field:
                return int(rest.split()[0]) * 1024
    return None


def mem_available() -> int:
    """MemAvailable now (0 where it cannot be read: the climb then stops)."""
    return meminfo_bytes(Path("/proc"), "MemAvailable") or 0


def _cap_ipc_lock(proc: Path) -> bool:
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in (proc / "self" / "status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> CAP_IPC_LOCK_BIT & 1)
    return False


def _number(path: Path) -> int | None:
    """A cgroup file's byte count; None for "max", an unlimited v1 value or no file."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    if not text.isdigit() or int(text) >= UNLIMITED_FROM_BYTES:
        return None
    return int(text)


def cgroup_memory(
    proc: Path, cgroup_root: Path
) -> tuple[int | None, int | None, Literal[1, 2] | None]:
    """(limit, usage, version) of this process's cgroup: the lowest of it and its ancestors."""
    try:
        lines = (proc / "self" / "cgroup").read_text().splitlines()
    except OSError:
        return None, None, None
    for line in lines:
        _, controllers, path = line.split(":", 2) if line.count(":") >= 2 else ("", "", "")
        if controllers == "" and path:  # v2: "0::/path"
            limit, usage = _cgroup(cgroup_root, path, "memory.max", "memory.current")
            if limit is not None or (cgroup_root / "cgroup.controllers").exists():
                return limit, usage, 2
        if "memory" in controllers.split(","):  # v1: "N:memory:/path"
            root = cgroup_root / "memory"
            return *_cgroup(root, path, "memory.limit_in_bytes", "memory.usage_in_bytes"), 1
    return None, None, None


def _cgroup(root: Path, path: str, limit_file: str, usage_file: str) -> tuple[int | None, ...]:
    """The lowest limit of the cgroup at `path` and each folder above it up to root, and its
    usage (None where nothing limits it)."""
    parts = [part for part in path.split("/") if part and part != ".."]
    folders = [root.joinpath(*parts[:depth]) for depth in range(len(parts), -1, -1)]
    limits = (_number(folder / limit_file) for folder in folders)
    limit = min((limit for limit in limits if limit is not None), default=None)
    return limit, _number(folders[0] / usage_file) if limit is not None else None


def _memlock(limit: int) -> int | None:
    return None if limit == resource.RLIM_INFINITY else limit


def read_limits(
    proc: Path = Path("/proc"),
    cgroup_root: Path = Path("/sys/fs/cgroup"),
    memlock: tuple[int, int] | None = None,
    euid: int | None = None,
) -> HostLimits:
    """This process's limits (memlock and euid: resource's and os's where not given)."""
    soft, hard = memlock if memlock is not None else resource.getrlimit(resource.RLIMIT_MEMLOCK)
    limit, usage, version = cgroup_memory(proc, cgroup_root)
    total = meminfo_bytes(proc, "MemTotal")
    available = meminfo_bytes(proc, "MemAvailable")
    if total is None or available is None:
        raise OutOfMemory(
            f"{proc / 'meminfo'} says no MemTotal and MemAvailable: memprof pinlimit pins "
            "memory only where it can see how much is left"
        )
    return HostLimits(
        memlock_soft_bytes=_memlock(soft),
        memlock_hard_bytes=_memlock(hard),
        root=(os.geteuid() if euid is None else euid) == 0,
        cap_ipc_lock=_cap_ipc_lock(proc),
        cgroup_limit_bytes=limit,
        cgroup_usage_bytes=usage,
        cgroup_version=version,
        mem_total_bytes=total,
        mem_available_bytes=available,
    )


# -- the plan ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """How far the climb goes: `steps` steps of `step_bytes` (half allocated, half
    registered), never leaving the host less than `margin_bytes`."""

    cap_bytes: int
    step_bytes: int
    margin_bytes: int

    @property
    def steps(self) -> int:
        return self.cap_bytes // self.step_bytes


def margin_bytes(mem_total_bytes: int) -> int:
    """What the host keeps whatever is pinned: a tenth of its memory, at least 4 GiB."""
    return max(MARGIN_LEAST_BYTES, int(mem_total_bytes * MARGIN_SHARE))


def check_cap(cap_gib: int | None, step_gib: int) -> None:
    """--cap holds one --step at least: checked before any GPU work, and by plan."""
    if cap_gib is not None and cap_gib < step_gib:
        raise InvalidArgument(f"--cap {cap_gib} is below one --step of {step_gib} GiB")


def plan(limits: HostLimits, cap_gib: int | None, step_gib: int, workload_bytes: int) -> Plan:
    """The climb's cap, in whole steps: --cap where it leaves the margin, else DEFAULT_SHARE of
    what is available up to DEFAULT_MOST_BYTES; `workload_bytes`: the run's pageable buffers."""
    step = step_gib * GIB
    margin = margin_bytes(limits.mem_total_bytes)
    available = limits.available_bytes
    most = available - margin - workload_bytes  # what may be pinned at all
    if cap_gib is not None:
        cap = cap_gib * GIB
        if cap > most:
            raise OutOfMemory(
                f"--cap {cap_gib} would pin {format_bytes(cap)} where "
                f"{format_bytes(available)} is available: the host keeps "
                f"{format_bytes(margin)} and the run's copies "
                f"{format_bytes(workload_bytes)}, so at most {format_bytes(max(most, 0))} "
                "here"
            )
        check_cap(cap_gib, step_gib)
        return Plan(cap - cap % step, step, margin)
    cap = min(int(available * DEFAULT_SHARE), DEFAULT_MOST_BYTES, most)
    cap -= cap % step
    if cap < step:
        raise OutOfMemory(
            f"{format_bytes(available)} is available: a quarter of it, within the host's "
            f"margin of {format_bytes(margin)}, holds no step of {step_gib} GiB"
        )
    return Plan(cap, step, margin)


def room_for_step(available_bytes: int, step_bytes: int, margin: int) -> bool:
    """Whether one more step leaves the host at least its margin (read before each step)."""
    return available_bytes - step_bytes >= margin
