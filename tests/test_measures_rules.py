"""memprof.model.measures' refusals at the edges the mutation round on it found untested: a
latency whose bytes are no arrays (peer's chase of dependent loads) must take time, and a
clock step divided among a batch is said so from a batch of 2 on (issue 37)."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace
from typing import Any

import pytest

from memprof.errors import InvalidArgument
from memprof.experiments import parse
from memprof.model.measures import CLOCK_STEP_MS, Measure, _check_resolution, _check_times
from memprof.model.results import Measurement
from memprof.model.schema import SchemaError
from tests.conftest import FIXTURES


def peer_with_latency_samples(samples_ms: list[float]) -> str:
    """h200x2_peer.json with its first latency chain's samples replaced."""
    data = json.loads((FIXTURES / "h200x2_peer.json").read_text())
    chain = next(m for m in data["measurements"] if m["operation"] == "latency")
    assert chain["bytes"] == 16384 and len(chain["samples_ms"]) == 5 and not chain["batch"]
    chain["samples_ms"] = samples_ms
    return json.dumps(data)


def test_a_peer_latency_chain_of_median_0_is_refused_and_one_of_a_clock_step_loads():
    """The chain moves no arrays (its bytes are the chain's): only shows='latency' holds it to
    taking time, which would otherwise divide 16 KiB by 0 ms into its figure."""
    parse(peer_with_latency_samples([0.0, 0.0, 1e-6, 1e-6, 1e-6]), "run.json")  # median: a step
    with pytest.raises(InvalidArgument) as refused:
        parse(peer_with_latency_samples([0.0, 0.0, 0.0, 1e-6, 1e-6]), "run.json")
    assert str(refused.value) == (
        "run.json: measurements[6].samples_ms has a median of 0 ms, but moving 16384 bytes "
        "takes time"
    )


@pytest.mark.parametrize(("shows", "refused"), [("latency", True), ("time", False)])
def test_bytes_that_are_no_arrays_must_take_time_only_for_a_latency(shows, refused):
    chain = Measure("gpu", "x", "a chain", "one operation", shows=shows)
    assert not chain.moves()
    zero = Measurement("gpu", "x", "x", None, 16384, [0.0, 0.0, 1.0])
    if not refused:
        _check_times(zero, chain, "measurements[0]")  # a driver call's bytes: its argument
        return
    with pytest.raises(SchemaError, match=r"samples_ms has a median of 0 ms, but moving 16384"):
        _check_times(zero, chain, "measurements[0]")


@pytest.mark.parametrize(
    ("batch", "reads"),
    [
        (0, "0 or at least 1e-06 ms"),  # no batches
        (1, "0 or at least 1e-06 ms"),  # a batch of one is one operation
        (2, "a batch of 2 operations as 0 or at least 1e-06 ms (5e-07 ms each)"),
    ],
)
def test_a_batch_is_said_to_divide_the_clock_step_from_two_operations_on(batch, reads):
    least_ms = 1e-6 / (batch or 1)
    under = math.nextafter(least_ms, 0)
    _check_resolution(
        Measurement("gpu", "x", "x", None, 0, [0.5], throughput_ms=[least_ms], batch=batch),
        "measurements[0]",
    )  # exactly one step, divided: a reading
    with pytest.raises(SchemaError) as caught:
        _check_resolution(
            Measurement("gpu", "x", "x", None, 0, [0.5], throughput_ms=[under], batch=batch),
            "measurements[0]",
        )
    assert str(caught.value) == (
        f"measurements[0].throughput_ms[0] is {under!r} ms, but a clock reads {reads}"
    )


def test_a_measure_is_required_unless_declared_otherwise():
    """Measure's default: every run records it, so a file without it is refused."""
    from types import SimpleNamespace

    from memprof.model.measures import check_declared

    def refusal(measure: Measure) -> str:
        run = SimpleNamespace(
            parameters=SimpleNamespace(), written_as=4, measurements=[], command="test"
        )
        try:
            check_declared(run, [measure], lambda _: [1024], several_gpus=False)
        except SchemaError as refused:
            return str(refused)
        return ""

    assert refusal(Measure("gpu", "x", "a call", "one operation")) == (
        "measurements has no gpu 'x', which every test run records"
    )
    assert refusal(Measure("gpu", "x", "a call", "one operation", required=False)) == ""


def trace_with(edits: dict[int, dict]) -> str:
    """h200_trace_pycuda.json with some of its measurements' fields replaced."""
    data = json.loads((FIXTURES / "h200_trace_pycuda.json").read_text())
    for index, fields in edits.items():
        data["measurements"][index].update(fields)
    return json.dumps(data)


@pytest.mark.parametrize(
    ("edits", "said"),
    [
        ({}, None),  # certified at C speed: no check of each measurement needed
        (
            {2: {"samples_ms": [5e-7]}},
            "measurements[2].samples_ms[0] is 5e-07 ms, but a clock reads 0 or at least 1e-06 ms",
        ),
        (
            {5: {"operation": "bogus"}, 2: {"samples_ms": [5e-7]}},
            "measurements[2].samples_ms[0] is 5e-07 ms, but a clock reads 0 or at least 1e-06 ms",
        ),
        (
            {2: {"operation": "bogus"}, 5: {"samples_ms": [5e-7]}},
            "measurements[2] is of group 'gpu', operation 'bogus', which trace does not record",
        ),
    ],
)
def test_a_trace_refused_by_its_declarations_names_its_first_measurement_at_fault(edits, said):
    """check_declared certifies a file in two comprehensions, and only where they find
    something runs its loop: which names the first measurement at fault, as it always did."""
    if said is None:
        parse(trace_with(edits), "run.json")
        return
    with pytest.raises(InvalidArgument) as refused:
        parse(trace_with(edits), "run.json")
    assert str(refused.value) == f"run.json: {said}"


def directions_run(*operations: str, samples_ms: tuple[float, ...] = (0.5,)) -> Any:
    """A run whose parameters asked for h2d only, of one measurement each of `operations`."""
    measurements = [Measurement("gpu", op, op, None, 0, [*samples_ms]) for op in operations]
    parameters = SimpleNamespace(directions=("h2d",))
    return SimpleNamespace(parameters=parameters, written_as=4, measurements=measurements)


# sweep's way: recorded exactly where parameters.directions names it, nothing else to check
BY_DIRECTION = [
    Measure("gpu", op, "a copy", "one operation", required="directions") for op in ("h2d", "d2h")
]


def test_an_operation_the_parameters_did_not_ask_for_is_refused_with_nothing_else_to_check():
    """The certification at C speed asks what check_declared's loop asks of each measurement:
    it certifies no operation the parameters did not ask for, so the loop refuses it."""
    from memprof.model.measures import check_declared

    run = directions_run("h2d", "d2h")
    run.command = "test"
    with pytest.raises(SchemaError) as refused:
        check_declared(run, BY_DIRECTION, lambda _: [], several_gpus=False)
    assert str(refused.value) == (
        "measurements[1].operation is 'd2h', which parameters.directions did not ask for"
    )


def test_operations_the_parameters_asked_for_are_certified_without_the_loop():
    """What the certification finds is what the loop would: each (group, operation) and
    (group, operation, kind); nothing where the loop must look (an operation not asked for)."""
    from memprof.model.measures import _found_at_c_speed, _Plan

    def found(run: Any) -> set[tuple]:
        plans = {m.key: _Plan(m, run, lambda _: [], False, None) for m in BY_DIRECTION}
        return _found_at_c_speed(run.measurements, plans, run.parameters)

    assert found(directions_run("h2d", "h2d")) == {("gpu", "h2d"), ("gpu", "h2d", None)}
    step = {("gpu", "h2d"), ("gpu", "h2d", None)}  # 0 and one clock step are readings
    assert found(directions_run("h2d", samples_ms=(0.0, CLOCK_STEP_MS))) == step
    assert found(directions_run("h2d", samples_ms=(math.nextafter(CLOCK_STEP_MS, 0),))) == set()
    assert found(directions_run("h2d", "d2h")) == set()
