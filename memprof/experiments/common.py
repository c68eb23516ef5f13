"""What several experiments share: sizes, input data, and the sumArrays kernel (numpy is
imported inside the functions, as every experiment module keeps import light)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memprof.experiments import base

if TYPE_CHECKING:
    import numpy as np

    from memprof.model.figures import Figure


def size_label(power: int) -> str:
    from memprof.model.formatting import format_bytes

    return f"2^{power} ({format_bytes(base.FLOAT32_BYTES << power)})"


def input_arrays(elements: int, seed: int = 2018) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random float32 inputs a, b and numpy's a + b: never zeros, which hide unwritten output."""
    import numpy as np

    rng = np.random.default_rng(seed)
    a = rng.random(elements, dtype=np.float32)
    b = rng.random(elements, dtype=np.float32)
    return a, b, a + b


def prefetch_to_gpu(session: Any, buffers: Iterable[Any], kind: str) -> None:
    """cuMemPrefetchAsync of managed `buffers` to the GPU, as PREFETCH and PREFETCH_CALLS."""
    from memprof.core import bindings

    buffers = list(buffers)
    gpu, calls, profiler = base.PREFETCH, base.PREFETCH_CALLS, session.profiler
    moved = sum(buffer.nbytes for buffer in buffers)
    with (
        profiler.events(gpu.group, gpu.name, gpu.operation, kind, moved),
        profiler.api(calls.name, calls.operation, kind),
    ):
        for buffer in buffers:
            bindings.prefetch(buffer.device_pointer, buffer.nbytes, session.device_index)


POISON_BYTE = 0xFF  # 0xFFFFFFFF is a float32 NaN: an element the kernel skipped never passes


class SumArrays:
    """The seeds' kernel, res = a + b over float32, with random inputs and numpy's answer."""

    def __init__(self, session: Any, elements: int) -> None:
        from memprof.core.kernels import load_kernel

        self.session, self.elements = session, elements
        self.kernel = load_kernel(session, "sum_arrays.cu", "sumArraysGPU")
        self.a, self.b, self.expected = input_arrays(elements)

    def launch(self, a_pointer: int, b_pointer: int, result: Any, kind: str | None) -> None:
        """Poison the device result, then run sumArrays reading a and b at these addresses."""
        from memprof.core import memory

        memory.memset(self.session, result, POISON_BYTE)
        self._sum(a_pointer, b_pointer, result.device_pointer, kind)

    def _sum(self, a_pointer: int, b_pointer: int, result_pointer: int, kind: Any) -> None:
        """sumArrays over the three arrays at these addresses: its bytes are all three."""
        nbytes = 3 * self.elements * base.FLOAT32_BYTES
        pointers = (a_pointer, b_pointer, result_pointer)
        self.kernel.launch(
            self.session, self.elements, *pointers, self.elements, kind=kind, nbytes=nbytes
        )

    def flow(self, sources: tuple, out: Any, devices: tuple, span: tuple, kernel_kind: Any) -> None:
        """The seeds' whole flow, timed end to end as `span` (name, operation, kind): a and b
        copied in from `sources`, sumArrays, the result copied out to `out`."""
        from memprof.core import memory

        session, nbytes = self.session, self.elements * base.FLOAT32_BYTES
        (a, b), (d_a, d_b, d_res) = sources, devices
        memory.memset(session, d_res, POISON_BYTE)
        with session.profiler.events("span", *span, 3 * nbytes):
            memory.copy(session, d_a, a)
            memory.copy(session, d_b, b)
            self._sum(d_a.device_pointer, d_b.device_pointer, d_res.device_pointer, kernel_kind)
            memory.copy(session, out, d_res)

    def verify(self, result: Any, name: str) -> Any:
        """Copy a device result back (never recorded: no measurement's part) and check it."""
        import numpy as np

        from memprof.core.verify import compare_arrays

        host = np.full(self.expected.shape, np.nan, dtype=self.expected.dtype)
        self.session.cuda.memcpy_dtoh(host, result.device_pointer)  # a direct call
        return compare_arrays(name, host, self.expected)


def peer_copy(source_gpu: Any, source: Any, target_gpu: Any, target: Any, nbytes: int) -> Any:
    """An action copying `nbytes` of buffer `source` in session `source_gpu`'s GPU into
    `target` in `target_gpu`'s, cuMemcpyPeerAsync on the stream it is given (check-pairs, peer)."""
    from memprof.core.bindings import memcpy_peer_async

    target_at = (target.device_pointer, target_gpu.context.handle)
    source_at = (source.device_pointer, source_gpu.context.handle)
    return lambda stream: memcpy_peer_async(*target_at, *source_at, nbytes, stream.handle)


@dataclass
class CheckedCopies:
    """One GPU's host and device buffers, between which copies move `values`: the destination
    poisoned before, what arrived compared after (hostlink, portable)."""

    session: Any
    host: Any  # memory.Buffer
    device: Any  # memory.Buffer
    values: Any  # numpy array: what the copies must move

    def prepare(self, direction: str) -> None:
        """The values in the source; poison where they land, so a copy not made never verifies."""
        import numpy as np

        cuda = self.session.cuda
        if direction == "h2d":
            self.host.array[:] = self.values
            cuda.memset_d8(self.device.device_pointer, POISON_BYTE, self.device.nbytes)
        else:
            cuda.memcpy_htod(self.device.device_pointer, self.values)
            self.host.array.fill(np.nan)

    def action(self, direction: str) -> Any:
        """An asynchronous copy `direction` between the buffers, on the stream it is given."""
        from memprof.core.memory import host_copy

        return host_copy(self.session.cuda, direction, self.host, self.device.device_pointer)[1]

    def verify(self, direction: str, name: str) -> Any:
        """Once the copies are done: what arrived against the values."""
        import numpy as np

        from memprof.core.verify import compare_arrays

        self.session.synchronize()
        if direction == "h2d":
            received = np.empty_like(self.values)
            self.session.cuda.memcpy_dtoh(received, self.device.device_pointer)
        else:
            received = self.host.array
        return compare_arrays(name, received, self.values)


def largest_batch(result: Any) -> int:
    """Copies per batch of back-to-back copies (the core chose it from one copy's time)."""
    return max((m.batch for m in result.measurements), default=0)


def gpu_timing(result) -> str:
    """How this Result's GPU operations were timed, for table notes."""
    if result.timing is not None and result.timing.source == "cupti":
        return "CUPTI's record of each operation"
    if result.timing is not None:
        return "gated CUDA events around each operation"
    return "CUDA events around each operation"  # results saved before memprof recorded it


def figures_by_key(
    result: Any, declared: Iterable[base.Measure], key_of: Callable[[Any], Any]
) -> dict[Any, Any]:
    """The figures of every GPU operation `key_of(measurement)` keys (None: not one); a file
    without one is not a run of that experiment: ValueError."""
    from memprof.model.figures import figure_finder

    figure_of = figure_finder(result, declared)
    found = {}
    for m in result.measurements:
        key = key_of(m) if m.group == "gpu" else None
        if key is not None:
            found[key] = figure_of(m)
    if not found:
        raise ValueError("it holds no copy measurements")
    return found


def pair_figures(result: Any, measure: base.Measure) -> dict[tuple[int, int], Figure]:
    """(first GPU, second GPU) -> the figures of a measure's operations between them: a
    copy's (source, destination), peer's latency chain's (memory's GPU, reading GPU)."""
    from memprof.model.figures import figure

    return {m.gpus: figure(result, m, measure) for m in base.find_all(result, measure)}


STAGING_CHUNK_BYTES = 256 << 10  # stays in a CPU core's cache, as the driver's buffer does
HOST_STAGING_NAMES = {
    "h2d": "staging memcpy (pageable → 256 KiB buffer)",
    "d2h": "staging memcpy (256 KiB buffer → pageable)",
}
# A batch of host copies lasts about this long: the host's clock reads nanoseconds, and 5 ms
# batches are past its scheduler's noise (10 ms made the host side a fifth of a sweep's run).
HOST_SIDE_TARGET_MS = 5.0


def measure_host_staging(profiler: Any, scratch: np.ndarray) -> None:
    """The host side of pageable copies of `scratch.nbytes` (overwritten), per direction: the
    driver's one host thread copying chunk by chunk through a small buffer in the CPU's cache,
    without the DMA (docs/ceilings.md). A CPU copies into a cached buffer at one speed, pinned
    or not, so the buffer is a plain one. Batches as every throughput figure's."""
    import ctypes

    import numpy as np

    nbytes = scratch.nbytes
    chunk = min(STAGING_CHUNK_BYTES, nbytes)
    buffer = np.ones(chunk, np.uint8)
    steps = [(offset, min(chunk, nbytes - offset)) for offset in range(0, nbytes, chunk)]
    pageable, staging = scratch.ctypes.data, buffer.ctypes.data

    def into_staging() -> None:
        for offset, length in steps:
            ctypes.memmove(staging, pageable + offset, length)

    def out_of_staging() -> None:
        for offset, length in steps:
            ctypes.memmove(pageable + offset, staging, length)

    for direction, action in (("h2d", into_staging), ("d2h", out_of_staging)):
        name, operation = HOST_STAGING_NAMES[direction], base.HOST_STAGING[direction].operation
        profiler.host_throughput(
            name, operation, "pageable", nbytes, action, target_ms=HOST_SIDE_TARGET_MS
        )


def stops_at(holds: dict[int, bool]) -> int | None:
    """The smallest size from which something (holds: size -> whether) no longer holds at any
    larger size, or None where it holds at the largest: where it stops for good."""
    stop = None
    for size in sorted(holds, reverse=True):
        if holds[size]:
            break
        stop = size
    return stop


def found_or_none(result: Any, group: str, operation: str, kind: str, nbytes: int) -> Any:
    """The one measurement of an operation of a kind and size (None: not measured)."""
    from memprof.model.results import MissingMeasurement

    try:
        return result.find(operation, kind, group, nbytes)
    except MissingMeasurement:
        return None
