"""Ctrl-C at any moment of a command, from the first import on: exit 130 and one line.

The GPU version, across context creation, measuring and freeing, is gpu/test_interrupt.py.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

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
    assert sum(e.returncode == 130 for e in endings) >= 4  # presses really landed mid-run


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


class Frame:
    """Just what the handler looks at: the running code's name and file."""

    def __init__(self, name: str, filename: str) -> None:
        self.f_code = type("Code", (), {"co_name": name, "co_filename": filename})()


def test_ctrl_c_inside_an_import_callback_is_delivered_again_not_lost():
    """Raised in importlib's weakref callback, KeyboardInterrupt is printed and dropped."""
    from memprof.__main__ import _handle_ctrl_c

    previous = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGALRM)
    try:
        _handle_ctrl_c()
        on_ctrl_c = signal.getsignal(signal.SIGINT)
        with pytest.raises(KeyboardInterrupt):
            on_ctrl_c(signal.SIGINT, Frame("render", "memprof/render.py"))
        for frame in (Frame("cb", "<frozen importlib._bootstrap>"), Frame("__del__", "x.py")):
            on_ctrl_c(signal.SIGINT, frame)  # no exception here...
            delay_s, _ = signal.getitimer(signal.ITIMER_REAL)
            assert 0 < delay_s <= 0.005  # ...but another Ctrl-C in 5 ms
            signal.setitimer(signal.ITIMER_REAL, 0)
        on_alarm = signal.getsignal(signal.SIGALRM)
        with pytest.raises(KeyboardInterrupt):
            on_alarm(signal.SIGALRM, Frame("render", "memprof/render.py"))
        delivered = []
        signal.signal(signal.SIGINT, lambda signum, frame: delivered.append(signum))
        on_alarm(signal.SIGALRM, None)  # to whoever holds SIGINT now (a cleanup's deferral)
        assert delivered == [signal.SIGINT]
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        on_alarm(signal.SIGALRM, None)  # ignored once the command has ended
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGINT, previous[0])
        signal.signal(signal.SIGALRM, previous[1])


def test_the_entry_point_runs_the_command_under_that_handler(monkeypatch):
    import memprof.__main__ as entry
    import memprof.cli

    seen = []

    def command(standalone_mode: bool) -> int:
        seen.append(getattr(signal.getsignal(signal.SIGINT), "__name__", None))
        return 0

    monkeypatch.setattr(memprof.cli, "app", command)
    previous = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGALRM)
    try:
        with pytest.raises(SystemExit) as exit_:
            entry.main()
        after = signal.getsignal(signal.SIGINT)
    finally:
        signal.signal(signal.SIGINT, previous[0])
        signal.signal(signal.SIGALRM, previous[1])
    assert exit_.value.code == 0
    assert seen == ["on_ctrl_c"]
    assert after == signal.SIG_IGN  # the command has ended: a late Ctrl-C stops nothing
