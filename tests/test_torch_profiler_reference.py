"""The torch.profiler reference of `memprof trace` (benchmarks/torch_profiler_run.py) counts a
copy at the operator that launched it, never at a CUDA API call torch also linked it to."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.benchmark_scripts import script

reference = script("torch_profiler_run")

COPY = SimpleNamespace(name="Memcpy HtoD (Pageable -> Device)")
KERNEL = SimpleNamespace(name="void at::native::vectorized_elementwise_kernel<4>")
MEMSET = SimpleNamespace(name="Memset (Device)")


def event(name: str, *kernels: SimpleNamespace) -> SimpleNamespace:
    return SimpleNamespace(name=name, kernels=list(kernels))


@pytest.mark.parametrize(
    ("name", "kernels", "made"),
    [
        ("aten::copy_", (COPY, COPY), 2),
        ("aten::_local_scalar_dense", (COPY,), 1),
        ("torch_lines.py(26): upload", (COPY,), 1),
        ("cuda_copies.py(12): upload", (COPY,), 1),  # a file named cuda...: no API call
        ("cudnn_convolution", (COPY,), 1),  # an operator whose name begins with cu
        ("custom_copy", (COPY,), 1),
        ("aten::add", (KERNEL,), 0),
        ("aten::zero_", (MEMSET,), 0),
        ("cudaGetDeviceProperties_v2", (COPY,), 0),  # seen on two H100s
        ("cudaMemcpyAsync", (COPY,), 0),
        ("cuLaunchKernel", (COPY,), 0),
    ],
)
def test_copies_are_counted_at_operators_only(name, kernels, made):
    assert reference.copies_made(event(name, *kernels)) == made
