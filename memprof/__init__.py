"""memprof: what each kind of CUDA memory really costs, measured on your own GPU.

From Python (a notebook, a script), the same experiments as the command line:

    import memprof

    result = memprof.run("pinned", power=20)  # measures on GPU 0, prints nothing
    memprof.render(result)                     # prints it as `memprof pinned` does
    result.find("h2d", "pinned", "gpu").stats  # every sample is in the Result
    saved = memprof.load("run.json")           # a Result saved with --json
    every = memprof.load_all("all.json")       # each GPU's, saved with --device all --json
    memprof.diff(saved, result)                # compared row by row, as `memprof diff`
    result.to_frame()                          # a pandas DataFrame: the CSV's rows
    memprof.plot(result, "run.svg")            # the picture `memprof plot` draws

See docs/python-api.md. Importing memprof is light: numpy, PyCUDA and CUPTI are loaded when
a run needs them, pandas and matplotlib when a frame or a picture is made.
"""

from memprof.version import __version__

# memprof.api's, imported when used
API = ("run", "load", "load_all", "render", "diff", "frame", "plot")
__all__ = ["__version__", *API]


def __getattr__(name: str) -> object:  # nothing imported here: `python -m memprof` starts fast
    if name in API:
        from memprof import api

        return getattr(api, name)
    raise AttributeError(f"module 'memprof' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
