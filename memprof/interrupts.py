"""Whether an error is a Ctrl-C. Imports nothing, so the entry point can use it first thing."""


def caused_by_ctrl_c(error: BaseException | None) -> bool:
    """A KeyboardInterrupt, or an error Python made of one (Python 3.11 turns one raised in
    __set_name__ while a class is built into a RuntimeError)."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, KeyboardInterrupt):
            return True
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return False
