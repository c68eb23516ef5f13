"""On two or more GPUs: memprof peer end to end, every copy verified, in under 15 s."""

from __future__ import annotations

import time

import pytest

from memprof.core.multigpu import PeerSession, device_count, ordered_pairs
from memprof.experiments import peer
from memprof.model.results import Result

pytestmark = pytest.mark.gpu


@pytest.fixture
def two_gpus() -> list[int]:
    count = device_count()
    if count < 2:
        pytest.skip(f"needs two GPUs: this machine has {count}")
    return list(range(count))


def test_peer_measures_every_pair_and_method_and_verifies(two_gpus):
    params = peer.PeerParams(power=20, repeat=2, warmup=1, latency_steps=512)
    with PeerSession(two_gpus) as peers:
        result = peer.run(peers, params)
    assert result.passed, [c.detail for c in result.checks if not c.passed]
    result = Result.from_json(result.to_json())
    for method in ("ce_off", "ce_on", "kernel_read", "kernel_write", "ce_bidir"):
        cells = peer.figures(result, method)
        assert set(cells) == set(ordered_pairs(two_gpus)), method
        assert all(gbs > 0 for gbs in cells.values())
    latency = peer.latencies_us(result)
    assert all((d, d) in latency for d in two_gpus)
    summary = peer.summarize(result)
    assert len(summary.tables) == 6


def test_peer_default_size_finishes_in_15_s(two_gpus):
    start = time.perf_counter()
    result = peer.measure(peer.PeerParams())
    assert result.passed
    assert time.perf_counter() - start < 15.0


def test_the_contexts_are_gone_after_a_peer_session(two_gpus):
    import pycuda.driver as cuda

    with PeerSession(two_gpus) as peers, peers.active(1):
        assert cuda.Context.get_device().get_attribute(
            cuda.device_attribute.PCI_BUS_ID
        ) == cuda.Device(1).get_attribute(cuda.device_attribute.PCI_BUS_ID)
    assert cuda.Context.get_current() is None  # every context popped and gone
