"""memprof's version, in one place: the packaging reads it (pyproject.toml), every Result
records it, and `memprof --version` prints it. A module of its own so that lower layers
(the Result model) need not import the package's face, which offers the Python API."""

__version__ = "0.1.0"
