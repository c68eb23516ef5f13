"""Kernel sources: found from the checkout, parsed into nvprof names, compiled to PTX by nvcc."""

import shutil
import subprocess
from pathlib import Path

import pytest

from memprof.core.kernels import (
    KernelSignature,
    kernel_directory,
    kernel_source,
    parse_signatures,
    unframed,
)

KERNEL_FILES = sorted(kernel_directory().glob("*.cu"))


def test_kernel_sources_are_found_in_the_checkout():
    assert kernel_directory() == Path(__file__).parents[1] / "kernels"
    assert "sumArraysGPU" in kernel_source("sum_arrays.cu")


def test_a_missing_source_is_named():
    from memprof.errors import EnvironmentProblem

    with pytest.raises(EnvironmentProblem, match=r"kernel source nothing\.cu is missing"):
        kernel_source("nothing.cu")


def test_signatures_read_as_nvprof_names_them():
    [signature] = parse_signatures(kernel_source("sum_arrays.cu")).values()
    assert signature.display == "sumArraysGPU(float*, float*, float*, int)"
    assert signature.pack_format == "PPPi"


@pytest.mark.parametrize(
    ("declaration", "display", "pack"),
    [
        ("const float* __restrict__ a, unsigned int n", "k(float*, unsigned int)", "PI"),
        (
            "double *out, const double * in, double s, long long n",
            "k(double*, double*, double, long long)",
            "PPdq",
        ),
        ("volatile int* flag", "k(int*)", "P"),
        ("float4* v, size_t count", "k(float4*, size_t)", "PQ"),
    ],
)
def test_parameter_types_drop_names_and_qualifiers(declaration, display, pack):
    [signature] = parse_signatures(f'extern "C" __global__ void k({declaration}) {{}}').values()
    assert signature.display == display
    assert signature.pack_format == pack


def test_only_extern_c_global_kernels_count():
    source = "__global__ void mangled(int n) {}\n__device__ float helper(float x) { return x; }"
    assert parse_signatures(source) == {}


def test_signature_is_hashable_and_comparable():
    assert KernelSignature("k", ("int",)) == KernelSignature("k", ("int",))


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH here")
@pytest.mark.parametrize("source", KERNEL_FILES, ids=lambda p: p.name)
def test_every_kernel_compiles_to_ptx(source, tmp_path):
    ptx = tmp_path / f"{source.stem}.ptx"
    subprocess.run(
        [
            "nvcc",
            "--ptx",
            "-arch=sm_90",
            "-O3",
            "-I",
            str(source.parent),
            "-o",
            str(ptx),
            str(source),
        ],
        check=True,
        capture_output=True,
    )
    text = ptx.read_text()
    for name in parse_signatures(source.read_text()):
        assert f".entry {name}(" in text  # extern "C": the name is not mangled


# -- the cubin cache, with a fake driver (no GPU) ----------------------------------------------


class FakeDriverError(Exception):
    pass


class FakeDriver:
    """What _compile uses of pycuda.driver: a device's architecture, the driver's version and
    loading a cubin (refused unless it is one the fake nvcc made)."""

    Error = FakeDriverError
    CompileError = FakeDriverError

    def __init__(self, capability=(9, 0), version=13000):
        self.capability, self.version, self.loaded = capability, version, []
        self.Context = type("Context", (), {"get_device": staticmethod(lambda: self)})

    def compute_capability(self):
        return self.capability

    def get_driver_version(self):
        return self.version

    def module_from_buffer(self, cubin):
        if not cubin.startswith(b"CUBIN"):
            raise FakeDriverError("CUDA_ERROR_INVALID_IMAGE")
        self.loaded.append(cubin)
        return cubin


@pytest.fixture
def fake_nvcc(monkeypatch, tmp_path):
    """memprof's cache under tmp_path; nvcc replaced by a counter that 'compiles'."""
    from memprof.core import kernels

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    runs = []

    def nvcc(session, source, file_name, arch):
        runs.append((file_name, arch))
        return b"CUBIN " + arch.encode() + b" " + str(len(runs)).encode()

    monkeypatch.setattr(kernels, "_nvcc", nvcc)
    return runs


def compiled(driver, file_name="sum_arrays.cu"):
    from types import SimpleNamespace

    from memprof.core.kernels import _compile

    return _compile(SimpleNamespace(cuda=driver), kernel_source(file_name), file_name)


def test_a_kernel_is_compiled_once_then_loaded_from_the_cache(fake_nvcc, tmp_path):
    driver = FakeDriver()
    first = compiled(driver)
    assert compiled(driver) == first == b"CUBIN sm_90 1"
    assert fake_nvcc == [("sum_arrays.cu", "sm_90")]
    [cached] = (tmp_path / "memprof" / "kernels").iterdir()
    assert cached.name.startswith("sum_arrays-sm_90-") and unframed(cached.read_bytes()) == first


def test_another_architecture_driver_or_source_compiles_again(fake_nvcc):
    compiled(FakeDriver())
    compiled(FakeDriver(capability=(8, 0)))
    compiled(FakeDriver(version=12080))
    compiled(FakeDriver(), "stream.cu")
    assert fake_nvcc == [
        ("sum_arrays.cu", "sm_90"),
        ("sum_arrays.cu", "sm_80"),
        ("sum_arrays.cu", "sm_90"),
        ("stream.cu", "sm_90"),
    ]


def test_a_damaged_cubin_is_compiled_again_and_replaced(fake_nvcc, tmp_path):
    compiled(FakeDriver())
    [cached] = (tmp_path / "memprof" / "kernels").iterdir()
    cached.write_bytes(b"half a file")
    assert compiled(FakeDriver()) == b"CUBIN sm_90 2"
    assert unframed(cached.read_bytes()) == b"CUBIN sm_90 2"


def test_a_cache_that_cannot_be_written_still_compiles(fake_nvcc, tmp_path):
    (tmp_path / "memprof").write_text("a file where the folder would be")
    assert compiled(FakeDriver()) == b"CUBIN sm_90 1"
    assert compiled(FakeDriver()) == b"CUBIN sm_90 2"  # nothing cached: nvcc each time
