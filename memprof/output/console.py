"""The one place memprof's terminal output is set up: width, colour and encoding.

stdout carries results, stderr errors, warnings and progress; both honour --no-color and
NO_COLOR, and write ASCII look-alikes where their encoding cannot show a character (LC_ALL=C).
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import io
import os
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from memprof.output.literal import literal

if TYPE_CHECKING:  # rich is imported where a console is made: `pinned --quiet` makes none
    from rich.console import Console

# Piped or redirected output is not cut to 80 columns: profiles are wide, like nvprof's.
PIPE_WIDTH = 160

ERROR_HANDLER = "memprof-ascii"
ASCII_LOOKALIKES = {  # what memprof prints beyond ASCII, for streams that cannot show it
    "\u00a0": " ",  # a no-break space (help keeps "[default: 8]" on one line)
    "→": "->",
    "←": "<-",
    "↔": "<->",
    "×": "x",
    "─": "-",
    "━": "-",
    "│": "|",
    "┃": "|",
    "…": "...",
    "≈": "~",
    "≤": "<=",
    "≥": ">=",
    "±": "+/-",
    "µ": "u",
    "μ": "u",
    "–": "-",
    "—": "-",
    "·": ".",
    "█": "#",
    "▏": "|",
    "░": ".",
    "▒": ":",
    "▓": "#",
    "•": "*",
    "✓": "ok",
    "✗": "x",
    "‘": "'",
    "’": "'",
    "“": '"',
    "”": '"',
    "°": " deg",
}


def _ascii_lookalike(error: UnicodeError) -> tuple[str, int]:
    """Codec error handler: an ASCII stand-in for each character the stream cannot encode."""
    if not isinstance(error, UnicodeEncodeError):
        raise error
    text = error.object[error.start : error.end]
    return "".join(ASCII_LOOKALIKES.get(char, "?") for char in text), error.end


codecs.register_error(ERROR_HANDLER, _ascii_lookalike)


def _raise_broken_pipe(console: Console) -> None:
    console.quiet = True  # nothing more to this reader
    raise BrokenPipeError(errno.EPIPE, "the reader closed the pipe")


def prepare_streams() -> None:
    """Let stdout and stderr write any character (a closed pipe is made an exception where a
    console is made: _console)."""
    forget_unusable_width()
    for stream in (sys.stdout, sys.stderr):
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("_", "-")
        if isinstance(stream, io.TextIOWrapper) and not encoding.startswith("utf"):
            with contextlib.suppress(ValueError, OSError):  # a closed or detached stream
                stream.reconfigure(errors=ERROR_HANDLER)


def forget_unusable_width() -> None:
    """Drop COLUMNS and LINES unless they are positive numbers: rich takes COLUMNS=0 as a
    width of 0 and prints nothing, and a garbled one as 80 columns where a pipe gets 160."""
    for name in ("COLUMNS", "LINES"):
        value = os.environ.get(name)
        if value is not None and not (value.isdigit() and int(value) > 0):
            del os.environ[name]


def results_console(no_color: bool = False, stderr: bool = False) -> Console:
    """The console results are rendered on: stdout (stderr for `trace`, whose stdout is the
    program's), full width when piped, plain text without colour."""
    prepare_streams()
    stream = sys.stderr if stderr else sys.stdout
    piped = not stream.isatty() if hasattr(stream, "isatty") else True
    width = PIPE_WIDTH if piped and "COLUMNS" not in os.environ else None
    return _console(stderr=stderr, width=width, no_color=no_color)


def stderr_console(no_color: bool = False) -> Console:
    """The console for error lines, warnings and the progress bar."""
    prepare_streams()
    return _console(stderr=True, width=None, no_color=no_color)


def _console(stderr: bool, width: int | None, no_color: bool) -> Console:
    from rich.console import Console

    # A closed pipe an exception: rich would exit 1, which reads as "verification failed".
    Console.on_broken_pipe = _raise_broken_pipe  # type: ignore[method-assign]
    # emoji=False: ":smile:" in a file's string (or a file name) stays those seven characters
    if no_color or os.environ.get("NO_COLOR", "") != "":  # set to anything (no-color.org)
        # No colours and no other ANSI styling either: plain text a script can read.
        return Console(stderr=stderr, width=width, color_system=None, no_color=True, emoji=False)
    return Console(stderr=stderr, width=width, emoji=False)


def print_error(message: str, no_color: bool = False) -> None:
    """`memprof: error: ...` on stderr, always one line; a closed stderr is ignored. A line
    break inside the message (a file name's) is shown as \\n, as it is spelt."""
    print_note("memprof: error: " + message.strip(), no_color, "bold red")


def print_note(message: str, no_color: bool = False, style: str = "dim") -> None:
    """A line on stderr that is not an error (a warning, "saved PATH")."""
    with contextlib.suppress(OSError, ValueError):
        stderr_console(no_color).print(
            literal(message), style=style, markup=False, highlight=False, soft_wrap=True
        )


def silence_closed_stdout(stderr: bool = False) -> None:
    """After the reader closed stdout (`memprof ... | head`), or stderr, send what is left to
    /dev/null: Python would report the broken pipe again when it flushes at exit."""
    with contextlib.suppress(OSError, ValueError, AttributeError, io.UnsupportedOperation):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, (sys.stderr if stderr else sys.stdout).fileno())
        os.close(devnull)


@contextlib.contextmanager
def progress_bar(
    enabled: bool = True, starting: str = "starting"
) -> Iterator[Callable[[str, int, int], None]]:
    """A transient progress line on stderr, only on a terminal: the experiment's step, done of
    total and the time elapsed. Each step is drawn as reported: rich's refresh thread cannot
    draw while a long driver call holds the GIL."""
    console = stderr_console() if enabled else None  # --quiet: rich is not even imported
    if console is None or not console.is_terminal:
        yield lambda description, done, total: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description}"), BarColumn(bar_width=20), MofNCompleteColumn())
    progress = Progress(*columns, TimeElapsedColumn(), console=console, transient=True)
    task = progress.add_task(starting, total=None)

    def update(description: str, done: int, total: int) -> None:
        progress.update(task, description=description, completed=done, total=total, refresh=True)

    with progress:
        yield update
