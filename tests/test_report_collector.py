"""`memprof report` and the cycle collector: what it loads is frozen while it is shown (no
collection walks a large trace's 10^5 objects again), and the process is left as it was found
where it goes on (a test, a notebook calling the command line), as GpuSession leaves it."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprof.cli import app
from memprof.model.results import FrozenOnceLoaded
from memprof.output import emit
from tests.test_session_close import Freezer

FIXTURES = Path(__file__).parent / "fixtures"
TRACE = FIXTURES / "h200_trace_pycuda.json"


@pytest.fixture
def seen_while_shown(monkeypatch) -> list[tuple[bool, int]]:
    """(collector enabled, objects frozen) as each Result is shown."""
    seen: list[tuple[bool, int]] = []
    show = emit.emit

    def shown(*arguments, **options):
        seen.append((gc.isenabled(), gc.get_freeze_count()))
        return show(*arguments, **options)

    monkeypatch.setattr(emit, "emit", shown)
    return seen


@pytest.mark.skipif(
    gc.get_freeze_count() != 0, reason="this Python freezes objects of its own at start (3.12)"
)
@pytest.mark.parametrize("path", [TRACE, FIXTURES / "missing.json"])
def test_report_shows_its_files_frozen_and_leaves_the_collector_as_it_found_it(
    path, seen_while_shown
):
    ran = CliRunner().invoke(app, ["report", str(path)])
    assert (ran.exit_code == 0) == path.exists()
    assert seen_while_shown == ([(True, seen_while_shown[0][1])] if path.exists() else [])
    assert all(frozen > 0 for _, frozen in seen_while_shown)
    assert gc.isenabled() and gc.get_freeze_count() == 0


@pytest.mark.parametrize(
    ("frozen", "ends_process", "calls"),
    [
        (0, False, ["freeze", "unfreeze"]),
        (0, True, ["freeze", "unfreeze"]),  # nothing else frozen: thawed as found
        (375, False, []),  # Python 3.12's own frozen: thawing would undo theirs
        (375, True, ["freeze"]),  # the command line's process ends with it: for good
    ],
)
def test_what_is_frozen_is_thawed_only_where_nothing_was_frozen_before(
    monkeypatch, frozen, ends_process, calls
):
    freezer = Freezer(frozen)
    for name in ("freeze", "unfreeze", "get_freeze_count"):
        monkeypatch.setattr(gc, name, getattr(freezer, name))
    with FrozenOnceLoaded(ends_process) as collector:
        assert not gc.isenabled()  # while the files load
        collector.loaded()
        assert gc.isenabled()
    assert freezer.calls == calls and gc.isenabled()


def test_a_load_that_fails_leaves_the_collector_running_and_nothing_frozen(monkeypatch):
    freezer = Freezer(0)
    for name in ("freeze", "unfreeze", "get_freeze_count"):
        monkeypatch.setattr(gc, name, getattr(freezer, name))
    with pytest.raises(ValueError), FrozenOnceLoaded(ends_process=True):
        raise ValueError("a refused file")
    assert freezer.calls == [] and gc.isenabled()
