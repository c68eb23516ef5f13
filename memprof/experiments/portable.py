"""`memprof portable`: one pinned buffer used from every GPU's context (seed 004).

Without PORTABLE, CUDA pins memory for the allocating context only, so another GPU's context
may treat it as pageable and stage its copies. Both buffers are allocated in the first GPU's
context; each GPU copies from and to both, verified. The copies are the synchronous calls:
one the driver stages would block behind a GPU-side gate, so they are timed as they return.
"""

from __future__ import annotations

from dataclasses import dataclass

from memprof.experiments import base
from memprof.experiments.common import CheckedCopies, figures_by_key, largest_batch
from memprof.experiments.hostlink import DIRECTION_LABELS, DIRECTIONS, ceiling_notes, devices_of
from memprof.model.device import DeviceRecord
from memprof.model.figures import Figure
from memprof.model.formatting import format_bytes, format_gb_per_s
from memprof.model.results import Measurement, Result
from memprof.model.schema import SchemaError
from memprof.model.summary import Column, Summary, table

BUFFERS = ("portable", "pinned")  # memory kinds: PORTABLE, and pinned in the owner's context
BATCH_TARGET_MS = 20.0  # about 4 copies of 256 MiB on PCIe Gen5
SAME_SPEED = 0.9  # a foreign context reaching 90% of portable treats the memory as pinned


PortableParams = base.LargeCopies  # portable's: 256 MiB copies from every GPU's context


@dataclass(frozen=True)
class PortableExtra:
    devices: list[DeviceRecord]  # the first is the owner, whose context allocated both buffers
    unified_addressing: bool  # every GPU reports UNIFIED_ADDRESSING


COPIES = {
    direction: base.Measure(
        "gpu", direction, f"a copy {label} from one GPU's context", "one operation", arrays=1,
        kinds=BUFFERS, gpus=1, shows="throughput", bound="link",
    )
    for direction, label in DIRECTION_LABELS.items()
}  # fmt: skip


class Portable(base.Experiment):
    name = "portable"
    Params = PortableParams
    Extra = PortableExtra
    gpus = "every"
    needs_two_gpus = "so no second context can use the memory"
    measures = (*COPIES.values(),)

    def run(self, ctx: base.RunContext) -> PortableExtra:
        import numpy as np

        from memprof.core import memory

        indices, params = ctx.devices.indices, ctx.params
        owner = indices[0]
        elements = 1 << params.power
        nbytes = elements * base.FLOAT32_BYTES
        values = np.random.default_rng(404).random(elements, dtype=np.float32)
        targets = {}
        for index in indices:
            with ctx.devices.session(index).active() as session:
                memory.require_memory(session, device_bytes=nbytes, host_bytes=4 * nbytes)
                targets[index] = memory.allocate(session, "device", elements)
        owner_session = ctx.devices.session(owner)
        with owner_session.active(), ctx.near_gpu(owner) as ctx.placement:
            hosts = {kind: memory.allocate(owner_session, kind, elements) for kind in BUFFERS}
        unified = all(ctx.devices.session(i).attribute("UNIFIED_ADDRESSING") for i in indices)
        step = ctx.steps(len(BUFFERS) * len(indices) * len(DIRECTIONS))
        for kind in BUFFERS:
            for index in indices:
                for direction in DIRECTIONS:
                    step(f"{kind} memory {direction}, {format_bytes(nbytes)}: from GPU {index}")
                    with ctx.devices.session(index).active() as session:
                        copy = _Copy(session, hosts[kind], targets[index], values, direction)
                        copy.measure(kind, index, nbytes, params)
                        label = f"{buffer_label(kind, owner)} {DIRECTION_LABELS[direction]}"
                        ctx.check(copy.verify(direction, f"{label}, from GPU {index}"))
        with owner_session.active():
            for buffer in hosts.values():
                buffer.free()
        for index in indices:
            with ctx.devices.session(index).active():
                targets[index].free()
        devices = [DeviceRecord.of(ctx.facts[index]) for index in indices]
        step("done")
        return PortableExtra(devices, bool(unified))

    def derived(self, result: Result) -> dict:
        return {
            "owner": result.device and result.device.index,  # the first GPU (run_devices)
            "bytes_per_copy": base.array_bytes(result.parameters),
        }

    def check_consistency(self, result: Result) -> None:
        unified = result.device.attributes.get("unifiedAddressing", 1)
        if result.extra.unified_addressing and not unified:
            raise SchemaError(
                "extra.unified_addressing",
                "is true, but device.attributes says GPU 0 has no unified addressing",
            )


@dataclass
class _Copy(CheckedCopies):
    """One GPU's synchronous copies between a host buffer and its own device buffer."""

    direction: str

    def measure(self, kind: str, index: int, nbytes: int, params: PortableParams) -> None:
        """Single copies (CUPTI's record, or events around the call), then batches."""
        from memprof.core.measure import Lane, concurrent

        cuda, profiler = self.session.cuda, self.session.profiler
        self.prepare(self.direction)
        if self.direction == "h2d":
            call = lambda stream: cuda.memcpy_htod(self.device.device_pointer, self.host.array)  # noqa: E731
        else:
            call = lambda stream: cuda.memcpy_dtoh(self.host.array, self.device.device_pointer)  # noqa: E731
        name = DIRECTIONS[self.direction]

        def one_copy() -> None:
            with profiler.events("gpu", name, self.direction, kind, nbytes, synchronous=True):
                call(None)

        with profiler.on_gpus(index):
            profiler.repeat(one_copy, params.warmup, params.repeat)
        lane = Lane(profiler, call, name, self.direction, kind, nbytes, (index,))
        concurrent([lane], True, BATCH_TARGET_MS, params.repeat, params.warmup)


def buffer_label(kind: str, owner: int) -> str:
    if kind == "portable":
        return f"Portable, pinned by GPU {owner}"
    return f"Pinned by GPU {owner} only"


# -- summarizing -----------------------------------------------------------------------------


def figure_key(measurement: Measurement) -> tuple[str, str, int] | None:
    """(buffer, direction, GPU) of a portable copy."""
    if len(measurement.gpus) != 1 or measurement.operation not in DIRECTIONS:
        return None
    return (measurement.kind, measurement.operation, measurement.gpus[0])


def copy_figures(result: Result) -> dict[tuple[str, str, int], Figure]:
    """(buffer, direction, device) -> the figures of its copies."""
    return figures_by_key(result, Portable.measures, figure_key)


def figures(result: Result) -> dict[tuple[str, str, int], float]:
    """(buffer, direction, device) -> GB/s, median of the batches."""
    return {key: one.gb_per_s for key, one in copy_figures(result).items()}


def summarize(result: Result) -> Summary:
    devices = devices_of(result)
    owner = devices[0]
    found = copy_figures(result)
    nbytes = base.array_bytes(result.parameters)
    rows = []
    for kind in BUFFERS:
        for index in devices:
            copies = {d: found[kind, d, index] for d in DIRECTIONS if (kind, d, index) in found}
            reached = [f"{copy.share:.0%}" for copy in copies.values() if copy.share is not None]
            rows.append(
                {"buffer": buffer_label(kind, owner),
                 "where": f"GPU {index}" + (" (its owner)" if index == owner else ""),
                 "reached": f"{', '.join(reached)} PCIe" if reached else "-", **copies}
            )  # fmt: skip
    columns = [Column("Buffer", "buffer"), Column("Used from", "where")]
    columns += [Column(DIRECTION_LABELS[d], d, "gb_per_s") for d in DIRECTIONS]
    columns.append(Column("Of ceiling", "reached"))  # both directions' shares in one cell
    title = f"Pinned host memory of {format_bytes(nbytes)} used from each GPU's context, GB/s"
    notes = [
        f"Both buffers allocated by cuMemHostAlloc in GPU {owner}'s context; copies are "
        f"cuMemcpyHtoD/DtoH in batches of {largest_batch(result)} between one event pair, median "
        f"of {base.repetitions(result, 'batch', 'batches', batches=True)}; GB/s = 10^9 bytes/s.",
        "Unified addressing on every GPU: "
        + ("yes" if result.extra.unified_addressing else "no")
        + " (with it, CUDA documents every cuMemHostAlloc buffer as usable by every GPU).",
        *ceiling_notes(result, "both directions, each GPU's copies"),
    ]
    return Summary(
        tables=[table(title, columns, rows, notes)],
        conclusions=_conclusions(devices, owner, figures(result)),
        show_profile=False,
    )


def _conclusions(devices: list[int], owner: int, cells: dict) -> list[str]:
    lines = []
    for index in (index for index in devices if index != owner):
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
