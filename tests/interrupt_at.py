"""Run memprof's entry point and press Ctrl-C at a chosen point: deterministic interruptions.

    python tests/interrupt_at.py POINT NUMPY_FIRST [--script PATH] ARGS...
    python tests/interrupt_at.py POINT,... NUMPY_FIRST --results FOLDER ARGS...

POINT is `line:N` (the Nth line of Python run once memprof's handler is installed, loops
included), `import:NAME` (as module NAME begins to import), `import-any:NAME` (the same,
whoever handles Ctrl-C then: memprof or not yet), `list-imports` (press nothing:
print the modules imported after memprof's handler is installed) or `count-lines` (press
nothing: print how many lines ran). NUMPY_FIRST `numpy` makes the command import numpy as it
starts (as every GPU command does inside run()), so a press can land inside numpy's import
on a machine without a GPU. `--script PATH` runs that file as the `memprof` command runs it
(scripts/memprof, or an installer's script) instead of `python -m memprof`. The press is a
real SIGINT to this process, delivered by Python at the next instruction, as a terminal's
Ctrl-C is.

Several points of one kind (`line:3,line:9`) with --results: this process runs on pressing
nothing, and at each point forks a child pressed there, in the state a process started
alone would be in at that instruction; FOLDER gets each child's stderr (a file named by its
point) and a line "EXIT POINT" in FOLDER/endings. The run up to every point is made once,
not once a point (the line and numpy sweeps: 9.5 CPU s in 57 processes, 2.1 in 2). A child
forked inside numpy's import lacks the thread its BLAS started in the parent.

tests/interrupting.py runs this.
"""

from __future__ import annotations

import _signal
import importlib.abc
import os
import runpy
import sys

DEFAULT = _signal.default_int_handler


def handler_installed() -> bool:
    """memprof's entry point has taken Ctrl-C over (its first instruction does)."""
    return _signal.getsignal(_signal.SIGINT) is not DEFAULT


def press() -> None:
    sys.settrace(None)
    os.kill(os.getpid(), _signal.SIGINT)


class Presses:
    """Where to press and how: in this process at its one point, or in a child forked at
    each of several points (`results`: a folder for each child's ending). It imports
    nothing, so the run it forks from imports what memprof's would, line for line."""

    def __init__(self, points: list[str], results: str | None) -> None:
        self.points, self.results = set(points), results

    def reached(self, point: str) -> bool:
        """Whether this process was pressed here."""
        if point not in self.points:
            return False
        self.points.discard(point)
        if self.results is None:
            press()
            return True
        stderr = os.open(f"{self.results}/{point}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        child = os.fork()
        if child == 0:  # pressed here, and nowhere else
            os.dup2(stderr, 2)
            os.close(stderr)
            self.points, self.results = set(), None
            press()
            return True
        os.close(stderr)
        _, status = os.waitpid(child, 0)
        endings = os.open(f"{self.results}/endings", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        os.write(endings, f"{os.waitstatus_to_exitcode(status)} {point}\n".encode())
        os.close(endings)
        return False


class Imports(importlib.abc.MetaPathFinder):
    """Sees every import begin; imports numpy before memprof.cli where asked."""

    def __init__(
        self, presses: Presses, kind: str, numpy_first: bool, listing: bool, anyway: bool
    ) -> None:
        self.presses, self.kind, self.numpy_first = presses, kind, numpy_first
        self.listing, self.pressing = listing, kind in ("import", "import-any")
        self.anyway = anyway  # press even before memprof has a handler

    def find_spec(self, name: str, path: object, target: object = None) -> None:
        if self.listing and handler_installed():
            print(name, file=sys.stderr)
        if self.pressing and (self.anyway or handler_installed()):
            self.presses.reached(f"{self.kind}:{name}")
        if name == "memprof.cli" and self.numpy_first:
            self.numpy_first = False
            import numpy  # noqa: F401  (as a GPU command's run() does)

            if self.listing:
                print("(numpy imported)", file=sys.stderr)
        return None


def line_counter(presses: Presses):
    count = [0]

    def tracer(frame: object, event: str, arg: object):
        if event == "line" and handler_installed():
            count[0] += 1
            if presses.reached(f"line:{count[0]}"):
                return None
        return tracer

    return tracer, count


def main() -> None:
    point, numpy_first, *arguments = sys.argv[1:]
    script = results = None
    if arguments[:1] == ["--script"]:
        script, arguments = arguments[1], arguments[2:]
    if arguments[:1] == ["--results"]:
        results, arguments = arguments[1], arguments[2:]
    kind = point.partition(":")[0]
    points = point.split(",") if kind in ("line", "import", "import-any") else []
    presses = Presses(points, results)
    imports = Imports(
        presses, kind, numpy_first == "numpy", kind == "list-imports", kind == "import-any"
    )
    sys.meta_path.insert(0, imports)
    count = None
    if kind in ("line", "count-lines"):
        tracer, count = line_counter(presses)
        sys.settrace(tracer)
    sys.argv = [script or "memprof", *arguments]
    try:
        if script:
            runpy.run_path(script, run_name="__main__")
        else:
            runpy.run_module("memprof", run_name="__main__", alter_sys=True)
    finally:
        if kind == "count-lines":
            sys.settrace(None)
            print(f"lines {count[0]}", file=sys.stderr)


if __name__ == "__main__":
    main()
