"""Send Ctrl-C to a memprof process at a chosen moment and describe how it ended."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path


@dataclass
class Ending:
    delay_s: float | str  # when Ctrl-C was pressed: seconds after the start, or a point
    returncode: int
    stderr: str

    def problems(self) -> list[str]:
        """What is wrong with this ending: memprof promises exit 130 and one line, or 0."""
        found = []
        if self.returncode not in (0, 130):
            found.append(f"exit {self.returncode}")
        lines = self.stderr.splitlines()
        if self.returncode == 130 and (len(lines) != 1 or "interrupted" not in lines[0]):
            found.append("not one 'interrupted' line")
        if self.returncode == 0 and lines:
            found.append("stderr after a finished run")
        signs = ("Traceback", "Exception ignored", "context stack was not empty", "PyCUDA WARNING")
        for sign in signs:
            if sign in self.stderr:
                found.append(sign)
        return found


def interrupt(
    arguments: list[str], delay_s: float, timeout_s: float = 120, program: str | None = None
) -> Ending:
    """Run `python -m memprof ARGS` (or `program ARGS`: the installed `memprof` command),
    press Ctrl-C after delay_s (to the process group, as a terminal does: compilers it
    started get it too), and wait for the end."""
    process = subprocess.Popen(
        [*([program] if program else [sys.executable, "-m", "memprof"]), *arguments],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    time.sleep(delay_s)
    with contextlib.suppress(ProcessLookupError):  # it may have finished already
        os.killpg(process.pid, signal.SIGINT)
    _, stderr = process.communicate(timeout=timeout_s)
    return Ending(delay_s, process.returncode, stderr.decode(errors="replace"))


AT = str(Path(__file__).with_name("interrupt_at.py"))
ROOT = str(Path(__file__).resolve().parent.parent)


def interrupt_at(
    arguments: list[str],
    point: str,
    numpy_first: bool = False,
    script: Path | None = None,
    results: Path | None = None,
) -> Ending:
    """Run memprof with Ctrl-C pressed at a point of its own code (tests/interrupt_at.py):
    `line:N`, `import:MODULE` or `import-any:MODULE`; the same point every time, whatever the
    machine's speed. `script`: run that file as the `memprof` command, not `python -m`.
    `results`: see interrupt_at_each."""
    chosen = ["--script", str(script)] if script else []
    chosen += ["--results", str(results)] if results else []
    completed = subprocess.run(
        [sys.executable, AT, point, "numpy" if numpy_first else "-", *chosen, *arguments],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": ROOT},
        timeout=120,
    )
    return Ending(point, completed.returncode, completed.stderr.decode(errors="replace"))


def interrupt_at_each(
    arguments: list[str], points: list[str], numpy_first: bool = False
) -> list[Ending]:
    """interrupt_at at each point, of one kind: one run of memprof that presses nothing, and
    forks at each point a child pressed there (tests/interrupt_at.py --results), so the run
    up to each point is made once. A point the run never reached ends as the run did."""
    with tempfile.TemporaryDirectory() as folder:
        run = interrupt_at(arguments, ",".join(points), numpy_first, results=Path(folder))
        endings = Path(folder, "endings")
        found = {}
        for line in endings.read_text().splitlines() if endings.exists() else []:
            code, point = line.split(" ", 1)
            found[point] = Ending(point, int(code), Path(folder, point).read_text(errors="replace"))
    assert (run.returncode, run.stderr) == (0, ""), run.stderr[-2000:]  # the run unpressed
    return [found.get(point, replace(run, delay_s=point)) for point in points]


def _listed(what: str, arguments: list[str], numpy_first: bool = False) -> str:
    """What tests/interrupt_at.py says on stderr of a run it presses nothing in."""
    return subprocess.run(
        [sys.executable, AT, what, "numpy" if numpy_first else "-", *arguments],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ROOT},
        check=True,
    ).stderr


def lines_of(arguments: list[str]) -> int:
    """The lines of Python a run executes once memprof's handler is installed."""
    return int(_listed("count-lines", arguments).split("lines ")[-1])


def imports_of(arguments: list[str], numpy_first: bool = False) -> list[str]:
    """The modules a run imports once memprof's handler is installed; with numpy_first, those
    of numpy's import alone. (Each run of tests/interrupt_at.py lists one or the other: the
    count traces every line, a second of CPU that listing imports does without.)"""
    imports = _listed("list-imports", arguments, numpy_first).splitlines()
    if numpy_first:
        imports = imports[imports.index("numpy") : imports.index("(numpy imported)")]
    return imports


def interpreter_start_s() -> float:
    """How long this Python takes to start (site included) before any memprof code runs.

    Ctrl-C in that window is CPython's own to report (it may print a traceback or die by
    SIGINT); memprof's promise starts when its entry point runs.
    """
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import runpy"], check=True)
    return time.perf_counter() - started


def run_time_s(arguments: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "memprof", *arguments], check=True, capture_output=True)
    return time.perf_counter() - started
