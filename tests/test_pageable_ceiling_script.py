"""benchmarks/pageable_ceiling.py reads saved pinned results as `memprof pinned` shows them:
each pageable copy's share of its ceiling is the table's "Of ceiling" cell."""

from __future__ import annotations

from pathlib import Path

import pytest

from memprof.experiments import load, pinned
from tests.benchmark_scripts import script as benchmark

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
script = benchmark("pageable_ceiling")


@pytest.mark.parametrize("name", ["h200_pinned_p20.json", "h200_pinned_p20_events.json"])
def test_each_share_is_the_tables(name):
    line, met = script.shares(FIXTURES / name)
    table = pinned.summarize(load(FIXTURES / name)).tables[0]
    cells = {row[1]: row[-1] for row in table.rows if row[0] == "pageable"}
    shown = [cells["host → device"], cells["device → host"]]  # "65% staging"
    assert [part.split("= ")[1].strip().split("  ")[0] for part in line.split("|")] == shown
    assert met == all(50 <= int(cell.split("%")[0]) <= 100 for cell in shown)


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("legacy_v1_pinned_p20.json", "no staging memcpy recorded"),
        ("h200_compare.json", "a result of memprof compare, not pinned"),
    ],
)
def test_a_file_it_cannot_judge_is_said_and_not_met(name, said):
    line, met = script.shares(FIXTURES / name)
    assert said in line and not met
