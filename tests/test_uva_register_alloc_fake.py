"""uva, register and alloc run on the stand-in GPU (tests/fakegpu.py): the memory each asks for
before it allocates, every measurement it records in order (what, which kind, its bytes,
--repeat samples and never the warm-up's), each result it verifies, its progress step by step,
and uva's pointers: each path's kernel reads a and b at that path's addresses, and the result
records the mapped buffers' host and device addresses, not the device memory's."""

from __future__ import annotations

import numpy as np
import pytest

from memprof.core import memory
from memprof.errors import EnvironmentProblem
from memprof.experiments import alloc, uva
from memprof.experiments.common import SumArrays
from tests import test_kinds_fake as kinds_fake
from tests.fakegpu import FakeSession
from tests.test_kinds_fake import KERNEL, MEMSET, REPEAT, WARMUP, checked, recorded, run_on_fake
from tests.test_progress import ATTRIBUTES

NBYTES = 4 << 10  # power 10: 1024 floats


def test_uva_reads_each_path_at_its_own_addresses_and_records_the_mapped_ones(monkeypatch):
    launches: list[tuple] = []
    real_launch = SumArrays.launch

    def launch(self, a_pointer, b_pointer, result, kind):
        launches.append((kind, a_pointer, b_pointer, result.device_pointer))
        return real_launch(self, a_pointer, b_pointer, result, kind)

    monkeypatch.setattr(SumArrays, "launch", launch)
    returned: list = []
    real_run = uva.Uva.run
    monkeypatch.setattr(uva.Uva, "run", lambda self, ctx: returned.append(real_run(self, ctx)))
    asked, measurements, checks, steps = run_on_fake("uva", monkeypatch, power=10)
    assert asked == [{"device_bytes": 3 * NBYTES, "host_bytes": 5 * NBYTES}]
    poison = [(*m, NBYTES, 3 * REPEAT) for m in MEMSET]  # before every timed launch
    assert recorded(measurements) == [
        *poison,
        ("api", "cuLaunchKernel", "launch", None, 0, 3 * REPEAT),
        *(("gpu", KERNEL, "kernel", path, 3 * NBYTES, REPEAT) for path in uva.PATHS),
    ]
    assert checked(checks) == [
        (f"sumArrays 2^10 (4 KiB), {label}", True, 1024) for label in uva.PATHS.values()
    ]
    assert steps == [
        *((f"{label}, 4 KiB", done, 3) for done, label in enumerate(uva.PATHS.values())),
        ("done", 3, 3),
    ]
    (extra,) = returned
    a, b = extra.pointers.a, extra.pointers.b
    # the stand-in maps as UVA does: each mapped buffer's device address is its host one
    assert (a.host, b.host) == (a.device, b.device) and a.host != b.host
    by_path = {kind: pointers for kind, *pointers in launches}
    assert len(launches) == 3 * (REPEAT + 1) and len(by_path) == 3
    assert by_path["uva"][:2] == [a.host, b.host]
    assert by_path["mapped"][:2] == [a.device, b.device]
    device = by_path["device"][:2]
    assert not {*device} & {a.host, a.device, b.host, b.device} and device[0] != device[1]
    assert len({pointers[2] for pointers in by_path.values()}) == 1  # one result array


def test_uva_refused_without_unified_addressing_before_any_memory(monkeypatch):
    monkeypatch.setattr(
        FakeSession, "attribute", lambda self, name: 0 if name == "UNIFIED_ADDRESSING" else 1
    )
    asked: list = []
    monkeypatch.setattr(
        "memprof.core.memory.require_memory", lambda *args, **sizes: asked.append(sizes)
    )
    with pytest.raises(EnvironmentProblem) as refused:
        run_on_fake("uva", monkeypatch, power=10)
    assert str(refused.value) == (
        "this GPU and driver have no unified virtual addressing (unifiedAddressing = 0): "
        "a host pointer means nothing to a kernel here; `memprof zerocopy` asks the "
        "driver for the device pointer instead"
    )
    assert asked == []


def test_register_times_registration_then_each_kind_both_ways_then_the_kernel(monkeypatch):
    asked, measurements, checks, steps = run_on_fake("register", monkeypatch, power=10)
    assert asked == [{"device_bytes": 2 * NBYTES, "host_bytes": 9 * NBYTES}]

    def copies(kind: str, call: str) -> list[tuple]:
        return [
            ("api", f"cuMemcpyHtoD{call}", "h2d", kind, NBYTES, REPEAT),
            ("gpu", "[CUDA memcpy HtoD]", "h2d", kind, NBYTES, REPEAT),
            ("api", f"cuMemcpyDtoH{call}", "d2h", kind, NBYTES, REPEAT),
            ("gpu", "[CUDA memcpy DtoH]", "d2h", kind, NBYTES, REPEAT),
        ]

    staged = ("staging_h2d", "staging_d2h")  # timed until steady: their count their own
    assert recorded(measurements, staged) == [
        ("api", "cuMemHostRegister", "register", "registered", NBYTES, REPEAT),
        ("api", "cuMemHostUnregister", "unregister", "registered", NBYTES, REPEAT),
        *copies("pageable", ""),
        ("host", "staging memcpy (pageable → 256 KiB buffer)", "staging_h2d", "pageable",
         NBYTES),
        ("host", "staging memcpy (256 KiB buffer → pageable)", "staging_d2h", "pageable",
         NBYTES),
        *copies("registered", "Async"),
        *copies("pinned", "Async"),
        *((*m, NBYTES, REPEAT) for m in MEMSET),
        ("api", "cuLaunchKernel", "launch", None, 0, REPEAT),
        ("gpu", KERNEL, "kernel", "registered", 3 * NBYTES, REPEAT),
    ]  # fmt: skip
    assert checked(checks) == [
        ("copied back, the numpy array, pageable", True, 1024),
        ("copied back, the same array, registered", True, 1024),
        ("copied back, cuMemHostAlloc memory", True, 1024),
        ("sumArrays 2^10 (4 KiB), registered", True, 1024),
    ]
    assert steps == [
        ("registered memory, 4 KiB: registration cost", 0, 3),
        ("registered memory, 4 KiB: transfers", 1, 3),
        ("registered memory, 4 KiB: kernel through its mapping", 2, 3),
        ("done", 3, 3),
    ]


KINDS = ["pageable", "pinned", "portable", "writecombined", "mapped", "device", "pool",
         "pool_kept", "vmm"]  # fmt: skip  # what the stand-in supports, in alloc's order
MODERN = ["pool", "pool_kept", "vmm"]  # through the bindings: pools and virtual memory too


@pytest.mark.parametrize("once_from", [16 << 10, (16 << 10) + 1, None])
def test_alloc_times_every_kind_at_every_size_host_memory_once_from_its_threshold(
    monkeypatch, once_from
):
    """Host memory from the threshold on is allocated once and not warmed up, exactly there:
    the threshold at the largest size (16 KiB) makes its host kinds once, one byte above it
    none; the stand-in's threshold, far above, leaves every allocation --repeat times."""
    if once_from is not None:
        monkeypatch.setattr(alloc, "HOST_ONCE_FROM_BYTES", once_from)
    calls: list[tuple] = []  # each allocation's kind and elements, warm-ups' too
    real = memory.allocate
    monkeypatch.setattr(
        memory,
        "allocate",
        lambda s, kind, n, *more: calls.append((kind, n)) or real(s, kind, n, *more),
    )
    returned: list = []
    real_run = alloc.Alloc.run
    monkeypatch.setattr(alloc.Alloc, "run", lambda self, ctx: returned.append(real_run(self, ctx)))
    asked, measurements, checks, steps = run_on_fake("alloc", monkeypatch, powers=(12, 10))
    largest = 16 << 10
    assert asked == [{"device_bytes": 3 * largest, "host_bytes": 2 * largest}]
    (extra,) = returned
    assert extra.kinds == KINDS and extra.allocators is not None
    assert extra.skipped == [  # the stand-in's attributes say neither is there
        "registered memory needs hostRegisterSupported (HOST_REGISTER_SUPPORTED), which is 0 here",
        "managed memory needs managedMemory (MANAGED_MEMORY), which is 0 here",
    ]
    assert extra.host_once_from_bytes == (once_from or alloc.HOST_ONCE_FROM_BYTES)
    once = {kind for kind in alloc.HOST_KINDS if once_from == largest}

    def timed(kind: str, nbytes: int) -> int:
        return 1 if nbytes == largest and kind in once else REPEAT

    kinds_phase = [
        (kind, operation, nbytes, timed(kind, nbytes))
        for nbytes in (largest, 4 << 10)  # --powers' order, largest first here
        for kind in KINDS
        for operation in ("alloc", "free")
    ]
    assert [
        (m.kind, m.operation, m.bytes, len(m.samples_ms)) for m in measurements[:36]
    ] == kinds_phase
    # the kinds phase's allocations, warm-up (WARMUP = 1) and timed; none for what is once
    kinds_calls = [
        (kind, nbytes // 4)
        for nbytes in (largest, 4 << 10)
        for kind in KINDS
        for _ in range(timed(kind, nbytes) + (timed(kind, nbytes) == REPEAT) * WARMUP)
    ]
    assert calls[: len(kinds_calls)] == kinds_calls
    total = len(KINDS) * 2 + 2 * 2 + len(MODERN)
    assert steps[:2] == [
        ("pageable memory, 2^12 (16 KiB): allocate and free", 0, total),
        ("pinned memory, 2^12 (16 KiB): allocate and free", 1, total),
    ]
    assert steps[len(KINDS) * 2] == ("pools and virtual memory, 16 KiB", 18, total)
    assert steps[len(KINDS) * 2 - 1] == ("vmm memory, 2^10 (4 KiB): allocate and free", 17, total)
    assert [step[1:] for step in steps] == [(done, total) for done in range(total + 1)]
    assert steps[-1] == ("done", total, total)
    assert all(check.passed for check in checks) and len(checks) == 5


def test_alloc_without_pools_or_virtual_memory_counts_the_kinds_phase_alone(monkeypatch):
    """A GPU without pools or VMM: no pools phase, and progress out of the kinds' steps alone."""
    attributes = {**ATTRIBUTES, "memoryPoolsSupported": 0, "virtualMemoryManagementSupported": 0}
    monkeypatch.setattr(kinds_fake, "ATTRIBUTES", attributes)
    returned: list = []
    real_run = alloc.Alloc.run
    monkeypatch.setattr(alloc.Alloc, "run", lambda self, ctx: returned.append(real_run(self, ctx)))
    _, measurements, checks, steps = run_on_fake("alloc", monkeypatch, powers=(10,))
    assert returned[0].allocators is None  # nothing of pools or VMM measured
    kinds = ["pageable", "pinned", "portable", "writecombined", "mapped", "device"]
    assert [m.kind for m in measurements] == [kind for kind in kinds for _ in range(2)]
    total = len(kinds)
    assert [step[1:] for step in steps] == [(done, total) for done in range(total + 1)]
    assert steps[-1] == ("done", total, total) and checks == []


def test_register_registers_with_the_flags_its_table_names(monkeypatch):
    """The costs table's note says "flags DEVICEMAP | PORTABLE": every registration the run
    makes, timed or kept for the kernel, passes exactly those (the cost depends on them)."""
    from memprof.core import bindings

    flags_passed: list[int] = []
    real = bindings.host_register

    def host_register(address: int, nbytes: int, flags: int) -> None:
        flags_passed.append(flags)
        real(address, nbytes, flags)

    monkeypatch.setattr(bindings, "host_register", host_register)
    run_on_fake("register", monkeypatch, power=10)
    assert len(flags_passed) == REPEAT + WARMUP + 2  # timed, warm-up, a and b for the kernel
    assert set(flags_passed) == {bindings.HOST_REGISTER_DEVICEMAP | bindings.HOST_REGISTER_PORTABLE}


@pytest.mark.parametrize("call", ["memcpy_htod", "memcpy_dtoh", "memcpy_dtod"])
def test_the_stand_in_refuses_a_copy_past_its_device_allocation_as_the_driver_does(call):
    """Register's host arrays made float64 (mutmut 3.8.1 run 28) copied 8 KiB into a 4 KiB
    device buffer: the stand-in wrote over the test's heap and aborted the whole process.
    A copy ending at the allocation's last byte works; one float more is refused."""
    from tests.fakegpu import FakeCuda, FakeDriverError, FakeGpu

    gpu = FakeGpu()
    cuda = FakeCuda(gpu)
    start = gpu.allocate_device(NBYTES)
    other = gpu.allocate_device(2 * NBYTES)

    def copy(offset: int, floats: int) -> None:
        host = np.zeros(floats, np.float32)
        at = start + offset
        if call == "memcpy_htod":
            cuda.memcpy_htod(at, host)
        elif call == "memcpy_dtoh":
            cuda.memcpy_dtoh(host, at)
        else:
            cuda.memcpy_dtod(at, other, host.nbytes)

    copy(0, NBYTES // 4)
    copy(4, NBYTES // 4 - 1)
    with pytest.raises(FakeDriverError) as refused:
        copy(4, NBYTES // 4)
    assert str(refused.value) == (
        f"4096 bytes at {start + 4:#x}, past the end of the 4096-byte allocation at {start:#x}"
    )


@pytest.mark.parametrize(("powers", "words"), [((10,), "1 size"), ((12, 10), "2 sizes")])
def test_alloc_says_how_many_sizes_its_growth_checks_passed_at(monkeypatch, powers, words):
    """'(1 size)', never '(1 sizes)': the count as sweep's checks say it."""
    _, _, checks, _ = run_on_fake("alloc", monkeypatch, powers=powers)
    grown = [check for check in checks if check.name.startswith("grown to twice the size")]
    assert len(grown) == 2
    assert all(check.detail == f"Check result success! ({words})" for check in grown)
