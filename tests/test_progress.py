"""Progress on long runs: every experiment's run() reports its steps (what, which memory, what
size) in order up to its total, on tests/fakegpu.py where the fake runs it (the others:
tests/gpu/test_progress.py); the line is drawn on a terminal only, not with --quiet, and is
gone once the run ends, Ctrl-C included."""

from __future__ import annotations

import dataclasses
import io
import itertools
import re
from types import SimpleNamespace

import pytest
from rich.console import Console

from memprof.experiments import experiment_named
from memprof.experiments.base import RunContext, declared_keys
from memprof.output import console as terminal
from tests.fakegpu import FakeSession, driver_calls_on

ATTRIBUTES = {
    "canMapHostMemory": 1,
    "unifiedAddressing": 1,
    "memoryPoolsSupported": 1,
    "virtualMemoryManagementSupported": 1,
}
SMALL = {"power": 10, "powers": (10, 11), "repeat": 2, "warmup": 1, "copies": 4}
# What the fake GPU runs (tests/fakegpu.py: copies, memsets, sumArrays, the small-copy kernels,
# pools and virtual memory); every other experiment is in tests/gpu/test_progress.py.
ON_THE_FAKE = ("pinned", "zerocopy", "uva", "writecombined", "alloc", "smallcopies", "check")
INSTANT = ("info",)  # reads the device's facts: the line's start covers it
SIZE = re.compile(r"\d+ (B|KiB|MiB|GiB)")


def steps_of(name: str, monkeypatch) -> list[tuple[str, int, int]]:
    experiment = experiment_named(name)
    session = FakeSession(ATTRIBUTES, declared_keys(type(experiment)))
    fields = {f.name for f in dataclasses.fields(experiment.Params)}
    params = experiment.Params(**{k: v for k, v in SMALL.items() if k in fields})
    if "device_power" in fields:
        params = dataclasses.replace(params, device_power=10)
    facts = SimpleNamespace(name="NVIDIA H200", attributes=ATTRIBUTES)
    seen: list[tuple[str, int, int]] = []
    ctx = RunContext(params, lambda *step: seen.append(step), session=session, facts={0: facts})
    with driver_calls_on(session.gpu, monkeypatch):
        try:
            experiment.run(ctx)
        finally:
            session.close()
    assert session.gpu.leaks() == {}
    return seen


@pytest.mark.parametrize("name", ON_THE_FAKE)
def test_every_step_is_reported_in_order_up_to_the_total(name, monkeypatch):
    seen = steps_of(name, monkeypatch)
    assert len(seen) >= 2, seen
    totals = {total for _, _, total in seen}
    assert len(totals) == 1, seen  # one total, known from the start
    (total,) = totals
    done = [done for _, done, _ in seen]
    assert done[0] == 0 and done == sorted(done), seen
    assert all(after - before <= 1 for before, after in itertools.pairwise(done)), seen
    assert seen[-1][1] == total, seen  # it ends at its total
    for description, _, _ in seen[:-1]:
        assert SIZE.search(description), f"{name}: {description!r} names no size"


def test_every_experiment_is_run_on_the_fake_or_on_the_gpu():
    from memprof.experiments import COMMANDS, PROGRAM_COMMAND, experiment_class
    from tests.gpu.test_progress import ON_THE_GPU

    names = {
        e.name for e in (experiment_class(c.name) for c in COMMANDS) if e.name != PROGRAM_COMMAND
    }
    assert names == set(ON_THE_FAKE) | set(ON_THE_GPU) | set(INSTANT)


def shown(enabled: bool, terminal_: bool, monkeypatch) -> str:
    stream = io.StringIO()
    console = Console(file=stream, force_terminal=terminal_, width=100, color_system=None)
    monkeypatch.setattr(terminal, "stderr_console", lambda no_color=False: console)
    with terminal.progress_bar(enabled, "memprof alloc: starting on GPU 0") as progress:
        progress("pinned memory, 2^20 (4 MiB): allocate and free", 3, 12)
    return stream.getvalue()


def test_the_line_says_the_step_done_of_total_and_the_time_on_a_terminal(monkeypatch):
    text = shown(True, True, monkeypatch)
    assert "pinned memory, 2^20 (4 MiB): allocate and free" in text
    assert "3/12" in text and "0:00:00" in text
    assert "memprof alloc: starting on GPU 0" in text


def test_nothing_is_drawn_off_a_terminal_or_with_quiet(monkeypatch):
    assert shown(True, False, monkeypatch) == ""
    assert shown(False, True, monkeypatch) == ""


def test_ctrl_c_leaves_no_line_behind(monkeypatch):
    stream = io.StringIO()
    console = Console(file=stream, force_terminal=True, width=100, color_system=None)
    monkeypatch.setattr(terminal, "stderr_console", lambda no_color=False: console)
    with pytest.raises(KeyboardInterrupt), terminal.progress_bar(True) as progress:
        progress("pinned memory, 4 MiB: transfers", 1, 4)
        raise KeyboardInterrupt
    assert stream.getvalue().endswith("\x1b[2K") or "\x1b[2K" in stream.getvalue()[-40:]


def test_rich_progress_is_not_imported_where_nothing_is_drawn(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "rich.progress", None)  # importing it raises
    assert shown(False, True, monkeypatch) == ""
    assert shown(True, False, monkeypatch) == ""
    with pytest.raises(ImportError):
        shown(True, True, monkeypatch)
