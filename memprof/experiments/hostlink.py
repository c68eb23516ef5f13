"""`memprof hostlink`: every GPU's pinned HtoD and DtoH alone, then all GPUs at the same time.

One context per GPU (memprof.multigpu.PeerSession), each with its own pinned host buffer
(allocated with the host thread on that GPU's local CPUs, unless --no-affinity) and device
buffer. A batch of back-to-back copies is queued on each GPU behind its own GPU-side gate,
the gates are opened back to back, and each GPU's events time its own batch. Alone: one GPU
at a time, the same way. If the GPUs together move less than the sum of what each moves
alone, they share something on the way: the host's PCIe root, its memory, or a switch.
`--device all` on pinned, sweep and compare ends with this. Every copy is verified.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from memprof.core import memory
from memprof.core.affinity import near_gpu
from memprof.core.devicefacts import collect
from memprof.core.measure import MAX_BATCH
from memprof.core.multigpu import DEVICE_RECORD, PeerSession, device_records
from memprof.errors import EnvironmentProblem
from memprof.experiments.common import (
    FLOAT32_BYTES,
    POISON_BYTE,
    Progress,
    gb_per_s_by_key,
    no_progress,
)
from memprof.model.formatting import format_bytes, format_gb_per_s
from memprof.model.results import ByteCount, Check, Measurement, Result
from memprof.model.summary import Summary, Table

MODES = {"alone": "Alone", "together": "All at once"}
DIRECTIONS = {"h2d": "[CUDA memcpy HtoD]", "d2h": "[CUDA memcpy DtoH]"}
DIRECTION_LABELS = {"h2d": "host → device", "d2h": "device → host"}
BATCH_TARGET_MS = 20.0  # a batch lasts about this long: the skew of opening gates stays small
SHARED_BELOW = 0.9  # together under 90% of the sum alone: something on the way is shared


@dataclass(frozen=True)
class HostlinkParams:
    power: int = 26  # 2^26 float32 = 256 MiB per copy
    repeat: int = 5  # timed batches per mode and direction
    warmup: int = 1


PARAMS = HostlinkParams
EXTRA_FIELDS = {
    "devices": list[DEVICE_RECORD],
    "bytes_per_copy": ByteCount,
}


def operation_key(mode: str, direction: str, index: int) -> str:
    """The Measurement operation: 'together h2d 1' is GPU 1's HtoD while every GPU copies."""
    return f"{mode} {direction} {index}"


def parse_operation_key(key: str, firsts: Any = MODES) -> tuple[str, str, int] | None:
    """(mode, direction, device) of a hostlink measurement, None for anything else.

    portable's keys have the same shape with its buffers in place of the modes (`firsts`).
    """
    parts = key.split(" ")
    if len(parts) != 3 or parts[0] not in firsts or parts[1] not in DIRECTIONS:
        return None
    return (parts[0], parts[1], int(parts[2])) if parts[2].isdigit() else None


def batch_count(one_copy_ms: float, target_ms: float = BATCH_TARGET_MS) -> int:
    """Copies per batch so a batch lasts about target_ms (at least 1, at most MAX_BATCH)."""
    return max(1, min(MAX_BATCH, math.ceil(target_ms / max(one_copy_ms, 1e-4))))


# -- running ---------------------------------------------------------------------------------


@dataclass
class _Gpu:
    session: Any
    values: np.ndarray
    host: memory.Buffer
    device: memory.Buffer

    def action(self, direction: str):
        _, action = memory.host_copy(
            self.session.cuda, direction, self.host, self.device.device_pointer
        )
        return action


def gated_batches(peers: PeerSession, actions: dict[int, Any], count: int) -> dict[int, float]:
    """`count` copies queued on each GPU behind its own gate, gates opened back to back.

    Returns each GPU's milliseconds per copy, from its own event pair.
    """
    events = {}
    for index, action in actions.items():
        with peers.active(index) as session:
            profiler = session.profiler
            profiler.gate().close(profiler.stream)
            start, end = session.cuda.Event(), session.cuda.Event()
            start.record(profiler.stream)
            for _ in range(count):
                action(profiler.stream)
            end.record(profiler.stream)
            events[index] = (start, end)
    for index in actions:  # opened back to back: the batches overlap
        peers.session(index).profiler.release_gate()
    per_copy = {}
    for index, (start, end) in events.items():
        with peers.active(index) as session:
            end.synchronize()
            session.profiler.gate().check()
            per_copy[index] = end.time_since(start) / count
    return per_copy


def run(
    peers: PeerSession,
    params: HostlinkParams,
    progress: Progress = no_progress,
    affinity: bool = True,
) -> Result:
    devices = peers.devices
    elements = 1 << params.power
    nbytes = elements * FLOAT32_BYTES
    gpus: dict[int, _Gpu] = {}
    facts = {}
    placed = []
    for index in devices:
        with peers.active(index) as session:
            facts[index] = collect(session)
            memory.require_memory(
                session, device_bytes=nbytes, host_bytes=(len(devices) + 1) * nbytes
            )
            with near_gpu(facts[index].pci_bus_id, affinity) as note:
                placed.append(f"GPU {index}: {note.removeprefix('affinity: ')}")
                values = np.random.default_rng(300 + index).random(elements, dtype=np.float32)
                host = memory.allocate(session, "pinned", elements)
                host.array[:] = values
            gpus[index] = _Gpu(session, values, host, memory.allocate(session, "device", elements))
    with peers.active(devices[0]) as session:
        one_ms = session.profiler.time_once(
            lambda: gpus[devices[0]].action("h2d")(session.profiler.stream)
        )
    count = batch_count(one_ms)
    measurements: list[Measurement] = []
    checks: list[Check] = []
    groups = [("alone", [index]) for index in devices] + [("together", devices)]
    steps, done = len(groups) * len(DIRECTIONS), 0
    for mode, members in groups:
        for direction, name in DIRECTIONS.items():
            progress(f"{MODES[mode].lower()}: {direction} on GPU {members}", done, steps)
            done += 1
            _prepare(peers, gpus, members, direction)
            actions = {index: gpus[index].action(direction) for index in members}
            for _ in range(params.warmup):
                gated_batches(peers, actions, count)
            samples: dict[int, list[float]] = {index: [] for index in members}
            for _ in range(params.repeat):
                for index, ms in gated_batches(peers, actions, count).items():
                    samples[index].append(ms)
            for index in members:
                measurements.append(
                    Measurement(
                        "gpu",
                        name,
                        operation_key(mode, direction, index),
                        "pinned",
                        nbytes,
                        samples_ms=samples[index],
                        throughput_ms=list(samples[index]),
                        batch=count,
                    )
                )
                checks.append(_verify(peers, gpus[index], index, mode, direction))
    progress("done", steps, steps)
    timing = None
    for index in devices:
        with peers.active(index) as session:
            gpus[index].host.free()
            gpus[index].device.free()
            if timing is None:
                timing = session.profiler.timing_info()
    timing.host_affinity = "affinity: " + "; ".join(placed)
    return Result(
        command="hostlink",
        parameters=asdict(params),
        device=facts[devices[0]],
        measurements=measurements,
        checks=checks,
        extra={
            "devices": device_records(facts, devices),
            "bytes_per_copy": nbytes,
        },
        timing=timing,
    )


def _prepare(peers: PeerSession, gpus: dict[int, _Gpu], members: list[int], direction: str):
    """Poison where the copies land, so a copy that did not happen never verifies."""
    for index in members:
        gpu = gpus[index]
        with peers.active(index) as session:
            if direction == "h2d":
                gpu.host.array[:] = gpu.values
                session.cuda.memset_d8(gpu.device.device_pointer, POISON_BYTE, gpu.device.nbytes)
            else:
                session.cuda.memcpy_htod(gpu.device.device_pointer, gpu.values)
                gpu.host.array.fill(np.nan)


def _verify(peers: PeerSession, gpu: _Gpu, index: int, mode: str, direction: str) -> Check:
    with peers.active(index) as session:
        session.synchronize()
        if direction == "h2d":
            received = np.empty_like(gpu.values)
            session.cuda.memcpy_dtoh(received, gpu.device.device_pointer)
        else:
            received = gpu.host.array
    wrong = np.flatnonzero(received != gpu.values)
    detail = (
        "Check result success!"
        if not wrong.size
        else f"element {wrong[0]} is {received[wrong[0]]!r} ({wrong.size} wrong)"
    )
    return Check(
        f"Pinned {DIRECTION_LABELS[direction]}, GPU {index} {MODES[mode].lower()}",
        not wrong.size,
        int(received.size),
        detail,
    )


def measure(
    params: HostlinkParams,
    progress: Progress = no_progress,
    affinity: bool = True,
    devices: list[int] | None = None,
) -> Result:
    """Open a context on every GPU and run the experiment (one GPU: exit 3, one line)."""
    from memprof.core.multigpu import device_count

    devices = devices if devices is not None else list(range(device_count()))
    if len(devices) < 2:
        raise EnvironmentProblem(
            "memprof hostlink needs two GPUs: this machine has one, so no two GPUs can copy "
            "at the same time"
        )
    with PeerSession(devices) as peers:
        return run(peers, params, progress, affinity)


# -- summarizing -----------------------------------------------------------------------------


def devices_of(result: Result) -> list[int]:
    return [device["index"] for device in result.extra["devices"]]


def figures(result: Result) -> dict[tuple[str, str, int], float]:
    """(mode, direction, device) -> GB/s, median of the batches."""
    return gb_per_s_by_key(result, parse_operation_key)


def totals(result: Result, direction: str) -> tuple[float, float] | None:
    """(sum of every GPU alone, sum of every GPU at once) in GB/s; None if one is missing."""
    cells = figures(result)
    devices = devices_of(result)
    keys = [(mode, direction, index) for mode in MODES for index in devices]
    if not all(key in cells for key in keys):
        return None
    alone = math.fsum(cells["alone", direction, index] for index in devices)
    together = math.fsum(cells["together", direction, index] for index in devices)
    return alone, together


def summarize(result: Result) -> Summary:
    devices = devices_of(result)
    cells = figures(result)
    nbytes = result.extra["bytes_per_copy"]
    table = Table(
        f"Pinned copies of {format_bytes(nbytes)}, each GPU alone and all {len(devices)} at once",
        ["GPU", "Direction", "Alone, GB/s", "All at once, GB/s", "At once / alone"],
    )

    def cell(key) -> str:
        return format_gb_per_s(cells[key]) if key in cells else "-"

    for direction, label in DIRECTION_LABELS.items():
        for index in devices:
            alone, together = ("alone", direction, index), ("together", direction, index)
            ratio = (
                f"{cells[together] / cells[alone]:.2f}"
                if alone in cells and together in cells
                else "-"
            )
            table.add_row(f"GPU {index}", label, cell(alone), cell(together), ratio)
        summed = totals(result, direction)
        if summed is not None:
            table.add_row(
                "total",
                label,
                format_gb_per_s(summed[0]),
                format_gb_per_s(summed[1]),
                f"{summed[1] / summed[0]:.2f}",
            )
    batch = max((m.batch for m in result.measurements), default=0)
    table.notes += [
        f"GB/s = 10^9 bytes/s: batches of {batch} back-to-back copies from pinned memory, "
        "each GPU between its own event pair behind its own GPU-side gate; at once: the "
        "gates opened back to back; median of "
        f"{result.parameters['repeat']} batches.",
        "Total alone: the sum of each GPU's figure measured on its own.",
    ]
    return Summary(tables=[table], conclusions=_conclusions(result), show_profile=False)


def _conclusions(result: Result) -> list[str]:
    lines = []
    count = len(devices_of(result))
    for direction, label in DIRECTION_LABELS.items():
        summed = totals(result, direction)
        if summed is None:
            continue
        alone, together = summed
        ratio = together / alone
        verdict = (
            "each GPU keeps its own path to host memory: nothing on the way is shared."
            if ratio >= SHARED_BELOW
            else "they share something on the way (the host's PCIe root or switch, or host "
            "memory bandwidth): spread transfers over time, or expect less per GPU."
        )
        lines.append(
            f"{label.capitalize()}: {count} GPUs at once moved {format_gb_per_s(together)} GB/s "
            f"in total, {ratio:.0%} of the {format_gb_per_s(alone)} GB/s they reach one at a "
            f"time: {verdict}"
        )
    return lines
