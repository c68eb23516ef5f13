"""Results of `memprof check` and `memprof check-pairs` for CPU tests.

Each is assembled from measurements recorded on the H200 by other commands, every figure a
real one, as check records it (the check fixtures recorded on the GPU, h200_check.json and
h200x2_check_pairs.json, are rendered by tests/test_golden.py and test_check.py; these stay
fixed so the tests' figures do):
- pinned HtoD and DtoH alone: hostlink's GPU 0 alone (256 MiB, back-to-back batches);
- both directions at once: hostlink's GPU 0 'all at once' (there, both GPUs copying the same
  direction at once: the nearest recorded figure of copies sharing the host's path);
- the device copy: device's cuMemcpyDtoD of 256 MiB;
- peer copies: peer's copy engine with peer access on, one direction and both at once.
Tests then edit them (slower, throttled, a degraded link, another process).
"""

from __future__ import annotations

import msgspec

from memprof.experiments import load
from memprof.experiments.check import CheckExtra, CheckPairsExtra, CheckPairsParams, CheckParams
from memprof.model.results import Measurement, Result
from tests.conftest import FIXTURES

MIB = 1 << 20


def _as(measurement: Measurement, operation: str, gpus: tuple[int, ...] = ()) -> Measurement:
    return msgspec.structs.replace(measurement, operation=operation, gpus=gpus)


def check_result() -> Result:
    hostlink = load(FIXTURES / "legacy_v2_h200x2_hostlink.json")
    device = load(FIXTURES / "legacy_v2_device.json")

    def on_gpu0(operation: str) -> Measurement:
        return next(m for m in hostlink.measurements if m.operation == operation and m.gpus == (0,))

    d2d = next(m for m in device.measurements if m.group == "gpu" and m.operation == "d2d")
    return Result(
        command="check",
        parameters=CheckParams(power=26, device_power=26, repeat=5),
        device=device.device,  # the H200 (device 0), its link Gen5 x16 from sysfs
        measurements=[
            _as(on_gpu0("h2d"), "h2d"),
            _as(on_gpu0("d2h"), "d2h"),
            _as(on_gpu0("h2d_at_once"), "h2d_at_once"),
            _as(on_gpu0("d2h_at_once"), "d2h_at_once"),
            d2d,
        ],
        extra=CheckExtra(),
        timing=device.timing,  # one GPU's run: its host thread's placement
        created_at=device.created_at,
        host=device.host,
    )


def pairs_result() -> Result:
    peer = load(FIXTURES / "legacy_v2_h200x2_peer.json")
    measurements = [
        _as(m, {"ce_on": "peer", "ce_bidir": "peer_at_once"}[m.operation], m.gpus)
        for m in peer.measurements
        if m.group == "gpu" and m.operation in ("ce_on", "ce_bidir")
    ]
    return Result(
        command="check-pairs",
        parameters=CheckPairsParams(power=peer.parameters.power, repeat=5),
        device=peer.device,
        measurements=measurements,
        extra=CheckPairsExtra(
            devices=peer.extra.devices,
            peer_access=peer.extra.peer_access,
        ),
        timing=peer.timing,
        created_at=peer.created_at,
        host=peer.host,
    )


def slower(result: Result, operation: str, to_gb_per_s: float) -> Result:
    """The result with one figure's copies slowed to `to_gb_per_s` (every batch alike)."""
    for m in result.measurements:
        if m.operation == operation:
            moved = 2 * m.bytes if operation == "d2d" else m.bytes
            per_copy_ms = moved / (to_gb_per_s * 1e9) * 1e3
            m.throughput_ms = [per_copy_ms] * (len(m.throughput_ms) or result.parameters.repeat)
            m.samples_ms, m.events_ms = list(m.throughput_ms), []  # the copies as one batch
            m.batch = max(1, m.batch)
    return result
