"""Run memprof's entry point and press Ctrl-C at a chosen point: deterministic interruptions.

    python tests/interrupt_at.py POINT NUMPY_FIRST [--script PATH] ARGS...

POINT is `line:N` (the Nth line of Python run once memprof's handler is installed, loops
included), `import:NAME` (as module NAME begins to import), `import-any:NAME` (the same,
whoever handles Ctrl-C then: memprof or not yet), `list-imports` (press nothing:
print the modules imported after memprof's handler is installed) or `count-lines` (press
nothing: print how many lines ran). NUMPY_FIRST `numpy` makes the command import numpy as it
starts (as every GPU command does inside run()), so a press can land inside numpy's import
on a machine without a GPU. `--script PATH` runs that file as the `memprof` command runs it
(scripts/memprof, or an installer's script) instead of `python -m memprof`. The press is a
real SIGINT to this process, delivered by Python at the next instruction, as a terminal's
Ctrl-C is. tests/interrupting.py runs this.
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


class Imports(importlib.abc.MetaPathFinder):
    """Sees every import begin; imports numpy before memprof.cli where asked."""

    def __init__(self, target: str | None, numpy_first: bool, listing: bool, anyway: bool) -> None:
        self.target, self.numpy_first, self.listing = target, numpy_first, listing
        self.anyway = anyway  # press even before memprof has a handler

    def find_spec(self, name: str, path: object, target: object = None) -> None:
        if self.listing and handler_installed():
            print(name, file=sys.stderr)
        if name == self.target and (self.anyway or handler_installed()):
            self.target = None
            press()
        if name == "memprof.cli" and self.numpy_first:
            self.numpy_first = False
            import numpy  # noqa: F401  (as a GPU command's run() does)

            if self.listing:
                print("(numpy imported)", file=sys.stderr)
        return None


def line_counter(stop_at: int | None):
    count = [0]

    def tracer(frame: object, event: str, arg: object):
        if event == "line" and handler_installed():
            count[0] += 1
            if count[0] == stop_at:
                press()
                return None
        return tracer

    return tracer, count


def main() -> None:
    point, numpy_first, *arguments = sys.argv[1:]
    script = None
    if arguments[:1] == ["--script"]:
        script, arguments = arguments[1], arguments[2:]
    kind, _, value = point.partition(":")
    pressing = value if kind in ("import", "import-any") else None
    imports = Imports(
        pressing, numpy_first == "numpy", kind == "list-imports", kind == "import-any"
    )
    sys.meta_path.insert(0, imports)
    count = None
    if kind in ("line", "count-lines"):
        tracer, count = line_counter(int(value) if kind == "line" else None)
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
