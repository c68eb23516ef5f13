"""On two or more GPUs: hostlink, portable and --device all end to end, every copy verified."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from memprof.cli import app
from memprof.core.multigpu import PeerSession, device_count
from memprof.experiments import hostlink, portable
from memprof.model.results import Result

pytestmark = pytest.mark.gpu


@pytest.fixture
def two_gpus() -> list[int]:
    count = device_count()
    if count < 2:
        pytest.skip(f"needs two GPUs: this machine has {count}")
    return list(range(count))


def test_hostlink_measures_every_gpu_alone_and_together_and_verifies(two_gpus):
    params = hostlink.HostlinkParams(power=24, repeat=2, warmup=1)
    with PeerSession(two_gpus) as peers:
        result = hostlink.run(peers, params)
    assert result.passed, [c.detail for c in result.checks if not c.passed]
    result = Result.from_json(result.to_json())
    cells = hostlink.figures(result)
    assert len(cells) == 2 * 2 * len(two_gpus) and all(gbs > 1 for gbs in cells.values())
    assert result.timing.host_affinity.startswith("affinity: GPU 0: ")
    assert len(hostlink.summarize(result).conclusions) == 2


def test_portable_memory_is_used_from_every_gpu_and_verified(two_gpus):
    params = portable.PortableParams(power=24, repeat=2, warmup=1)
    with PeerSession(two_gpus) as peers:
        result = portable.run(peers, params)
    assert result.passed, [c.detail for c in result.checks if not c.passed]
    result = Result.from_json(result.to_json())
    assert len(portable.figures(result)) == 2 * 2 * len(two_gpus)
    assert result.extra["owner"] == 0


def test_device_all_renders_every_gpu_then_the_simultaneous_copies(two_gpus, tmp_path):
    csv = tmp_path / "all.csv"
    result = CliRunner().invoke(
        app, ["pinned", "--device", "all", "--power", "16", "--repeat", "2", "--csv", str(csv)]
    )
    assert result.exit_code == 0, result.output
    for index in two_gpus:
        assert "memprof pinned on " in result.output and f"(device {index})" in result.output
    assert "memprof hostlink on " in result.output
    assert result.output.count("affinity:") == len(two_gpus) + 1
