"""The GPU session's one-line errors, with stand-in pycuda packages (no GPU here)."""

import re
import sys

import pytest

from memprof.core import session
from memprof.core.session import GpuSession, import_driver, install_hint
from memprof.errors import EnvironmentProblem, ExitCode, InvalidArgument, install_command

DRIVER_WITH_DEVICES = """
class Error(Exception):
    pass

COUNT = {count}
INIT_ERROR = {init_error!r}

def init():
    if INIT_ERROR:
        raise Error(INIT_ERROR)

class Device:
    @staticmethod
    def count():
        return COUNT
"""


def test_missing_pycuda_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "pycuda", None)
    monkeypatch.setattr(session, "driver_installed", lambda: True)  # else: no_driver_line()
    with pytest.raises(EnvironmentProblem) as raised:
        import_driver()
    assert str(raised.value) == install_hint()
    assert install_command() in install_hint()
    assert 'pip install "memprof[cuda]"' not in install_hint()  # on PyPI: another project
    assert raised.value.exit_code == ExitCode.ENVIRONMENT


def test_missing_driver_library_is_named(fake_pycuda):
    message = "libcuda.so.1: cannot open shared object file: No such file or directory"
    fake_pycuda(f"raise ImportError({message!r})")
    with pytest.raises(EnvironmentProblem, match=r"the CUDA driver \(libcuda.so.1\) was not found"):
        import_driver()


def test_no_gpu_is_one_line(fake_pycuda):
    fake_pycuda(
        DRIVER_WITH_DEVICES.format(
            count=0, init_error="cuInit failed: no CUDA-capable device is detected"
        )
    )
    with pytest.raises(
        EnvironmentProblem, match="no usable CUDA device: cuInit failed: no CUDA-capable"
    ):
        GpuSession(0).__enter__()


def test_driver_that_sees_no_device(fake_pycuda):
    fake_pycuda(DRIVER_WITH_DEVICES.format(count=0, init_error=""))
    with pytest.raises(EnvironmentProblem, match="no CUDA device found"):
        GpuSession(0).__enter__()


@pytest.mark.parametrize(
    ("count", "index", "allowed"),
    [(1, 1, "1 CUDA device (0 to 0)"), (4, 7, "4 CUDA devices (0 to 3)")],
)
def test_device_index_is_checked_against_the_devices_present(fake_pycuda, count, index, allowed):
    fake_pycuda(DRIVER_WITH_DEVICES.format(count=count, init_error=""))
    expected = f"--device {index} does not exist: this machine has {allowed}"
    with pytest.raises(InvalidArgument, match=re.escape(expected)):
        GpuSession(index).__enter__()


def test_closing_a_session_that_never_opened_is_harmless():
    GpuSession(0).close()
