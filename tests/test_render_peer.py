"""`memprof peer` as recorded on the two-GPU H200 machine (NVLink NV18), rendered on a CPU."""

from pathlib import Path

import pytest

from memprof.experiments import load as load_result
from memprof.experiments import peer
from memprof.model.formatting import bandwidth_gb_per_s, format_gb_per_s
from memprof.model.results import Result
from tests.conftest import array_bytes, render_text


def recorded() -> Result:
    return load_result(Path(__file__).parent / "fixtures" / "h200x2_peer.json")


def test_the_copy_engine_matrix_is_throughput_of_each_ordered_pair():
    result = recorded()
    nbytes = array_bytes(result)
    figures = peer.figures(result, "ce_on")
    for (source, destination), gb_per_s in figures.items():
        [measurement] = [
            m
            for m in result.measurements
            if m.operation == "ce_on" and m.gpus == (source, destination)
        ]
        per_copy = measurement.throughput_stats.median_ms  # back to back, not one copy
        assert gb_per_s == pytest.approx(bandwidth_gb_per_s(nbytes, per_copy))
    assert set(figures) == {(0, 1), (1, 0)}


@pytest.mark.parametrize("width", [60, 80, 120])
def test_peer_renders_whole_at_every_width(width):
    result = recorded()
    text = render_text(result, width=width)
    nbytes = array_bytes(result)
    one_way = peer.figures(result, "ce_on")[0, 1]
    assert format_gb_per_s(one_way) in text
    assert f"Verified against numpy: all {len(result.checks)} results match" in " ".join(
        text.split()
    )
    assert len(result.checks) >= 6
    assert "GPU 0 ↔ GPU 1" in text and "in total" in text
    assert nbytes == 4 << result.parameters.power


def test_latency_is_kernel_time_over_the_chain_of_loads():
    result = recorded()
    latencies = peer.latencies_us(result)
    assert latencies[1, 0] > latencies[0, 0]  # the peer's memory is further away
    steps = result.parameters.latency_steps
    [measurement] = [
        m for m in result.measurements if m.operation == "latency" and m.gpus == (0, 1)
    ]
    assert latencies[0, 1] == pytest.approx(measurement.stats.median_ms * 1e3 / steps)
