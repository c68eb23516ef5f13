"""On the GPU: streams and device end to end, verified."""

from __future__ import annotations

import pytest

from memprof import api
from memprof.experiments import device, streams
from memprof.experiments import parse as parse_result
from tests.gpu.test_commands import memprof

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize(("dtype", "power"), [("float32", 20), ("float64", 19), ("float64", 7)])
def test_device_kernels_verify_against_numpy(dtype, power):
    result = api.run("device", power=power, dtype=dtype, repeat=3, warmup=1)
    assert result.passed, [c.detail for c in result.checks if not c.passed]
    assert [c.name.split()[0] for c in result.checks] == ["copy", "mul", "add", "triad", "dot", "a"]
    summary = device.summarize(parse_result(result.to_json()))
    assert len(summary.tables[0].rows) == 7


def test_streams_overlap_verifies_every_mode_and_stamps_every_chunk():
    result = api.run("streams", power=20, streams=3, repeat=2, warmup=1)
    assert result.passed, [c.detail for c in result.checks if not c.passed]
    assert len(result.checks) == 3
    for mode in streams.MODES:
        timeline = getattr(result.extra.timelines, mode)
        assert len(timeline) == 3 * 3  # 3 chunks x 3 stages
        lanes = {row[0] for row in timeline}
        assert lanes == ({0} if mode == "serial" else {0, 1, 2})
        for _, _, _, start, end in timeline:
            assert 0 <= start <= end
    summary = streams.summarize(parse_result(result.to_json()))
    assert len(summary.charts) == 3


def test_streams_honours_kernel_ms():
    result = api.run("streams", power=20, streams=2, kernel_ms=2.0, repeat=2, warmup=0)
    assert result.passed
    kernel_total = streams.stage_sums(result, "serial")["kernel"].median_ms
    assert 1.0 < kernel_total < 4.0  # calibrated to about 2 ms over all chunks


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (["streams", "--power", "20", "--streams", "4", "--repeat", "2"], "Timeline"),
        (["device", "--power", "18", "--dtype", "float32", "--repeat", "2"], "triad"),
    ],
)
def test_cli_overlap_and_device(arguments, expected):
    completed = memprof(*arguments)
    assert completed.returncode == 0, completed.stderr
    assert expected in completed.stdout
