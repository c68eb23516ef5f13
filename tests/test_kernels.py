"""Kernel sources: found from the checkout, parsed into nvprof names, compiled to PTX by nvcc."""

import shutil
import subprocess
from pathlib import Path

import pytest

from memprof.core.kernels import KernelSignature, kernel_directory, kernel_source, parse_signatures

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
