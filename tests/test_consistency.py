"""Each agreement a Result's values keep, broken once in a recorded fixture: refused by the
check that names the field (Experiment.check_consistency, the types' check_consistency)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from memprof.errors import InvalidArgument
from memprof.experiments import COMMANDS, experiment_class, parse

FIXTURES = Path(__file__).parent / "fixtures"


def measurement(document: dict, **wanted) -> dict:
    """The fixture's first measurement with these values."""
    return next(m for m in document["measurements"] if wanted.items() <= m.items())


def drop(**wanted) -> Callable[[dict], None]:
    def change(document: dict) -> None:
        document["measurements"].remove(measurement(document, **wanted))

    return change


def twice(document: dict) -> None:
    document["measurements"].append(dict(document["measurements"][0]))


def setting(*where, value) -> Callable[[dict], None]:
    def change(document: dict) -> None:
        target = document
        for step in where[:-1]:
            target = target[step]
        target[where[-1]] = value

    return change


def each(*changes: Callable[[dict], None]) -> Callable[[dict], None]:
    def change(document: dict) -> None:
        for one in changes:
            one(document)

    return change


def drop_all(**wanted) -> Callable[[dict], None]:
    def change(document: dict) -> None:
        kept = [m for m in document["measurements"] if not wanted.items() <= m.items()]
        document["measurements"] = kept

    return change


def swap_timeline_lane(document: dict) -> None:
    document["extra"]["timelines"]["serial"][0][0] = 3


CASES = {
    "pinned elements": (  # a field older files held: checked as it upgrades
        "legacy_v2_pinned_p20",
        setting("extra", "elements", value=1 << 19),
        "extra.elements is 524288, but the parameters and measurements make 1048576",
    ),
    "pinned kind": (
        "h200_pinned_p20",
        lambda d: measurement(d, group="gpu", operation="h2d").update(kind="device"),
        "kind is 'device', but a gpu 'h2d' of this experiment is one of 'pageable', 'pinned'",
    ),
    "single GPU naming GPUs": (
        "h200_pinned_p20",
        lambda d: d["measurements"][0].update(gpus=[0, 1]),
        "measurements[0].gpus names GPUs [0, 1], but a pinned run measures one GPU",
    ),
    "no device facts": ("h200_uva", setting("device", value=None), "device is null"),
    "batch without batches": (
        "h200_pinned_p20",
        lambda d: measurement(d, operation="h2d", group="gpu").update(throughput_ms=[]),
        "but throughput_ms holds no back-to-back batch",
    ),
    "events beside events": (
        "h200_pinned_p20",
        lambda d: measurement(d, operation="h2d", group="gpu").update(source="events"),
        "events_ms holds events beside CUPTI's records, but source is 'events'",
    ),
    "events of other operations": (
        "h200_pinned_p20",
        lambda d: measurement(d, operation="h2d", group="gpu")["events_ms"].pop(),
        "events_ms has 19 samples, one per operation, but samples_ms has 20",
    ),
    "link while unavailable": (
        "h200_info",
        setting("device", "pcie_source", value="unavailable"),
        "device.pcie_generation is given, but pcie_source says the link was unavailable",
    ),
    "link above its maximum": (
        "h200_info",
        setting("device", "pcie_width", value=32),
        "device.pcie_width is 32, more than pcie_max_width (16)",
    ),
    "counter min above max": (
        "h200_managed",
        setting("timing", "unified_memory", "GPU_PAGE_FAULT", "min", value=99),
        "timing.unified_memory.GPU_PAGE_FAULT.min is 99, more than max (",
    ),
    "counter total beyond its records": (
        "h200_managed",
        setting("timing", "unified_memory", "CPU_PAGE_FAULT_COUNT", "total", value=1),
        "CPU_PAGE_FAULT_COUNT.total is 1, but {n} records of 1 to 1 make {n} to {n}".format(
            n=json.loads((FIXTURES / "h200_managed.json").read_text())["timing"]["unified_memory"][
                "CPU_PAGE_FAULT_COUNT"
            ]["count"]
        ),
    ),
    "counter max no record reached": (  # the largest is one record: the rest sum at least 1 each
        "h200_managed",
        setting("timing", "unified_memory", "CPU_PAGE_FAULT_COUNT", "max", value=2),
        "CPU_PAGE_FAULT_COUNT.total is 65759, but 65759 records of 1 to 2 make 65760 to 131517",
    ),
    "counter min no record reached": (  # every record at max but one at min
        "h200_managed",
        setting("timing", "unified_memory", "GPU_PAGE_FAULT", "total", value=2711 * 17),
        "GPU_PAGE_FAULT.total is 46087, but 2711 records of 1 to 17 make 2727 to 46071",
    ),
    "register bytes": (
        "h200_register",
        lambda d: measurement(d, group="api", operation="register").update(bytes=4096),
        "bytes is 4096, but a api 'register' of this run moves one array of parameters.power",
    ),
    "writecombined bytes": (
        "h200_writecombined",
        lambda d: measurement(d, group="gpu", operation="kernel").update(bytes=16777216),
        "moves 3 x one array of parameters.power (16 MiB)",
    ),
    "uva size": (
        "h200_uva",
        setting("parameters", "power", value=21),
        "moves one array of parameters.power (8 MiB)",
    ),
    "compare without pinned copies": (
        "h200_compare",
        drop(group="gpu", operation="h2d", kind="pinned"),
        "measurements has no gpu 'h2d' of kind 'pinned', which every compare run records",
    ),
    "managed variant not asked for": (
        "h200_managed",
        setting("parameters", "prefetch", value=False),
        "kind is 'managed+prefetch', but parameters did not ask for it",
    ),
    "managed variant without concurrent access": (
        "legacy_v2_managed",
        setting("extra", "concurrent_managed_access", value=False),
        "extra.concurrent_managed_access is False, but the parameters and measurements make True",
    ),
    "managed step missing": (
        "h200_managed",
        drop(group="host", operation="host_read", kind="managed+read-mostly"),
        "has no host 'host_read' of kind 'managed+read-mostly', which the managed summary",
    ),
    "device kernel missing": (
        "h200_device",
        lambda d: d["measurements"].remove(
            next(m for m in d["measurements"] if m["name"].startswith("stream_triad_"))
        ),
        "has 0 gpu kernels named stream_triad_*",
    ),
    "device kernel bytes": (
        "h200_device",
        lambda d: next(m for m in d["measurements"] if m["name"].startswith("stream_add_")).update(
            bytes=536870912
        ),
        "but add reads and writes 3 arrays of parameters.power",
    ),
    "device blocks": (
        "legacy_v2_device",
        setting("extra", "launch", "dot_blocks", value=1),
        "extra.launch.dot_blocks is 1, but the parameters and measurements make 1056",
    ),
    "device threads per block": (
        "legacy_v2_device",
        setting("extra", "launch", "block_size", value=128),
        "extra.launch.block_size is 128, but the parameters and measurements make 256",
    ),
    "device without a memory clock": (
        "h200_device",
        setting("device", "memory_clock_khz", value=0),
        "device.memory_clock_khz is 0: the summary compares with the theoretical bandwidth",
    ),
    "streams chunks": (
        "legacy_v2_streams",
        setting("extra", "chunks", value=[33554432, 33554432]),
        "extra.chunks is [33554432, 33554432], but the parameters and measurements make",
    ),
    "streams kernel time asked for": (
        "h200_streams",
        setting("parameters", "kernel_ms", value=2.0),
        "extra.kernel_target_ms is {}, but parameters.kernel_ms asked for 2.0".format(
            json.loads((FIXTURES / "h200_streams.json").read_text())["extra"]["kernel_target_ms"]
        ),
    ),
    "streams lane": (
        "h200_streams",
        swap_timeline_lane,
        "extra.timelines.serial[0][0] is stream 3, but serial uses 1",
    ),
    "streams stage twice": (
        "h200_streams",
        lambda d: d["extra"]["timelines"]["pageable"].append(
            d["extra"]["timelines"]["pageable"][0]
        ),
        "extra.timelines.pageable[12] is chunk 0's h2d again",
    ),
    "streams stage missing": (
        "h200_streams",
        lambda d: d["extra"]["timelines"]["overlapped"].pop(),
        "extra.timelines.overlapped has 11 stages, but 4 chunks make 12",
    ),
    "sweep kind not asked for": (
        "h200_sweep",
        setting("parameters", "kinds", value=["pinned"]),
        "kind is 'pageable', but a gpu 'h2d' of this run is one of 'pinned'",
    ),
    "sweep direction not asked for": (
        "h200_sweep",
        setting("parameters", "directions", value=["h2d"]),
        "operation is 'd2h', which parameters.directions did not ask for",
    ),
    "sweep direction asked for, not measured": (
        "h200_sweep",
        drop_all(group="gpu", operation="d2h"),
        "measurements has no gpu 'd2h', which parameters.directions asked for",
    ),
    "sweep sizes twice": (
        "h200_sweep",
        setting("parameters", "powers", value=[8, 8]),
        "parameters.powers[1] is 8, after 8",
    ),
    "zerocopy one size": (
        "h200_zerocopy_sweep",
        setting("parameters", "single_size", value=True),
        "parameters.powers has 8 sizes, but single_size says one",
    ),
    "alloc kind": (
        "h200_alloc",
        setting("extra", "kinds", value=["pageable"]),
        "kind is 'pinned', but an api 'alloc' of this run is one of 'pageable'",
    ),
    "hostlink size": (
        "h200x2_hostlink",
        setting("extra", "bytes_per_copy", value=1 << 20),
        "extra.bytes_per_copy is 1048576, but the parameters and measurements make 268435456",
    ),
    "hostlink copy twice": (
        "h200x2_hostlink",
        twice,
        "is measurements[0] again (gpu '[CUDA memcpy HtoD]', pinned",
    ),
    "hostlink GPU not in the run": (
        "h200x2_hostlink",
        setting("measurements", 0, "gpus", value=[5]),
        "measurements[0].gpus names GPU 5, which extra.devices does not list",
    ),
    "hostlink first GPU": (
        "h200x2_hostlink",
        setting("device", "index", value=1),
        "device.index is 1, but extra.devices begins with GPU (0)",
    ),
    "portable owner": (
        "h200x2_portable",
        setting("extra", "owner", value=1),
        "extra.owner is 1, but the parameters and measurements make 0",
    ),
    "portable buffer": (
        "h200x2_portable",
        setting("measurements", 0, "kind", value="pageable"),
        "kind is 'pageable', but a gpu 'h2d' of this experiment is one of 'portable', 'pinned'",
    ),
    "peer matrix": (
        "h200x2_peer",
        setting("extra", "peer_access", value=[[True, True]]),
        "extra.peer_access is not 2 x 2: one row and column per GPU",
    ),
    "peer own memory": (
        "h200x2_peer",
        setting("extra", "peer_access", value=[[False, True], [True, True]]),
        "extra.peer_access says GPU 0 cannot access its own memory",
    ),
    "peer latency steps": (
        "h200x2_peer",
        setting("extra", "latency_steps", value=0),
        "extra.latency_steps is 0, but the parameters and measurements make 4096",
    ),
    "peer GPU twice": (
        "h200x2_peer",
        setting("extra", "devices", 1, "index", value=0),
        "extra.devices[1].index is GPU 0 again",
    ),
    "trace bytes": (
        "h200_trace_pycuda",
        lambda d: d["extra"]["copies"][0].update(bytes=1),
        "extra.copies[0].bytes is 1, but its copies make",
    ),
    "trace small copies": (
        "h200_trace_pycuda",
        lambda d: d["extra"]["copies"][0].update(small_calls=0),
        "extra.copies[0].small_calls is 0, but its copies make 50",
    ),
    "trace GPU time": (
        "h200_trace_pycuda",
        lambda d: d["extra"]["copies"][0].update(gpu_ms=1.0),
        "extra.copies[0].gpu_ms is 1.0, but its copies took",
    ),
    "trace group twice": (
        "h200_trace_pycuda",
        lambda d: d["extra"]["copies"].append(d["extra"]["copies"][0]),
        "extra.copies[5] is '[CUDA memcpy HtoD] pageable -> device' again",
    ),
    "trace copies without a group": (
        "h200_trace_pycuda",
        lambda d: d["extra"]["copies"].pop(),
        "extra.copies has no group for the measured '[CUDA memcpy DtoD] device -> device'",
    ),
    "trace blocked copies": (
        "h200_trace_pycuda",
        lambda d: d["extra"]["blocked"][0].update(calls=11),
        "extra.blocked[0].calls is 11, but 10 such copies were measured",
    ),
    "trace blocked time": (
        "h200_trace_pycuda",
        lambda d: d["extra"]["blocked"][0].update(blocked_ms=100.0),
        "but extra.blocked's calls took 100.0",
    ),
    "trace exit code": (
        "h200_trace_pycuda",
        setting("extra", "exit_code", value=-1),
        "extra.exit_code is -1: expected an integer 0 to 255",
    ),
    "trace bandwidth as text": (
        "h200_trace_pycuda",
        setting("extra", "pinned_bandwidth", "bytes", value="64 MiB"),
        "extra.pinned_bandwidth.bytes is the string '64 MiB'",
    ),
    "info CPUs twice": (
        "h200_info",
        setting("extra", "affinity", "local_cpus", value=[0, 0]),
        "extra.affinity.local_cpus[1] is 0 again",
    ),
    "sweep sizes out of order": (
        "h200_sweep",
        lambda d: d["parameters"].update(powers=d["parameters"]["powers"][::-1]),
        "parameters.powers[1] is 25, after 26",
    ),
    "a measurement twice": (
        "h200_pinned_p20",
        lambda d: d["measurements"].append(d["measurements"][3]),
        "is measurements[3] again",
    ),
    "a capability flag of 2": (
        "h200_info",
        setting("device", "attributes", "canMapHostMemory", value=2),
        "device.attributes.canMapHostMemory is 2: a capability flag is 0 or 1",
    ),
    "a counter record of nothing": (
        "h200_managed",
        setting("timing", "unified_memory", "BYTES_TRANSFER_HTOD", "min", value=0),
        "BYTES_TRANSFER_HTOD.min is 0, but each of its",
    ),
    "managed advice not asked for": (
        "h200_managed",
        setting("parameters", "advice", value=["accessed-by"]),
        "but parameters did not ask for it",
    ),
    "uva null pointer": (
        "h200_uva",
        setting("extra", "pointers", "a", "host", value=0),
        "extra.pointers.a.host is 0: expected an integer 1 to 2^53",
    ),
    "portable addressing": (
        "h200x2_portable",
        each(
            setting("extra", "unified_addressing", value=True),
            setting("device", "attributes", "unifiedAddressing", value=0),
        ),
        "extra.unified_addressing is true, but device.attributes says GPU 0 has no unified",
    ),
    "trace bandwidth of 0": (
        "h200_trace_pycuda",
        setting("extra", "pinned_bandwidth", "h2d_gb_per_s", value=0),
        "extra.pinned_bandwidth.h2d_gb_per_s is 0: expected a number (0.1, 1000]",
    ),
    "GPU state link above its maximum": (
        "h200_pinned_p20",
        setting("gpu_states", 0, "pcie_width", value=32),
        "gpu_states[0].pcie_width is 32, more than pcie_max_width (16)",
    ),
    "check sizes": (
        "legacy_v3_check",
        setting("extra", "device_copy_bytes", value=4096),
        "extra.device_copy_bytes is 4096, but the parameters and measurements make 1073741824",
    ),
    "check-pairs one-way access": (
        "h200x2_check_pairs",
        setting("extra", "peer_access", value=[[True, True], [False, True]]),
        "but peer copies need two GPUs that reach each other",
    ),
    "smallcopies way missing": (
        "h200_smallcopies",
        lambda d: d["measurements"].remove(
            measurement(d, group="span", operation="h2d", kind="batched")
        ),
        "has no batched copies host → device of",
    ),
    "smallcopies way twice": (
        "h200_smallcopies",
        lambda d: d["extra"]["ways"].append("pinned"),
        "extra.ways[5] is 'pinned': ways are pinned, pageable, batched, gathered, kernel",
    ),
    "smallcopies way not run": (
        "h200_smallcopies",
        lambda d: d["extra"]["ways"].remove("kernel"),
        "measurements[9].kind is 'kernel', but a span 'h2d' of this run is one of 'pinned', "
        "'pageable', 'batched', 'gathered'",
    ),
    "trace error with exit 0": (
        "h200_trace_pycuda",
        setting("extra", "error", value="ZeroDivisionError: division by zero"),
        "extra.exit_code is 0, but the program raised 'ZeroDivisionError: division by zero'",
    ),
    "trace copy named for the other direction": (
        "h200_trace_pycuda",
        lambda d: measurement(d, group="gpu", operation="htod").update(operation="dtoh"),
        "operation is 'dtoh', but it is '[CUDA memcpy HtoD]",
    ),
    "trace host to device from GPU memory": (
        "h200_trace_pycuda",
        lambda d: next(c for c in d["extra"]["copies"] if c["direction"] == "HtoD").update(
            source="device"
        ),
        "source is 'device' in a HtoD copy",
    ),
    "alloc loop iterations": (
        "h200_alloc",
        setting("extra", "allocators", "loop_iterations", value=7),
        "iterations, but extra.allocators.loop_iterations is 7",
    ),
    "a GPU's state twice": (
        "h200_pinned_p20",
        lambda d: d["gpu_states"].append(dict(d["gpu_states"][0])),
        "gpu_states[1].index is GPU 0 again (0)",
    ),
    "the state of a GPU the run did not use": (
        "h200_pinned_p20",
        lambda d: d["gpu_states"][0].update(index=5),
        "gpu_states[0].index is 5, but the run was on GPU 0",
    ),
    "the state of the run's GPU on another bus": (
        "h200_pinned_p20",
        lambda d: d["gpu_states"][0].update(pci_bus_id="0000:aa:00.0"),
        "gpu_states[0].pci_bus_id is '0000:aa:00.0', but device.pci_bus_id is '0000:00:06.0'",
    ),
    "a two-GPU run's first GPU with other facts": (
        "h200x2_hostlink",
        lambda d: d["extra"]["devices"][0].update(name="Tesla K80"),
        "extra.devices[0].name is 'Tesla K80', but device.name is 'NVIDIA H200'",
    ),
    "a two-GPU run's state of a GPU it did not use": (
        "h200x2_hostlink",
        lambda d: d["gpu_states"][1].update(index=5),
        "gpu_states[1].index is GPU 5, not one of the run's",
    ),
    "CUPTI rows in a run timed with events": (
        "h200_pinned_p20",
        setting("timing", "source", value="events"),
        "source is 'cupti', but timing.source says this run timed with events",
    ),
}


@pytest.mark.parametrize(("name", "case"), CASES.items(), ids=list(CASES))
def test_each_agreement_is_refused_by_its_own_check(name, case):
    fixture, change, message = case
    document = json.loads((FIXTURES / f"{fixture}.json").read_text())
    change(document)
    with pytest.raises(InvalidArgument) as refused:
        parse(json.dumps(document), "run.json")
    assert str(refused.value).startswith("run.json: ")
    assert message in str(refused.value)


def test_every_measure_that_moves_data_says_how_much():
    """What a GPU operation or a span moves is declared, so the loader holds its bytes to the
    Params: all but a traced program's (its own sizes) and the allocators' (each its own)."""
    free_sizes = {"trace", "alloc"}
    undeclared = [
        f"{e.name} {m.group} {m.operation}"
        for e in (experiment_class(c.name) for c in COMMANDS)
        for m in e.measures
        if m.group in ("gpu", "span") and m.arrays is None and e.name not in free_sizes
        and m.operation != "latency"  # peer's chain: 4 bytes per step (its own check)
    ]  # fmt: skip
    assert undeclared == []


def test_every_recorded_fixture_keeps_every_agreement():
    for path in sorted(FIXTURES.glob("*.json")):
        parse(path.read_text(), path.name)  # raises if a rule refused a real run


@pytest.mark.parametrize(
    ("samples", "refused"),
    [([0.0, 1.0, 2.0], False), ([0.0, 0.0, 1.0], True), ([0.0, 0.0, 1.0, 2.0], False),
     ([0.0, 0.0, 0.0, 1.0], True), ([0.0], True), ([1.0], False)],
)  # fmt: skip
def test_a_copy_is_refused_exactly_where_its_median_is_zero(samples, refused):
    from memprof.model.measures import Measure, _check_times
    from memprof.model.results import Measurement
    from memprof.model.schema import SchemaError

    copy = Measurement("gpu", "[CUDA memcpy HtoD]", "h2d", "pinned", 4096, samples)
    declared = Measure("gpu", "h2d", "a copy", "one operation", arrays=1)
    if refused:
        with pytest.raises(SchemaError, match="has a median of 0 ms"):
            _check_times(copy, declared, "measurements[0]")
    else:
        _check_times(copy, declared, "measurements[0]")


@pytest.mark.parametrize(("past_ms", "kept"), [(0.0, True), (1e-3, False)])
def test_a_streams_timeline_ends_within_the_longest_run_its_span_measured(past_ms, kept):
    """The timeline drawn is one of the runs: never longer than the longest of them."""
    document = json.loads((FIXTURES / "h200_streams.json").read_text())
    longest_ms = max(
        max(m["samples_ms"])
        for m in document["measurements"]
        if m["group"] == "span" and m["kind"] == "pinned, 4 streams"
    )
    last = max(document["extra"]["timelines"]["overlapped"], key=lambda row: row[4])
    last[4] = longest_ms + past_ms
    if kept:
        assert parse(json.dumps(document))
        return
    with pytest.raises(InvalidArgument) as refused:
        parse(json.dumps(document))
    assert str(refused.value).endswith(
        f"extra.timelines.overlapped ends at {longest_ms + past_ms} ms, but the longest run "
        f"of 'pinned, 4 streams' took {longest_ms} ms"
    )
