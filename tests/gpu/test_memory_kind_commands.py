"""On the GPU: uva, managed, writecombined, register and alloc end to end, verified."""

from __future__ import annotations

import pytest

from memprof import api
from memprof.core import memory
from memprof.experiments import parse as parse_result
from memprof.experiments import uva, writecombined
from memprof.model.results import Result
from tests.conftest import render_text
from tests.gpu.test_commands import memprof

pytestmark = pytest.mark.gpu


def run(command: str, **params) -> Result:
    result = api.run(command, **params)
    assert result.passed, [c.detail for c in result.checks if not c.passed]
    again = parse_result(result.to_json())
    assert render_text(again) == render_text(result)  # the summary, charts drawn
    return result


def test_uva_host_pointer_equals_device_pointer_and_verifies():
    result = run("uva", power=13, repeat=3, warmup=1)
    for addresses in (result.extra.pointers.a, result.extra.pointers.b):
        assert addresses.host == addresses.device  # Hopper: UVA, cuMemHostAlloc DEVICEMAP
    for path in uva.PATHS:
        assert len(result.find("kernel", path, "gpu").samples_ms) == 3


def test_managed_measures_every_step_and_verifies():
    result = run("managed", power=16, repeat=2, warmup=1)
    assert len(result.checks) == 2 + 1 + 3  # on demand, copies, prefetch, three advices
    for kind in ("managed", "managed+prefetch", "managed+read-mostly", "managed+accessed-by"):
        assert result.find("kernel_first", kind, "gpu").samples_ms
        assert result.find("host_read", kind, "host").samples_ms
    assert result.find("prefetch", "managed+prefetch", "gpu").samples_ms


def test_managed_with_one_advice_and_no_prefetch():
    result = run(
        "managed", power=10, repeat=2, warmup=0, prefetch=False, advice=("preferred-location",)
    )
    assert len(result.checks) == 3
    with pytest.raises(KeyError):
        result.find("prefetch", "managed+prefetch", "gpu")


def test_writecombined_reads_back_and_kernel_verifies():
    result = run("writecombined", power=14, repeat=3, warmup=1)
    assert len(result.checks) == 4
    for kind in writecombined.KINDS:
        for measure, _ in writecombined.ROWS:
            assert result.find(measure.operation, kind, measure.group).samples_ms


def test_register_pins_in_place_and_kernel_reads_through_devicemap():
    result = run("register", power=15, repeat=3, warmup=1)
    assert len(result.find("register", "registered", "api").samples_ms) == 3
    assert len(result.find("unregister", "registered", "api").samples_ms) == 3
    assert len(result.checks) == 4


def test_alloc_times_every_kind_at_every_size():
    result = run("alloc", powers=(10, 13), repeat=2, warmup=0)
    assert result.extra.kinds == [kind.name for kind in memory.single_gpu_kinds()]  # H200: all
    for kind in result.extra.kinds:
        for power in (10, 13):
            assert len(result.find("alloc", kind, byte_count=4 << power).samples_ms) == 2
            assert len(result.find("free", kind, byte_count=4 << power).samples_ms) == 2


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (["uva", "--power", "12", "--repeat", "2"], "Equal"),
        (["managed", "--power", "12", "--repeat", "2", "--advise", "read-mostly"], "first launch"),
        (["wc", "--power", "12", "--repeat", "2"], "host reads the buffer"),
        (["register", "--power", "12", "--repeat", "2"], "cuMemHostRegister"),
        (
            ["alloc", "--from", "10", "--to", "12", "--repeat", "1"],
            "writecombined",
        ),
    ],
)
def test_cli_commands_run_and_verify(arguments, expected):
    completed = memprof(*arguments)
    assert completed.returncode == 0, completed.stderr
    assert expected in completed.stdout
    assert "Traceback" not in completed.stderr
