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
