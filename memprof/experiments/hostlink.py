"""`memprof hostlink`: every GPU's pinned HtoD and DtoH alone, then all GPUs at the same time.

Each GPU's batches of back-to-back copies from its own pinned buffer (allocated near it unless
--no-affinity), alone in turn, then all at once behind GPU-side gates opened back to back: if
together they move less than the sum alone, they share the host's PCIe root, memory or a
switch. `--device all` on pinned, sweep and compare ends with this. Every copy is verified.
"""

from __future__ import annotations

from dataclasses import dataclass

from memprof.experiments import base
from memprof.experiments.common import CheckedCopies, figures_by_key, largest_batch
from memprof.model.ceilings import NO_GPU_STATE, detail_of, pcie_ceiling
from memprof.model.device import DeviceRecord
from memprof.model.figures import Derived, Figure
from memprof.model.formatting import format_bytes, format_gb_per_s, gpu_names, said_once
from memprof.model.results import Measurement, Result
from memprof.model.summary import Column, Summary, table

MODES = {"alone": "Alone", "together": "All at once"}
DIRECTIONS = base.COPY_NAMES  # direction -> the copies' name
DIRECTION_LABELS = base.DIRECTIONS  # direction -> words
BATCH_TARGET_MS = 20.0  # long batches: opening the gates one after the other costs nothing
SHARED_BELOW = 0.9  # together under 90% of the sum alone: something on the way is shared


HostlinkParams = base.LargeCopies  # hostlink's: 256 MiB copies, each GPU alone and all at once


@dataclass(frozen=True)
class HostlinkExtra:
    devices: list[DeviceRecord]


def _copies(operation: str, words: str) -> dict[str, base.Measure]:
    """Each direction's pinned copies, back to back, of GPU `gpus[0]`, against its link."""
    return {
        direction: base.Measure(
            "gpu", operation.format(direction=direction), words.format(label=label),
            "back to back", arrays=1, kinds=("pinned",), gpus=1, shows="throughput",
            bound="link",
        )
        for direction, label in DIRECTION_LABELS.items()
    }  # fmt: skip


ALONE = _copies("{direction}", "one GPU's pinned copies {label}")
TOGETHER = _copies("{direction}_at_once", "each GPU's copies {label}, all at once")


class Hostlink(base.Experiment):
    name = "hostlink"
    Params = HostlinkParams
    Extra = HostlinkExtra
    gpus = "every"
    needs_two_gpus = "so no two GPUs can copy at the same time"
    measures = (*ALONE.values(), *TOGETHER.values())

    def run(self, ctx: base.RunContext) -> HostlinkExtra:
        import numpy as np

        from memprof.core import memory
        from memprof.core.measure import Lane, concurrent

        indices = ctx.devices.indices
        params = ctx.params
        elements = 1 << params.power
        nbytes = elements * base.FLOAT32_BYTES
        gpus, placed = {}, []
        for index in indices:
            with ctx.devices.session(index).active() as session:
                memory.require_memory(
                    session, device_bytes=nbytes, host_bytes=(len(indices) + 1) * nbytes
                )
                with ctx.near_gpu(index) as note:
                    placed.append((index, note.removeprefix("affinity: ")))
                    values = np.random.default_rng(300 + index).random(elements, dtype=np.float32)
                    host = memory.allocate(session, "pinned", elements)
                    host.array[:] = values
                device = memory.allocate(session, "device", elements)
                gpus[index] = CheckedCopies(session, host, device, values)
        ctx.placement = "affinity: " + "; ".join(said_once(placed, gpu_names))  # GPUs alike: one

        step = ctx.steps(len(DIRECTIONS) * (len(indices) + 1))
        for direction, name in DIRECTIONS.items():
            for index in indices:
                step(f"pinned {direction}, {format_bytes(nbytes)}: alone on GPU {index}")
                gpu = gpus[index]
                with gpu.session.active():
                    gpu.prepare(direction)
                    action, profiler = gpu.action(direction), gpu.session.profiler
                    lane = Lane(profiler, action, name, direction, "pinned", nbytes, (index,))
                    concurrent([lane], False, BATCH_TARGET_MS, params.repeat, params.warmup)
                    ctx.check(gpu.verify(direction, _check_name(index, "alone", direction)))
            step(f"pinned {direction}, {format_bytes(nbytes)}: GPUs {indices} at once")
            lanes = []
            for index, gpu in gpus.items():
                with gpu.session.active():
                    gpu.prepare(direction)
                operation = TOGETHER[direction].operation
                action, profiler = gpu.action(direction), gpu.session.profiler
                lanes.append(Lane(profiler, action, name, operation, "pinned", nbytes, (index,)))
            concurrent(lanes, False, BATCH_TARGET_MS, params.repeat, params.warmup)
            for index, gpu in gpus.items():
                with gpu.session.active():
                    ctx.check(gpu.verify(direction, _check_name(index, "together", direction)))
        for gpu in gpus.values():
            with gpu.session.active():
                gpu.host.free()
                gpu.device.free()
        devices = [DeviceRecord.of(ctx.facts[index]) for index in indices]
        step("done")
        return HostlinkExtra(devices=devices)

    def derived(self, result: Result) -> dict:
        return {"bytes_per_copy": base.array_bytes(result.parameters)}


def _check_name(index: int, mode: str, direction: str) -> str:
    return f"Pinned {DIRECTION_LABELS[direction]}, GPU {index} {MODES[mode].lower()}"


# -- summarizing -----------------------------------------------------------------------------


def devices_of(result: Result) -> list[int]:
    return [device.index for device in result.extra.devices]


def figure_key(measurement: Measurement) -> tuple[str, str, int] | None:
    """(mode, direction, GPU) of a hostlink copy."""
    if len(measurement.gpus) != 1:
        return None
    direction, _, at_once = measurement.operation.partition("_")
    if direction not in DIRECTIONS or at_once not in ("", "at_once"):
        return None
    return ("together" if at_once else "alone", direction, measurement.gpus[0])


def copy_figures(result: Result) -> dict[tuple[str, str, int], Figure]:
    """(mode, direction, device) -> the figures of its copies."""
    return figures_by_key(result, Hostlink.measures, figure_key)


def figures(result: Result) -> dict[tuple[str, str, int], float]:
    """(mode, direction, device) -> GB/s, median of the batches."""
    return {key: one.gb_per_s for key, one in copy_figures(result).items()}


def total_figures(result: Result, direction: str) -> tuple[Derived, Derived, Derived] | None:
    """(sum alone, sum at once, at once / alone); None if a copy is missing."""
    found = copy_figures(result)
    keys = {mode: [(mode, direction, index) for index in devices_of(result)] for mode in MODES}
    if not all(key in found for key in keys["alone"] + keys["together"]):
        return None
    alone, together = (
        Derived(
            f"{direction}, every GPU {words.lower()}", tuple(map(found.get, keys[mode])), "total"
        )
        for mode, words in MODES.items()
    )
    return alone, together, Derived(f"{direction}, at once / alone", (alone, together), "ratio")


def totals(result: Result, direction: str) -> tuple[float, float] | None:
    """(sum of every GPU alone, sum of every GPU at once) in GB/s; None if one is missing."""
    found = total_figures(result, direction)
    return None if found is None else (found[0].gb_per_s, found[1].gb_per_s)


def summarize(result: Result) -> Summary:
    devices = devices_of(result)
    found = copy_figures(result)
    nbytes = base.array_bytes(result.parameters)
    rows, conclusions = [], []
    for direction, label in DIRECTION_LABELS.items():
        for index in devices:
            alone, together = (found.get((when, direction, index)) for when in MODES)
            row = {"gpu": f"GPU {index}", "direction": label, "alone": alone, "together": together}
            if alone is not None and together is not None:
                name = f"{direction}, GPU {index}: at once / alone"
                row["against"] = Derived(name, (alone, together), "ratio")
            rows.append(row)
        summed = total_figures(result, direction)
        if summed is not None:  # a total has no one ceiling
            rows.append(dict(zip(("alone", "together", "against"), summed, strict=True)))
            rows[-1] |= {"gpu": "total", "direction": label}
            conclusions.append(_conclusion(label, len(devices), *summed))
    title = (
        f"Pinned copies of {format_bytes(nbytes)}, each GPU alone and all {len(devices)} at once"
    )
    notes = [
        f"GB/s = 10^9 bytes/s: batches of {largest_batch(result)} back-to-back copies from "
        "pinned memory, "
        "each GPU between its own event pair behind its own GPU-side gate; at once: the "
        "gates opened back to back; median of "
        f"{base.repetitions(result, 'batch', 'batches', batches=True)}.",
        "Total alone: the sum of each GPU's figure measured on its own.",
        *ceiling_notes(result, "each GPU alone"),
    ]
    tables = [table(title, COPIES, rows, notes)]
    return Summary(tables=tables, conclusions=conclusions, show_profile=False)


COPIES = (
    Column("GPU", "gpu"),
    Column("Direction", "direction"),
    Column("Alone, GB/s", "alone", "gb_per_s"),
    Column("All at once, GB/s", "together", "gb_per_s"),
    Column("At once / alone", "against", "ratio"),
    Column("Of ceiling", "alone", "share"),
)


def ceiling_notes(result: Result, compared: str) -> list[str]:
    """Each GPU's own link, one line for the GPUs whose links are alike (hostlink, portable)."""
    said = [
        (index, f"{detail_of(pcie_ceiling(result, index), NO_GPU_STATE)}.")
        for index in devices_of(result)
    ]
    return [
        f"Of ceiling ({compared} against its own link), {line}"
        for line in said_once(said, gpu_names)
    ]


def _conclusion(label: str, count: int, alone: Derived, together: Derived, ratio: Derived) -> str:
    """One direction's verdict from its total row: all at once against the sum alone."""
    verdict = (
        "each GPU keeps its own path to host memory: nothing on the way is shared."
        if ratio.ratio >= SHARED_BELOW
        else "they share something on the way (the host's PCIe root or switch, or host "
        "memory bandwidth): spread transfers over time, or expect less per GPU."
    )
    return (
        f"{label.capitalize()}: {count} GPUs at once moved {format_gb_per_s(together.gb_per_s)} "
        f"GB/s in total, {ratio.ratio:.0%} of the {format_gb_per_s(alone.gb_per_s)} GB/s they "
        f"reach one at a time: {verdict}"
    )
