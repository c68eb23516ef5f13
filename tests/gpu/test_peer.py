"""On two or more GPUs: memprof peer end to end, every copy verified, both timing sources."""

from __future__ import annotations

import pytest

from memprof import api
from memprof.experiments import parse as parse_result
from memprof.experiments import peer
from memprof.experiments.peer import ordered_pairs

pytestmark = pytest.mark.gpu


@pytest.fixture
def two_gpus() -> list[int]:
    from memprof.core.session import device_count

    count = device_count()
    if count < 2:
        pytest.skip(f"needs two GPUs: this machine has {count}")
    return list(range(count))


@pytest.mark.parametrize("timing", ["cupti", "events"])
def test_peer_measures_every_pair_and_method_and_verifies(two_gpus, timing):
    result = api.run("peer", timing=timing, power=20, repeat=2, warmup=1, latency_steps=512)
    assert result.passed, [c.detail for c in result.checks if not c.passed]
    result = parse_result(result.to_json())
    for method in ("ce_off", "ce_on", "kernel_read", "kernel_write", "ce_bidir"):
        cells = peer.figures(result, method)
        assert set(cells) == set(ordered_pairs(two_gpus)), method
        assert all(gbs > 0 for gbs in cells.values())
    latency = peer.latencies_us(result)
    assert all((d, d) in latency for d in two_gpus)
    assert len(peer.summarize(result).tables) == 6
    single = [m for m in result.measurements if m.operation in ("ce_on", "latency")]
    other = [(m.operation, m.gpus, m.source) for m in single if m.source != timing]
    assert single and not other, other  # CUPTI reaches every context


def test_peer_at_its_default_size_verifies(two_gpus):
    assert api.run("peer").passed


def test_the_contexts_are_gone_after_a_run_on_every_gpu(two_gpus):
    import pycuda.driver as cuda

    from memprof.core.session import Devices

    with Devices(two_gpus, "events") as devices, devices.session(1).active():
        assert cuda.Context.get_device().get_attribute(
            cuda.device_attribute.PCI_BUS_ID
        ) == cuda.Device(1).get_attribute(cuda.device_attribute.PCI_BUS_ID)
    assert cuda.Context.get_current() is None  # every context popped and gone
