"""managed on the stand-in GPU (tests/fakegpu.py): which steps it times and verifies, and
which it skips, with the reason the table prints, where the GPU lacks concurrentManagedAccess
(prefetch and cuMemAdvise need it)."""

from __future__ import annotations

from types import SimpleNamespace

from memprof.core import memory
from memprof.experiments.base import RunContext, declared_keys
from memprof.experiments.managed import Managed, ManagedParams
from tests.fakegpu import FakeSession, driver_calls_on
from tests.test_compare_fake import ATTRIBUTES

LACKS = "needs concurrentManagedAccess, which this GPU lacks"


def run_managed(monkeypatch, params: ManagedParams, concurrent: int):
    """A small managed run on the fake GPU: its context, what it returned, what it timed and
    the progress it showed."""
    attributes = {**ATTRIBUTES, "concurrentManagedAccess": concurrent}
    session = FakeSession(attributes, declared_keys(Managed))
    read = session.attribute
    session.attribute = lambda name: (
        concurrent if name == "CONCURRENT_MANAGED_ACCESS" else read(name)
    )
    facts = SimpleNamespace(name="NVIDIA H200", attributes=attributes)
    steps: list[tuple] = []

    def progress(*step) -> None:
        steps.append(step)

    ctx = RunContext(params, progress, session=session, facts={0: facts})
    with driver_calls_on(session.gpu, monkeypatch):
        try:
            extra = Managed().run(ctx)
            measurements = session.profiler.measurements()
        finally:
            session.close()
    assert session.gpu.leaks() == {}
    return ctx, extra, measurements, steps


def timed(measurements, operation: str) -> set[str]:
    return {m.kind for m in measurements if m.operation == operation}


def test_with_concurrent_access_each_variant_asked_for_is_timed_and_verified(monkeypatch):
    asked = []
    real = memory.require_memory
    monkeypatch.setattr(
        memory, "require_memory", lambda *args, **sizes: asked.append(sizes) or real(*args, **sizes)
    )
    params = ManagedParams(power=10, repeat=2, warmup=1, advice=("read-mostly", "accessed-by"))
    ctx, extra, measurements, steps = run_managed(monkeypatch, params, concurrent=1)
    array_bytes = 4 << params.power  # managed may all land on the GPU: 6 arrays there, 8 host
    assert asked == [{"device_bytes": 6 * array_bytes, "host_bytes": 8 * array_bytes}]
    assert extra.skipped == []
    variants = {"managed+prefetch", "managed+read-mostly", "managed+accessed-by"}
    assert timed(measurements, "kernel_first") == {"managed", *variants}
    assert timed(measurements, "host_read") == {"managed", "pageable", *variants}
    assert timed(measurements, "prefetch") == {"managed+prefetch"}
    assert [(check.name, check.passed) for check in ctx.checks] == [
        ("sumArrays, managed memory", True),
        ("sumArrays, device memory", True),
        ("sumArrays, managed memory prefetched", True),
        ("sumArrays, managed memory, read-mostly", True),
        ("sumArrays, managed memory, accessed-by", True),
    ]
    kernels = [m for m in measurements if m.operation in ("kernel_first", "kernel")]
    assert {m.bytes for m in kernels} == {3 * array_bytes}  # a, b and res
    samples = {(m.operation, m.kind): len(m.samples_ms) for m in measurements if m.group != "api"}
    assert samples.pop(("h2d", "pinned")) == 2 * params.repeat  # a and b each flow
    assert set(samples.values()) == {params.repeat}  # the warm-up's never kept
    where = "managed memory, 4 KiB"
    assert steps == [
        (f"{where}: on-demand migration", 0, 5),
        ("device memory, 4 KiB: explicit copies", 1, 5),
        (f"{where}: prefetch", 2, 5),
        (f"{where}: advice read-mostly", 3, 5),
        (f"{where}: advice accessed-by", 4, 5),
        ("done", 5, 5),
    ]


def test_without_prefetch_none_is_timed(monkeypatch):
    params = ManagedParams(power=10, repeat=2, warmup=0, prefetch=False, advice=())
    ctx, extra, measurements, steps = run_managed(monkeypatch, params, concurrent=1)
    assert extra.skipped == []
    assert timed(measurements, "kernel_first") == {"managed"}
    assert timed(measurements, "prefetch") == set()
    assert len(ctx.checks) == 2 and all(check.passed for check in ctx.checks)
    assert [step[1:] for step in steps] == [(0, 2), (1, 2), (2, 2)]


def test_without_concurrent_access_prefetch_and_each_hint_are_skipped_saying_why(monkeypatch):
    params = ManagedParams(power=10, repeat=2, warmup=1, advice=("read-mostly", "accessed-by"))
    ctx, extra, measurements, steps = run_managed(monkeypatch, params, concurrent=0)
    assert extra.skipped == [
        f"prefetch: {LACKS}",
        f"advice read-mostly: {LACKS}",
        f"advice accessed-by: {LACKS}",
    ]
    assert timed(measurements, "kernel_first") == {"managed"}
    assert not [m for m in measurements if (m.kind or "").startswith("managed+")]
    assert [check.name for check in ctx.checks] == [
        "sumArrays, managed memory",
        "sumArrays, device memory",
    ]
    assert [step[0].rsplit(": ")[-1] for step in steps] == [  # each skip still a step
        "on-demand migration", "explicit copies", "prefetch", "advice read-mostly",
        "advice accessed-by", "done",
    ]  # fmt: skip
