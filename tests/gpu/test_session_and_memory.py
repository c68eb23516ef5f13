"""On the GPU: the session's lifecycle, every memory kind, copies, kernels, refusals."""

from __future__ import annotations

import numpy as np
import pytest

from memprof.core import memory
from memprof.core.kernels import load_kernel
from memprof.core.session import GpuSession
from memprof.errors import InvalidArgument, OutOfMemory
from memprof.experiments.common import POISON_BYTE, input_arrays

pytestmark = pytest.mark.gpu


def current_context():
    import pycuda.driver as cuda

    return cuda.Context.get_current()


def test_session_pops_its_context_on_success_and_on_errors():
    with GpuSession(0) as session:
        assert current_context() is not None
        memory.allocate(session, "pinned", 1024)
    assert current_context() is None
    for exception in (RuntimeError("boom"), KeyboardInterrupt()):
        with pytest.raises(type(exception)), GpuSession(0) as session:
            memory.allocate(session, "device", 1 << 20)
            memory.allocate(session, "mapped", 1 << 20)
            raise exception
        assert current_context() is None


def test_session_frees_device_memory_it_owns():
    with GpuSession(0) as session:
        free_before, _ = session.memory_info()
        for _ in range(4):
            memory.allocate(session, "device", 64 << 20)  # 256 MiB never freed by the caller
        free_during, _ = session.memory_info()
        assert free_before - free_during >= 256 << 20
        session.close()
    with GpuSession(0) as session:
        free_after, _ = session.memory_info()
    assert free_after >= free_before - (64 << 20)


def test_a_device_that_does_not_exist_is_refused_with_the_range():
    import pycuda.driver as cuda

    cuda.init()
    count = cuda.Device.count()
    with pytest.raises(
        InvalidArgument, match=rf"this machine has {count} CUDA device.*0 to {count - 1}"
    ):
        GpuSession(count).__enter__()


@pytest.mark.parametrize("host_kind", ["pageable", "pinned", "mapped"])
def test_every_host_kind_round_trips_through_device_memory(host_kind):
    with GpuSession(0) as session:
        elements = (1 << 20) + 7
        source = memory.allocate(session, host_kind, elements)
        target = memory.allocate(session, host_kind, elements)
        on_device = memory.allocate(session, "device", elements)
        values, _, _ = input_arrays(elements, seed=7)
        source.array[:] = values
        target.array.fill(np.nan)
        with session.profiler.timed():
            memory.copy(session, on_device, source)
            memory.copy(session, target, on_device)
        np.testing.assert_array_equal(target.array, values)
        names = {m.display_name for m in session.profiler.measurements()}
        assert f"[CUDA memcpy HtoD] ({host_kind})" in names
        assert f"[CUDA memcpy DtoH] ({host_kind})" in names


def test_a_kernel_reads_mapped_memory_through_its_device_pointer():
    with GpuSession(0) as session:
        elements = 1000  # not a multiple of the block size
        kernel = load_kernel(session, "sum_arrays.cu", "sumArraysGPU")
        a, b = (memory.allocate(session, "mapped", elements) for _ in range(2))
        result = memory.allocate(session, "device", elements)
        out = memory.allocate(session, "pinned", elements)
        a_values, b_values, expected = input_arrays(elements)
        a.array[:], b.array[:] = a_values, b_values
        memory.memset(session, result, POISON_BYTE)
        kernel.launch(
            session,
            elements,
            a.device_pointer,
            b.device_pointer,
            result.device_pointer,
            elements,
            kind="mapped",
        )
        memory.copy(session, out, result)
        np.testing.assert_array_equal(out.array, expected)
        assert kernel.signature.display == "sumArraysGPU(float*, float*, float*, int)"


def test_sizes_that_cannot_fit_are_refused_before_allocating():
    with GpuSession(0) as session:
        _, total = session.memory_info()
        with pytest.raises(OutOfMemory, match=r"needs .* of device memory but only .* is free"):
            memory.require_memory(session, device_bytes=total * 2)
        assert session.profiler.measurements() == []


def test_a_failed_allocation_says_how_much_was_asked_and_is_free():
    with GpuSession(0) as session:
        _, total = session.memory_info()
        with pytest.raises(OutOfMemory, match=r"cuMemAlloc of .* failed: out of memory \(.* free"):
            memory.allocate(session, "device", total)  # float32 elements: 4x the whole GPU


def test_an_experiment_failing_midway_leaves_the_process_healthy(monkeypatch):
    """An error deep inside an experiment (managed, mapped, kernels and a gate alive) frees
    everything; the next session in the same process works and nothing crashes later."""
    import gc

    from memprof import api
    from memprof.experiments import compare

    calls = []

    def failing_copy(profiler, operation, kind, destination, source):
        calls.append(kind)
        if kind.startswith("managed"):
            raise RuntimeError("injected failure")
        destination[...] = source

    monkeypatch.setattr(compare, "_timed_copyto", failing_copy)
    with pytest.raises(RuntimeError, match="injected failure"):
        api.run("compare", power=12, repeat=1, warmup=0)
    assert current_context() is None
    gc.collect()
    result = api.run("sweep", powers=(10,), kinds=("pinned", "zerocopy"), repeat=3)
    assert result.passed
    gc.collect()
