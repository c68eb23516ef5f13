"""Whether a command was interrupted. Imports nothing, so the entry point can use it first thing.

A Ctrl-C does not always arrive as a KeyboardInterrupt (inside a C extension's import it comes
back as an ImportError, in a __del__ it is dropped), so the entry point's handler notes every
press here, and whatever a command ends with after one is the interruption: one line, exit 130.
"""

_pressed = [False]


def note_press() -> None:
    """Ctrl-C was pressed (memprof.__main__'s handler calls this first)."""
    _pressed[0] = True


def forget_presses() -> None:
    """A new command begins: no Ctrl-C yet."""
    _pressed[0] = False


def pressed() -> bool:
    """Whether Ctrl-C was pressed since the command began."""
    return _pressed[0]


def caused_by_ctrl_c(error: BaseException | None) -> bool:
    """A KeyboardInterrupt, or an error Python made of one (Python 3.11 turns one raised in
    __set_name__ while a class is built into a RuntimeError), or any error after a press."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, KeyboardInterrupt):
            return True
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return pressed()
