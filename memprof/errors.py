"""User-facing errors: one line, a non-zero exit code, never a traceback."""

from __future__ import annotations

import itertools
from enum import IntEnum
from typing import Any


class ExitCode(IntEnum):
    """Exit codes memprof documents in its README and help."""

    OK = 0
    CHECK_FAILED = 1  # a GPU result did not match numpy, or an unexpected failure
    USAGE = 2  # invalid arguments (also Click's own code for usage errors)
    ENVIRONMENT = 3  # PyCUDA, driver, GPU, nvcc or a capability is missing
    OUT_OF_MEMORY = 4  # an allocation was refused or failed
    SAVE_FAILED = 5  # the run finished, but its output (--json/--csv, stdout) was not written
    INTERNAL = 70  # a bug in memprof (sysexits' EX_SOFTWARE): one line, MEMPROF_DEBUG=1 for more
    INTERRUPTED = 130  # Ctrl-C


class MemprofError(Exception):
    """An error memprof explains in one line instead of a traceback."""

    exit_code: ExitCode = ExitCode.CHECK_FAILED

    def __init__(self, message: str, exit_code: ExitCode | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


def error_words(error: BaseException) -> str:
    """An error's own words, else its type's name: 'ERROR_NOT_READY (13)', 'RuntimeError'."""
    return str(error).strip() or type(error).__name__


class EnvironmentProblem(MemprofError):
    """Something outside memprof is missing: PyCUDA, the driver, a GPU, nvcc, a capability."""

    exit_code = ExitCode.ENVIRONMENT


class InvalidArgument(MemprofError):
    """An argument is outside its allowed range; the message names the range."""

    exit_code = ExitCode.USAGE


class OutOfMemory(MemprofError):
    """An allocation that cannot fit: says how much was asked and how much is free."""

    exit_code = ExitCode.OUT_OF_MEMORY


class VerificationFailed(MemprofError):
    """The GPU computed something other than numpy did."""

    exit_code = ExitCode.CHECK_FAILED


class SaveFailed(MemprofError):
    """The run finished, but writing --json, --csv or stdout failed (disk full...)."""

    exit_code = ExitCode.SAVE_FAILED


DISTRIBUTION = "cuda-memprof"  # pyproject's name: `memprof` on PyPI is another project
CUDA_PACKAGES = '"pycuda>=2024.1" "cupti-python>=13.0" "nvidia-ml-py>=12.0" "cuda-bindings>=12.8"'


def install_command(packages: str = CUDA_PACKAGES, extra: str = "cuda") -> str:
    """The command that installs one of memprof's extras: from the checkout where memprof runs
    from one (`pip install "memprof[cuda]"` fetches an unrelated project), else `packages`."""
    import shlex
    from pathlib import Path

    checkout = Path(__file__).resolve().parent.parent
    project = checkout / "pyproject.toml"
    try:
        ours = project.is_file() and f'name = "{DISTRIBUTION}"' in project.read_text("utf-8")
    except (OSError, UnicodeDecodeError):
        ours = False
    if ours:
        return f"pip install -e {shlex.quote(f'{checkout}[{extra}]')}"
    return f"pip install {packages}"


class MissingPackage(EnvironmentProblem, ImportError):
    """An optional package a feature needs is not installed (matplotlib for pictures, pandas
    for DataFrames): exit 3 like any missing tool, and an ImportError, so a notebook's
    `except ImportError` around an optional feature catches it too."""


def require_package(module: str, minimum: tuple[int, ...], extra: str, purpose: str) -> Any:
    """`module` imported, at least version `minimum`, or MissingPackage saying how to install
    it."""
    import importlib

    wanted = ".".join(map(str, minimum))
    how = install_command(f'"{module}>={wanted}"', extra)
    try:
        found = importlib.import_module(module)
    except ImportError:
        raise MissingPackage(f"{purpose} needs {module}, which is not installed: {how}") from None
    version = getattr(found, "__version__", "")
    if _release(version) < minimum:
        raise MissingPackage(f"{purpose} needs {module} {wanted} or later, not {version}: {how}")
    return found


def _release(version: str) -> tuple[int, ...]:
    """The leading numbers of a version string: '3.11.2rc1' -> (3, 11, 2)."""
    numbers = []
    for part in version.split("."):
        digits = "".join(itertools.takewhile(str.isdigit, part))
        if not digits:
            break
        numbers.append(int(digits))
    return tuple(numbers)
