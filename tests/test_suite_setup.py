"""The suite's own set-up, where a mistake costs time rather than a failed test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import IMPORTED_AT


def test_xdist_workers_read_the_tests_rewritten_before_they_started():
    """conftest's pytest_sessionstart: a worker that rewrote this module itself (the cache's
    file not found, or pytest's steps changed) wrote the file after its conftest ran."""
    folder = os.environ.get("PYTHONPYCACHEPREFIX", "")
    if "PYTEST_XDIST_WORKER" not in os.environ or not Path(folder).name.startswith(
        "memprof-tests-bytecode-"
    ):
        pytest.skip("only pytest-xdist's workers read conftest's cache (PYTHONDONTWRITEBYTECODE)")
    from _pytest.assertion.rewrite import PYC_TAIL

    source = Path(__file__)
    written = Path(folder, *source.parts[1:-1], source.name[:-3] + PYC_TAIL)
    assert written.stat().st_mtime < IMPORTED_AT


def test_a_worker_takes_a_files_tests_together_and_the_pictures_tests_all():
    from tests.conftest import worker_share

    golden = "tests/test_golden.py::test_every_fixture_renders_as_recorded"
    pictures = [
        "tests/test_plot.py::test_every_fixture_is_drawn_and_reads_back[h200_uva]",
        "tests/test_plot_style.py::test_no_text_is_cut_or_runs_into_another[h200_uva]",
        "tests/test_plot_runs.py::test_two_runs_are_drawn_and_read_back[h200_sweep]",
        "tests/test_plot_values.py::test_a_linear_axis_marks_whole_gib_four_at_most[1]",
    ]
    assert worker_share(f"{golden}[h200_info.80]") == worker_share(f"{golden}[h200_uva.80]")
    assert worker_share(f"{golden}[h200_info.80]") != worker_share("tests/test_export.py::test")
    assert len({worker_share(test) for test in pictures}) == 1
    assert worker_share(pictures[0]) != worker_share(f"{golden}[h200_uva.80]")


def test_the_long_shares_are_handed_out_first_then_the_most_tests():
    """A one-test file that takes seconds (a wheel built) handed out last left one worker
    finishing it alone: pytest-xdist orders by the number of tests only."""
    from tests.conftest import handed_out_first

    queue = {
        "tests/test_export.py": {"a": False, "b": False},
        "tests/test_cli.py": {"a": False, "b": False, "c": False},
        "tests/test_wheel.py": {"a": False},
        "pictures": {"a": False},
        "tests/test_toy.py": {"a": False},
    }
    order = ["pictures", "tests/test_wheel.py", "tests/test_toy.py"]
    order += ["tests/test_cli.py", "tests/test_export.py"]
    assert list(handed_out_first(queue)) == order
    assert handed_out_first(queue)["tests/test_cli.py"] is queue["tests/test_cli.py"]
