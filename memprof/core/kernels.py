"""CUDA kernels: find kernels/*.cu (in a checkout or inside the installed wheel), compile, launch.

Kernels are `extern "C" __global__` (names not mangled); the signature parsed from the source
gives the profile name nvprof would print and the argument packing for launches.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memprof.errors import EnvironmentProblem, MemprofError

_PACKAGE_DIR = Path(__file__).resolve().parent.parent  # memprof/
# Inside a wheel the sources sit in memprof/kernels/; in a checkout, beside memprof/.
KERNEL_DIR_CANDIDATES = (_PACKAGE_DIR / "kernels", _PACKAGE_DIR.parent / "kernels")

_KERNEL_DECLARATION = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(\w+)\s*\(([^)]*)\)', re.S)
_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict"}
# struct format characters PyCUDA's prepared calls use, by C type
_PACK_FORMATS = {
    "int": "i",
    "unsigned int": "I",
    "unsigned": "I",
    "long long": "q",
    "unsigned long long": "Q",
    "size_t": "Q",
    "float": "f",
    "double": "d",
}


def kernel_directory() -> Path:
    """Where the .cu sources are, whether memprof runs from a checkout or a wheel."""
    for candidate in KERNEL_DIR_CANDIDATES:
        if any(candidate.glob("*.cu")):
            return candidate
    searched = ", ".join(str(c) for c in KERNEL_DIR_CANDIDATES)
    raise EnvironmentProblem(f"memprof's kernel sources were not found (looked in {searched})")


def kernel_source(file_name: str) -> str:
    path = kernel_directory() / file_name
    if not path.is_file():
        raise EnvironmentProblem(f"kernel source {file_name} is missing from {path.parent}")
    return path.read_text()


@dataclass(frozen=True)
class KernelSignature:
    name: str
    parameter_types: tuple[str, ...]  # "float*", "int", ...

    @property
    def display(self) -> str:
        """As nvprof names a kernel: sumArraysGPU(float*, float*, float*, int)."""
        return f"{self.name}({', '.join(self.parameter_types)})"

    @property
    def pack_format(self) -> str:
        """PyCUDA's prepare() format: P for every pointer, then the scalar types."""
        return "".join("P" if t.endswith("*") else _PACK_FORMATS[t] for t in self.parameter_types)


def parse_signatures(source: str) -> dict[str, KernelSignature]:
    """Every `extern "C" __global__` kernel in a source, by name."""
    signatures = {}
    for name, parameters in _KERNEL_DECLARATION.findall(source):
        types = tuple(_parameter_type(p) for p in parameters.split(",") if p.strip())
        signatures[name] = KernelSignature(name, types)
    return signatures


def _parameter_type(parameter: str) -> str:
    spaced = parameter.replace("*", " * ")
    words = [w for w in spaced.split() if w not in _QUALIFIERS]
    stars = words.count("*")
    base_words = [w for w in words if w != "*"]
    if stars == 0 or len(base_words) > 1:
        base_words = base_words[:-1]  # drop the parameter's name
    return " ".join(base_words) + "*" * stars


@dataclass
class Kernel:
    """A compiled, prepared kernel; launches are timed and named as nvprof would."""

    signature: KernelSignature
    function: Any

    def launch(
        self,
        session: Any,
        elements: int,
        *arguments: Any,
        kind: str | None = None,
        nbytes: int = 0,
        block_size: int = 256,
        stream: Any = None,
        operation: str = "kernel",
        blocks: int | None = None,
    ) -> None:
        """One thread per element (or `blocks` blocks, grid-stride), recorded: `kind` is the
        memory it reads; `nbytes` what it reads plus writes."""
        grid = (blocks or (elements + block_size - 1) // block_size, 1)
        profiler = session.profiler
        stream = stream if stream is not None else profiler.stream
        with (
            profiler.events("gpu", self.signature.display, operation, kind, nbytes, stream),
            profiler.api("cuLaunchKernel", "launch"),
        ):
            self.function.prepared_async_call(grid, (block_size, 1, 1), stream, *arguments)


def load_kernel(session: Any, file_name: str, kernel_name: str) -> Kernel:
    """Compile a kernels/ source once per session and return one of its kernels."""
    source = kernel_source(file_name)
    signatures = parse_signatures(source)
    if kernel_name not in signatures:
        raise MemprofError(f'{file_name} has no extern "C" __global__ kernel named {kernel_name}')
    module = session.module(file_name, lambda: _compile(session, source, file_name))
    function = module.get_function(kernel_name)
    signature = signatures[kernel_name]
    function.prepare(signature.pack_format)
    return Kernel(signature, function)


NVCC_OPTIONS = ("-O3",)


CUBIN_CACHE_BYTES = 64 << 20  # memprof's cubins are tens of KiB
CUBIN_HEADER = b"memprof cubin sha256 "  # then the cubin's digest in hex, a newline, the cubin


def _compile(session: Any, source: str, file_name: str) -> Any:
    """The module of a kernels/ source, its cubin cached by source, options, architecture and
    driver (sparing nvcc, about 0.1 s), its digest checked before the driver reads it: a
    damaged one is one warning, then compiled again."""
    from memprof.cache import cache_directory, read_bytes, store, warn_once

    cuda = session.cuda
    major, minor = cuda.Context.get_device().compute_capability()
    arch = f"sm_{major}{minor}"
    # every file a source could #include from kernels/, itself among them
    sources = sorted(p for p in kernel_directory().iterdir() if p.suffix in (".cu", ".cuh", ".h"))
    parts = [source, *(p.read_text() for p in sources), arch, *NVCC_OPTIONS]
    parts += [str(cuda.get_driver_version()), CUBIN_HEADER.decode()]
    key = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]
    folder, name = cache_directory(), f"{Path(file_name).stem}-{arch}-{key}.cubin"
    path = None if folder is None else folder / "kernels" / name
    cached = None if path is None else read_bytes(path, CUBIN_CACHE_BYTES)
    if cached is not None:
        cubin = unframed(cached)
        if cubin is not None:
            with contextlib.suppress(cuda.Error):
                return cuda.module_from_buffer(cubin)
        warn_once(str(path), f"ignored the cache {path}: a damaged cubin (compiled again)")
    cubin = _nvcc(session, source, file_name, arch)
    if path is not None:
        store(path, framed(cubin))
    return cuda.module_from_buffer(cubin)


def framed(cubin: bytes) -> bytes:
    """A cubin as the cache keeps it: behind a header holding its digest."""
    return CUBIN_HEADER + hashlib.sha256(cubin).hexdigest().encode() + b"\n" + cubin


def unframed(data: bytes) -> bytes | None:
    """The cubin a cache file holds, or None where it is not whole (its digest differs)."""
    head, newline, cubin = data.partition(b"\n")
    if not newline or not head.startswith(CUBIN_HEADER) or not cubin:
        return None
    digest = head[len(CUBIN_HEADER) :]
    return cubin if digest == hashlib.sha256(cubin).hexdigest().encode() else None


def _nvcc(session: Any, source: str, file_name: str, arch: str) -> bytes:
    if shutil.which("nvcc") is None:
        raise EnvironmentProblem(
            "nvcc was not found on PATH: memprof compiles its kernels with the CUDA toolkit's "
            "nvcc (add e.g. /usr/local/cuda/bin to PATH)"
        )
    from pycuda.compiler import compile as compile_cubin

    try:
        return compile_cubin(
            source,
            options=list(NVCC_OPTIONS),
            no_extern_c=True,
            arch=arch,
            include_dirs=[str(kernel_directory())],
            # memprof's own cache (_compile) is the one read: PyCUDA's would read its files
            # unchecked (a FIFO there hangs) and needs a home (none: `--user N` containers)
            cache_dir=False,
        )
    except session.cuda.CompileError as error:
        first_lines = "; ".join(str(error).strip().splitlines()[:3])
        raise MemprofError(f"nvcc could not compile {file_name}: {first_lines}") from error
    except OSError as error:
        raise EnvironmentProblem(f"running nvcc failed: {error}") from error
