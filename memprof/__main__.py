"""The `memprof` entry point (console script and `python -m memprof`).

Ctrl-C is memprof's from this module's first instruction: before main() nothing is allocated
and a press ends the process at once; from main() on it raises KeyboardInterrupt (noted in
memprof.interrupts, as numpy's import may turn it into an ImportError), so the command frees
what it holds; either way one line and exit 130. After the command a late Ctrl-C is ignored.
The installed command is scripts/memprof, whose first instruction does the same (an
installer-written script imports re and this package first).
"""

import _signal  # first: the C module, which imports nothing and cannot be interrupted
import sys


def _stop_at_once(signum: int, frame: object) -> None:
    """Ctrl-C before main(): nothing to free yet, so the line and exit 130, now."""
    import os  # loaded at interpreter start-up: no import happens here

    os.write(2, b"memprof: error: interrupted\n")
    os._exit(130)


if __name__ == "__main__" or sys.argv[0].rpartition("/")[2] == "memprof":  # not on import
    _signal.signal(_signal.SIGINT, _stop_at_once)

from memprof.interrupts import caused_by_ctrl_c, forget_presses, note_press, pressed  # noqa: E402

INTERRUPTED_EXIT_CODE = 130  # memprof.errors.ExitCode.INTERRUPTED, not imported: it is not light
SAVE_FAILED_EXIT_CODE = 5  # ExitCode.SAVE_FAILED: output that could not be written


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
        code = None
    if code is None or (pressed() and code != INTERRUPTED_EXIT_CODE):  # or a press lost
        _say("memprof: error: interrupted\n")
        code = INTERRUPTED_EXIT_CODE
    if not _flush_stdout() and code == 0:
        _say("memprof: error: stdout: not written: what was left could not be flushed\n")
        code = SAVE_FAILED_EXIT_CODE
    if code == INTERRUPTED_EXIT_CODE:
        # Under `python -m`, a KeyboardInterrupt that ended inside a string exec/eval (as
        # dataclasses and namedtuple build their methods) leaves a flag that makes CPython
        # exit by SIGINT instead of with our code; any string exec clears that flag.
        exec("")
    sys.exit(code if isinstance(code, int) else 0)


def _handle_ctrl_c() -> None:
    """Ctrl-C raises KeyboardInterrupt, except where Python would print it as "Exception
    ignored" and run on (inside a __del__ or importlib's weakref callback): there it is
    delivered again 5 ms later (SIGALRM), and the unraisable hook redelivers any other."""
    import signal

    def dropped_there(frame: object) -> bool:
        """Whether `frame` or a caller is a __del__ or importlib's weakref callback."""
        while frame is not None:
            code = getattr(frame, "f_code", None)
            name = getattr(code, "co_name", "")
            if name == "__del__" or (
                name == "cb" and "importlib" in getattr(code, "co_filename", "")
            ):
                return True
            frame = getattr(frame, "f_back", None)
        return False

    def on_ctrl_c(signum: int, frame: object) -> None:
        note_press()
        if dropped_there(frame):
            signal.setitimer(signal.ITIMER_REAL, 0.005)
            return
        raise KeyboardInterrupt

    def on_alarm(signum: int, frame: object) -> None:
        current = signal.getsignal(signal.SIGINT)  # ours, a cleanup's deferral, or ignored
        if callable(current):
            current(signal.SIGINT, frame)

    def on_unraisable(unraisable: object) -> None:
        if isinstance(getattr(unraisable, "exc_value", None), KeyboardInterrupt):
            signal.setitimer(signal.ITIMER_REAL, 0.005)
            return
        print_unraisable(unraisable)

    print_unraisable = sys.unraisablehook
    forget_presses()
    sys.unraisablehook = on_unraisable
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


def _flush_stdout() -> bool:
    """Flush now, so a closed pipe costs no 'Exception ignored' at exit: False where what was
    left could not be written (a full disk; a closed pipe is fine)."""
    if sys.stdout is None:  # closed before memprof started (`>&-`): nothing was written
        return True
    try:
        sys.stdout.flush()
        return True
    except (OSError, ValueError) as error:
        try:
            import os

            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return isinstance(error, BrokenPipeError)


if __name__ == "__main__":
    main()
