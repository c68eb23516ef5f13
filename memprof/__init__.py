"""memprof: what each kind of CUDA memory really costs, measured on your own GPU.

From Python (a notebook, a script), the same experiments as the command line:

    import memprof

    result = memprof.run("pinned", power=20)  # measures on GPU 0, prints nothing
    memprof.render(result)                     # prints it as `memprof pinned` does
    result.find("h2d", "pinned", "gpu").stats  # every sample is in the Result
    memprof.load("run.json")                   # a Result saved with --json

See docs/python-api.md. Importing memprof is light: numpy, PyCUDA and CUPTI are loaded when
a run needs them.
"""

from memprof.version import __version__

__all__ = ["__version__", "load", "render", "run"]


def __getattr__(name: str) -> object:  # nothing imported here: `python -m memprof` starts fast
    if name in ("run", "load", "render"):
        from memprof import api

        return getattr(api, name)
    raise AttributeError(f"module 'memprof' has no attribute {name!r}")
