"""On the GPU: compare and sweep end to end, verified."""

from __future__ import annotations

import json

import pytest

from memprof import api
from memprof.experiments import base, compare, sweep
from memprof.experiments import parse as parse_result
from tests.gpu.test_commands import memprof

pytestmark = pytest.mark.gpu


def test_compare_fills_every_row_and_verifies():
    result = api.run("compare", power=18, repeat=2, warmup=1)
    assert result.passed, [c.detail for c in result.checks if not c.passed]
    summary = compare.summarize(parse_result(result.to_json()))
    table = summary.tables[0]
    assert len(table.rows) == len(compare.ROWS)
    for row in table.rows:
        assert any(cell != "-" for cell in row[1:]), row
    assert len(summary.conclusions) == 4
    assert len(table.highlighted) == len(compare.COLUMNS)
    # the prefetch managed records too, by the one procedure (where the GPU can prefetch)
    prefetched = [m for m in result.measurements if m.operation == "prefetch"]
    if prefetched:
        assert {(m.group, m.name, m.kind) for m in prefetched} == {
            ("gpu", base.PREFETCH.name, "managed prefetched"),
            ("api", base.PREFETCH_CALLS.name, "managed prefetched"),
        }


def test_sweep_every_kind_both_directions_small_sizes():
    result = api.run("sweep", powers=(0, 3, 8, 13), repeat=5, warmup=1)
    assert result.passed, [c.detail for c in result.checks if not c.passed]
    assert len(result.checks) == len(sweep.SWEEP_KINDS) * 2
    found = sweep.curves(result)
    assert all(len(points) == 4 for points in found.values())
    assert all(gbs > 0 for points in found.values() for _, _, gbs in points)


def test_cli_compare_and_sweep(tmp_path):
    path = tmp_path / "sweep.json"
    completed = memprof(
        "sweep",
        "--from",
        "10",
        "--to",
        "12",
        "--kinds",
        "pinned,zerocopy",
        "--direction",
        "h2d",
        "--repeat",
        "5",
        "--json",
        str(path),
    )
    assert completed.returncode == 0, completed.stderr
    assert "GB/s host → device against size" in completed.stdout
    assert json.loads(path.read_text())["parameters"]["kinds"] == ["pinned", "zerocopy"]
    completed = memprof("compare", "--power", "16", "--repeat", "2", "--quiet")
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == ""
