"""`memprof portable`: one pinned buffer used from every GPU's context (seed 004).

cuMemHostAlloc(PORTABLE) pins memory for every CUDA context; without the flag, CUDA says
the memory is pinned for the allocating context only, so another GPU's context may treat
it as pageable and stage its copies. Both buffers are allocated in the first GPU's context
(with the host thread on its local CPUs unless --no-affinity); each GPU copies from and to
both, and every copy is verified. Copies are the synchronous calls (cuMemcpyHtoD/DtoH) in
batches between one event pair: a copy the driver stages would block behind a GPU-side
gate, and at 256 MiB per copy the calls' own cost is well under 1%.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from memprof.core import memory
from memprof.core.affinity import near_gpu
from memprof.core.devicefacts import collect
from memprof.core.multigpu import DEVICE_RECORD, PeerSession, device_records
from memprof.errors import EnvironmentProblem
from memprof.experiments import hostlink
from memprof.experiments.common import (
    FLOAT32_BYTES,
    POISON_BYTE,
    Progress,
    gb_per_s_by_key,
    no_progress,
)
from memprof.experiments.hostlink import DIRECTION_LABELS, DIRECTIONS
from memprof.model.formatting import format_bytes, format_gb_per_s
from memprof.model.results import ByteCount, Check, Count, Measurement, Result
from memprof.model.summary import Summary, Table

BUFFERS = ("portable", "pinned")  # memory kinds: PORTABLE, and pinned in the owner's context
BATCH = 4  # copies per batch (256 MiB each: about 20 ms on PCIe Gen5)
SAME_SPEED = 0.9  # a foreign context reaching 90% of portable treats the memory as pinned


@dataclass(frozen=True)
class PortableParams:
    power: int = 26  # 2^26 float32 = 256 MiB per copy
    repeat: int = 5  # timed batches per buffer, GPU and direction
    warmup: int = 1


PARAMS = PortableParams
EXTRA_FIELDS = {
    "devices": list[DEVICE_RECORD],
    "owner": Count,  # the GPU whose context allocated both buffers
    "bytes_per_copy": ByteCount,
    "unified_addressing": bool,  # every GPU reports UNIFIED_ADDRESSING
}


def operation_key(buffer: str, direction: str, index: int) -> str:
    """'pinned h2d 1': GPU 1 copying from the buffer pinned in the owner's context only."""
    return f"{buffer} {direction} {index}"


def parse_operation_key(key: str) -> tuple[str, str, int] | None:
    """(buffer, direction, device) of a portable measurement, None for anything else."""
    return hostlink.parse_operation_key(key, BUFFERS)


# -- running ---------------------------------------------------------------------------------


def run(
    peers: PeerSession,
    params: PortableParams,
    progress: Progress = no_progress,
    affinity: bool = True,
) -> Result:
    devices = peers.devices
    owner = devices[0]
    elements = 1 << params.power
    nbytes = elements * FLOAT32_BYTES
    values = np.random.default_rng(404).random(elements, dtype=np.float32)
    facts = {}
    targets: dict[int, memory.Buffer] = {}
    for index in devices:
        with peers.active(index) as session:
            facts[index] = collect(session)
            memory.require_memory(session, device_bytes=nbytes, host_bytes=4 * nbytes)
            targets[index] = memory.allocate(session, "device", elements)
    with peers.active(owner) as session, near_gpu(facts[owner].pci_bus_id, affinity) as placed:
        hosts = {kind: memory.allocate(session, kind, elements) for kind in BUFFERS}
        unified = all(peers.session(i).attribute("UNIFIED_ADDRESSING") for i in devices)
    measurements: list[Measurement] = []
    checks: list[Check] = []
    steps = len(BUFFERS) * len(devices) * len(DIRECTIONS)
    done = 0
    for kind in BUFFERS:
        for index in devices:
            for direction, name in DIRECTIONS.items():
                progress(f"{kind} {direction} from GPU {index}", done, steps)
                done += 1
                with peers.active(index) as session:
                    samples = _timed_copies(
                        session, hosts[kind], targets[index], values, direction, params
                    )
                    checks.append(
                        _verify(
                            session, hosts[kind], targets[index], values, direction, index, owner
                        )
                    )
                measurements.append(
                    Measurement(
                        "gpu",
                        name,
                        operation_key(kind, direction, index),
                        kind,
                        nbytes,
                        samples_ms=samples,
                        throughput_ms=list(samples),
                        batch=BATCH,
                    )
                )
    progress("done", steps, steps)
    timing = None
    with peers.active(owner) as session:
        for buffer in hosts.values():
            buffer.free()
        timing = session.profiler.timing_info()
    for index in devices:
        with peers.active(index):
            targets[index].free()
    timing.host_affinity = placed
    return Result(
        command="portable",
        parameters=asdict(params),
        device=facts[owner],
        measurements=measurements,
        checks=checks,
        extra={
            "devices": device_records(facts, devices),
            "owner": owner,
            "bytes_per_copy": nbytes,
            "unified_addressing": bool(unified),
        },
        timing=timing,
    )


def _timed_copies(
    session: Any,
    host: memory.Buffer,
    device: memory.Buffer,
    values: np.ndarray,
    direction: str,
    params: PortableParams,
) -> list[float]:
    """Milliseconds per copy of `repeat` batches of BATCH synchronous copies (after warm-ups)."""
    cuda = session.cuda
    if direction == "h2d":
        host.array[:] = values
        cuda.memset_d8(device.device_pointer, POISON_BYTE, device.nbytes)

        def copy() -> None:
            cuda.memcpy_htod(device.device_pointer, host.array)
    else:
        cuda.memcpy_htod(device.device_pointer, values)
        host.array.fill(np.nan)

        def copy() -> None:
            cuda.memcpy_dtoh(host.array, device.device_pointer)

    samples = []
    for batch in range(params.warmup + params.repeat):
        start, end = cuda.Event(), cuda.Event()
        start.record()  # the legacy default stream, which the synchronous calls use
        for _ in range(BATCH):
            copy()
        end.record()
        end.synchronize()
        if batch >= params.warmup:
            samples.append(end.time_since(start) / BATCH)
    return samples


def _verify(session, host, device, values, direction: str, index: int, owner: int) -> Check:
    session.context.synchronize()
    if direction == "h2d":
        received = np.empty_like(values)
        session.cuda.memcpy_dtoh(received, device.device_pointer)
    else:
        received = host.array
    wrong = np.flatnonzero(received != values)
    detail = (
        "Check result success!"
        if not wrong.size
        else f"element {wrong[0]} is {received[wrong[0]]!r} ({wrong.size} wrong)"
    )
    return Check(
        f"{buffer_label(host.kind.name, owner)} {DIRECTION_LABELS[direction]}, from GPU {index}",
        not wrong.size,
        int(received.size),
        detail,
    )


def buffer_label(kind: str, owner: int) -> str:
    if kind == "portable":
        return f"Portable, pinned by GPU {owner}"
    return f"Pinned by GPU {owner} only"


def measure(
    params: PortableParams, progress: Progress = no_progress, affinity: bool = True
) -> Result:
    """Open a context on every GPU and run the experiment (one GPU: exit 3, one line)."""
    from memprof.core.multigpu import device_count

    count = device_count()
    if count < 2:
        raise EnvironmentProblem(
            "memprof portable needs two GPUs: this machine has one, so no second context can "
            "use the memory"
        )
    with PeerSession(list(range(count))) as peers:
        return run(peers, params, progress, affinity)


# -- summarizing -----------------------------------------------------------------------------


def figures(result: Result) -> dict[tuple[str, str, int], float]:
    """(buffer, direction, device) -> GB/s, median of the batches."""
    return gb_per_s_by_key(result, parse_operation_key)


def summarize(result: Result) -> Summary:
    devices = [device["index"] for device in result.extra["devices"]]
    owner = result.extra["owner"]
    cells = figures(result)
    table = Table(
        f"Pinned host memory of {format_bytes(result.extra['bytes_per_copy'])} used from each "
        "GPU's context, GB/s",
        ["Buffer", "Used from", *(f"{DIRECTION_LABELS[d]}" for d in DIRECTIONS)],
    )
    for kind in BUFFERS:
        for index in devices:
            where = f"GPU {index}" + (" (its owner)" if index == owner else "")
            row = [
                format_gb_per_s(cells[kind, d, index]) if (kind, d, index) in cells else "-"
                for d in DIRECTIONS
            ]
            table.add_row(buffer_label(kind, owner), where, *row)
    table.notes += [
        f"Both buffers allocated by cuMemHostAlloc in GPU {owner}'s context; copies are "
        f"cuMemcpyHtoD/DtoH in batches of {BATCH} between one event pair, median of "
        f"{result.parameters['repeat']} batches; GB/s = 10^9 bytes/s.",
        "Unified addressing on every GPU: "
        + ("yes" if result.extra["unified_addressing"] else "no")
        + " (with it, CUDA documents every cuMemHostAlloc buffer as usable by every GPU).",
    ]
    return Summary(
        tables=[table], conclusions=_conclusions(result, devices, owner, cells), show_profile=False
    )


def _conclusions(result, devices, owner, cells) -> list[str]:
    lines = []
    for index in devices:
        if index == owner:
            continue
        for direction, label in DIRECTION_LABELS.items():
            portable = cells.get(("portable", direction, index))
            foreign = cells.get(("pinned", direction, index))
            if not portable or not foreign:
                continue
            ratio = foreign / portable
            verdict = (
                "its context treats the buffer as pinned too, so PORTABLE changed nothing here."
                if ratio >= SAME_SPEED
                else "its context treats the buffer as pageable and stages the copies: "
                "allocate host memory that several GPUs use with PORTABLE."
            )
            lines.append(
                f"GPU {index}, {label}: memory pinned only in GPU {owner}'s context moved "
                f"{format_gb_per_s(foreign)} GB/s, {ratio:.0%} of the portable buffer's "
                f"{format_gb_per_s(portable)} GB/s: {verdict}"
            )
    return lines
