"""User-facing errors: one line, a non-zero exit code, never a traceback."""

from __future__ import annotations

from enum import IntEnum


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


def install_command(packages: str = CUDA_PACKAGES) -> str:
    """The command that installs memprof's `cuda` extra where this memprof runs from.

    memprof is not published: `pip install "memprof[cuda]"` fetches an unrelated project of
    that name. From a checkout (pyproject.toml beside the package, as `pip install -e .`
    leaves it) the extra is installed from that folder, wherever the command is typed;
    installed any other way, `packages` are named themselves.
    """
    import shlex
    from pathlib import Path

    checkout = Path(__file__).resolve().parent.parent
    project = checkout / "pyproject.toml"
    try:
        ours = project.is_file() and f'name = "{DISTRIBUTION}"' in project.read_text("utf-8")
    except (OSError, UnicodeDecodeError):
        ours = False
    if ours:
        return f"pip install -e {shlex.quote(f'{checkout}[cuda]')}"
    return f"pip install {packages}"
