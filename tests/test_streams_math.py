"""The pure parts of `memprof streams`: chunks, ideal time, text timeline (the engine timeline
is the measuring core's: tests/test_streams_timeline.py)."""

import pytest

from memprof.experiments.streams import (
    chunk_bounds,
    mode_labels,
    reference,
    timeline_lines,
)
from memprof.model.figures import ideal_overlapped_ms


def test_chunks_cover_every_element_once():
    assert chunk_bounds(10, 3) == [(0, 4), (4, 4), (8, 2)]
    assert chunk_bounds(8, 4) == [(0, 2), (2, 2), (4, 2), (6, 2)]
    for elements, chunks in ((1, 4), (1000, 7), (1 << 20, 32)):
        bounds = chunk_bounds(elements, chunks)
        assert sum(count for _, count in bounds) == elements
        assert all(start + count <= elements for start, count in bounds)


def test_ideal_is_the_longest_stage_plus_one_chunk_of_the_others():
    times = {"h2d": (4.0, 1.0), "kernel": (8.0, 2.0), "d2h": (4.0, 1.0)}
    assert ideal_overlapped_ms(list(times.values())) == 8.0 + 1.0 + 1.0


def test_text_timeline_draws_each_stage_where_it_ran():
    timeline = [[0, 0, "h2d", 0.0, 1.0], [0, 0, "kernel", 1.0, 2.0], [1, 1, "d2h", 2.0, 4.0]]
    lines = timeline_lines(timeline, streams=2, width=8)
    assert lines[0] == "stream 0  |HHKK    |"
    assert lines[1] == "stream 1  |    DDDD|"
    assert lines[2].rstrip().endswith("4.0000ms")


def test_mode_labels_name_the_stream_count():
    assert mode_labels(8) == {
        "serial": "pinned, 1 stream",
        "overlapped": "pinned, 8 streams",
        "pageable": "pageable, 8 streams",
    }


def test_reference_is_float32_arithmetic_without_fusion():
    import numpy as np

    values = np.array([0.0, 1.0, 0.5], dtype=np.float32)
    once = reference(values, 1)
    assert once.dtype == np.float32
    assert once[1] == np.float32(np.float32(1.0) * np.float32(0.999)) + np.float32(0.001)
    assert reference(values, 0).tolist() == values.tolist()
    with pytest.raises(TypeError):
        reference(values, None)


@pytest.mark.parametrize(("power", "streams", "refused"), [(3, 5, True), (3, 4, False)])
def test_a_saved_run_of_more_streams_than_chunks_is_refused(power, streams, refused):
    """memprof refuses to run `--power 3 --streams 5` (4 chunks of 2): a file saying so
    would print 'pinned, 5 streams' over 4 chunks."""
    import dataclasses

    from memprof.experiments import experiment_class, load_summarized
    from memprof.model.schema import SchemaError
    from tests.conftest import FIXTURES

    result, _ = load_summarized(FIXTURES / "h200_streams.json")
    result.parameters = dataclasses.replace(result.parameters, power=power, streams=streams)
    check = experiment_class("streams")().check_consistency
    if not refused:
        check(result)
        return
    with pytest.raises(SchemaError) as caught:
        check(result)
    assert str(caught.value) == (
        "parameters.streams is 5: 2^3 floats cut into chunks of 2 make 4, not 5"
    )


def test_an_operation_too_short_for_a_column_still_shows_in_one():
    """An instant (end = start, which check_timeline accepts) takes the column it starts in;
    one at the very end takes the last column, never one past it."""
    timeline = [[0, 0, "h2d", 0.0, 4.0], [1, 0, "kernel", 2.0, 2.0], [1, 0, "d2h", 4.0, 4.0]]
    lines = timeline_lines(timeline, streams=2, width=8)
    assert lines[:2] == ["stream 0  |HHHHHHHH|", "stream 1  |    K  D|"]


def test_verify_names_the_first_element_never_copied_back():
    import numpy as np

    from memprof.experiments.streams import _verify

    values = np.arange(8, dtype=np.float32)
    received = reference(values, 3)
    received[[5, 6]] = np.nan  # the poison left where no chunk came back
    check = _verify(received, values, 3, "pinned, 4 streams")
    assert (check.name, check.passed, check.elements, check.detail) == (
        "pinned, 4 streams",
        False,
        8,
        "element 5 was never copied back",
    )


@pytest.mark.parametrize(("elements", "checked"), [(5000, 4096), (100, 100)])
def test_verify_checks_a_sample_from_the_first_element_to_the_last(elements, checked):
    """At most SAMPLE_ELEMENTS (4096) compared exactly, the first and the last among them."""
    import numpy as np

    from memprof.experiments.streams import _verify

    values = np.random.default_rng(1).random(elements, dtype=np.float32)
    received = reference(values, 2)
    check = _verify(received, values, 2, "pinned, 1 stream")
    assert (check.name, check.passed, check.elements, check.detail) == (
        "pinned, 1 stream",
        True,
        elements,
        f"Check result success! (all written; {checked} elements checked exactly)",
    )
    for wrong in (0, elements - 1):
        bad = received.copy()
        bad[wrong] += np.float32(1.0)
        failed = _verify(bad, values, 2, "pinned, 1 stream")
        assert (failed.name, failed.passed) == ("pinned, 1 stream", False), wrong
        # the element named is the array's, not its place in the sample (the last one was
        # named 4095 of 5000)
        assert failed.detail == (
            f"Arrays do not match! 1 of {checked} sampled elements differ; first at index "
            f"{wrong}: host {received[wrong]}, gpu {bad[wrong]}"
        )


@pytest.mark.parametrize(("power", "streams", "refused"), [(3, 5, True), (3, 4, False)])
def test_more_streams_than_the_cut_makes_chunks_are_refused_before_the_gpu(power, streams, refused):
    from memprof.errors import InvalidArgument
    from memprof.experiments.streams import Streams, StreamsParams

    params = StreamsParams(power=power, streams=streams)
    if not refused:
        assert Streams().read_inputs(params) is None
        return
    with pytest.raises(InvalidArgument) as caught:
        Streams().read_inputs(params)
    assert str(caught.value) == (
        "--streams 5: 2^3 floats cut into chunks of 2 make 4, not 5: give a larger --power or "
        "fewer --streams"
    )


@pytest.mark.parametrize(
    ("power", "streams", "chunk_bytes"),
    [(4, 6, [4, 12]), (4, 3, [16, 24]), (4, 4, [16]), (10, 3, [1360, 1368]), (5, 7, [8, 20])],
)
def test_the_stage_measures_sizes_are_each_chunk_size_in_bytes_once(power, streams, chunk_bytes):
    """16 floats for 6 streams: five chunks of 3 and one of 1; smallest first."""
    from memprof.experiments.streams import StreamsParams

    assert StreamsParams(power=power, streams=streams).chunk_bytes == chunk_bytes
