"""`memprof pinlimit` on the CPU: the limits read from fake /proc and /sys trees, the plan and its
refusals on both sides of each boundary, the climb on the fake GPU (its stops, its failures,
Ctrl-C), and the summary and verdict of SYNTHETIC Results.

The synthetic Results below are built from made-up samples through the experiment's own
types, not recorded on a GPU: they test the arithmetic and the words, never a figure of any
machine. The recorded fixture (tests/fixtures/h200_pinlimit.json) is the lead's to record.
"""

from __future__ import annotations

import dataclasses
import resource
from pathlib import Path
from types import SimpleNamespace

import pytest

from memprof.core import bindings, hostlimits
from memprof.core.hostlimits import GIB, HostLimits, Plan
from memprof.errors import EnvironmentProblem, ExitCode, InvalidArgument, OutOfMemory
from memprof.experiments import parse, pinlimit, summarize
from memprof.experiments.base import RunContext, declared_keys
from memprof.experiments.pictures import picture
from memprof.model.results import Measurement, Result
from memprof.model.schema import SchemaError
from tests.fakegpu import CUresult, FakeSession
from tests.verdict_tools import fixture

MIB = 1 << 20


# -- the limits, from fake trees ------------------------------------------------------------------


def fake_host(tmp_path: Path, cgroup: str, files: dict[str, str], cap_eff: str = "0") -> Path:
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "meminfo").write_text("MemTotal:  131072000 kB\nMemAvailable:  104857600 kB\n")
    (proc / "self" / "status").write_text(f"Name:\tpython\nCapEff:\t{cap_eff}\n")
    (proc / "self" / "cgroup").write_text(cgroup)
    for name, text in files.items():
        path = tmp_path / "cgroup" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return proc


def limits_of(tmp_path: Path, cgroup: str, files: dict[str, str], **kw) -> HostLimits:
    proc = fake_host(tmp_path, cgroup, files, kw.pop("cap_eff", "0"))
    return hostlimits.read_limits(
        proc, tmp_path / "cgroup", kw.pop("memlock", (65536, 65536)), kw.pop("euid", 1000)
    )


def test_meminfo_and_memlock_are_read_in_bytes(tmp_path):
    limits = limits_of(tmp_path, "", {}, memlock=(65536, resource.RLIM_INFINITY))
    assert limits.mem_total_bytes == 131072000 * 1024
    assert limits.mem_available_bytes == 104857600 * 1024
    assert (limits.memlock_soft_bytes, limits.memlock_hard_bytes) == (65536, None)
    assert limits.cgroup_version is None and limits.memlock_binds


def test_cap_ipc_lock_is_bit_14_of_capeff_and_root_is_euid_0(tmp_path):
    assert limits_of(tmp_path / "a", "", {}, cap_eff="0000000000004000").cap_ipc_lock
    for neighbours in ("0000000000002000", "0000000000008000", "000001ffffffbfff"):
        assert not limits_of(tmp_path / neighbours, "", {}, cap_eff=neighbours).cap_ipc_lock
    assert limits_of(tmp_path / "r", "", {}, euid=0).root
    assert not limits_of(tmp_path / "r" / "1", "", {}, euid=0).memlock_binds


def test_cgroup_v2_takes_the_lowest_limit_of_the_cgroup_and_its_ancestors(tmp_path):
    files = {
        "cgroup.controllers": "memory",
        "memory.max": str(16 * GIB),
        "a/memory.max": str(8 * GIB),
        "a/b/memory.max": "max",
        "a/b/memory.current": str(3 * GIB),
    }
    limits = limits_of(tmp_path, "0::/a/b\n", files)
    assert (limits.cgroup_limit_bytes, limits.cgroup_usage_bytes) == (8 * GIB, 3 * GIB)
    assert limits.cgroup_version == 2
    assert limits.available_bytes == 5 * GIB  # the cgroup's room, below MemAvailable


def test_cgroup_v2_without_a_limit_leaves_meminfo_to_bound(tmp_path):
    files = {"cgroup.controllers": "memory", "a/memory.max": "max", "a/memory.current": "5"}
    limits = limits_of(tmp_path, "0::/a\n", files)
    assert limits.cgroup_version == 2 and limits.cgroup_limit_bytes is None
    assert limits.cgroup_usage_bytes is None  # a usage without a limit bounds nothing
    assert limits.available_bytes == limits.mem_available_bytes


def test_cgroup_v1_limit_and_its_unlimited_value(tmp_path):
    files = {
        "memory/docker/x/memory.limit_in_bytes": str(2 * GIB),
        "memory/docker/x/memory.usage_in_bytes": str(GIB),
    }
    cgroup = "5:cpu,cpuacct:/docker/x\n4:memory:/docker/x\n"
    limits = limits_of(tmp_path, cgroup, files)
    assert (limits.cgroup_version, limits.cgroup_limit_bytes) == (1, 2 * GIB)
    assert limits.available_bytes == GIB
    unlimited = {"memory/docker/x/memory.limit_in_bytes": "9223372036854771712"}
    assert limits_of(tmp_path / "u", cgroup, unlimited).cgroup_limit_bytes is None
    just_below = {"memory/docker/x/memory.limit_in_bytes": str((1 << 60) - 4096)}
    assert limits_of(tmp_path / "b", cgroup, just_below).cgroup_limit_bytes == (1 << 60) - 4096


def test_a_hard_memlock_limit_is_read_and_the_defaults_are_this_processs(tmp_path, monkeypatch):
    limits = limits_of(tmp_path / "a", "", {}, memlock=(65536, 131072))
    assert (limits.memlock_soft_bytes, limits.memlock_hard_bytes) == (65536, 131072)
    monkeypatch.setattr(resource, "getrlimit", {resource.RLIMIT_MEMLOCK: (4096, 8192)}.get)
    monkeypatch.setattr(hostlimits.os, "geteuid", lambda: 0)
    proc = fake_host(tmp_path / "b", "", {})
    limits = hostlimits.read_limits(proc, tmp_path / "b" / "cgroup")
    assert (limits.memlock_soft_bytes, limits.memlock_hard_bytes, limits.root) == (4096, 8192, True)


def test_no_capeff_or_no_status_is_no_cap_ipc_lock(tmp_path):
    proc = fake_host(tmp_path, "", {})
    (proc / "self" / "status").write_text("Name:\tpython\n")
    assert not hostlimits.read_limits(proc, tmp_path / "cgroup", (0, 0), 1000).cap_ipc_lock
    (proc / "self" / "status").unlink()
    assert not hostlimits.read_limits(proc, tmp_path / "cgroup", (0, 0), 1000).cap_ipc_lock


def test_the_climbs_memavailable_is_procs_and_none_readable_is_none_left(monkeypatch):
    asked = []
    monkeypatch.setattr(hostlimits, "meminfo_bytes", lambda *where: asked.append(where) or 7)
    assert hostlimits.mem_available() == 7
    assert asked == [(Path("/proc"), "MemAvailable")]
    monkeypatch.setattr(hostlimits, "meminfo_bytes", lambda *where: None)
    assert hostlimits.mem_available() == 0  # the climb then stops: no step leaves the margin


def test_cgroup_v1s_unlimited_value_begins_at_exactly_2_to_the_60(tmp_path):
    cgroup = "4:memory:/x\n"
    at = {"memory/x/memory.limit_in_bytes": str(1 << 60)}
    assert limits_of(tmp_path, cgroup, at).cgroup_limit_bytes is None


@pytest.mark.parametrize(
    ("cgroup", "version"),
    [
        ("12:blkio:/other\n4:cpu,memory:/docker/x\n", 1),  # memory beside another controller
        ("junk\n4:memory:/docker/x\n", 1),  # a line of no fields is passed over
        ("junk\n0::/docker/x\n", 2),
        ("0::/../../docker/x\n", 2),  # a namespace's path above its root: from the root down
        ("0::/docker/x:y\n", 2),  # a colon in the path is the path's
    ],
)
def test_the_memory_cgroup_is_found_in_each_line_form(tmp_path, cgroup, version):
    path = "docker/x:y" if "x:y" in cgroup else "docker/x"
    under = "memory/" if version == 1 else ""
    limit_file, usage_file = (
        ("memory.limit_in_bytes", "memory.usage_in_bytes")
        if version == 1
        else ("memory.max", "memory.current")
    )
    files = {f"{under}{path}/{limit_file}": str(2 * GIB), f"{under}{path}/{usage_file}": str(GIB)}
    files["memory/other/memory.limit_in_bytes"] = str(GIB)  # another path's: not this process's
    if version == 2:
        files["cgroup.controllers"] = "memory"  # the v2 root: a line's cgroup is found under it
    limits = limits_of(tmp_path, cgroup, files)
    assert (limits.cgroup_version, limits.cgroup_limit_bytes, limits.cgroup_usage_bytes) == (
        version,
        2 * GIB,
        GIB,
    )


def test_a_v2_line_is_v2_by_its_limit_or_the_controllers_file_and_else_no_cgroup(tmp_path):
    limited = {"a/memory.max": str(2 * GIB), "a/memory.current": str(GIB)}
    limits = limits_of(tmp_path / "l", "0::/a\n", limited)  # no cgroup.controllers
    assert (limits.cgroup_version, limits.cgroup_limit_bytes) == (2, 2 * GIB)
    bare = limits_of(tmp_path / "b", "0::/a\n", {"a/memory.current": str(GIB)})
    assert (bare.cgroup_version, bare.cgroup_limit_bytes, bare.cgroup_usage_bytes) == (
        None,
        None,
        None,
    )


def test_no_meminfo_is_refused_in_one_line(tmp_path):
    proc = fake_host(tmp_path, "", {})
    (proc / "meminfo").write_text("MemTotal: 1 kB\n")
    with pytest.raises(OutOfMemory) as refused:
        hostlimits.read_limits(proc, tmp_path / "cgroup", (0, 0), 0)
    assert str(refused.value) == (
        f"{proc / 'meminfo'} says no MemTotal and MemAvailable: memprof pinlimit pins memory "
        "only where it can see how much is left"
    )


# -- the plan -------------------------------------------------------------------------------------


def host(available_gib: float, total_gib: float = 126, **changes) -> HostLimits:
    values = dict(
        memlock_soft_bytes=None,
        memlock_hard_bytes=None,
        root=True,
        cap_ipc_lock=True,
        cgroup_limit_bytes=None,
        cgroup_usage_bytes=None,
        cgroup_version=None,
        mem_total_bytes=int(total_gib * GIB),
        mem_available_bytes=int(available_gib * GIB),
    )
    return HostLimits(**{**values, **changes})


def test_the_margin_is_a_tenth_of_memtotal_and_at_least_4_gib():
    assert hostlimits.margin_bytes(126 * GIB) == int(12.6 * GIB)
    assert hostlimits.margin_bytes(40 * GIB) == 4 * GIB
    assert hostlimits.margin_bytes(41 * GIB) == int(4.1 * GIB)


def test_the_default_cap_is_a_quarter_of_memavailable_in_whole_steps():
    assert hostlimits.plan(host(120), None, 1, 2 * GIB).cap_bytes == 30 * GIB
    assert hostlimits.plan(host(123.9), None, 1, 2 * GIB).cap_bytes == 30 * GIB
    assert hostlimits.plan(host(124), None, 1, 2 * GIB).cap_bytes == 31 * GIB
    assert hostlimits.plan(host(120), None, 4, 2 * GIB).cap_bytes == 28 * GIB
    assert hostlimits.plan(host(120), None, 4, 2 * GIB).steps == 7


def test_the_default_cap_is_at_most_32_gib_however_large_the_host():
    assert hostlimits.plan(host(128, 140), None, 1, 2 * GIB).cap_bytes == 32 * GIB
    assert hostlimits.plan(host(132, 140), None, 1, 2 * GIB).cap_bytes == 32 * GIB
    assert hostlimits.plan(host(500, 512), None, 1, 2 * GIB).cap_bytes == 32 * GIB
    assert hostlimits.plan(host(500, 512), 100, 1, 2 * GIB).cap_bytes == 100 * GIB  # --cap


def test_the_default_cap_never_enters_the_margin():
    # 10 GiB available on a 40 GiB host: a quarter (2.5) fits; on a host whose margin
    # leaves less than a quarter, the room left is the cap
    assert hostlimits.plan(host(10, 40), None, 1, 0).cap_bytes == 2 * GIB
    assert hostlimits.plan(host(6, 40), None, 1, 0).cap_bytes == GIB  # 6 - 4 - 0 = 2, 1.5
    with pytest.raises(OutOfMemory) as refused:
        hostlimits.plan(host(5, 40), None, 1, GIB)  # 5 - 4 - 1 = 0
    assert refused.value.exit_code == ExitCode.OUT_OF_MEMORY


def test_a_cap_that_leaves_the_margin_runs_and_one_gib_more_is_refused_with_exit_4():
    limits = host(100, 126)  # at most 100 - 12.6 - 2 = 85.4 GiB
    assert hostlimits.plan(limits, 85, 1, 2 * GIB).cap_bytes == 85 * GIB
    with pytest.raises(OutOfMemory) as refused:
        hostlimits.plan(limits, 86, 1, 2 * GIB)
    assert refused.value.exit_code == ExitCode.OUT_OF_MEMORY == 4
    assert "\n" not in str(refused.value) and "--cap 86" in str(refused.value)


def test_the_cgroups_room_bounds_the_cap():
    limits = host(100, 126, cgroup_limit_bytes=40 * GIB, cgroup_usage_bytes=10 * GIB)
    assert hostlimits.plan(limits, 15, 1, GIB).cap_bytes == 15 * GIB  # 30 - 12.6 - 1
    with pytest.raises(OutOfMemory):
        hostlimits.plan(limits, 17, 1, GIB)


def test_a_cap_below_one_step_is_refused_and_rounded_down_to_whole_steps():
    with pytest.raises(InvalidArgument):
        hostlimits.plan(host(100), 1, 2, 0)
    assert hostlimits.plan(host(100), 2, 2, 0).steps == 1
    assert hostlimits.plan(host(100), 5, 2, 0).cap_bytes == 4 * GIB


def test_a_step_is_taken_only_where_it_leaves_the_margin():
    assert hostlimits.room_for_step(10 * GIB, GIB, 9 * GIB)
    assert not hostlimits.room_for_step(10 * GIB - 1, GIB, 9 * GIB)


def test_the_room_is_memavailable_or_the_cgroups_whichever_is_less():
    def room(limit_gib, usage_gib):
        cgroup = dict(cgroup_limit_bytes=limit_gib * GIB, cgroup_version=2)
        usage = None if usage_gib is None else usage_gib * GIB
        return host(100, cgroup_usage_bytes=usage, **cgroup).available_bytes

    assert room(40, 10) == 30 * GIB  # the cgroup's room, below MemAvailable
    assert room(200, 10) == 100 * GIB  # MemAvailable, below the cgroup's room
    assert room(40, 50) == 0  # a cgroup already beyond its limit has no room, not less
    assert room(40, None) == 100 * GIB  # a limit without its usage: MemAvailable bounds


def test_memlock_binds_only_a_process_without_root_or_cap_ipc_lock_under_a_limit():
    def binds(root, cap_ipc_lock, soft):
        return host(100, root=root, cap_ipc_lock=cap_ipc_lock, memlock_soft_bytes=soft)

    assert binds(False, False, 64 * 1024).memlock_binds
    assert not binds(False, True, 64 * 1024).memlock_binds
    assert not binds(True, False, 64 * 1024).memlock_binds
    assert not binds(False, False, None).memlock_binds  # unlimited


def test_a_cap_that_exactly_fills_the_room_left_runs_and_a_step_more_is_refused():
    limits = host(20, 40)  # at most 20 - 4 (the margin) - 1 = 15 GiB
    assert hostlimits.plan(limits, 15, 1, GIB).cap_bytes == 15 * GIB
    assert hostlimits.plan(limits, 15, 15, GIB).steps == 1  # the cap equal to one step
    with pytest.raises(OutOfMemory) as refused:
        hostlimits.plan(limits, 16, 1, GIB)
    assert str(refused.value) == (
        "--cap 16 would pin 16 GiB where 20 GiB is available: the host keeps 4 GiB and the "
        "run's copies 1 GiB, so at most 15 GiB here"
    )


def test_the_plan_keeps_the_hosts_margin_for_the_climb_to_stop_at():
    assert hostlimits.plan(host(100, 126), None, 1, GIB).margin_bytes == int(12.6 * GIB)
    assert hostlimits.plan(host(100, 126), 20, 1, GIB).margin_bytes == int(12.6 * GIB)


def test_a_host_with_no_room_says_so_in_numbers_never_below_nothing():
    with pytest.raises(OutOfMemory) as refused:
        hostlimits.plan(host(3, 40), 1, 1, GIB)  # 3 - 4 - 1: at most 0, not -2 GiB
    assert str(refused.value).endswith(
        "the host keeps 4 GiB and the run's copies 1 GiB, so at most 0 B here"
    )
    with pytest.raises(OutOfMemory) as refused:
        hostlimits.plan(host(5, 40), None, 1, GIB)
    assert str(refused.value) == (
        "5 GiB is available: a quarter of it, within the host's margin of 4 GiB, holds no step "
        "of 1 GiB"
    )


def test_the_runs_copies_are_its_two_pageable_buffers():
    assert pinlimit.workload_bytes(pinlimit.PinlimitParams(copy_power=27)) == GIB  # 2 x 512 MiB
    assert pinlimit.workload_bytes(pinlimit.PinlimitParams(copy_power=10)) == 8 * 1024


def test_a_cap_beyond_the_margin_is_refused_before_the_gpu_is_touched(monkeypatch):
    class Untouchable:
        def __getattr__(self, name):
            raise AssertionError(f"the GPU session was used ({name}) before the refusal")

    monkeypatch.setattr(hostlimits, "read_limits", lambda: host(20, 126))
    params = pinlimit.PinlimitParams(cap=8)  # at most 20 - 12.6 - 2 = 5.4 GiB
    ctx = RunContext(params, session=Untouchable())
    with pytest.raises(OutOfMemory, match="--cap 8"):
        pinlimit.Pinlimit().run(ctx)


# -- the climb on the fake GPU ---------------------------------------------------------------


class Registrations:
    """cuMemHostRegister and cuMemHostUnregister, keeping what is registered."""

    def __init__(
        self,
        fail_at: int | None = None,
        interrupt_at: int | None = None,
        failure: CUresult = CUresult.CUDA_ERROR_OUT_OF_MEMORY,
    ) -> None:
        self.now: dict[int, int] = {}
        self.sizes: list[int] = []  # each registration's bytes, in order
        self.calls = 0
        self.fail_at, self.interrupt_at, self.failure = fail_at, interrupt_at, failure

    def register(self, address: int, nbytes: int, flags: int) -> None:
        self.calls += 1
        if self.calls == self.fail_at:
            raise bindings.failure("cuMemHostRegister", self.failure)
        assert address % 4096 == 0 and address not in self.now
        assert flags == bindings.HOST_REGISTER_MAPPED_PORTABLE  # DEVICEMAP | PORTABLE
        self.now[address] = nbytes
        self.sizes.append(nbytes)
        if self.calls == self.interrupt_at:
            raise KeyboardInterrupt  # pressed during the call: raised as it returns

    def unregister(self, address: int) -> None:
        del self.now[address]


def climbed(
    monkeypatch,
    steps=4,
    available=None,
    fail_alloc_at=None,
    fail_register_at=None,
    margin=0,
    interrupt_at=None,
    register_failure=CUresult.CUDA_ERROR_OUT_OF_MEMORY,
):
    registrations = Registrations(fail_register_at, interrupt_at, register_failure)
    monkeypatch.setattr(bindings, "host_register", registrations.register)
    monkeypatch.setattr(bindings, "host_unregister", registrations.unregister)
    session = FakeSession({}, declared_keys(pinlimit.Pinlimit))
    if fail_alloc_at is not None:
        allocate, calls = session.cuda.pagelocked_empty, []

        def pagelocked_empty(count, dtype, mem_flags=0):
            calls.append(count)
            if len(calls) == fail_alloc_at:
                raise MemoryError("cuMemHostAlloc failed: out of memory")
            return allocate(count, dtype, mem_flags)

        session.cuda.pagelocked_empty = pagelocked_empty
    params = pinlimit.PinlimitParams(copy_power=10, repeat=2)
    seen = []
    ctx = RunContext(params, lambda *step: seen.append(step), session=session)
    plan = Plan(steps * 2 * MIB, 2 * MIB, margin)
    try:
        extra = pinlimit.climb(ctx, host(100), plan, available or (lambda: 100 * GIB))
        measurements = session.profiler.measurements()
    finally:  # also where the climb raised (Ctrl-C): what the session's close leaves
        session.close()
        assert session.gpu.leaks() == {} and registrations.now == {}
    climbed.registrations = registrations  # the last climb's, for a test to read
    return extra, measurements, ctx, seen


def counts(measurements: list[Measurement]) -> dict[tuple, int]:
    return {(m.group, m.operation, m.kind, m.bytes): len(m.samples_ms) for m in measurements}


def test_the_climb_pins_every_step_frees_it_and_registers_it_again_at_once(monkeypatch):
    extra, measurements, ctx, seen = climbed(monkeypatch)
    assert extra.held_bytes == [2 * MIB, 4 * MIB, 6 * MIB, 8 * MIB] and extra.stopped == "cap"
    found = counts(measurements)
    for key in (
        ("api", "alloc", "pinned", MIB),
        ("host", "touch", "pinned", MIB),
        ("host", "touch", "registered", MIB),
        ("api", "register", "registered", MIB),
        ("api", "free", "pinned", MIB),
        ("host", "free", "registered", MIB),
    ):
        assert found[key] == 4, key
    assert found["api", "register_whole", "registered", 4 * MIB] == 1
    assert found["api", "unregister_whole", "registered", 4 * MIB] == 1
    for phase in ("idle", "held", "after"):
        assert found["host", f"copy_{phase}", "pageable", 4096] == 2
        assert found["gpu", f"h2d_{phase}", "pageable", 4096] == 2
    assert all(check.passed for check in ctx.checks) and len(ctx.checks) == 6
    assert [done for _, done, _ in seen] == sorted(done for _, done, _ in seen)
    assert seen[-1][1] == seen[-1][2] == 8


def test_two_steps_are_registered_again_in_one_call_and_the_climb_says_each_stage(monkeypatch):
    extra, measurements, _, seen = climbed(monkeypatch, 2)
    assert counts(measurements)["api", "register_whole", "registered", 2 * MIB] == 1
    assert (extra.limits, extra.cap_bytes, extra.available_idle_bytes) == (
        host(100),
        4 * MIB,
        100 * GIB,
    )
    assert seen == [
        ("4 KiB host copies, nothing pinned", 0, 6),
        ("pinning 2 MiB", 1, 6),
        ("pinning 4 MiB", 2, 6),
        ("4 KiB host copies, 4 MiB pinned", 3, 6),
        ("freeing 4 MiB", 4, 6),
        ("4 KiB host copies, everything freed", 5, 6),
        ("done", 6, 6),
    ]


def test_a_climb_stopped_before_its_first_step_says_nothing_was_pinned(monkeypatch):
    readings = iter([100 * GIB, GIB - 1])  # idle; before step 1: a step would enter the margin
    extra, _, _, seen = climbed(monkeypatch, 4, lambda: next(readings), margin=GIB - 2 * MIB)
    assert (extra.stopped, extra.held_bytes, extra.available_idle_bytes) == (
        "margin",
        [],
        100 * GIB,
    )
    assert [words for words, _, _ in seen[1:3]] == [
        "4 KiB host copies, nothing pinned",
        "freeing 0 B",
    ]


def test_each_half_step_is_registered_at_its_size_and_the_whole_at_every_steps(monkeypatch):
    _, measurements, _, _ = climbed(monkeypatch, 2)
    assert climbed.registrations.sizes == [MIB, MIB, 2 * MIB]
    names = {(m.operation, m.kind): m.name for m in measurements}
    assert {key: names[key] for key in CALL_NAMES} == CALL_NAMES


CALL_NAMES = {  # what a profile and a diff call each measurement of the climb
    ("alloc", "pinned"): "cuMemHostAlloc",
    ("touch", "pinned"): "first touch",
    ("touch", "registered"): "first touch",
    ("register", "registered"): "cuMemHostRegister",
    ("free", "pinned"): "cuMemFreeHost",
    ("free", "registered"): "cuMemHostUnregister",
    ("register_whole", "registered"): "cuMemHostRegister",
    ("unregister_whole", "registered"): "cuMemHostUnregister",
    ("copy_idle", "pageable"): "numpy copyto",
}


def test_the_run_climbs_with_its_limits_plan_and_memavailable_once_registration_is_possible(
    monkeypatch,
):
    limits, asked = host(100), []
    monkeypatch.setattr(hostlimits, "read_limits", lambda: limits)
    monkeypatch.setattr(pinlimit, "climb", lambda *given: asked.append(given) or "climbed")
    params = pinlimit.PinlimitParams(cap=2, copy_power=10)
    session = FakeSession({}, declared_keys(pinlimit.Pinlimit))
    ctx = RunContext(params, session=session)
    assert pinlimit.Pinlimit().run(ctx) == "climbed"
    assert asked == [(ctx, limits, Plan(2 * GIB, GIB, int(12.6 * GIB)), hostlimits.mem_available)]
    monkeypatch.setattr(session, "attribute", lambda name: 0)  # no DEVICEMAP here
    with pytest.raises(EnvironmentProblem, match="registered memory needs"):
        pinlimit.Pinlimit().run(ctx)
    assert len(asked) == 1
    session.close()


def test_a_registration_is_undone_once_and_only_where_it_was_made(monkeypatch):
    registrations = Registrations(fail_at=2)
    monkeypatch.setattr(bindings, "host_register", registrations.register)
    monkeypatch.setattr(bindings, "host_unregister", registrations.unregister)  # KeyError: twice
    never = pinlimit._Registration(4096)
    never()  # released before its call: nothing to undo
    made = pinlimit._Registration(8192)
    made.register(MIB)
    made()
    made()  # the session and the Buffer both release it
    assert registrations.now == {}
    failed = pinlimit._Registration(12288)
    with pytest.raises(OutOfMemory):
        failed.register(MIB)
    failed()  # a failed call registered nothing
    assert registrations.sizes == [MIB] and registrations.now == {}


def test_the_climb_stops_before_the_margin(monkeypatch):
    # idle; before step 1 (exactly a step above the margin); after it; before step 2
    readings = iter([100 * GIB, GIB, GIB, GIB - 1])
    extra, _, _, _ = climbed(monkeypatch, 4, lambda: next(readings), margin=GIB - 2 * MIB)
    assert extra.stopped == "margin" and extra.held_bytes == [2 * MIB]
    assert extra.available_bytes == [GIB]


def test_a_failed_allocation_ends_the_climb_with_its_size_and_cudas_words(monkeypatch):
    # the host copies' two pageable buffers come first: the third allocation is the pinned
    # memory's first... pageable memory is numpy's, so the pinned halves are the only calls
    extra, measurements, _, _ = climbed(monkeypatch, fail_alloc_at=3)
    assert extra.stopped == "failed" and extra.held_bytes == [2 * MIB, 4 * MIB]
    assert extra.failure == pinlimit.Failure(
        "cuMemHostAlloc", MIB, "cuMemHostAlloc failed: out of memory"
    )
    assert counts(measurements)["api", "free", "pinned", MIB] == 2


def test_a_failed_registration_ends_the_climb_and_frees_that_steps_allocation(monkeypatch):
    extra, measurements, _, _ = climbed(monkeypatch, fail_register_at=2)
    assert extra.stopped == "failed" and extra.held_bytes == [2 * MIB]
    assert extra.failure.call == "cuMemHostRegister" and "OUT_OF_MEMORY" in extra.failure.error
    assert extra.failure.bytes == MIB  # the half step it asked for
    found = counts(measurements)
    assert found["api", "alloc", "pinned", MIB] == found["api", "free", "pinned", MIB] == 2
    assert found["api", "register", "registered", MIB] == 1
    assert not any(op == "register_whole" for _, op, _, _ in found)


def test_a_registration_this_driver_cannot_do_is_an_error_not_a_limit(monkeypatch):
    """CUDA_ERROR_NOT_SUPPORTED (or cuda-bindings missing) says nothing of how much can be
    pinned: the command stops with that line, and nothing is left pinned or registered."""
    with pytest.raises(EnvironmentProblem, match="does not support it"):
        climbed(monkeypatch, fail_register_at=2, register_failure=CUresult.CUDA_ERROR_NOT_SUPPORTED)


def test_ctrl_c_in_the_middle_of_the_climb_frees_everything(monkeypatch):
    readings = iter([100 * GIB] * 4)

    def available():
        try:
            return next(readings)
        except StopIteration:
            raise KeyboardInterrupt from None

    with pytest.raises(KeyboardInterrupt):
        climbed(monkeypatch, 4, available)  # its own asserts: no leak, nothing registered


@pytest.mark.parametrize("at", [2, 5], ids=["a step's half", "the whole at once"])
def test_ctrl_c_as_a_registration_returns_still_unregisters_it(monkeypatch, at):
    """4 steps register their halves in calls 1 to 4; call 5 registers them all at once."""
    with pytest.raises(KeyboardInterrupt):
        climbed(monkeypatch, 4, interrupt_at=at)  # its own asserts: nothing left registered


def test_a_failed_allocations_words_are_pycudas_not_memprofs():
    try:
        try:
            raise MemoryError("cuMemHostAlloc failed: out of memory")
        except MemoryError as error:
            raise OutOfMemory("memprof's words") from error
    except OutOfMemory as error:
        assert pinlimit._cuda_words(error) == "cuMemHostAlloc failed: out of memory"


# -- synthetic Results: the summary, the verdict, the loader ------------------------------


def synthetic(
    steps: int = 4,
    alloc_ms: float = 250.0,
    register_ms: float = 12.0,
    touch_ms: float = 40.0,
    copy_ms: tuple[float, ...] = (100.0, 100.0),
    h2d_ms: tuple[float, ...] = (150.0, 150.0),
    step_gib: int = 2,
    stopped: str = "cap",
    failure: pinlimit.Failure | None = None,
    spread: float = 0.0,
) -> Result:
    """A Result of made-up samples, as a run of `steps` whole steps would hold them."""
    half = step_gib * GIB // 2
    params = pinlimit.PinlimitParams(cap=steps * step_gib, step=step_gib, repeat=3)
    begun = steps + (failure is not None and failure.call == "cuMemHostRegister")

    def m(group, name, operation, kind, nbytes, values, source="host"):
        return Measurement(group, name, operation, kind, nbytes, list(values), source)

    measurements = [
        m("api", "cuMemHostAlloc", "alloc", "pinned", half, [alloc_ms] * begun),
        m("host", "first touch", "touch", "pinned", half, [touch_ms] * begun),
        m("host", "first touch", "touch", "registered", half, [touch_ms] * begun),
        m("api", "cuMemHostRegister", "register", "registered", half, [register_ms] * steps),
        m("api", "cuMemFreeHost", "free", "pinned", half, [30.0] * begun),
        m("host", "cuMemHostUnregister", "free", "registered", half, [9.0] * steps),
    ]
    if steps >= 2:
        whole = steps * half
        measurements += [
            m("api", "cuMemHostRegister", "register_whole", "registered", whole, [11.0 * steps]),
            m("api", "cuMemHostUnregister", "unregister_whole", "registered", whole, [8.0]),
        ]
    nbytes = 4 << params.copy_power
    spreads = (1 - spread, 1.0, 1 + spread)  # the copies' samples about their median
    copy_ms, h2d_ms = (
        times if len(times) == 3 else (*times, times[0]) for times in (copy_ms, h2d_ms)
    )
    for phase, copy, h2d in zip(pinlimit.PHASES, copy_ms, h2d_ms, strict=True):
        measurements += [
            m(
                "host",
                "numpy copyto",
                f"copy_{phase}",
                "pageable",
                nbytes,
                [copy * f for f in spreads],
            ),
            m("gpu", "[CUDA memcpy HtoD]", f"h2d_{phase}", "pageable", nbytes, [h2d] * 3, "events"),
        ]
    step = step_gib * GIB
    extra = pinlimit.PinlimitExtra(
        limits=host(120),
        cap_bytes=(steps + (stopped != "cap")) * step,
        held_bytes=[step * (i + 1) for i in range(steps)],
        available_bytes=[120 * GIB - step * (i + 1) for i in range(steps)],
        available_idle_bytes=120 * GIB,
        stopped=stopped,
        failure=failure,
    )
    params = dataclasses.replace(params, cap=extra.cap_bytes // GIB)
    return Result("pinlimit", params, fixture("h200_register").device, measurements, [], extra)


def roundtrip(result: Result) -> Result:
    return parse(result.to_json())


def test_a_synthetic_result_loads_back_equal_and_is_summarized():
    result = synthetic()
    again = roundtrip(result)
    assert again.to_json() == result.to_json()
    assert summarize(again).conclusions == summarize(result).conclusions


def test_the_verdict_gives_the_total_the_cost_per_gib_and_the_ending():
    said = summarize(synthetic()).conclusions[0]
    # 4 steps of 2 GiB: each step 250 + 40 + 40 + 12 ms; 8 GiB in 1.368 s
    assert said.startswith("Pinning 8 GiB took 1.4 s, 0.17 s per GiB")
    assert said.endswith("It stopped at its cap of 8 GiB.")


@pytest.mark.parametrize(("held_ms", "slower"), [(104.9, False), (105.1, True)])
def test_the_host_is_called_slower_only_beyond_5_percent(held_ms, slower):
    said = summarize(roundtrip(synthetic(copy_ms=(100.0, held_ms)))).conclusions[0]
    assert ("numpy copy 5% slower" in said) is slower
    assert ("as fast (within 5%" in said) is not slower


# 3 errors of the two medians, each 1.07 x spread / sqrt(3): 0.091 at 2%, 0.137 at 3%
@pytest.mark.parametrize(
    ("spread", "slower"), [(0.01, True), (0.02, True), (0.03, False), (0.3, False)]
)
def test_a_slowdown_within_the_copies_own_noise_is_not_called_one(spread, slower):
    said = summarize(roundtrip(synthetic(copy_ms=(100.0, 110.0), spread=spread))).conclusions[0]
    assert ("numpy copy 10% slower" in said) is slower
    assert ("as fast (within 5% and their noise: numpy copy +10%" in said) is not slower


def test_the_noise_is_the_baselines_and_the_held_copies_together():
    """Held 10% slower, its own samples exact: the noise is the baseline's (3 x 0.054 at a
    5% spread), which explains it; the held copies' alone would not."""
    result = synthetic(copy_ms=(100.0, 110.0), spread=0.05)
    held = next(m for m in result.measurements if m.operation == "copy_held")
    held.samples_ms = [110.0] * 3
    work = pinlimit.host_figures(roundtrip(result))["numpy copy"]
    assert work.noise == pytest.approx(3 * 1.0728112200080876 * 0.05, rel=1e-6)
    assert not work.slower


@pytest.mark.parametrize(
    ("after_ms", "slower"), [(100.0, True), (114.0, True), (114.4, False), (130.0, False)]
)
def test_a_slowdown_is_pinnings_only_where_the_copies_freed_again_are_faster(after_ms, slower):
    """Held 20% slower than before: pinning's only where the copies once it is freed again
    are faster than held beyond 5% and their noise (else the run's later copies are slower
    anyway); the slowdown is against the slower of before and after."""
    result = roundtrip(synthetic(copy_ms=(100.0, 120.0, after_ms)))
    said = summarize(result).conclusions[0]
    work = pinlimit.host_figures(result)["numpy copy"]
    assert work.slowdown == pytest.approx(120.0 / max(100.0, after_ms) - 1)
    assert work.slower is slower
    assert ("numpy copy" in said and "slower" in said.split("numpy copy")[1][:12]) is slower


def test_a_pageable_copy_to_the_gpu_slower_is_named_on_its_own():
    said = summarize(roundtrip(synthetic(h2d_ms=(150.0, 180.0)))).conclusions[0]
    assert "pageable copy to the GPU 20% slower" in said and "numpy copy" not in said


def test_the_endings_say_why_the_climb_stopped():
    margin = summarize(roundtrip(synthetic(stopped="margin"))).conclusions[0]
    assert "It stopped at 8 GiB, short of its cap of 10 GiB" in margin
    failure = pinlimit.Failure("cuMemHostRegister", GIB, "CUDA_ERROR_OUT_OF_MEMORY [x]")
    failed = summarize(roundtrip(synthetic(stopped="failed", failure=failure))).conclusions[0]
    assert (
        "With 8 GiB pinned, cuMemHostRegister of 1 GiB failed: CUDA_ERROR_OUT_OF_MEMORY" in failed
    )


def test_the_table_and_the_picture_show_the_same_cost_per_gib():
    result = roundtrip(synthetic())
    summary = summarize(result)
    climb = next(t for t in summary.tables if t.title.startswith("Pinning as it grows"))
    assert [row[2] for row in climb.rows] == ["290.00ms"] * 4  # (250 + 40) / 1 GiB
    curves = picture(result, summary).panels[0]
    assert [y for _, y in curves.lines[0].points] == pytest.approx([290.0] * 4)
    assert [x for x, _ in curves.lines[0].points] == result.extra.held_bytes


def tampered(**changes) -> str:
    result = synthetic()
    result.extra = dataclasses.replace(result.extra, **changes)
    return result.to_json()


GROWS = "extra.held_bytes does not grow by parameters.step GiB each step"
FAILURE = "extra.failure is given where stopped is not 'failed', or missing"
ABOVE_HARD = "extra.limits.memlock_soft_bytes is above the hard limit"


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        ({"held_bytes": [2 * GIB, 4 * GIB, 6 * GIB, 9 * GIB]}, GROWS),
        ({"available_bytes": [GIB]}, "extra.available_bytes holds not one value per step (4)"),
        ({"stopped": "gave up"}, "extra.stopped is the string 'gave up'"),
        ({"stopped": "failed"}, FAILURE),
        ({"failure": pinlimit.Failure("cuMemHostAlloc", GIB, "x")}, FAILURE),
        ({"limits": host(127)}, "extra.limits.mem_available_bytes is above mem_total_bytes"),
        (
            {"available_idle_bytes": 127 * GIB},
            "extra.available_bytes holds more than limits.mem_total_bytes",
        ),
        (
            {"limits": host(120, cgroup_usage_bytes=GIB)},
            "extra.limits.cgroup_usage_bytes is given without a cgroup limit",
        ),
        ({"limits": host(120, memlock_soft_bytes=2 * GIB, memlock_hard_bytes=GIB)}, ABOVE_HARD),
        ({"limits": host(120, memlock_hard_bytes=GIB)}, ABOVE_HARD),  # unlimited under a limit
        (
            {"limits": host(120, cgroup_limit_bytes=GIB)},
            "extra.limits.cgroup_version is null beside a cgroup limit",
        ),
        ({"cap_bytes": 6 * GIB}, "extra.held_bytes goes beyond extra.cap_bytes"),  # 8 held
        ({"cap_bytes": 9 * GIB}, "extra.cap_bytes is not a whole number of parameters.step GiB"),
        ({"cap_bytes": 10 * GIB}, "extra.stopped is 'cap', but the steps do not reach it"),
        (
            {"held_bytes": [2 * GIB, 4 * GIB, 6 * GIB]},
            "extra.available_bytes holds not one value per step (3)",
        ),
    ],
)
def test_a_tampered_result_is_refused_in_one_line_naming_its_field(changes, said):
    with pytest.raises((InvalidArgument, SchemaError)) as refused:
        parse(tampered(**changes))
    assert "\n" not in str(refused.value)
    assert str(refused.value).startswith(f"result: {said}")


def test_a_sample_more_than_its_steps_is_refused():
    result = synthetic()
    result.measurements[3].samples_ms.append(12.0)  # a fifth registration of four steps
    with pytest.raises((InvalidArgument, SchemaError)) as refused:
        parse(result.to_json())
    assert str(refused.value) == (
        "result: measurements hold 5 samples of register (registered), not 4 of half a step "
        f"({GIB} bytes)"
    )


def whole_changed(steps: int, **changes) -> Result:
    """A result whose call over every step (register_whole) is changed, or added to one step."""
    result = synthetic(steps=steps)
    whole = Measurement("api", "cuMemHostRegister", "register_whole", "registered", GIB, [11.0])
    found = [m for m in result.measurements if m.operation == "register_whole"]
    if not found:
        result.measurements.append(whole)
        found = [whole]
    for name, value in changes.items():
        setattr(found[0], name, value)
    return result


@pytest.mark.parametrize(
    "result",
    [
        whole_changed(1),  # one step: no call over every step can be made
        whole_changed(4, bytes=3 * GIB),  # not every step's bytes
        whole_changed(4, samples_ms=[44.0, 44.0]),  # more than one call
    ],
)
def test_a_call_over_every_step_is_one_call_of_every_steps_bytes_on_two_steps_or_more(result):
    with pytest.raises((InvalidArgument, SchemaError)) as refused:
        parse(result.to_json())
    assert str(refused.value) == (
        "result: measurements register_whole is not one call over every step"
    )


def at_the_edges(result: Result, **changes) -> Result:
    result.extra = dataclasses.replace(result.extra, **changes)
    return result


@pytest.mark.parametrize(
    "result",
    [
        synthetic(steps=1),  # a cap of exactly one step
        synthetic(steps=2),  # the call over every step on two steps, the fewest it needs
        synthetic(stopped="failed", failure=pinlimit.Failure("cuMemHostAlloc", GIB, "x")),
        at_the_edges(synthetic(), limits=host(120, memlock_soft_bytes=GIB, memlock_hard_bytes=GIB)),
        at_the_edges(synthetic(), limits=host(120, 120), available_idle_bytes=120 * GIB),
    ],
)
def test_a_result_at_each_checks_edge_loads(result):
    assert parse(result.to_json()).to_json() == result.to_json()


def test_the_limits_table_says_when_the_driver_did_not_charge_memlock():
    result = synthetic()
    result.extra = dataclasses.replace(
        result.extra, limits=host(120, memlock_soft_bytes=64 * 1024, root=False, cap_ipc_lock=False)
    )
    notes = summarize(roundtrip(result)).tables[0].notes
    assert any("above RLIMIT_MEMLOCK's 64 KiB" in note for note in notes)
    capped = synthetic()
    capped.extra = dataclasses.replace(capped.extra, limits=host(120, memlock_soft_bytes=64 * GIB))
    assert not any("RLIMIT_MEMLOCK's" in n for n in summarize(roundtrip(capped)).tables[0].notes)


def test_a_climb_that_pinned_nothing_says_so_in_each_table_and_its_verdict():
    failure = pinlimit.Failure("cuMemHostAlloc", GIB, "cuMemHostAlloc failed: out of memory")
    result = synthetic(steps=0, stopped="failed", failure=failure)
    result.measurements = [m for m in result.measurements if m.samples_ms]  # no step begun
    limits = host(120, memlock_soft_bytes=0, memlock_hard_bytes=0, root=False, cap_ipc_lock=False)
    result.extra = dataclasses.replace(result.extra, limits=limits)
    summary = summarize(roundtrip(result))
    assert summary.conclusions == [
        "Nothing could be pinned, and left the host's pageable copies as fast (within 5% and "
        "their noise: numpy copy +0%, pageable copy to the GPU +0%). With nothing pinned, "
        "cuMemHostAlloc of 1 GiB failed: cuMemHostAlloc failed: out of memory."
    ]
    limits_table, release, host_work = summary.tables  # no climb table
    assert len(limits_table.notes) == 1  # nothing pinned is not above a soft limit of 0 B
    assert "One call over every half step needs two steps or more: not made." in release.notes
    assert host_work.headers[2] == "nothing pinned"
    assert host_work.rows[-1] == ["MemAvailable", "120 GiB", "-", "-", ""]
    assert host_work.figures[-1]["idle"].name == "MemAvailable with nothing pinned"  # its CSV row


def limits_rows(**changes) -> list[list[str]]:
    result = synthetic()
    result.extra = dataclasses.replace(result.extra, limits=host(120, **changes))
    return summarize(roundtrip(result)).tables[0].rows


def test_the_limits_table_says_each_limit_and_who_it_binds():
    unprivileged = limits_rows(
        memlock_soft_bytes=64 * 1024,
        memlock_hard_bytes=128 * 1024,
        root=False,
        cap_ipc_lock=False,
        cgroup_limit_bytes=40 * GIB,
        cgroup_version=1,
    )
    assert unprivileged[:4] == [
        ["RLIMIT_MEMLOCK soft", "64 KiB", "binds mlock()"],
        ["RLIMIT_MEMLOCK hard", "128 KiB", "the soft limit"],
        ["Process", "not root, no CAP_IPC_LOCK", "RLIMIT_MEMLOCK"],
        ["cgroup v1 memory", "40 GiB, ? used", "both calls"],  # its usage unread
    ]
    privileged = limits_rows(cgroup_version=2)
    assert privileged[:4] == [
        ["RLIMIT_MEMLOCK soft", "unlimited", "does not bind (root or CAP_IPC_LOCK)"],
        ["RLIMIT_MEMLOCK hard", "unlimited", "the soft limit"],
        ["Process", "root, CAP_IPC_LOCK", "RLIMIT_MEMLOCK"],
        ["cgroup v2 memory", "no limit", "both calls"],
    ]
    assert limits_rows()[3] == ["cgroup memory", "none found", ""]


def test_the_limits_tables_memlock_sizes_are_named_facts_for_the_csv():
    result = synthetic()
    limits = host(120, memlock_soft_bytes=64 * 1024, memlock_hard_bytes=128 * 1024)
    result.extra = dataclasses.replace(result.extra, limits=limits)
    figures = summarize(roundtrip(result)).tables[0].figures
    assert [(f["value"].name, f["value"].bytes) for f in figures[:2]] == [
        ("RLIMIT_MEMLOCK soft", 64 * 1024),
        ("RLIMIT_MEMLOCK hard", 128 * 1024),
    ]


@pytest.mark.parametrize(
    ("soft", "noted"), [(8 * GIB, False), (8 * GIB - 1, True), (6 * GIB, True)]
)
def test_the_memlock_note_is_for_a_top_above_the_soft_limit_not_at_it(soft, noted):
    result = synthetic()  # 8 GiB held at the top, 6 GiB a step below
    result.extra = dataclasses.replace(result.extra, limits=host(120, memlock_soft_bytes=soft))
    notes = summarize(roundtrip(result)).tables[0].notes
    assert any("This run pinned 8 GiB, above RLIMIT_MEMLOCK's" in n for n in notes) is noted


def test_the_verdict_rounds_the_total_and_the_cost_per_gib_from_milliseconds():
    result = synthetic(steps=1, alloc_ms=1000.5, touch_ms=20.0, register_ms=10.0)
    said = summarize(roundtrip(result)).conclusions[0]  # 1050.5 ms for 2 GiB
    assert said.startswith("Pinning 2 GiB took 1.1 s, 0.53 s per GiB, and left")


def test_the_verdict_names_every_copy_made_slower():
    result = synthetic(copy_ms=(100.0, 120.0), h2d_ms=(150.0, 180.0))
    said = summarize(roundtrip(result)).conclusions[0]
    assert said == (
        "Pinning 8 GiB took 1.4 s, 0.17 s per GiB, and left the host's numpy copy 20% slower "
        "and pageable copy to the GPU 20% slower. It stopped at its cap of 8 GiB."
    )


def test_a_failed_calls_words_are_its_own_where_it_has_no_cause():
    assert pinlimit._cuda_words(RuntimeError("cuMemHostAlloc failed: x")) == (
        "cuMemHostAlloc failed: x"
    )
    assert pinlimit._cuda_words(OutOfMemory("no room")) == "no room"
    assert pinlimit._cuda_words(MemoryError()) == "MemoryError"


def test_the_climb_needs_no_gpu_to_be_read(monkeypatch):
    SimpleNamespace()  # summarize imports no PyCUDA: the registry's report path
    import sys

    monkeypatch.setitem(sys.modules, "pycuda", None)
    assert summarize(roundtrip(synthetic())).tables


def test_the_benchmark_reads_memprofs_cost_per_gib_as_the_native_program_prints_it():
    from tests.benchmark_scripts import script as benchmark

    script = benchmark("pinlimit_reference")
    found = script.per_gib(roundtrip(synthetic()))  # halves of 1 GiB
    assert found["alloc"] == 250.0 and found["register"] == 12.0
    assert found["touch_pinned"] == found["touch_registered"] == 40.0
    assert found["free"] == 30.0 and found["unregister"] == 9.0
    assert found["register_whole"] == pytest.approx(44.0 / 4)


def test_every_measurement_of_a_run_has_a_name_of_its_own_in_profiles_and_diffs():
    names = [m.display_name for m in synthetic().measurements]
    assert len(set(names)) == len(names), names
