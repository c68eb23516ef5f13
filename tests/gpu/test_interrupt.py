"""On the GPU: Ctrl-C at many moments of `memprof pinned --power 16`, from the first import
through cuInit, context creation, compiling, measuring and freeing to the exit.

Every ending must be exit 130 with one "interrupted" line (or 0 if the run had finished):
no traceback, no "context stack was not empty", no abort (exit 134 / -6), no PyCUDA warning.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import memprof
from tests.interrupting import interpreter_start_s, interrupt, run_time_s

pytestmark = pytest.mark.gpu

COMMAND = ["pinned", "--power", "16"]


def spread(start_s: float, end_s: float, count: int) -> list[float]:
    return [start_s + (end_s - start_s) * i / (count - 1) for i in range(count)]


def test_ctrl_c_at_any_moment_of_a_gpu_run_is_one_line_and_130():
    run_time_s(COMMAND)  # fills PyCUDA's kernel cache: the first run compiles, later ones not
    whole_s = run_time_s(COMMAND)
    start_s = 2 * interpreter_start_s()
    # The whole run evenly, and the first 60% (imports, cuInit, CUPTI, context) densely.
    moments = spread(start_s, whole_s + 0.2, 30) + spread(start_s, 0.6 * whole_s, 40)
    endings = [interrupt(COMMAND, delay) for delay in sorted(moments)]
    bad = [
        (e.delay_s, e.returncode, e.problems(), e.stderr)
        for e in endings
        if e.problems() and not in_pythons_own_start_up(e)
    ]
    assert bad == [], f"run takes {whole_s:.2f}s: " + "\n\n".join(
        f"at {delay:.3f} s, exit {code}, {problems}:\n{stderr}"
        for delay, code, problems, stderr in bad
    )
    interrupted = sum(e.returncode == 130 for e in endings)
    assert interrupted >= len(endings) // 2, f"only {interrupted} presses landed mid-run"


def in_pythons_own_start_up(ending) -> bool:
    """A KeyboardInterrupt traceback without a frame of memprof's package, and nothing else
    wrong but its exit code: the press came while CPython was still starting (site and the
    .pth files it runs: on the H100's image one imports importlib.resources, 55 ms, and a
    bare start took 50 to 150 ms), before memprof's first instruction, whenever the clock
    says it came."""
    frames = frames_of(ending)
    last = ending.stderr.rstrip().splitlines()[-1] if ending.stderr.strip() else ""
    return (
        bool(frames)
        and not any(in_memprof(frame) for frame in frames)
        and last.startswith("KeyboardInterrupt")
        and set(ending.problems()) <= {f"exit {ending.returncode}", "Traceback"}
    )


MEMPROF_PACKAGE = Path(memprof.__file__).resolve().parent


def in_memprof(frame: str) -> bool:
    """Whether a traceback's file is memprof's own (not one of CPython's `<frozen ...>`)."""
    return not frame.startswith("<") and Path(frame).resolve().is_relative_to(MEMPROF_PACKAGE)


def frames_of(ending) -> list[str]:
    """The files of the traceback's frames (a message may name the command's own path)."""
    return re.findall(r'File "([^"]*)"', ending.stderr)


def in_pythons_frames(ending) -> bool:
    """A KeyboardInterrupt traceback whose every frame is CPython's frozen start-up code
    (`<frozen site>` reading the .pth files; importlib's weakref callback, where CPython
    prints "Exception ignored" and starts the command after all; zipimport asked whether
    the script's path is an archive) or the script's own frame at line 0 (CPython raised
    the pending press as the frame began, before its first instruction: seen on the H200,
    2026-11-29): the press came before the command's first instruction, whenever the clock
    says it came."""
    frames = re.findall(r'File "([^"]*)", line (\d+)', ending.stderr)
    last = ending.stderr.rstrip().splitlines()[-1] if ending.stderr.strip() else ""
    return (
        bool(frames)
        and all(
            file.startswith("<frozen ") or (line == "0" and not in_memprof(file))
            for file, line in frames
        )
        and last.startswith("KeyboardInterrupt")
    )


# What CPython prints when a press ends its own start-up: its initialisation (a .pth file's
# line running in `site`, say) or, after it, setting up the script's __main__ module
PYTHONS_OWN_WORDS = ("Fatal Python error: init_", "failed to set __main__.__loader__")


def in_pythons_init(ending) -> bool:
    """CPython says the press ended its own start-up, whenever the clock says it came."""
    return any(words in ending.stderr for words in PYTHONS_OWN_WORDS) and not any(
        in_memprof(frame) for frame in frames_of(ending)
    )


def killed_before_any_handler(ending) -> bool:
    """Ended by SIGINT itself, without a word: only CPython's start-up, before the command's
    first instruction, leaves SIGINT's default in place (the clock must say so too)."""
    return ending.returncode == -2 and ending.stderr == ""


def test_ctrl_c_from_the_first_millisecond_of_the_installed_command():
    """The installed `memprof` (scripts/memprof) from 0 to 2 s: every 2 ms over the first
    120 ms (the start-up window of issue 22), then evenly to 2 s. Only presses inside the
    interpreter's own start-up may end as CPython ends them: what it prints says so, or,
    killed silently by SIGINT, the clock does."""
    import shutil

    command = shutil.which("memprof")
    if command is None:
        pytest.skip("no installed `memprof` on PATH (pip install -e .)")
    if "_stop_at_once" not in Path(command).read_text(errors="replace"):
        pytest.fail(f"{command} is an installer's script: reinstall memprof (pip install -e .)")
    run_time_s(COMMAND)  # the kernel cache filled: later runs are alike
    start_s = interpreter_start_s()
    moments = [i * 0.002 for i in range(60)] + spread(0.12, 2.0, 20)
    endings = [interrupt(COMMAND, delay, program=command) for delay in moments]
    bad = [
        (e.delay_s, e.returncode, e.problems(), e.stderr[:1500])  # its first frame: whose
        for e in endings
        if e.problems()
        and not (
            in_pythons_frames(e)
            or in_pythons_init(e)
            or (e.delay_s <= start_s and killed_before_any_handler(e))
        )
    ]
    assert bad == [], f"the interpreter starts in {start_s * 1e3:.1f} ms: " + "\n\n".join(
        f"at {delay:.3f} s, exit {code}, {problems}:\n{stderr}"
        for delay, code, problems, stderr in bad
    )
