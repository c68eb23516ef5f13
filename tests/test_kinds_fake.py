"""pinned, zerocopy and writecombined run on the stand-in GPU (tests/fakegpu.py): the memory
each asks for before it allocates, every measurement it records in order (what, which kind,
its bytes, --repeat samples and never the warm-up's), each result it verifies and passes, and
its progress step by step. test_progress runs them for their steps alone."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import numpy as np
import pytest

from memprof.core import memory
from memprof.experiments import experiment_named
from memprof.experiments.base import RunContext, declared_keys
from tests.fakegpu import FakeSession, driver_calls_on
from tests.test_progress import ATTRIBUTES

REPEAT, WARMUP = 3, 1  # neither is any experiment's default
KERNEL = "sumArraysGPU(float*, float*, float*, int)"
HTOD, DTOH = "[CUDA memcpy HtoD]", "[CUDA memcpy DtoH]"
MEMSET = [
    ("api", "cuMemsetD8Async", "memset", "device"),
    ("gpu", "[CUDA memset]", "memset", "device"),
]


def run_on_fake(
    name: str, monkeypatch, copies: list | None = None, multiprocessors: int = 0, **params
):
    """(memory asked for, measurements, checks, progress steps) of a small run on the fake;
    `copies`, where given, gets each host copy (watch_copies); `multiprocessors`, where given,
    is the device facts' SM count (device sizes its grids by it)."""
    asked: list[dict] = []
    real = memory.require_memory

    def require(*args, **sizes) -> None:
        asked.append(sizes)
        real(*args, **sizes)

    monkeypatch.setattr(memory, "require_memory", require)
    experiment = experiment_named(name)
    session = FakeSession(ATTRIBUTES, declared_keys(type(experiment)))
    facts = SimpleNamespace(name="NVIDIA H200", attributes=ATTRIBUTES)
    if multiprocessors:
        facts.multiprocessors = multiprocessors
    steps: list[tuple] = []
    if copies is not None:
        watch_copies(session, steps, copies)
    parameters = experiment.Params(repeat=REPEAT, warmup=WARMUP, **params)
    ctx = RunContext(
        parameters, lambda *step: steps.append(step), session=session, facts={0: facts}
    )
    with driver_calls_on(session.gpu, monkeypatch):
        try:
            experiment.run(ctx)
            measurements = session.profiler.measurements()
        finally:
            session.close()
    assert session.gpu.leaks() == {}
    return asked, measurements, ctx.checks, steps


def watch_copies(session: FakeSession, steps: list, copies: list) -> None:
    """Each host copy the fake makes, as (the progress step it ran in, its call, the host
    array's address, whether the gate was closed)."""

    def watched(name: str, host_at: int):
        real = getattr(session.cuda, name)

        def copy(*args):
            address = args[host_at].__array_interface__["data"][0]
            copies.append((steps[-1][0], name, address, session.profiler.gate_closed))
            return real(*args)

        return copy

    for call, host_at in (("memcpy_htod", 1), ("memcpy_dtoh", 0)):
        for name in (call, f"{call}_async"):
            setattr(session.cuda, name, watched(name, host_at))


def recorded(measurements, staged: tuple[str, ...] = ()) -> list[tuple]:
    """Each measurement as (group, name, operation, kind, bytes, samples); those `staged`
    (timed until steady, their count their own) without their count."""
    return [
        (m.group, m.name, m.operation, m.kind, m.bytes)
        + (() if m.operation in staged else (len(m.samples_ms),))
        for m in measurements
    ]


def checked(checks) -> list[tuple[str, bool, int]]:
    return [(check.name, check.passed, check.elements) for check in checks]


def test_writecombined_times_each_kind_alike_and_verifies_its_read_back_and_kernel(monkeypatch):
    copied = []  # numpy's copies (the host's writes and reads): what each reads and writes
    real = np.copyto
    monkeypatch.setattr(
        np, "copyto", lambda to, source: copied.append((to.dtype, source.dtype)) or real(to, source)
    )
    asked, measurements, checks, steps = run_on_fake("writecombined", monkeypatch, power=10)
    nbytes = 4 << 10
    # float32 both sides: a host read that also converted its floats would time the conversion
    assert set(copied) == {(np.dtype(np.float32), np.dtype(np.float32))}
    assert asked == [{"device_bytes": 3 * nbytes, "host_bytes": 8 * nbytes}]
    per_kind = {
        kind: [
            ("host", "host write", "host_write", kind, nbytes, REPEAT),
            ("host", "host read", "host_read", kind, nbytes, REPEAT),
            ("api", "cuMemcpyHtoDAsync", "h2d", kind, nbytes, REPEAT),
            ("gpu", HTOD, "h2d", kind, nbytes, REPEAT),
            ("api", "cuMemcpyDtoHAsync", "d2h", kind, nbytes, REPEAT),
            ("gpu", DTOH, "d2h", kind, nbytes, REPEAT),
        ]
        for kind in ("mapped", "writecombined")
    }
    poison = [(*m, nbytes, 2 * REPEAT) for m in MEMSET]  # before each kind's kernel
    launch = ("api", "cuLaunchKernel", "launch", None, 0, 2 * REPEAT)
    assert recorded(measurements) == [
        *per_kind["mapped"],
        *poison,
        launch,
        ("gpu", KERNEL, "kernel", "mapped", 3 * nbytes, REPEAT),
        *per_kind["writecombined"],
        ("gpu", KERNEL, "kernel", "writecombined", 3 * nbytes, REPEAT),
    ]
    assert checked(checks) == [
        ("host read back, cached pinned", True, 1024),
        ("sumArrays 2^10 (4 KiB), cached pinned mapped", True, 1024),
        ("host read back, write-combined pinned", True, 1024),
        ("sumArrays 2^10 (4 KiB), write-combined pinned mapped", True, 1024),
    ]
    assert steps == [
        ("cached pinned, 4 KiB", 0, 2),
        ("write-combined pinned, 4 KiB", 1, 2),
        ("done", 2, 2),
    ]


def test_pinned_times_pageable_then_pinned_and_stages_pageable_alone(monkeypatch):
    copies: list = []
    asked, measurements, checks, steps = run_on_fake("pinned", monkeypatch, copies, power=10)
    nbytes = 4 << 10
    assert asked == [{"device_bytes": 3 * nbytes, "host_bytes": 7 * nbytes}]
    staging = ("staging_h2d", "staging_d2h")

    def flow(kind: str, api_h2d: str, api_d2h: str) -> list[tuple]:
        """The flow's copies (a and b in, res out) and its span; copies then batched too."""
        return [
            ("api", api_h2d, "h2d", kind, nbytes, 2 * REPEAT),
            ("gpu", HTOD, "h2d", kind, nbytes, 2 * REPEAT),
            *([("api", "cuLaunchKernel", "launch", None, 0, 2 * REPEAT),
               ("gpu", KERNEL, "kernel", None, 3 * nbytes, 2 * REPEAT)]
              if kind == "pageable" else []),
            ("api", api_d2h, "d2h", kind, nbytes, REPEAT),
            ("gpu", DTOH, "d2h", kind, nbytes, REPEAT),
            ("span", "2 HtoD + sumArrays + DtoH", "flow", kind, 3 * nbytes, REPEAT),
        ]  # fmt: skip

    assert recorded(measurements, staging) == [
        ("host", "numpy.empty + first touch", "alloc", "pageable", nbytes, REPEAT),
        ("host", "numpy free", "free", "pageable", nbytes, REPEAT),
        ("host", "staging memcpy (pageable → 256 KiB buffer)", "staging_h2d", "pageable", nbytes),
        ("host", "staging memcpy (256 KiB buffer → pageable)", "staging_d2h", "pageable", nbytes),
        *[(*m, nbytes, 2 * REPEAT) for m in MEMSET],  # res poisoned in each flow
        *flow("pageable", "cuMemcpyHtoD", "cuMemcpyDtoH"),
        ("api", "cuMemHostAlloc", "alloc", "pinned", nbytes, REPEAT),
        ("api", "cuMemFreeHost", "free", "pinned", nbytes, REPEAT),
        *flow("pinned", "cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync"),
    ]
    batched = {(m.operation, m.kind) for m in measurements if m.throughput_ms}
    assert batched == {(d, k) for d in ("h2d", "d2h") for k in ("pageable", "pinned")} | {
        (operation, "pageable") for operation in staging
    }
    assert checked(checks) == [
        ("sumArrays, pageable host memory", True, 1024),
        ("sumArrays, pinned host memory", True, 1024),
    ]
    assert steps == [
        ("pageable memory, 4 KiB: allocation", 0, 4),
        ("pageable memory, 4 KiB: transfers", 1, 4),
        ("pinned memory, 4 KiB: allocation", 2, 4),
        ("pinned memory, 4 KiB: transfers", 3, 4),
        ("done", 4, 4),
    ]
    # each kind's copies, its flow's and its batches' alike: a and b in, res out; pageable
    # ones (synchronous) never behind the closed gate: on a GPU they would wait on it for ever
    for kind, gates in (("pageable", {False}), ("pinned", {False, True})):
        made = [copy[1:] for copy in copies if copy[0].startswith(f"{kind} memory")]
        sources = {address for call, address, _ in made if "htod" in call}
        destinations = {address for call, address, _ in made if "dtoh" in call}
        assert len(sources) == 2 and len(destinations) == 1 and not sources & destinations
        assert {closed for _, _, closed in made} == gates


def test_pinned_allocates_pageable_memory_where_host_buffer_says(monkeypatch):
    _, measurements, checks, _ = run_on_fake("pinned", monkeypatch, power=10, host_buffer="malloc")
    host = [(m.name, m.operation) for m in measurements if m.group == "host"]
    assert host[:2] == [("malloc + first touch", "alloc"), ("free", "free")]
    assert all(check.passed for check in checks)


@pytest.mark.parametrize("powers", [(10, 11), (11, 10)])
def test_zerocopy_asks_for_its_largest_size_and_runs_three_verified_paths_a_size(
    powers, monkeypatch
):
    allocated = []
    real = memory.allocate
    monkeypatch.setattr(
        memory, "allocate", lambda *args, **kw: allocated.append(args[1:3]) or real(*args, **kw)
    )
    asked, measurements, checks, steps = run_on_fake("zerocopy", monkeypatch, powers=powers)
    largest = 4 << 11
    assert asked == [{"device_bytes": 3 * largest, "host_bytes": 6 * largest}]
    # what it asked for at the largest size, each size: 3 arrays on the GPU and 6 on the host
    each_size = {"mapped": 2, "pinned": 1, "pageable": 3, "device": 3}
    assert Counter(allocated) == {
        (kind, 1 << power): count for power in powers for kind, count in each_size.items()
    }
    spans = [
        (m.name, m.kind, m.bytes, len(m.samples_ms)) for m in measurements if m.group == "span"
    ]
    assert spans == [
        (path, kind, 3 * (4 << power), REPEAT)
        for power in powers
        for path, kind in (
            ("device path", "device"),
            ("zero-copy path", "mapped"),
            ("pageable path", "pageable"),
        )
    ]
    kernels = [(m.kind, m.bytes, len(m.samples_ms)) for m in measurements if m.group == "gpu"
               and m.operation == "kernel"]  # fmt: skip
    assert kernels == [
        (kind, 3 * (4 << power), count)
        for power in powers
        for kind, count in (("device", 2 * REPEAT), ("mapped", REPEAT))  # device: both paths
    ]
    paths = ("device memory", "zero-copy", "device memory from pageable")
    assert checked(checks) == [
        (f"sumArrays 2^{power} ({4 << power >> 10} KiB), {path}", True, 1 << power)
        for power in powers
        for path in paths
    ]
    assert steps == [
        *(
            (f"zero-copy and device memory, 2^{power} ({4 << power >> 10} KiB)", done, 2)
            for done, power in enumerate(powers)
        ),
        ("done", 2, 2),
    ]
