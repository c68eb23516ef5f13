"""On two or more GPUs: hostlink, portable and --device all end to end, every copy verified."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from memprof import api
from memprof.cli import app
from memprof.experiments import hostlink, portable
from memprof.experiments import parse as parse_result

pytestmark = pytest.mark.gpu


@pytest.fixture
def two_gpus() -> list[int]:
    from memprof.core.session import device_count

    count = device_count()
    if count < 2:
        pytest.skip(f"needs two GPUs: this machine has {count}")
    return list(range(count))


@pytest.mark.parametrize("timing", ["cupti", "events"])
def test_hostlink_measures_every_gpu_alone_and_together_and_verifies(two_gpus, timing):
    result = api.run("hostlink", timing=timing, power=24, repeat=2, warmup=1)
    assert result.passed, [c.detail for c in result.checks if not c.passed]
    assert result.timing.source == timing
    result = parse_result(result.to_json())
    cells = hostlink.figures(result)
    assert len(cells) == 2 * 2 * len(two_gpus) and all(gbs > 1 for gbs in cells.values())
    assert result.timing.host_affinity.startswith(("affinity: GPU 0: ", "affinity: GPUs 0"))
    assert len(hostlink.summarize(result).conclusions) == 2


@pytest.mark.parametrize("timing", ["cupti", "events"])
def test_portable_memory_is_used_from_every_gpu_and_verified(two_gpus, timing):
    result = api.run("portable", timing=timing, power=24, repeat=2, warmup=1)
    assert result.passed, [c.detail for c in result.checks if not c.passed]
    result = parse_result(result.to_json())
    assert len(portable.figures(result)) == 2 * 2 * len(two_gpus)
    # GPU 0's context allocated both buffers: the owner is derived, not saved (issue 21)
    assert [device.index for device in result.extra.devices] == two_gpus
    assert portable.Portable().derived(result)["owner"] == 0
    one_copy = [m for m in result.measurements if m.group == "gpu"]
    assert all(m.source == timing for m in one_copy)  # single copies: CUPTI's record or events
    assert all(m.stats.count == 2 and m.throughput_ms for m in one_copy)


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


def test_check_on_every_gpu_saves_one_file_that_report_and_diff_read(two_gpus, tmp_path):
    """Issue 39, item 4: each GPU's check, then check-pairs, in one file."""
    saved = tmp_path / "check.json"
    ran = CliRunner().invoke(app, ["check", "--device", "all", "--json", str(saved)])
    assert ran.exit_code in (0, 1), ran.output  # 1: a GPU below its floor, still saved
    found = api.load_all(saved)
    assert [r.command for r in found] == ["check"] * len(two_gpus) + ["check-pairs"]
    assert [r.gpu_index for r in found[:-1]] == two_gpus
    shown = CliRunner().invoke(app, ["report", str(saved), "--no-color"], env={"COLUMNS": "80"})
    assert shown.exit_code == ran.exit_code, shown.output
    for index in two_gpus:
        assert f"memprof check, GPU {index} " in shown.output
    same = CliRunner().invoke(app, ["diff", str(saved), str(saved)])
    assert same.exit_code == 0, same.output


def test_peer_and_hostlink_say_what_every_pair_or_gpu_shares_once(two_gpus):
    """On alike GPUs the ceiling notes are a line for all, not one per pair or GPU."""
    from memprof.experiments import peer

    result = parse_result(api.run("peer", power=24, repeat=2, warmup=1).to_json())
    notes = [n for t in peer.summarize(result).tables for n in t.notes if "of its ceiling" in n]
    pairs = len(two_gpus) * (len(two_gpus) - 1)
    assert 1 <= len(notes) < pairs or pairs == 2, notes  # distinct shares keep their own lines
    result = parse_result(api.run("hostlink", power=24, repeat=2, warmup=1).to_json())
    table = hostlink.summarize(result).tables[0]
    assert len([n for n in table.notes if n.startswith("Of ceiling")]) <= len(two_gpus)
