"""What a saved streams file must be for its timelines and tables to be drawn, on both sides of
each edge: check_timeline (each chunk's three stages once, on the mode's streams, ending after
they start, the run taking time) and Streams.check_consistency (every mode's label, the kernel
time asked for, a timeline within its longest run), each refusal said in full where it is."""

from __future__ import annotations

import pytest

from memprof.experiments.streams import EPSILON_MS, Streams, check_timeline
from memprof.model.schema import SchemaError
from tests.conftest import replace
from tests.verdict_tools import fixture

STAGES = ("h2d", "kernel", "d2h")


def stages_of(chunks: int, lanes: int = 1, ms: float = 1.0) -> list[list]:
    """Each chunk's three stages, one after another, chunk i on stream i mod lanes."""
    rows, now = [], 0.0
    for chunk in range(chunks):
        for stage in STAGES:
            rows.append([chunk % lanes, chunk, stage, now, now + ms])
            now += ms
    return rows


def refusal(timeline: list, lanes: int = 1, chunks: int = 2) -> str:
    with pytest.raises(SchemaError) as refused:
        check_timeline(timeline, lanes, chunks, "serial")
    return str(refused.value)


def test_an_operation_may_end_as_it_starts_but_not_before():
    instant = stages_of(2)
    instant[1][4] = instant[1][3]  # chunk 0's kernel: no time at the clock's resolution
    check_timeline(instant, 1, 2, "serial")
    backwards = stages_of(2)
    backwards[1][4] = backwards[1][3] - 0.5
    assert refusal(backwards) == "extra.timelines.serial[1] ends at 0.5 ms, before it starts (1.0)"


def test_the_last_chunk_is_one_less_than_the_count_cut():
    check_timeline(stages_of(3), 1, 3, "serial")  # chunks 0, 1, 2
    beyond = stages_of(3)
    assert refusal(beyond, chunks=2) == (
        "extra.timelines.serial[6][1] is chunk 2, but parameters.streams cuts 2"
    )


def test_a_stage_twice_and_a_stage_missing_are_refused_where_they_are():
    twice = stages_of(2)
    twice[4][1:3] = [0, "kernel"]  # chunk 1's kernel said to be chunk 0's again
    assert refusal(twice) == "extra.timelines.serial[4] is chunk 0's kernel again"
    missing = stages_of(2)[:-1]
    assert refusal(missing) == "extra.timelines.serial has 5 stages, but 2 chunks make 6"


def test_a_timeline_must_end_after_zero_however_soon():
    check_timeline(stages_of(2, ms=0.001), 1, 2, "serial")  # 6 us in all: it took time
    assert refusal(stages_of(2, ms=0.0)) == (
        "extra.timelines.serial ends at 0 ms: a timeline takes time"
    )


def streams_file():
    return fixture("h200_streams")


def consistency_refusal(result) -> str:
    with pytest.raises(SchemaError) as refused:
        Streams().check_consistency(result)
    return str(refused.value)


def with_timeline(result, mode: str, timeline: list):
    timelines = replace(result.extra.timelines, **{mode: timeline})
    return replace(result, extra=replace(result.extra, timelines=timelines))


def ending_at(result, mode: str, end_ms: float):
    """The mode's timeline stretched so that its last operation ends at end_ms."""
    timeline = getattr(result.extra.timelines, mode)
    factor = end_ms / max(row[4] for row in timeline)
    stretched = [[lane, chunk, stage, start * factor, end * factor]
                 for lane, chunk, stage, start, end in timeline]  # fmt: skip
    max(stretched, key=lambda row: row[4])[4] = end_ms  # exactly, not as the product rounds
    return with_timeline(result, mode, stretched)


def longest_run_ms(result, label: str) -> float:
    (span,) = [m for m in result.measurements if m.group == "span" and m.kind == label]
    return max(span.samples_ms)


@pytest.mark.parametrize(("group", "operation"), [("gpu", "kernel"), ("span", "total")])
def test_a_measurement_of_a_mode_that_did_not_run_is_refused(group, operation):
    result = streams_file()
    measurements = [
        replace(m, kind="pinned, 3 streams")
        if (m.group, m.operation, m.kind) == (group, operation, "pinned, 4 streams")
        else m
        for m in result.measurements
    ]
    index = next(i for i, m in enumerate(measurements) if m.kind == "pinned, 3 streams")
    assert consistency_refusal(replace(result, measurements=measurements)) == (
        f"measurements[{index}].kind is 'pinned, 3 streams', but a streams run's are "
        "'pinned, 1 stream', 'pinned, 4 streams', 'pageable, 4 streams'"
    )


def test_the_kernel_time_kept_is_the_one_asked_for():
    result = streams_file()
    asked = replace(result, parameters=replace(result.parameters, kernel_ms=2.0))
    Streams().check_consistency(replace(asked, extra=replace(asked.extra, kernel_target_ms=2.0)))
    other = replace(asked, extra=replace(asked.extra, kernel_target_ms=2.5))
    assert consistency_refusal(other) == (
        "extra.kernel_target_ms is 2.5, but parameters.kernel_ms asked for 2.0"
    )


def test_the_serial_timeline_is_on_one_stream():
    result = streams_file()
    serial = [(1, *row[1:]) if index == 0 else row
              for index, row in enumerate(result.extra.timelines.serial)]  # fmt: skip
    assert consistency_refusal(with_timeline(result, "serial", serial)) == (
        "extra.timelines.serial[0][0] is stream 1, but serial uses 1"
    )


@pytest.mark.parametrize(("mode", "label"), [("serial", "pinned, 1 stream"),
                                             ("overlapped", "pinned, 4 streams")])  # fmt: skip
def test_a_timeline_ends_within_the_longest_run_of_its_mode(mode, label):
    result = streams_file()
    longest = longest_run_ms(result, label)
    for end_ms in (longest, longest + EPSILON_MS):  # the same times, summed apart
        Streams().check_consistency(ending_at(result, mode, end_ms))
    late = longest + 3 * EPSILON_MS
    assert consistency_refusal(ending_at(result, mode, late)) == (
        f"extra.timelines.{mode} ends at {late} ms, but the longest run of {label!r} took "
        f"{longest} ms"
    )
