"""memprof.experiments.common: what the experiments share, each rule where a user sees it: the
bytes the host side of pageable copies moves, which copies a figure table keys, the bytes and
kinds sumArrays records and the checks of what the copies and kernels wrote (a fake GPU's
memory, tests/fakegpu.py: real bytes, made-up times)."""

from __future__ import annotations

import ctypes
import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

from memprof.core import bindings
from memprof.experiments import experiment_named, load
from memprof.experiments.base import RunContext, declared_keys, declared_measures
from memprof.experiments.common import (
    HOST_SIDE_TARGET_MS,
    HOST_STAGING_NAMES,
    STAGING_CHUNK_BYTES,
    CheckedCopies,
    figures_by_key,
    found_or_none,
    input_arrays,
    measure_host_staging,
)
from memprof.model.results import Measurement
from tests.conftest import FIXTURES
from tests.fakegpu import FakeBindings, FakeCuda, FakeGpu, FakeSession
from tests.test_progress import ATTRIBUTES


class RecordingProfiler:
    """host_throughput's arguments, and each action run once (the batches are the core's)."""

    def __init__(self) -> None:
        self.timed: list[tuple] = []

    def host_throughput(self, name, operation, kind, nbytes, action, *, target_ms) -> None:
        self.timed.append((name, operation, kind, nbytes, target_ms))
        action()


@pytest.mark.parametrize("nbytes", [2 * STAGING_CHUNK_BYTES + 4096, 4096])
def test_the_host_side_copies_every_byte_through_one_chunk_sized_buffer(monkeypatch, nbytes):
    """Into the staging buffer chunk by chunk (h2d), out of it (d2h): every byte of the
    pageable buffer once, in order, the last chunk as long as what is left."""
    copies: list[tuple[int, int, int]] = []
    memmove = ctypes.memmove

    def recorded(destination, source, length):
        copies.append((destination, source, length))
        return memmove(destination, source, length)

    monkeypatch.setattr(ctypes, "memmove", recorded)
    scratch = np.zeros(nbytes, np.uint8)
    made = RecordingProfiler()
    measure_host_staging(made, scratch)
    assert made.timed == [
        (HOST_STAGING_NAMES[way], f"staging_{way}", "pageable", nbytes, HOST_SIDE_TARGET_MS)
        for way in ("h2d", "d2h")
    ]
    chunk = min(STAGING_CHUNK_BYTES, nbytes)
    steps = [(offset, min(chunk, nbytes - offset)) for offset in range(0, nbytes, chunk)]
    assert sum(length for _, length in steps) == nbytes
    pageable = scratch.ctypes.data
    into, out_of = copies[: len(steps)], copies[len(steps) :]
    staging = {destination for destination, _, _ in into}
    assert len(staging) == 1 and not pageable <= staging.pop() < pageable + nbytes
    assert [(source - pageable, length) for _, source, length in into] == steps
    assert [(destination - pageable, length) for destination, _, length in out_of] == steps
    assert {source for _, source, _ in out_of} == {destination for destination, _, _ in into}


def test_a_figure_table_keys_gpu_copies_only_and_refuses_a_file_without_them():
    result = load(FIXTURES / "h200_zerocopy_p20.json")
    declared = declared_measures(experiment_named("zerocopy"))
    keyed = figures_by_key(result, declared, lambda m: (m.group, m.operation, m.kind, m.bytes))
    gpu = [m for m in result.measurements if m.group == "gpu"]
    assert len(gpu) < len(result.measurements)  # api calls and host copies beside them
    assert [one.measurement for one in keyed.values()] == gpu
    with pytest.raises(ValueError, match=r"^it holds no copy measurements$"):
        figures_by_key(result, declared, lambda m: None)


def test_found_or_none_finds_the_measurement_of_its_group():
    result = load(FIXTURES / "h200_zerocopy_p20.json")
    copy = next(m for m in result.measurements if (m.group, m.kind) == ("gpu", "pageable"))
    call = found_or_none(result, "api", copy.operation, "pageable", copy.bytes)
    assert call is not None and call.group == "api"
    assert found_or_none(result, "gpu", copy.operation, "pageable", copy.bytes) is copy
    assert found_or_none(result, "gpu", copy.operation, "pageable", copy.bytes + 1) is None


@pytest.mark.parametrize("direction", ["h2d", "d2h"])
def test_checked_copies_verify_only_a_copy_that_happened(direction):
    """hostlink's and portable's check: the source holds the values, the destination is
    poisoned, so a copy that never ran fails and one that ran passes (a fake GPU's memory)."""
    gpu = FakeGpu()
    cuda = FakeCuda(gpu)
    values = np.arange(1, 1025, dtype=np.float32)
    allocation = cuda.mem_alloc(values.nbytes)
    cuda.memcpy_htod(allocation, values)  # both ends hold the values from a copy before:
    host = SimpleNamespace(array=values.copy())  # only the poison makes a missed one fail
    device = SimpleNamespace(device_pointer=allocation, nbytes=values.nbytes)
    session = SimpleNamespace(cuda=cuda, synchronize=lambda: None)
    checked = CheckedCopies(session, host, device, values)
    try:
        checked.prepare(direction)
        destination = read_device(cuda, allocation, values) if direction == "h2d" else host.array
        assert np.isnan(destination).all()
        source = host.array if direction == "h2d" else read_device(cuda, allocation, values)
        assert np.array_equal(source, values)
        missed = checked.verify(direction, "copies")
        assert not missed.passed and missed.name == "copies"
        if direction == "h2d":
            cuda.memcpy_htod(allocation, host.array)
        else:
            cuda.memcpy_dtoh(host.array, allocation)
        assert checked.verify(direction, "copies").passed
    finally:
        allocation.free()


def read_device(cuda: FakeCuda, allocation, like: np.ndarray) -> np.ndarray:
    found = np.empty_like(like)
    cuda.memcpy_dtoh(found, allocation)
    return found


def test_the_inputs_are_the_same_nonzero_float32_each_run_and_their_sum():
    a, b, expected = input_arrays(1000)
    assert a.dtype == b.dtype == expected.dtype == np.float32 and a.shape == (1000,)
    assert np.array_equal(expected, a + b) and not np.array_equal(a, b)
    assert np.count_nonzero(a) == np.count_nonzero(b) == 1000
    again = input_arrays(1000)
    assert all(np.array_equal(x, y) for x, y in zip(again, (a, b, expected), strict=True))
    assert not np.array_equal(input_arrays(1000, seed=1)[0], a)


def run_on_fake(name: str, monkeypatch) -> tuple[RunContext, list[Measurement]]:
    """A small run of experiment `name` on the stand-in GPU: its checks and measurements."""
    experiment = experiment_named(name)
    session = FakeSession(ATTRIBUTES, declared_keys(type(experiment)))
    fake = FakeBindings(session.gpu)
    monkeypatch.setattr(bindings, "_import", lambda: (fake, None))
    bindings._allocation_properties.cache_clear()
    fields = {f.name for f in dataclasses.fields(experiment.Params)}
    small = {"power": POWER, "powers": (POWER,), "repeat": 2, "warmup": 1}
    params = experiment.Params(**{k: v for k, v in small.items() if k in fields})
    facts = SimpleNamespace(name="NVIDIA H200", attributes=ATTRIBUTES)
    ctx = RunContext(params, session=session, facts={0: facts})
    try:
        experiment.run(ctx)
        measurements = session.profiler.measurements()
    finally:
        session.close()
        bindings._allocation_properties.cache_clear()
    assert session.gpu.leaks() == {}
    return ctx, measurements


POWER = 10


KERNEL_BYTES = 3 * 4 << POWER  # sumArrays reads a and b and writes res, float32 each


@pytest.mark.parametrize(
    ("name", "kernel_kinds", "spans"),
    [("zerocopy", {"device", "mapped"}, 3), ("uva", {"uva", "mapped", "device"}, 0),
     ("pinned", {None}, 2)],
)  # fmt: skip
def test_sum_arrays_records_its_three_arrays_and_verifies_what_it_wrote(
    name, kernel_kinds, spans, monkeypatch
):
    """Each launch of sumArrays, alone or in the seeds' flow, counts a, b and res in the
    memory kind it read; each flow spans the same bytes; every result passes its check."""
    ctx, measurements = run_on_fake(name, monkeypatch)
    kernels = [m for m in measurements if m.operation == "kernel"]
    assert {m.kind for m in kernels} == kernel_kinds
    assert {m.bytes for m in kernels} == {KERNEL_BYTES}
    assert [m.bytes for m in measurements if m.group == "span"] == [KERNEL_BYTES] * spans
    assert ctx.checks and all(check.passed for check in ctx.checks), ctx.checks
    assert all(check.name.startswith("sumArrays") for check in ctx.checks)
