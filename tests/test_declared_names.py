"""A measurement's name as nvprof prints it is spelled once in memprof (the host copies' in
memprof.model.measures.COPY_NAMES, the prefetch's in base.PREFETCH); managed's and compare's
prefetch are one declaration and one procedure (common.prefetch_to_gpu), run here on the
stand-in GPU."""

from __future__ import annotations

import ast
import functools
from pathlib import Path
from types import SimpleNamespace

import pytest

from memprof.core import bindings
from memprof.experiments import base
from memprof.experiments.base import declared_keys
from memprof.experiments.common import prefetch_to_gpu
from memprof.experiments.compare import Compare
from memprof.experiments.managed import Managed
from tests.fakegpu import FakeSession


@pytest.mark.parametrize(("experiment", "arrays"), [(Managed, 3), (Compare, 1)])
def test_both_commands_declare_the_one_prefetch(experiment, arrays):
    declared = {measure.key: measure for measure in experiment.measures}
    gpu, calls = declared["gpu", "prefetch"], declared["api", "prefetch"]
    assert (gpu.name, gpu.basis, gpu.arrays) == (base.PREFETCH.name, "one operation", arrays)
    assert calls == base.PREFETCH_CALLS


@pytest.mark.parametrize(("experiment", "count"), [(Managed, 3), (Compare, 1)])
def test_the_one_procedure_records_the_declared_figures(monkeypatch, experiment, count):
    moved = []
    prefetch = lambda address, nbytes, device: moved.append((address, nbytes, device))  # noqa: E731
    monkeypatch.setattr(bindings, "prefetch", prefetch)
    session = FakeSession({}, declared_keys(experiment))
    buffers = [SimpleNamespace(device_pointer=4096 * (i + 1), nbytes=1024) for i in range(count)]
    with session.profiler.timed():
        prefetch_to_gpu(session, buffers, "managed prefetched")
    assert moved == [(4096 * (i + 1), 1024, 0) for i in range(count)]
    found = {(m.group, m.operation): m for m in session.profiler.measurements()}
    gpu, calls = found["gpu", "prefetch"], found["api", "prefetch"]
    assert (gpu.name, gpu.kind, gpu.bytes) == (
        base.PREFETCH.name,
        "managed prefetched",
        1024 * count,
    )
    assert (calls.name, calls.kind) == ("cuMemPrefetchAsync", "managed prefetched")


PACKAGE = Path(__file__).resolve().parent.parent / "memprof"


@functools.cache
def constants() -> tuple[tuple[str, object], ...]:
    """(module, value) of every constant in memprof's code: parsed once for all the names."""
    return tuple(
        (path.relative_to(PACKAGE).as_posix(), node.value)
        for path in sorted(PACKAGE.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant)
    )


@pytest.mark.parametrize(
    "name", ["[CUDA memcpy HtoD]", "[CUDA memcpy DtoH]", "[Unified Memory prefetch HtoD]"]
)
def test_each_name_is_spelled_in_one_place(name):
    spelled = [module for module, value in constants() if value == name]
    assert len(spelled) == 1, spelled
