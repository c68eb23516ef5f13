"""memprof: what each kind of CUDA memory really costs, measured on your own GPU."""

__version__ = "0.1.0"
