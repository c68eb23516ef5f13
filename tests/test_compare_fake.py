"""compare on the stand-in GPU (tests/fakegpu.py): what it verifies, and that it does no work
twice that its figures never needed (issue 40: compare within its 3 s budget on the H200)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from memprof.core import access, memory
from memprof.experiments import compare
from memprof.experiments.base import RunContext, declared_keys
from memprof.experiments.compare import Compare, CompareParams
from tests.fakegpu import FakeSession, driver_calls_on
from tests.test_progress import ATTRIBUTES as FAKE_ATTRIBUTES

ATTRIBUTES = {**FAKE_ATTRIBUTES, "managedMemory": 1, "concurrentManagedAccess": 1}

PARAMS = CompareParams(power=10, repeat=2, warmup=1)


def run_compare(monkeypatch) -> tuple[RunContext, list]:
    """A small compare on the fake GPU: its context (checks) and its measurements."""
    session = FakeSession(ATTRIBUTES, declared_keys(Compare))
    facts = SimpleNamespace(name="NVIDIA H200", attributes=ATTRIBUTES)
    ctx = RunContext(PARAMS, session=session, facts={0: facts})
    with driver_calls_on(session.gpu, monkeypatch):
        try:
            Compare().run(ctx)
            measurements = session.profiler.measurements()
        finally:
            session.close()
    assert session.gpu.leaks() == {}
    return ctx, measurements


def test_every_check_of_a_compare_that_did_its_work_passes(monkeypatch):
    ctx, _ = run_compare(monkeypatch)
    assert len(ctx.checks) > 10
    assert all(check.passed for check in ctx.checks), [c for c in ctx.checks if not c.passed]


def test_each_kind_is_allocated_only_as_often_as_its_allocation_is_timed(monkeypatch):
    made: dict[str, int] = {}
    real = memory.allocate

    def counting(session, kind_name, count, *arguments, **keywords):
        if count == 1 << PARAMS.power:
            made[kind_name] = made.get(kind_name, 0) + 1
        return real(session, kind_name, count, *arguments, **keywords)

    monkeypatch.setattr(memory, "allocate", counting)
    _, measurements = run_compare(monkeypatch)
    timed = {m.kind: len(m.samples_ms) for m in measurements if m.operation == "alloc"}
    assert set(timed) >= {"pageable", "pinned", "managed", "device"}
    for kind, samples in timed.items():  # the warm-up's, the timed ones, none thrown away
        extra = 1 if kind == "device" else 0  # the buffer the host kinds' copies use
        assert made[kind] == PARAMS.warmup + samples + extra, kind


def test_the_values_are_summed_once_for_every_kernel_read(monkeypatch):
    summed = []
    real = access.float64_sum
    monkeypatch.setattr(access, "float64_sum", lambda values: summed.append(values) or real(values))
    ctx, _ = run_compare(monkeypatch)
    reads = [check for check in ctx.checks if check.name.startswith("kernel read")]
    assert len(reads) >= 5 and len(summed) == 1


def test_a_kernel_read_of_other_values_fails_its_check(monkeypatch):
    real = compare._EveryKind.__init__

    def wrong_sum(self, ctx, elements):
        real(self, ctx, elements)
        self.values_sum *= 1.001  # as if the buffers held other values than these

    monkeypatch.setattr(compare._EveryKind, "__init__", wrong_sum)
    ctx, _ = run_compare(monkeypatch)
    failed = {check.name for check in ctx.checks if not check.passed}
    assert failed == {check.name for check in ctx.checks if check.name.startswith("kernel read")}


def sum_check(values: np.ndarray, stored: np.ndarray) -> bool:
    """Whether DirectAccess.check_sum passes a readSum of `stored` against `values`' sum."""
    session = FakeSession(ATTRIBUTES, declared_keys(Compare))
    try:
        reader = access.DirectAccess(session)
        buffer = memory.allocate(session, "device", stored.size)
        session.cuda.memcpy_htod(buffer.device_pointer, stored)
        reader.read(buffer.device_pointer, stored.size, "device")
        passed = reader.check_sum("read", values.size, access.float64_sum(values)).passed
        buffer.free()
        reader.free()
    finally:
        session.close()
    return passed


@pytest.mark.parametrize(
    ("change", "passes"),
    [
        (lambda v: v, True),
        (lambda v: np.where(np.arange(v.size) == 7, v * (1 + 2e-5), v), True),  # within 1e-4
        (lambda v: np.where(np.arange(v.size) == 7, v + 1, v), False),
        (lambda v: np.where(np.arange(v.size) == 7, np.nan, v), False),
    ],
)
def test_a_sum_check_passes_within_its_tolerance_and_never_on_nan(change, passes):
    values = np.random.default_rng(1).random(4096, dtype=np.float32) + 0.5
    stored = change(values).astype(np.float32)
    assert sum_check(values, stored) is passes


@pytest.mark.parametrize("direction", ["htod", "dtoh"])
def test_a_copy_that_writes_nothing_fails_the_round_trip_check(monkeypatch, direction):
    """Each direction's destination holds NaN before its copies: the device buffer held the
    previous kind's values (pageable's, before pinned's copies) and the host buffer its
    own, which a copy writing nothing would have kept."""
    real = memory.copy

    def lazy(session, destination, source, *arguments, **keywords):
        host = source if destination.on_device else destination
        if host.kind.name == "pinned" and destination.on_device == (direction == "htod"):
            return None  # pinned memory's copies this way write nothing
        return real(session, destination, source, *arguments, **keywords)

    monkeypatch.setattr(memory, "copy", lazy)
    ctx, _ = run_compare(monkeypatch)
    trips = {c.name: c.passed for c in ctx.checks if c.name.startswith("copied to the device")}
    failed = [name for name, passed in trips.items() if not passed]
    assert len(failed) == 1 and "pinned" in failed[0], trips
