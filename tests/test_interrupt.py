"""Ctrl-C at any moment of a command, from the entry point's first instruction: exit 130
and one line. Presses land at chosen points of memprof's own run (a line, an import:
tests/interrupt_at.py), so every run of these tests tries the same moments.

The GPU version, across context creation, measuring and freeing, is gpu/test_interrupt.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import memprof.cli
from memprof.interrupts import forget_presses, note_press
from tests.interrupting import Ending, imports_of, interrupt_at, interrupt_at_each, lines_of

runner = CliRunner()

FIXTURE = str(Path(__file__).parent / "fixtures" / "h200_pinned_p20.json")


def every(items: list, count: int) -> list:
    """`count` items spread evenly over the list, its first and last included."""
    if len(items) <= count:
        return list(items)
    return [items[round(i * (len(items) - 1) / (count - 1))] for i in range(count)]


def problems(found: list[Ending]) -> list[tuple]:
    return [(e.delay_s, e.returncode, e.problems(), e.stderr[-500:]) for e in found if e.problems()]


def test_ctrl_c_at_lines_spread_over_a_whole_report_is_one_line_and_130():
    """Importing typer and rich, loading, rendering, exiting: 24 points of memprof's own
    run, the same ones on every machine (a line count, not a delay)."""
    command = ["report", FIXTURE]
    lines = lines_of(command)
    found = interrupt_at_each(command, [f"line:{n}" for n in every(list(range(1, lines + 1)), 16)])
    assert problems(found) == []
    assert sum(e.returncode == 130 for e in found) >= 14  # all but the exit's last lines


def test_ctrl_c_before_main_runs_is_one_line_and_130():
    """memprof.interrupts is the entry point's first import, before main() has a handler."""
    ending = interrupt_at(["report", FIXTURE], "import:memprof.interrupts")
    assert (ending.returncode, ending.stderr) == (130, "memprof: error: interrupted\n")


def test_ctrl_c_at_each_import_inside_numpy_is_one_line_and_130():
    """Every module numpy imports, as a GPU command imports it: among them datetime, which
    numpy's C code loads as a capsule and whose KeyboardInterrupt comes back as an
    ImportError that does not name it."""
    command = ["report", FIXTURE]
    imports = imports_of(command, numpy_first=True)
    assert "datetime" in imports and len(imports) > 20
    chosen = dict.fromkeys([*every(imports, 40), "datetime"])
    found = interrupt_at_each(command, [f"import:{name}" for name in chosen], numpy_first=True)
    assert problems(found) == []
    assert all(e.returncode == 130 for e in found)


SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "memprof"
# What pip writes for a [project.scripts] entry (distlib's template): re before memprof.
INSTALLER_SCRIPT = """import re
import sys
from memprof.__main__ import main
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit(main())
"""


@pytest.mark.parametrize("first_import", ["memprof", "memprof.__main__", "memprof.interrupts"])
def test_the_memprof_command_takes_ctrl_c_before_it_imports_anything(first_import):
    """The installed `memprof` is scripts/memprof: a press as the package itself begins to
    import (before any memprof module has run) is one line and 130, not a traceback."""
    ending = interrupt_at(["report", FIXTURE], f"import-any:{first_import}", script=SCRIPT)
    assert (ending.returncode, ending.stderr) == (130, "memprof: error: interrupted\n")


def test_an_installers_script_would_let_such_a_press_print_a_traceback(tmp_path):
    """Why memprof ships its own script: the one an installer writes imports re and the
    package before memprof's handler, and the same press ends in a traceback."""
    script = tmp_path / "memprof"
    script.write_text(INSTALLER_SCRIPT)
    ending = interrupt_at(["report", FIXTURE], "import-any:memprof", script=script)
    assert "Traceback" in ending.stderr and "KeyboardInterrupt" in ending.stderr


def test_the_wheel_installs_that_script_as_the_command():
    import ast

    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((SCRIPT.parent.parent / "pyproject.toml").read_text())
    assert "scripts" not in project["project"]  # no installer-written `memprof`
    shared = project["tool"]["hatch"]["build"]["targets"]["wheel"]["shared-scripts"]
    assert shared == {"scripts/memprof": "memprof"}
    assert os.access(SCRIPT, os.X_OK)
    body = ast.parse(SCRIPT.read_text()).body
    statements = [ast.unparse(node).splitlines()[0] for node in body[1:]]  # after the docstring
    assert statements[0] == "import _signal"  # the first statement
    installed = statements.index("_signal.signal(_signal.SIGINT, _stop_at_once)")
    imports = [
        i for i, node in enumerate(body[1:]) if isinstance(node, ast.Import | ast.ImportFrom)
    ]
    assert imports[0] == 0 and imports[1] > installed  # nothing else imported before it


def test_a_press_that_came_back_as_another_error_is_still_one_line_and_130(monkeypatch, capsys):
    import memprof.__main__ as entry
    import memprof.cli

    def command(standalone_mode: bool) -> int:
        note_press()  # what the handler does before raising KeyboardInterrupt...
        raise ImportError('PyCapsule_Import could not import module "datetime"')  # ...lost

    monkeypatch.setattr(memprof.cli, "app", command)
    code, lines = _main_of(entry)
    assert (code, lines) == (130, ["memprof: error: interrupted"])


def test_a_press_lost_by_a_command_that_then_finished_is_still_130(monkeypatch):
    import memprof.__main__ as entry
    import memprof.cli

    def command(standalone_mode: bool) -> int:
        note_press()  # dropped: "Exception ignored in __del__", and the command ran on
        return 0

    monkeypatch.setattr(memprof.cli, "app", command)
    assert _main_of(entry) == (130, ["memprof: error: interrupted"])


def test_an_error_of_a_command_nobody_interrupted_is_its_own():
    forget_presses()
    result = runner.invoke(memprof.cli.app, ["report", "missing.json"])
    assert result.exit_code == 2 and "interrupted" not in result.stderr
    note_press()
    try:
        result = runner.invoke(memprof.cli.app, ["report", "missing.json"])
    finally:
        forget_presses()
    assert result.exit_code == 130 and result.stderr.count("\n") == 1
    assert "interrupted" in result.stderr


def _main_of(entry) -> tuple[int, list[str]]:
    """main()'s exit code and stderr lines, its handlers put back afterwards."""
    import io
    import sys

    previous = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGALRM)
    stderr, sys.stderr = sys.stderr, io.StringIO()
    try:
        with pytest.raises(SystemExit) as exit_:
            entry.main()
        return exit_.value.code, sys.stderr.getvalue().splitlines()
    finally:
        sys.stderr = stderr
        forget_presses()
        signal.signal(signal.SIGINT, previous[0])
        signal.signal(signal.SIGALRM, previous[1])


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
        forget_presses()
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


DROPPED_BY_PYTHON = """
import os, signal, time, weakref
from memprof import __main__ as entry

entry._handle_ctrl_c()


class Thing:
    pass


def remove(reference):  # a weakref callback, as WeakValueDictionary's, where Python drops errors
    os.kill(os.getpid(), signal.SIGINT)


thing = Thing()
reference = weakref.ref(thing, remove)
try:
    del thing
    time.sleep(2)
    print("ran on")
except KeyboardInterrupt:
    print("interrupted")
"""


def test_ctrl_c_that_python_would_drop_in_a_weakref_callback_is_delivered_again():
    ran = subprocess.run(
        [sys.executable, "-c", DROPPED_BY_PYTHON],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert (ran.stdout, ran.stderr) == ("interrupted\n", "")
