"""Repetitions until the noise target, in the one measuring core (memprof.core.measure): exactly
--repeat N where it is given, else until each median's noise is below --max-noise, at least
MIN_COUNT times, no longer than the time cap; single operations and batches alike."""

from __future__ import annotations

import contextlib
import itertools

import pytest

from memprof.core import measure
from memprof.core.measure import Lane, Profiler, concurrent
from memprof.core.repetitions import FEWEST, MIN_COUNT, THROUGHPUT_BATCHES, Repetitions
from memprof.model.statistics import median_noise, repetitions_words
from tests.test_profile import FakeActivity, FakeEvent, FakeGate, FakeSession

NOISY = [1.0, 1.25, 0.75, 1.125, 0.875]  # exact in binary; the noise of its median: 10.4%


@pytest.fixture(autouse=True)
def clock():
    FakeEvent.clock_ms, FakeEvent.log = 0.0, []


def profiler(policy: Repetitions, activity=None) -> Profiler:
    made = Profiler(FakeSession(), activity, gate=FakeGate())
    made.repetitions = policy
    made._event_overhead_ms = 0.0
    return made


def copies(made: Profiler, durations_ms) -> tuple:
    """A step timing one copy, each taking the next of durations_ms (the last one after)."""
    durations = iter(durations_ms)
    last = [durations_ms[-1]]

    def step() -> None:
        with made.events("gpu", "[CUDA memcpy HtoD]", "h2d", "pinned", 64):
            last[0] = next(durations, last[0])
            FakeEvent.clock_ms += last[0]

    return step


def samples(made: Profiler) -> list[float]:
    [copy] = [m for m in made.measurements() if m.group == "gpu"]
    return copy.samples_ms


def test_repeat_n_is_exactly_n_however_noisy_or_steady():
    for durations in (NOISY * 3, [1.0]):
        made = profiler(Repetitions(max_noise_pct=1.0))
        made.repeat(copies(made, durations), warmup=0, repeat=7)
        assert len(samples(made)) == 7
    made = profiler(Repetitions(exactly=4))  # --repeat 4 as the run's policy
    made.repeat(copies(made, NOISY), warmup=0)
    assert samples(made) == pytest.approx(NOISY[:4])


def test_a_steady_measurement_stops_at_the_least_count():
    made = profiler(Repetitions(max_noise_pct=1.0))
    made.repeat(copies(made, [1.0]), warmup=2)
    assert samples(made) == [1.0] * MIN_COUNT and MIN_COUNT == 5


def test_a_noisy_measurement_repeats_until_its_median_settles():
    # five noisy copies, then steady ones: the median's noise falls to 0 once more than half
    # of the deviations are 0, at the ninth (the noise is checked at each count from 5 to 9)
    made = profiler(Repetitions(max_noise_pct=1.0))
    made.repeat(copies(made, [*NOISY, 1.0]), warmup=0)
    assert samples(made) == pytest.approx([*NOISY, 1.0, 1.0, 1.0, 1.0])
    assert median_noise(samples(made)[:8]) > 0.01 and median_noise(samples(made)) == 0


def test_the_noise_target_is_met_at_its_value_and_missed_just_above_it():
    reached = median_noise(NOISY) * 100
    made = profiler(Repetitions(max_noise_pct=reached))
    made.repeat(copies(made, [*NOISY, 1.0]), warmup=0)
    assert len(samples(made)) == MIN_COUNT  # at the target: enough
    made = profiler(Repetitions(max_noise_pct=reached * 0.999))
    made.repeat(copies(made, [*NOISY, 1.0]), warmup=0)
    assert len(samples(made)) > MIN_COUNT


def test_no_measurement_repeats_more_than_its_experiment_did_before_the_noise_target():
    made = profiler(Repetitions(max_noise_pct=1.0, most=7))
    made.repeat(copies(made, NOISY * 10), warmup=0)
    assert len(samples(made)) == 7
    made = profiler(Repetitions(max_noise_pct=1.0, most=3))  # alloc's: 3, fewer than MIN_COUNT
    made.repeat(copies(made, NOISY * 10), warmup=0)
    assert len(samples(made)) == 3
    made = profiler(Repetitions(max_noise_pct=1.0, most=7))
    concurrent([lane(made, [0.5, 0.5, 0.7, 0.5, 0.3])])  # batches: as many, at least 3
    assert len(throughput(made)) == 7


def test_each_experiment_repeats_at_most_what_its_repeat_field_says():
    from memprof.experiments import base, experiment_class
    from memprof.experiments.check import CheckParams
    from memprof.experiments.info import Info

    sweep = experiment_class("sweep").Params()
    assert base.repetitions_of(sweep, 0.5) == Repetitions(None, 0.5, most=20)
    pinned = experiment_class("pinned").Params(repeat=4)
    assert base.repetitions_of(pinned, 0.5).exactly == 4
    assert base.repetitions_of(CheckParams(), 1.0).exactly == 5  # check's own count
    assert base.repetitions_of(Info.Params(), 1.0).exactly == 1  # it repeats nothing


def test_the_time_cap_ends_a_measurement_that_never_settles():
    made = profiler(Repetitions(max_noise_pct=1.0, cap_s=0.0))  # each step outlasts the cap
    made.repeat(copies(made, NOISY * 10), warmup=0)
    assert len(samples(made)) == FEWEST == 3  # a median and its spread, no more
    made = profiler(Repetitions(max_noise_pct=1.0, cap_s=3600.0))
    ticks = itertools.count()
    start = measure.time.perf_counter

    def clock() -> float:  # the host clock advances a second per look
        return start() + next(ticks)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(measure.time, "perf_counter", clock)
        made.repetitions = Repetitions(max_noise_pct=1.0, cap_s=30.0)
        made.repeat(copies(made, NOISY * 100), warmup=0)
    assert MIN_COUNT < len(samples(made)) < 40


def looped(policy: Repetitions, settles_at: int, spent_s: float = 0.0) -> tuple[int, list[int]]:
    """The policy's loop over a figure whose noise is 10.4% until `settles_at` repetitions and
    0 from then on, the host clock `spent_s` on from its start at every look: the count it
    stops at, and the counts at which it looked at the noise."""
    from memprof.core import repetitions

    looked: list[int] = []
    clock = itertools.chain([100.0], itertools.repeat(100.0 + spent_s))

    def series() -> list[list[float]]:
        looked.append(loop.count)
        return [NOISY if loop.count < settles_at else [1.0] * 5]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(repetitions.time, "perf_counter", lambda: next(clock))
        loop = policy.loop()
        while loop.more(series):
            pass
    return loop.count, looked


def test_the_noise_is_looked_at_each_count_to_16_then_each_time_it_grew_by_an_eighth():
    # 16 // 8 = 2: 16, 18, ...; 24 // 8 = 3: 24, 27, 30; 33 // 8 = 4: 33, 37
    policy = Repetitions(max_noise_pct=1.0, cap_s=3600.0)
    count, looked = looped(policy, 38)
    assert looked == [*range(5, 17), 18, 20, 22, 24, 27, 30, 33, 37, 41] and count == 41
    for settles_at, stops_at in [(6, 6), (10, 10), (16, 16), (17, 18), (18, 18), (25, 27)]:
        assert looped(policy, settles_at)[0] == stops_at, settles_at


def test_the_time_cap_stops_the_loop_at_its_value_and_not_just_before_it():
    policy = Repetitions(max_noise_pct=1.0, cap_s=5.0)
    assert looped(policy, 6, 5.0) == (FEWEST, [])  # 5 s spent: a median and its spread
    assert looped(policy, 6, 4.999) == (6, [5, 6])  # under it: on to the noise target


def test_batches_are_at_least_three_where_the_experiment_repeated_fewer():
    policy = Repetitions(max_noise_pct=1.0, most=2).batches(None)
    assert policy == Repetitions(None, 1.0, minimum=THROUGHPUT_BATCHES, most=THROUGHPUT_BATCHES)
    assert looped(policy, 1000)[0] == THROUGHPUT_BATCHES


def test_with_cupti_the_loop_stops_on_its_events_and_keeps_cuptis_records():
    # the gated events are steady, so the loop stops at the least count; what is saved is
    # CUPTI's record of each copy (arriving only after the loop), noisy as they are
    records = dict(enumerate(NOISY, start=1))
    made = profiler(Repetitions(max_noise_pct=1.0), FakeActivity(records, {}))
    made.repeat(copies(made, [1.0]), warmup=0)
    [copy] = made.measurements()
    assert copy.source == "cupti" and copy.samples_ms == pytest.approx(NOISY)
    assert copy.events_ms == [1.0] * MIN_COUNT


def test_driver_calls_timed_beside_a_figure_do_not_hold_the_loop_up(monkeypatch):
    made = profiler(Repetitions(max_noise_pct=1.0))
    calls_us = itertools.cycle([1, 2, 3, 4, 5])  # each call a microsecond longer, then again
    host_ns = (ns for us in calls_us for ns in (0, us * 1000))
    monkeypatch.setattr(measure.time, "perf_counter_ns", lambda: next(host_ns))
    copy = copies(made, [1.0])

    def step() -> None:
        with made.api("cuLaunchKernel", "launch"):
            pass
        copy()

    made.repeat(step, warmup=0)
    launch = next(m for m in made.measurements() if m.group == "api")
    assert len(launch.samples_ms) == MIN_COUNT and median_noise(launch.samples_ms) > 0.2
    alone = profiler(Repetitions(max_noise_pct=1.0, cap_s=3600.0, most=12))  # never settles

    def call() -> None:
        with alone.api("cuMemAlloc", "alloc"):
            pass

    alone.repeat(call, warmup=0)  # a noisy call alone is its own figure: it holds the loop up
    assert len(next(iter(alone._measurements.values())).samples_ms) == 12


def lane(made: Profiler, durations_ms) -> Lane:
    durations = itertools.cycle(durations_ms)

    def action(stream) -> None:
        FakeEvent.clock_ms += next(durations)

    return Lane(made, action, "[CUDA memcpy HtoD]", "h2d", "pinned", 64)


def throughput(made: Profiler) -> list[float]:
    return made._measurement("gpu", "[CUDA memcpy HtoD]", "h2d", "pinned", 64).throughput_ms


def test_batches_stop_at_their_least_count_when_steady_and_as_many_as_given_otherwise():
    made = profiler(Repetitions(max_noise_pct=1.0))
    concurrent([lane(made, [0.5])])
    assert throughput(made) == [0.5] * THROUGHPUT_BATCHES  # steady: 3 batches, not 5
    made = profiler(Repetitions(exactly=10))  # --repeat 10: batches as before, 3
    concurrent([lane(made, [0.5])])
    assert len(throughput(made)) == THROUGHPUT_BATCHES
    made = profiler(Repetitions(exactly=10))
    concurrent([lane(made, [0.5])], batches=6)  # an experiment's own count (hostlink's)
    assert len(throughput(made)) == 6


def test_batches_of_a_noisy_lane_go_on_until_every_lane_settles():
    made = profiler(Repetitions(max_noise_pct=1.0))
    steady, noisy = lane(made, [0.5]), lane(made, [0.5, 0.5, 0.7, 0.5, 0.3])
    noisy = Lane(made, noisy.action, "[CUDA memcpy HtoD]", "h2d", "pageable", 64)
    concurrent([steady, noisy])  # one operation per batch: a batch of 1 ms is two of 0.5
    assert len(throughput(made)) > THROUGHPUT_BATCHES


def test_host_batches_stop_the_same_way(monkeypatch):
    made = profiler(Repetitions(max_noise_pct=1.0))
    host_ns = itertools.count(step=100_000)  # every look at the clock 0.1 ms later
    monkeypatch.setattr(measure.time, "perf_counter_ns", lambda: next(host_ns))
    made.host_throughput("memcpy", "memcpy", None, 64, lambda: None)
    [memcpy] = made._measurements.values()
    assert len(memcpy.throughput_ms) == THROUGHPUT_BATCHES


def test_the_run_records_its_target_and_cap_only_when_it_repeats_until_the_noise_target():
    info = profiler(Repetitions(max_noise_pct=0.5, cap_s=0.2)).timing_info()
    assert (info.max_noise_pct, info.time_cap_s, info.max_count) == (0.5, 0.2, 10_000)
    info = profiler(Repetitions(exactly=10)).timing_info()
    assert (info.max_noise_pct, info.time_cap_s, info.max_count) == (None, None, None)


def test_a_footnote_says_how_many_samples_and_how_noisy():
    # NOISY twice: median 1, MAD 0.125, so 1.2533 x 1.4826 x 0.125 / sqrt(10) = 7.3%
    assert repetitions_words([[1.0] * 5, NOISY * 2]) == "5 to 10, noise at most 7.3%"
    assert repetitions_words([[1.0] * 3], "batches") == "3 batches, noise at most 0.0%"
    assert repetitions_words([]) == ""


def test_a_run_until_the_noise_target_says_so_in_its_headline_and_footnotes():
    import dataclasses

    from memprof.experiments import base
    from tests.conftest import load_fixture, render_text

    result = load_fixture("zerocopy_p20")  # saved with --repeat 10: "median of 10"
    saved = " ".join(render_text(result, width=400).split())
    assert "repeat=10" in saved and "median of 10. " in saved
    result.parameters = dataclasses.replace(result.parameters, repeat=None)
    result.timing.max_noise_pct, result.timing.time_cap_s, result.timing.max_count = 0.5, 0.2, 10
    kernels = [m for m in result.measurements if m.operation == "kernel"]
    kernels[0].samples_ms = kernels[0].samples_ms[:6]  # one figure settled sooner
    text = " ".join(render_text(result, width=400).split())
    assert "repeat=until the noise target" in text
    words = repetitions_words(
        [m.samples_ms for m in result.measurements if m.operation != "driver_call"]
    )
    assert words.startswith("6 to ")  # the profile's every row, driver calls left out
    assert (
        "each operation until its median's noise was below 0.5%, 10 times, or for 0.2 s "
        f"(median of {words})"
    ) in text
    figures = base.repetitions(result)  # the figures, without the core's side records
    assert figures.startswith("6 to 20, noise at most ")  # a and b copied in: 2 per run
    assert f"median of {figures}. " in text  # the kernel table's own footnote


# -- what is not measured twice ---------------------------------------------------------------


def counted(milliseconds: float, log: list[str]):
    """A copy of `milliseconds`, counted in `log` each time it runs."""

    def action(stream) -> None:
        FakeEvent.clock_ms += milliseconds
        log.append("copy")

    return action


@pytest.mark.parametrize(("one_ms", "span"), [(2.0, False), (0.5, False), (2.0, True)])
def test_a_throughput_whose_batch_is_one_operation_takes_the_single_operations_timed_before(
    one_ms, span
):
    made, ran = profiler(Repetitions(exactly=5)), []
    copy = counted(one_ms, ran)

    def step() -> None:
        with contextlib.ExitStack() as around:
            if span:  # inside a span a copy is not alone: its events are not a batch
                around.enter_context(made.events("span", "flow", "flow", "pinned", 64))
            with made.events("gpu", "[CUDA memcpy HtoD]", "h2d", "pinned", 64):
                copy(made.stream)

    made.repeat(step, warmup=0)
    made.throughput("[CUDA memcpy HtoD]", "h2d", "pinned", 64, copy)
    if one_ms >= measure.BATCH_TARGET_MS and not span:
        assert len(ran) == 5  # nothing run again
        assert throughput(made) == [2.0] * 5
        assert made._measurement("gpu", "[CUDA memcpy HtoD]", "h2d", "pinned", 64).batch == 1
    else:
        assert len(ran) > 5 and len(throughput(made)) == THROUGHPUT_BATCHES


def test_the_batch_that_sized_batches_of_one_operation_is_the_first_of_them():
    for one_ms, warmup, runs in ((2.0, 0, 3), (2.0, 1, 5), (0.5, 0, 1 + 3 * 2)):
        made, ran = profiler(Repetitions(exactly=10)), []
        concurrent([Lane(made, counted(one_ms, ran), "c", "h2d", None, 8)], warmup=warmup)
        assert len(ran) == runs, (one_ms, warmup)
        assert len(made._measurement("gpu", "c", "h2d", None, 8).throughput_ms) == 3


def test_a_host_batch_of_one_operation_starts_with_the_one_that_sized_it(monkeypatch):
    made, calls = profiler(Repetitions(exactly=10)), []
    host_ns = itertools.count(step=2_000_000)  # every look at the clock 2 ms later
    monkeypatch.setattr(measure.time, "perf_counter_ns", lambda: next(host_ns))
    made.host_throughput("memcpy", "memcpy", None, 64, lambda: calls.append(1))
    [memcpy] = made._measurements.values()
    assert memcpy.batch == 1 and memcpy.throughput_ms == [2.0] * 3
    assert len(calls) == 1 + 3  # untimed first touch, then the three batches, sizing included


@pytest.mark.parametrize(
    ("max_noise", "error", "words"),
    [
        ("1", TypeError, "max_noise must be a number, not str"),
        (True, TypeError, "max_noise must be a number, not bool"),
        (0, "InvalidArgument", "max_noise: 0 is outside the allowed range"),
        (100.5, "InvalidArgument", "max_noise: 100.5 is outside the allowed range"),
    ],
)
def test_the_api_checks_max_noise_before_touching_a_gpu(max_noise, error, words):
    from memprof import api
    from memprof.errors import InvalidArgument

    expected = InvalidArgument if error == "InvalidArgument" else error
    with pytest.raises(expected, match=words):
        api.run("pinned", max_noise=max_noise)


def test_max_noise_takes_any_percent_above_0_up_to_100():
    from memprof.api import _noise

    assert _noise(100) == 100.0 and _noise(0.01) == 0.01


# -- what a saved run says about its repetitions agrees -----------------------------------------


def noise_target_file(repeat, **timing) -> str:
    import json

    from tests.conftest import FIXTURES

    data = json.loads((FIXTURES / "h200_zerocopy_p20.json").read_text())
    data["parameters"]["repeat"] = repeat
    data["timing"].update(timing)
    return json.dumps(data)


TARGET = {"max_noise_pct": 1.0, "time_cap_s": 0.1, "max_count": 10}


def test_a_run_until_the_noise_target_records_the_target_and_loads():
    from memprof.experiments import parse

    assert parse(noise_target_file(None, **TARGET)).timing.max_noise_pct == 1.0
    assert parse(noise_target_file(10)).parameters.repeat == 10


@pytest.mark.parametrize("missing", sorted(TARGET))
def test_a_run_until_the_noise_target_without_it_is_refused(missing):
    from memprof.errors import InvalidArgument
    from memprof.experiments import parse

    timing = {name: value for name, value in TARGET.items() if name != missing}
    with pytest.raises(InvalidArgument, match=rf"run.json: timing.{missing} is missing, but "):
        parse(noise_target_file(None, **timing), "run.json")


@pytest.mark.parametrize("recorded", sorted(TARGET))
def test_a_run_of_repeat_n_with_a_noise_target_is_refused(recorded):
    from memprof.errors import InvalidArgument
    from memprof.experiments import parse

    with pytest.raises(InvalidArgument, match=rf"timing.{recorded} is .*parameters.repeat is 10"):
        parse(noise_target_file(10, **{recorded: TARGET[recorded]}), "run.json")


@pytest.mark.parametrize(
    ("policy", "least", "most"),
    [
        (Repetitions(exactly=7), THROUGHPUT_BATCHES, THROUGHPUT_BATCHES),  # --repeat 7
        (Repetitions(most=6), THROUGHPUT_BATCHES, 6),  # until the noise target
    ],
)
def test_pageable_staging_batches_follow_the_runs_policy(policy, least, most):
    import numpy as np

    from memprof.experiments.common import measure_host_staging

    made = profiler(policy)
    measure_host_staging(made, np.zeros(1 << 16, np.float32))
    staging = [m for m in made.measurements() if m.group == "host"]
    assert {m.operation for m in staging} == {"staging_h2d", "staging_d2h"}
    for m in staging:
        assert least <= len(m.throughput_ms) <= most, (m.operation, m.throughput_ms)
