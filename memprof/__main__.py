"""The `memprof` entry point (console script and `python -m memprof`).

Deliberately tiny, with nothing heavy imported at the top: Ctrl-C while numpy, rich and
typer are still importing is one line and exit 130, like Ctrl-C at any later moment.
Once the command has ended, a late Ctrl-C is ignored: there is nothing left to stop.

The first few tens of milliseconds belong to the interpreter (start-up, site, runpy), and
Ctrl-C there is CPython's to report; memprof's handling starts with main().
"""

import sys

from memprof.interrupts import caused_by_ctrl_c

INTERRUPTED_EXIT_CODE = 130  # memprof.errors.ExitCode.INTERRUPTED, not imported: it is not light


def main() -> None:
    code: object = INTERRUPTED_EXIT_CODE
    try:
        try:
            _handle_ctrl_c()
            from memprof.cli import app

            code = app(standalone_mode=False)
        finally:
            _ignore_ctrl_c()
    except BaseException as error:
        if not caused_by_ctrl_c(error):
            raise
        _say("memprof: error: interrupted\n")
        code = INTERRUPTED_EXIT_CODE
    _flush_stdout()
    if code == INTERRUPTED_EXIT_CODE:
        # Under `python -m`, a KeyboardInterrupt that ended inside a string exec/eval (as
        # dataclasses and namedtuple build their methods) leaves a flag that makes CPython
        # exit by SIGINT instead of with our code; any string exec clears that flag.
        exec("")
    sys.exit(code if isinstance(code, int) else 0)


def _handle_ctrl_c() -> None:
    """Ctrl-C raises KeyboardInterrupt, as by default, except where Python would drop it.

    Raised inside importlib's weakref callback or a __del__, the exception is printed as
    "Exception ignored" and lost, and the command runs on. There Ctrl-C is delivered again
    5 ms later (SIGALRM), to whatever handles SIGINT then.
    """
    import signal

    def on_ctrl_c(signum: int, frame: object) -> None:
        code = getattr(frame, "f_code", None)
        name = getattr(code, "co_name", "")
        in_import_callback = name == "cb" and "importlib" in getattr(code, "co_filename", "")
        if name == "__del__" or in_import_callback:
            signal.setitimer(signal.ITIMER_REAL, 0.005)
            return
        raise KeyboardInterrupt

    def on_alarm(signum: int, frame: object) -> None:
        current = signal.getsignal(signal.SIGINT)  # ours, a cleanup's deferral, or ignored
        if callable(current):
            current(signal.SIGINT, frame)

    signal.signal(signal.SIGALRM, on_alarm)
    signal.signal(signal.SIGINT, on_ctrl_c)


def _ignore_ctrl_c() -> None:
    """The command has ended (or is ending): a late Ctrl-C has nothing left to stop."""
    import signal  # here, not at the top: importing it takes long enough to be interrupted

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _say(line: str) -> None:
    try:
        sys.stderr.write(line)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _flush_stdout() -> None:
    """Flush now, so a reader that closed the pipe costs no 'Exception ignored' at exit."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        try:
            import os

            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass


if __name__ == "__main__":
    main()
