"""A sweep's checks on the fake GPU (tests/fakegpu.py): every copy that leaves an element out
is reported, whichever side compares it (the GPU: the device buffer, write-combined and
mapped memory; the host: pinned and pageable memory), and only its own direction fails. The
same on the GPU: tests/gpu/test_verify_gpu.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from memprof.core import memory
from memprof.experiments.base import RunContext, declared_keys
from memprof.experiments.common import size_label
from memprof.experiments.sweep import Sweep, SweepParams
from tests.fakegpu import FakeSession
from tests.test_progress import ATTRIBUTES

LABEL = {"h2d": "host → device", "d2h": "device → host"}
KINDS = ("pageable", "pinned", "writecombined", "mapped", "zerocopy")


def sweep(
    monkeypatch, short: tuple[str, str] | None = None, directions: tuple[str, ...] = ("h2d", "d2h")
) -> dict:
    """The checks of a small sweep, by name; `short`: (kind, direction) whose copies leave
    the last element out."""
    real = memory.host_copy

    def copy(cuda, direction, host, device_pointer, elements=None):
        if (host.kind.name, direction) == short and elements:
            elements -= 1
        return real(cuda, direction, host, device_pointer, elements)

    monkeypatch.setattr(memory, "host_copy", copy)
    session = FakeSession(ATTRIBUTES, declared_keys(Sweep))
    params = SweepParams(powers=(4, 6), kinds=KINDS, directions=directions, repeat=2, warmup=1)
    facts = SimpleNamespace(name="NVIDIA H200", attributes=ATTRIBUTES)
    ctx = RunContext(params, session=session, facts={0: facts})
    try:
        Sweep().run(ctx)
    finally:
        session.close()
    assert session.gpu.leaks() == {}
    return {check.name: check for check in ctx.checks}


def test_a_sweep_of_copies_that_do_their_work_passes_every_check(monkeypatch):
    checks = sweep(monkeypatch)
    assert len(checks) == 2 * len(KINDS)
    assert all(check.passed for check in checks.values()), checks


def test_a_sweep_of_device_to_host_alone_copies_the_values_from_the_start(monkeypatch):
    checks = sweep(monkeypatch, directions=("d2h",))
    assert len(checks) == len(KINDS)
    assert all(check.passed for check in checks.values()), checks


@pytest.mark.parametrize("kind", ["pinned", "writecombined", "pageable", "mapped"])
@pytest.mark.parametrize("direction", ["h2d", "d2h"])
def test_a_copy_that_leaves_the_last_element_out_fails_its_own_direction_alone(
    monkeypatch, kind, direction
):
    checks = sweep(monkeypatch, (kind, direction))
    failed = {name: check.detail for name, check in checks.items() if not check.passed}
    assert failed == {f"{kind} {LABEL[direction]}": f"{size_label(4)}: element 15 differs"}


def test_a_sweep_of_one_direction_loads_and_one_missing_an_asked_direction_is_refused(tmp_path):
    """--direction h2d records no d2h: such a run must load (its --json is held to the loader
    before it is written); a file that asked for both and holds one is refused, naming it."""
    import json

    from memprof.errors import InvalidArgument
    from memprof.experiments import load
    from tests.conftest import FIXTURES

    data = json.loads((FIXTURES / "h200_sweep.json").read_text())
    data["measurements"] = [
        m for m in data["measurements"] if "d2h" not in m["operation"] and "DtoH" not in m["name"]
    ]
    asked_both = tmp_path / "both.json"
    asked_both.write_text(json.dumps(data))
    with pytest.raises(InvalidArgument, match="has no gpu 'd2h', which parameters"):
        load(asked_both)
    data["parameters"]["directions"] = ["h2d"]
    one = tmp_path / "h2d.json"
    one.write_text(json.dumps(data))
    assert {m.operation for m in load(one).measurements if m.group == "gpu"} == {"h2d"}


def test_a_zero_copy_read_that_leaves_the_last_element_out_fails_its_sum(monkeypatch):
    from memprof.core.access import DirectAccess

    real = DirectAccess.read

    def short(self, pointer, elements, kind, stream=None, operation="kernel_read"):
        if kind == "zerocopy" and elements > 16:  # every size but the smallest
            elements -= 1
        return real(self, pointer, elements, kind, stream, operation)

    monkeypatch.setattr(DirectAccess, "read", short)
    failed = {name: check for name, check in sweep(monkeypatch).items() if not check.passed}
    assert list(failed) == ["zerocopy host → device"]
    assert failed["zerocopy host → device"].detail.startswith(f"{size_label(6)}: sum ")


@pytest.mark.parametrize("sizes", [(16, 64, 1024, 4096), (4096, 16, 1024, 64), (64, 64, 16)])
def test_each_sizes_expected_sum_is_numpys_sum_of_its_values(monkeypatch, sizes):
    import numpy as np

    from memprof.core import access
    from memprof.experiments import sweep as module

    values = np.random.default_rng(3).random(4096, dtype=np.float32)
    session = FakeSession(ATTRIBUTES)
    checker = module._Checker(session, values, np.zeros_like(values))
    summed = []
    real = access.float64_sum
    monkeypatch.setattr(access, "float64_sum", lambda part: summed.append(part.size) or real(part))
    for n in sizes:
        expected = float(values[:n].sum(dtype=np.float64))
        assert checker.sum_of_first(n) == pytest.approx(expected, rel=1e-12), n
    checker.free()
    session.close()
    if sizes == tuple(sorted(sizes)):  # smallest first: each value summed once
        assert sum(summed) == max(sizes)


@pytest.mark.parametrize("kind", ["pageable", "pinned", "writecombined", "mapped"])
def test_a_host_buffer_is_poisoned_with_nan_and_filled_with_the_values_up_to_n(kind):
    import numpy as np

    from memprof.experiments import sweep as module

    values = np.random.default_rng(3).random(64, dtype=np.float32)
    session = FakeSession(ATTRIBUTES)
    checker = module._Checker(session, values, np.zeros_like(values))
    host = memory.allocate(session, kind, values.size)
    host.array[:] = 7.0
    checker.fill_host(host, 16, poison=True)
    assert np.isnan(host.array[:16]).all() and (host.array[16:] == 7.0).all()
    checker.fill_host(host, 32)
    assert (host.array[:32] == values[:32]).all() and (host.array[32:] == 7.0).all()
    host.free()
    checker.free()
    session.close()
    assert session.gpu.leaks() == {}
