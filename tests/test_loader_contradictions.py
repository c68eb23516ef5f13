"""A saved run whose GPU facts, NVML samples and measurements contradict each other is
refused, naming the field: a clock above its maximum, a link faster than the other record
says it can go, a memory kind the GPU's flags rule out, a trace advised with another GPU's
figures. Each on both sides of its boundary."""

from __future__ import annotations

import json
import math

import pytest

from memprof.errors import InvalidArgument
from memprof.experiments import experiment_class, load_summarized, parse
from memprof.experiments.base import declared_measures
from memprof.model.ceilings import hbm_ceiling
from memprof.model.figures import CACHE_BOUND, figure
from memprof.model.gpustate import CLOCK_REASONS
from memprof.model.measures import ABOVE_BOUND
from memprof.model.schema import SchemaError
from tests.conftest import FIXTURES


def edited(stem: str, edit) -> str:
    data = json.loads((FIXTURES / f"{stem}.json").read_text())
    edit(data)
    return json.dumps(data)


def refusal(text: str) -> str:
    with pytest.raises(InvalidArgument) as refused:
        parse(text, "run.json")
    return str(refused.value)


def set_state(**values):
    def edit(data):
        data["gpu_states"][0].update(values)

    return edit


@pytest.mark.parametrize("clock", ["sm_clock_mhz", "memory_clock_mhz"])
def test_a_clock_above_its_maximum_is_refused_and_at_it_loads(clock):
    most = json.loads((FIXTURES / "h200_pinned_p20.json").read_text())["gpu_states"][0][
        clock.replace("_mhz", "_max_mhz")
    ]
    assert parse(edited("h200_pinned_p20", set_state(**{clock: most})))
    assert refusal(edited("h200_pinned_p20", set_state(**{clock: most + 1}))) == (
        f"run.json: gpu_states[0].{clock} is {most + 1} MHz, above its maximum ({most} MHz)"
    )


def test_nvml_seeing_the_link_run_faster_than_the_facts_allow_is_refused():
    def facts_at_most(generation):
        def edit(data):
            data["device"]["pcie_max_generation"] = generation
            data["device"]["pcie_generation"] = min(generation, 5)

        return edit

    assert parse(edited("h200_pinned_p20", facts_at_most(5)))  # NVML saw Gen5: allowed
    assert refusal(edited("h200_pinned_p20", facts_at_most(4))) == (
        "run.json: gpu_states[0].pcie_generation is 5, but device.pcie_max_generation says "
        "the link can do at most 4"
    )


def test_facts_of_a_link_faster_than_nvml_allows_are_refused_and_a_slower_one_loads():
    def facts_running(generation, width):
        def edit(data):
            data["device"].update(pcie_generation=generation, pcie_width=width)

        return edit

    assert parse(edited("h200_pinned_p20", facts_running(1, 16)))  # an idle link slows down
    state = set_state(pcie_max_generation=4, pcie_generation=4)

    def both(data):
        state(data)
        facts_running(5, 16)(data)

    assert refusal(edited("h200_pinned_p20", both)) == (
        "run.json: device.pcie_generation is 5, but gpu_states[0].pcie_max_generation says "
        "the link can do at most 4"
    )
    assert refusal(edited("h200_pinned_p20", set_state(pcie_max_width=8))).startswith(
        "run.json: gpu_states[0].pcie_width is 16, more than pcie_max_width (8)"
    )


@pytest.mark.parametrize(
    ("stem", "kind", "flag"),
    [
        ("h200_zerocopy_p20", "mapped", "canMapHostMemory"),
        ("h200_alloc", "vmm", "virtualMemoryManagementSupported"),
        ("h200_alloc", "pool", "memoryPoolsSupported"),
        ("h200_managed", "managed", "managedMemory"),
        ("h200_register", "registered", "hostRegisterSupported"),
    ],
)
def test_a_kind_the_gpus_flags_rule_out_is_refused(stem, kind, flag):
    def without(data):
        data["device"]["attributes"][flag] = 0

    message = refusal(edited(stem, without))
    assert message.startswith("run.json: measurements[")
    assert message.endswith(
        f"].kind is {kind!r}, but device.attributes.{flag} is 0: this GPU has no {kind} memory"
    )


def test_a_flag_of_1_lets_its_kind_load():
    def with_flag(data):
        data["device"]["attributes"]["canMapHostMemory"] = 1

    assert parse(edited("h200_zerocopy_p20", with_flag)).find("kernel", "mapped", "gpu")


@pytest.mark.parametrize(("field", "value"), [("gpu_name", "NVIDIA A100"), ("driver_version", "1")])
def test_a_trace_advised_with_another_gpus_figures_is_refused(field, value):
    def other(data):
        data["extra"]["pinned_bandwidth"][field] = value

    ran = json.loads((FIXTURES / "h200_trace_torch.json").read_text())["extra"][field]
    assert refusal(edited("h200_trace_torch", other)) == (
        f"run.json: extra.pinned_bandwidth.{field} is {value!r}, but the program ran with "
        f"{ran!r}: the advice would use another GPU's figures"
    )
    assert parse(edited("h200_trace_torch", lambda data: None))


def copy_of_1_kib(source: str, alone_ms: float, back_to_back_ms: float):
    from memprof.model.results import Measurement

    return Measurement(
        "gpu", "[CUDA memcpy HtoD]", "h2d", "pinned", 1024, [alone_ms] * 3, source=source,
        throughput_ms=[back_to_back_ms] * 3, batch=128,
    )  # fmt: skip


def times_checked(m) -> None:
    from memprof.experiments.sweep import Sweep
    from memprof.model.measures import _check_times

    measure = next(measure for measure in declared_measures(Sweep) if measure.key == ("gpu", "h2d"))
    _check_times(m, measure, "measurements[0]")


def test_batches_faster_than_half_of_cuptis_one_copy_load_with_a_warning():
    """As an H100 recorded them when its link changed speed during a sweep: the file loads
    (both are what the GPU did) and says its figures disagree, from just under half on."""
    from types import SimpleNamespace

    from memprof.experiments.sweep import Sweep
    from memprof.model.measures import moved_during_run

    def warned(source: str, alone_ms: float, back_to_back_ms: float) -> list[str]:
        copy = copy_of_1_kib(source, alone_ms, back_to_back_ms)
        times_checked(copy)  # loads
        return moved_during_run(SimpleNamespace(measurements=[copy]), declared_measures(Sweep))

    assert warned("cupti", 0.002, 0.001) == []  # at half: what batches can do
    assert warned("cupti", 0.002, 0.00099) == [
        "warning: [CUDA memcpy HtoD] (pinned), 1 KiB: one alone took 2.0000us, back to back "
        "990ns each, less than 50% of that: the link or the GPU changed speed during the run, "
        "so its figures disagree; measure again"
    ]
    assert warned("events", 0.002, 0.00099) == []  # one alone holds its launch: no contradiction


def test_the_h100_run_whose_link_changed_speed_loads_and_says_which_figure_moved():
    _, summary = load_summarized(FIXTURES / "h100_sweep_link_changed.json")
    assert summary.header == [
        "warning: [CUDA memcpy HtoD] (writecombined), 256 KiB: one alone took 36.577us, back "
        "to back 13.136us each, less than 50% of that: the link or the GPU changed speed "
        "during the run, so its figures disagree; measure again"
    ]
    assert load_summarized(FIXTURES / "h200_sweep.json")[1].header == []


def test_with_events_one_copy_alone_holds_its_launch_and_batches_may_hide_it():
    times_checked(copy_of_1_kib("events", 0.0386, 0.0178))  # as the H200 measured
    with pytest.raises(SchemaError, match="throughput_ms has a median of 0 ms, but moving 1024"):
        times_checked(copy_of_1_kib("events", 0.0386, 0.0))


def test_a_kernel_on_data_the_l2_cache_holds_is_bounded_by_the_cache_too():
    """A 64 MiB read fits in twice the H200's L2 (no HBM bound), but not at 3.9 PB/s: above
    CACHE_BOUND x HBM (and its noise allowance) is refused; just under it loads."""
    result = parse((FIXTURES / "h200_compare.json").read_text())
    index, m = next(
        (i, m)
        for i, m in enumerate(result.measurements)
        if m.name.startswith("readSum") and m.kind == "device" and m.group == "gpu"
    )
    assert m.bytes == 64 << 20 < 2 * result.device.l2_cache_bytes
    measure = next(
        d for d in declared_measures(experiment_class("compare")) if d.key == ("gpu", m.operation)
    )
    reached = figure(result, m, measure).gb_per_s / hbm_ceiling(result.device).gb_per_s

    def faster(factor):
        def edit(data):
            row = data["measurements"][index]
            for field in ("samples_ms", "throughput_ms"):
                if row.get(field):
                    row[field] = [value / factor for value in row[field]]

        return edit

    limit = CACHE_BOUND * ABOVE_BOUND / reached  # the factor that reaches the bound
    assert parse(edited("h200_compare", faster(limit * 0.98)))
    assert refusal(edited("h200_compare", faster(limit * 1.02))).startswith(
        f"run.json: measurements[{index}]."
    )
    assert "of its L2 cache ceiling" in refusal(edited("h200_compare", faster(1000)))


def test_a_clock_reason_nvml_never_gives_is_refused_and_each_it_gives_loads():
    """An unknown reason would be no reason at all to `check` ("PASS No clock held down")."""
    for reason in CLOCK_REASONS:
        assert parse(edited("h200_check", set_state(clock_reasons=[reason.name])))
    shown = refusal(edited("h200_check", set_state(clock_reasons=["gpu_idle", "HW_SLOWDOWN"])))
    assert shown.startswith(
        "run.json: gpu_states[0].clock_reasons[1] is 'HW_SLOWDOWN', not a reason NVML gives: "
        "one of gpu_idle, "
    )


def set_extra(path: tuple, value):
    def edit(data):
        where = data["extra"]
        for key in path[:-1]:
            where = where[key]
        where[path[-1]] = value

    return edit


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (("small_copies", "costs", 0, "gathered_ms"), 0, "small_copies.costs[0].gathered_ms"),
        (("small_copies", "costs", 0, "pinned_ms"), 1e-12, "small_copies.costs[0].pinned_ms"),
        (("small_copies", "costs", 0, "bytes"), 0, "small_copies.costs[0].bytes"),
        (("small_copies", "copies"), 0, "small_copies.copies"),
        (("pinned_bandwidth", "bytes"), 0, "pinned_bandwidth.bytes"),
        (("pinned_bandwidth", "h2d_gb_per_s"), 1e-9, "pinned_bandwidth.h2d_gb_per_s"),
        (("pinned_bandwidth", "d2h_gb_per_s"), 5000.0, "pinned_bandwidth.d2h_gb_per_s"),
    ],
)
def test_a_traces_impossible_figure_is_refused_naming_it(path, value, field):
    """Each steered the advice ("0ns gathered ... batching did not pay", "0 copies",
    "HtoD 0.000 GB/s: no slower than pinned copies") before it was refused."""
    assert refusal(edited("h200_trace_torch", set_extra(path, value))).startswith(
        f"run.json: extra.{field} "
    )


def test_a_traces_figures_at_their_bounds_load():
    for path, value in [
        (("small_copies", "costs", 0, "gathered_ms"), 1.1e-5),
        (("small_copies", "copies"), 1),
        (("pinned_bandwidth", "h2d_gb_per_s"), 0.11),
        (("pinned_bandwidth", "d2h_gb_per_s"), 1000.0),
        (("lines", 0, "line"), 0),  # a frame without a line number: the recorder writes 0
    ]:
        assert parse(edited("h200_trace_torch", set_extra(path, value)))


def test_smallcopies_names_its_copies_as_many_as_its_parameters_say():
    """copies 1 beside names of "128 x" showed every per-copy cost 128 times too large."""

    def copies(count):
        def edit(data):
            data["parameters"]["copies"] = count

        return edit

    assert parse(edited("h200_smallcopies", copies(128)))
    shown = refusal(edited("h200_smallcopies", copies(1)))
    assert shown.startswith("run.json: measurements[") and shown.endswith(
        ".name is of 128 copies, but parameters.copies is 1: every per-copy cost would be "
        "divided by the wrong count"
    )
    assert "is of 128 copies" in refusal(edited("h200_smallcopies", copies(127)))


def test_a_measurement_no_declaration_has_and_a_created_at_out_of_format_say_so():
    bogus = in_measurements("api", "memset", operation="bogus")
    assert refusal(edited("h200_pinned_p20", bogus)) == (
        f"run.json: measurements[{index_of('h200_pinned_p20', 'api', 'memset')}] is of group "
        "'api', operation 'bogus', which pinned does not record"
    )

    def created(data):
        data["created_at"] = "yesterday"

    assert refusal(edited("h200_pinned_p20", created)) == (
        "run.json: created_at is the string 'yesterday': expected a date and time with its "
        "offset, as 2026-11-25T15:26:52+00:00"
    )


@pytest.mark.parametrize(
    ("field", "value", "kept"),
    [
        ("memprof_version", "0.2.0.dev3+gabc1234", True),
        ("memprof_version", "1" * 64, True),
        ("memprof_version", "1" * 65, False),  # a header line no terminal holds
        ("memprof_version", "9" * 10_000, False),
        ("memprof_version", "0.1.0 (patched)", False),  # prose, not a version
        ("memprof_version", "", False),
        ("memprof_version", "v0.1.0", False),
        ("host", "n" * 253, True),  # the longest DNS name
        ("host", "n" * 254, False),
    ],
)
def test_the_version_and_host_a_header_prints_are_held_to_their_shape(field, value, kept):
    def plant(data):
        data[field] = value

    text = edited("h200_pinned_p20", plant)
    if kept:
        assert getattr(parse(text), field) == value
    else:
        assert refusal(text).startswith(f"run.json: {field} is the string")


@pytest.mark.parametrize(
    ("field", "most"),
    [
        ("multiprocessors", 4096),
        ("memory_clock_khz", 50_000_000),
        ("memory_bus_width_bits", 65_536),
        ("l2_cache_bytes", 2**32),
        ("attributes.asyncEngineCount", 64),
    ],
)
def test_device_facts_past_any_gpus_are_refused_at_their_edge(field, most):
    """A check's ceilings are made of these: a lie here would decide its verdict."""

    def plant(value):
        def edit(data):
            facts = data["device"]
            *inside, last = field.split(".")
            for step in inside:
                facts = facts[step]
            facts[last] = value

        return edit

    assert parse(edited("h200_check", plant(most)))
    shown = refusal(edited("h200_check", plant(most + 1)))
    assert shown.startswith(f"run.json: device.{field} is {most + 1}"), shown


# -- what a measure's declaration holds each measurement to (memprof.model.measures) --------


def index_of(stem: str, group: str, operation: str) -> int:
    """Where the fixture's first measurement of (group, operation) is."""
    measurements = json.loads((FIXTURES / f"{stem}.json").read_text())["measurements"]
    return next(
        i for i, m in enumerate(measurements) if (m["group"], m["operation"]) == (group, operation)
    )


def in_measurements(group: str, operation_: str, **values):
    """An edit setting `values` in the fixture's first measurement of (group, operation_)."""

    def edit(data):
        found = (
            m for m in data["measurements"] if (m["group"], m["operation"]) == (group, operation_)
        )
        next(found).update(values)

    return edit


@pytest.mark.parametrize(
    ("stem", "refused"),
    [("legacy_v1_pinned_p20", False), ("legacy_v2_pinned_p20", True), ("h200_pinned_p20", True)],
)
def test_a_sample_count_its_repetitions_do_not_make_is_refused_from_schema_2_on(stem, refused):
    """Files before schema 2 recorded warm-ups among the samples: their counts say nothing.
    A launch (which moves no bytes and has no kind) is held to its count too."""
    for operation in ("alloc", "launch"):
        group = "host" if operation == "alloc" else "api"
        index = index_of(stem, group, operation)
        assert parse(edited(stem, in_measurements(group, operation, samples_ms=[0.5] * 20)))
        nine = edited(stem, in_measurements(group, operation, samples_ms=[0.5] * 9))
        if not refused:
            assert parse(nine)
            continue
        assert refusal(nine) == (
            f"run.json: measurements[{index}].samples_ms holds 9 samples, but parameters.repeat "
            "10 makes a multiple of 10"
        )


@pytest.mark.parametrize("stem", ["legacy_v1_pinned_p20", "h200_pinned_p20"])
def test_a_launch_that_moves_bytes_is_refused_and_one_of_none_loads(stem):
    """LAUNCH_CALL declares arrays=0: bytes 0 and nothing else, repetitions counted or not."""
    index = index_of(stem, "api", "launch")
    assert parse(edited(stem, in_measurements("api", "launch", bytes=0)))
    assert refusal(edited(stem, in_measurements("api", "launch", bytes=4096))) == (
        f"run.json: measurements[{index}].bytes is 4096, but a api 'launch' moves no bytes"
    )


def test_a_measurement_every_run_records_missing_is_refused_naming_it():
    def without_copy_calls(data):
        data["measurements"] = [
            m for m in data["measurements"] if (m["group"], m["operation"]) != ("api", "h2d")
        ]

    assert refusal(edited("h200_pinned_p20", without_copy_calls)) == (
        "run.json: measurements has no api 'h2d', which every pinned run records"
    )


def declared_check(measure, *measurements, several_gpus=False, **params) -> str:
    """check_declared on a run of one declared measure, these measurements and Params
    (power 10's array: 1 KiB; repeat only where given): its refusal, or '' where it loads."""
    from types import SimpleNamespace

    from memprof.model.measures import check_declared

    run = SimpleNamespace(
        parameters=SimpleNamespace(**params),
        written_as=4,
        measurements=list(measurements),
        command="test",
    )
    try:
        check_declared(run, [measure], lambda _: [1024], several_gpus)
    except SchemaError as refused:
        return str(refused)
    return ""


def timed(bytes_: int = 1024, kind: str | None = None, gpus=(), samples=(0.5,), **more):
    from memprof.model.results import Measurement

    return Measurement("gpu", "x", "x", kind, bytes_, list(samples), gpus=gpus, **more)


def test_arrays_named_by_a_params_field_are_that_many_of_the_size():
    from memprof.model.measures import Measure

    each = Measure("gpu", "x", "copies", "one operation", arrays="copies")
    assert declared_check(each, timed(4 * 1024), copies=4) == ""
    assert declared_check(each, timed(1024), copies=4) == (
        "measurements[0].bytes is 1024, but a gpu 'x' of this run moves copies x one array "
        "of parameters.power (1 KiB)"
    )


def test_a_kind_alone_is_checked_without_repetitions_or_bytes():
    from memprof.model.measures import Measure

    pinned = Measure("gpu", "x", "a kind", "one operation", kinds=("pinned",), per_repeat=False)
    assert declared_check(pinned, timed(0, "pinned")) == ""
    assert declared_check(pinned, timed(0, "device")) == (
        "measurements[0].kind is 'device', but a gpu 'x' of this experiment is one of 'pinned'"
    )


def test_the_gpus_a_measure_names_are_held_on_a_run_of_several_gpus_only():
    from memprof.model.measures import Measure

    pair = Measure("gpu", "x", "a pair", "one operation", gpus=2, per_repeat=False)
    assert declared_check(pair, timed(0, gpus=(0, 1)), several_gpus=True) == ""
    assert declared_check(pair, timed(0, gpus=(0,)), several_gpus=True) == (
        "measurements[0].gpus names 1 GPUs, but a 'x' runs on 2"
    )
    assert declared_check(pair, timed(0), several_gpus=False) == ""  # one GPU: names none


@pytest.mark.parametrize(
    ("arrays", "sizes", "said"),
    [
        (1, [1024], "moves one array of parameters.power (1 KiB)"),
        (2, [1024], "moves 2 x one array of parameters.power (1 KiB)"),
        ((2, 3), [1024], "moves 2 or 3 x one array of parameters.power (1 KiB)"),
        (
            1,
            [4096, 1024, 3072, 2048],
            "moves one array of parameters.power (1 KiB, 2 KiB, 3 KiB, 4 KiB)",
        ),  # four: all
        (
            1,
            [5120, 4096, 1024, 3072, 2048],
            "moves one array of parameters.power (1 KiB, 2 KiB, 3 KiB, 4 KiB, ...)",
        ),
    ],
)
def test_bytes_no_size_makes_are_refused_saying_what_the_run_moves(arrays, sizes, said):
    from memprof.model.measures import Measure, _bytes_refusal

    refused = _bytes_refusal(
        timed(7), Measure("gpu", "x", "", "one operation", arrays=arrays), sizes
    )
    assert refused == f"is 7, but a gpu 'x' of this run {said}"


@pytest.mark.parametrize(
    ("basis", "alone_ms", "refused"),
    [("one operation", [0.0, 0.0, 1.0], True), ("one operation", [1.0, 1.0, 0.0], False),
     ("back to back", [0.0, 0.0, 1.0], False)],
)  # fmt: skip
def test_one_operation_alone_must_take_time_where_its_batches_did(basis, alone_ms, refused):
    """Batches timed, one alone of median 0 is refused; a measure timed back to back is
    its batches' figure (its operations alone may be too short to see)."""
    from memprof.model.measures import Measure, _check_times

    copy = timed(1024, samples=alone_ms, throughput_ms=[0.25, 0.25], batch=8)
    measure = Measure("gpu", "x", "a copy", basis, arrays=1)
    if not refused:
        _check_times(copy, measure, "measurements[3]")
        return
    with pytest.raises(SchemaError) as caught:
        _check_times(copy, measure, "measurements[3]")
    assert str(caught.value) == (
        "measurements[3].samples_ms has a median of 0 ms, but moving 1024 bytes takes time "
        "(back to back: 0.25 ms each)"
    )


def test_a_copy_of_single_operations_with_a_median_of_0_names_its_samples():
    from memprof.model.measures import Measure

    copy = Measure("gpu", "x", "a copy", "one operation", arrays=1)
    assert declared_check(copy, timed(1024, samples=[0.0])) == (
        "measurements[0].samples_ms has a median of 0 ms, but moving 1024 bytes takes time"
    )


def test_repetitions_alone_are_checked_without_bytes_or_kinds():
    from memprof.model.measures import Measure

    call = Measure("gpu", "x", "a call", "one operation")
    assert declared_check(call, timed(0, samples=[0.5] * 10), repeat=10) == ""
    assert declared_check(call, timed(0, samples=[0.5] * 9), repeat=10) == (
        "measurements[0].samples_ms holds 9 samples, but parameters.repeat 10 makes a multiple "
        "of 10"
    )


def test_only_a_declared_transfer_timed_one_way_and_back_to_back_can_have_moved():
    """Skipped, whatever their times: a measurement no measure declares, one of a measure
    timed back to back, one that moves no bytes. A copy of no kind is named without one."""
    from types import SimpleNamespace

    from memprof.model.measures import Measure, moved_during_run
    from memprof.model.results import Measurement

    def copy(operation: str, kind: str | None) -> Measurement:
        return Measurement(
            "gpu", "[CUDA memcpy HtoD]", operation, kind, 1024, [0.002], source="cupti",
            events_ms=[0.002], throughput_ms=[0.0001], batch=8,
        )  # fmt: skip

    declared = [
        Measure("gpu", "batched", "", "back to back", arrays=1),
        Measure("gpu", "launch", "", "one operation", arrays=0),
        Measure("gpu", "h2d", "", "one operation", arrays=1),
    ]
    run = SimpleNamespace(
        measurements=[copy(op, "pinned") for op in ("undeclared", "batched", "launch")]
        + [copy("h2d", None)]
    )
    assert moved_during_run(run, declared) == [
        "warning: [CUDA memcpy HtoD], 1 KiB: one alone took 2.0000us, back to back 100ns each, "
        "less than 50% of that: the link or the GPU changed speed during the run, so its "
        "figures disagree; measure again"
    ]


def test_a_kind_a_traffic_mapping_leaves_out_counts_each_byte_once():
    from memprof.experiments.managed import KERNEL_FIRST

    assert KERNEL_FIRST.traffic_of("managed+prefetch") == 0  # already resident: nothing moved
    assert KERNEL_FIRST.traffic_of("managed") == 1
    assert KERNEL_FIRST.traffic_of(None) == 1


@pytest.mark.parametrize(("vmm", "granularity"), [(True, None), (True, 0), (False, 2 << 20)])
def test_a_granularity_that_contradicts_whether_vmm_ran_is_refused(vmm, granularity):
    """A run that measured VMM printed 'granularity, 0 B here' from a null granularity."""

    def edit(data):
        data["extra"]["allocators"].update(vmm=vmm, granularity_bytes=granularity)

    said = refusal(edited("h200_alloc", edit))
    assert said.startswith(f"run.json: extra.allocators.granularity_bytes is {granularity}, but")
    assert f"extra.allocators.vmm is {str(vmm).lower()}" in said


def test_the_recorded_granularity_of_a_vmm_run_loads():
    data = json.loads((FIXTURES / "h200_alloc.json").read_text())["extra"]["allocators"]
    assert data["vmm"] and data["granularity_bytes"] > 0
    assert parse((FIXTURES / "h200_alloc.json").read_text())


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [("bytes", None, "missing"), ("how", None, "missing"), ("how", "", "''")],
)
def test_a_traces_bandwidth_without_its_size_or_source_is_refused(field, value, said):
    """Its Copies table said 'HtoD 53.3 GB/s, DtoH 55.2 GB/s (0 B copies; not measured)'."""

    def edit(data):
        bandwidth = data["extra"]["pinned_bandwidth"]
        bandwidth.pop(field) if value is None else bandwidth.update({field: value})

    assert refusal(edited("h200_trace_torch", edit)) == (
        f"run.json: extra.pinned_bandwidth.{field} is {said}, but "
        "extra.pinned_bandwidth.h2d_gb_per_s is there: a measured bandwidth keeps its "
        "copies' size and how it was had"
    )


def test_a_traces_bandwidth_that_was_not_measured_needs_only_how():
    def edit(data):
        data["extra"]["pinned_bandwidth"] = {"how": "not measured (--bandwidth none)"}

    assert parse(edited("h200_trace_torch", edit))
    assert parse((FIXTURES / "h200_trace_torch.json").read_text())  # all of it kept


@pytest.mark.parametrize(
    ("field", "batch", "least_ms", "reads"),
    [
        ("samples_ms", 0, 1e-6, "0 or at least 1e-06 ms"),
        ("events_ms", 64, 1e-6, "0 or at least 1e-06 ms"),  # one alone, beside the batches
        ("throughput_ms", 64, 1e-6 / 64, "a batch of 64 operations as 0 or at least 1e-06 ms"),
        ("samples_ms", 64, 1e-6 / 64, "a batch of 64 operations as 0 or at least 1e-06 ms"),
    ],
)
def test_a_positive_time_under_a_clock_step_is_refused_and_one_step_loads(
    field, batch, least_ms, reads
):
    """CUPTI and the host count whole ns; a batch's ns is divided among its operations (and
    samples_ms holds those where no single operation was timed). A call that moves nothing,
    so no other check of its times applies; 0 stays for the median rule to judge."""
    from memprof.model.measures import Measure

    call = Measure("gpu", "x", "a call", "one operation")

    def checked(ms: float) -> str:
        times = {"samples": [0.5] * 3, "events_ms": [0.5] * 3, "throughput_ms": [0.5] * 3}
        if not batch:
            del times["throughput_ms"]
        times[field if field != "samples_ms" else "samples"][1] = ms
        return declared_check(call, timed(0, source="cupti", batch=batch, **times))

    assert checked(least_ms) == checked(0.0) == checked(0.5) == ""
    under = math.nextafter(least_ms, 0)
    each = f" ({least_ms!r} ms each)" if batch and field != "events_ms" else ""
    assert (
        checked(under)
        == f"measurements[0].{field}[1] is {under!r} ms, but a clock reads {reads}{each}"
    )
    assert checked(1e-300).startswith(f"measurements[0].{field}[1] is 1e-300 ms")
