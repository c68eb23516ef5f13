"""Ctrl-C at any moment of a command, from the first import on: exit 130 and one line.

The GPU version, across context creation, measuring and freeing, is gpu/test_interrupt.py.
"""

from __future__ import annotations

from pathlib import Path

from tests.interrupting import Ending, interpreter_start_s, interrupt, run_time_s

FIXTURE = str(Path(__file__).parent / "fixtures" / "h200_sweep.json")


def delays(start_s: float, end_s: float, count: int) -> list[float]:
    return [start_s + (end_s - start_s) * i / (count - 1) for i in range(count)]


def test_ctrl_c_while_importing_rendering_or_exiting_is_one_line_and_130():
    command = ["report", FIXTURE]
    whole_s = run_time_s(command)
    start_s = 2 * interpreter_start_s()
    endings = [interrupt(command, delay) for delay in delays(start_s, whole_s + 0.05, 16)]
    bad = [
        (e.delay_s, e.returncode, e.problems(), e.stderr[-500:]) for e in endings if e.problems()
    ]
    assert bad == []
    assert sum(e.returncode == 130 for e in endings) >= 8  # most presses landed mid-run


def test_the_problems_of_an_ending_are_named():
    assert Ending(0.1, 130, "memprof: error: interrupted\n").problems() == []
    assert Ending(0.1, 0, "").problems() == []
    assert Ending(0.1, 1, "Traceback (most recent call last):\n").problems() == [
        "exit 1",
        "Traceback",
    ]
    assert Ending(0.1, -6, "context stack was not empty\n").problems() == [
        "exit -6",
        "context stack was not empty",
    ]
    assert "not one 'interrupted' line" in Ending(0.1, 130, "a\nb\n").problems()
