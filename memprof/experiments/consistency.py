"""What the values of one Result must agree on, in the words a refusal uses.

An experiment's `check_consistency(result)` (memprof.experiments.base) states what its
Params, Extra and measurements say together, with these helpers: the array size its power
makes, the bytes each operation moves, the GPUs a run on several names. The registry's load
runs it on every file before the summary is built, so a file that contradicts itself is one
line naming the field (exit 2), never a table drawn from it. Rules of one field alone belong
in its type (memprof.model.schema), not here.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any, NoReturn

from memprof.model.formatting import format_bytes
from memprof.model.results import Measurement, Result
from memprof.model.schema import SchemaError

# What a sumArrays experiment's operations move, in arrays of its size: a copy or a memset
# one, the kernel three (reads a and b, writes res), a launch or a driver call nothing.
MEMSET_MOVES = {("gpu", "memset"): 1, ("api", "memset"): 1}
NOTHING_MOVED = {("api", "launch"): 0, ("api", "driver_call"): 0}
SUM_ARRAYS_MOVES = {
    **{(group, way): 1 for group in ("gpu", "api") for way in ("h2d", "d2h")},
    **MEMSET_MOVES,
    ("gpu", "kernel"): 3,
    **NOTHING_MOVED,
}


def refuse(where: str, found: str) -> NoReturn:
    """One value that contradicts another: where it is, and what it contradicts."""
    raise SchemaError(where, found)


def array_bytes(result: Result, field: str = "bytes_per_array", element_bytes: int = 4) -> int:
    """extra.<field>, refused unless it is the 2^power elements parameters.power names."""
    power = result.parameters.power
    nbytes = getattr(result.extra, field)
    wanted = element_bytes << power
    if nbytes != wanted:
        refuse(
            f"extra.{field}",
            f"is {nbytes}, but parameters.power {power} makes {wanted} "
            f"(2^{power} elements of {element_bytes} bytes)",
        )
    return nbytes


def equal(where: str, found: Any, wanted: Any, because: str) -> None:
    """where's value must be `wanted`, as `because` says."""
    if found != wanted:
        refuse(where, f"is {found!r}, but {because} ({wanted!r})")


def measured_bytes(
    result: Result,
    arrays: Mapping[tuple[str, str], int],
    sizes: Collection[int],
    sizes_from: str = "extra.bytes_per_array",
) -> None:
    """Each measurement of a listed (group, operation) moved `arrays` arrays of one of the
    run's sizes (0 arrays: an operation that moves nothing, a launch or a driver call)."""
    allowed = {key: {count * size for size in sizes} for key, count in arrays.items()}
    for index, m in enumerate(result.measurements):
        wanted = allowed.get((m.group, m.operation))
        if wanted is not None and m.bytes not in wanted:
            count = arrays[m.group, m.operation]
            what = f"{count} x {sizes_from}" if count > 1 else sizes_from
            shown = ", ".join(format_bytes(size) for size in sorted(wanted)[:4])
            refuse(
                f"measurements[{index}].bytes",
                f"is {m.bytes}, but a {m.group} {m.operation!r} of this run moves {what} "
                f"({shown}{', ...' if len(wanted) > 4 else ''})"
                if count
                else f"is {m.bytes}, but a {m.group} {m.operation!r} moves no bytes",
            )


def kinds_among(result: Result, allowed: Mapping[tuple[str, str], Collection[str | None]]) -> None:
    """Each measurement of a listed (group, operation) is of one of its memory kinds."""
    for index, m in enumerate(result.measurements):
        kinds = allowed.get((m.group, m.operation))
        if kinds is not None and m.kind not in kinds:
            refuse(
                f"measurements[{index}].kind",
                f"is {m.kind!r}, but a {m.group} {m.operation!r} of this experiment is one of "
                + ", ".join(repr(kind) for kind in kinds),
            )


def run_devices(result: Result) -> list[int]:
    """The GPUs of a run on every GPU at once: at least two, each once, the first the one
    whose facts the Result records."""
    devices = [device.index for device in result.extra.devices]
    if len(devices) < 2:
        refuse(
            "extra.devices",
            f"names {len(devices)} GPU{'' if len(devices) == 1 else 's'}, but a "
            f"{result.command} run uses at least two",
        )
    for position, index in enumerate(devices):
        if index in devices[:position]:
            refuse(f"extra.devices[{position}].index", f"is GPU {index} again")
    equal("device.index", result.device.index, devices[0], "extra.devices begins with GPU")
    first = result.extra.devices[0]
    for field in ("name", "pci_bus_id"):  # the same GPU's facts, copied from device
        if getattr(first, field) != getattr(result.device, field):
            refuse(
                f"extra.devices[0].{field}",
                f"is {getattr(first, field)!r}, but device.{field} is "
                f"{getattr(result.device, field)!r}",
            )
    for position, state in enumerate(result.gpu_states or []):
        if state.index not in devices:
            refuse(f"gpu_states[{position}].index", f"is GPU {state.index}, not one of the run's")
    return devices


def measured_on(result: Result, devices: list[int], counts: Mapping[str, int]) -> None:
    """Each GPU operation names as many GPUs as its operation involves (`counts`: 1 for a
    copy with the host, 2 for one between GPUs), each one of the run's."""
    for index, m in enumerate(result.measurements):
        if m.group != "gpu":
            continue
        wanted = counts.get(m.operation)
        if wanted is not None and len(m.gpus) != wanted:
            refuse(
                f"measurements[{index}].gpus",
                f"names {len(m.gpus)} GPUs, but a {m.operation!r} runs on {wanted}",
            )
        for gpu in m.gpus:
            if gpu not in devices:
                refuse(
                    f"measurements[{index}].gpus",
                    f"names GPU {gpu}, which extra.devices does not list",
                )


def access_matrix(result: Result, devices: list[int]) -> dict[tuple[int, int], bool]:
    """extra.peer_access as (GPU, GPU whose memory) -> can access: one row and column per
    GPU, each GPU reaching its own memory."""
    rows = result.extra.peer_access
    if len(rows) != len(devices) or any(len(row) != len(devices) for row in rows):
        refuse(
            "extra.peer_access",
            f"is not {len(devices)} x {len(devices)}: one row and column per GPU",
        )
    access = {(a, b): rows[i][j] for i, a in enumerate(devices) for j, b in enumerate(devices)}
    for a in devices:
        if not access[a, a]:
            refuse("extra.peer_access", f"says GPU {a} cannot access its own memory")
    return access


def takes_time(result: Result, operations: Collection[tuple[str, str]]) -> None:
    """Each listed (group, operation) that moved bytes took time per operation: a summary
    divides by it (its back-to-back batches' median, else its one operations')."""
    for index, m in enumerate(result.measurements):
        if m.bytes and (m.group, m.operation) in operations:
            times = m.throughput_ms or m.samples_ms
            if times.count(0) > len(times) // 2:  # the median is 0
                field = "throughput_ms" if m.throughput_ms else "samples_ms"
                refuse(
                    f"measurements[{index}].{field}",
                    f"has a median of 0 ms, but moving {m.bytes} bytes takes time",
                )


def present(result: Result, group: str, operation: str, kind: str | None, needed_for: str) -> None:
    """A measurement the summary reads: refused as missing if the file lacks it."""
    for m in result.measurements:
        if (m.group, m.operation, m.kind) == (group, operation, kind):
            return
    refuse("measurements", f"has no {group} {operation!r} of kind {kind!r}, which {needed_for}")


def once_each(result: Result, key_of: Callable[[Measurement], Any], what: str) -> None:
    """No two measurements for the same figure (the summary would show one of them)."""
    seen: dict[Any, int] = {}
    for index, m in enumerate(result.measurements):
        key = key_of(m)
        if key is None:
            continue
        if key in seen:
            refuse(
                f"measurements[{index}]",
                f"is a second {what} {key!r} (measurements[{seen[key]}] is the first)",
            )
        seen[key] = index
