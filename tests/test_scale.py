"""A large result loads and renders in time proportional to its size.

Without a timed assertion (timings live in benchmarks/startup.py): the work is counted
as lines of Python run (a loop's every turn included) to load, check, summarize and render
a trace of 1,000 and of 8,000 measurements (tests/large_result.py: a recorded trace's copies
at distinct sizes). Linear work grows 8x; a pass over every measurement per measurement
(Result.find per row, a check comparing every copy with every other) grows 64x.
"""

from __future__ import annotations

import io
import json
import sys

import pytest
from rich.console import Console

from memprof.errors import InvalidArgument
from memprof.experiments import parse, summarize
from memprof.output.render import render_result
from tests.large_result import large_trace

SMALL, LARGE = 1_000, 8_000


def lines_run(text: str) -> int:
    """Lines of Python run to load a result from JSON text and render it."""
    count = [0]

    def tracer(frame, event, arg):
        if event == "line":
            count[0] += 1
        return tracer

    console = Console(file=io.StringIO(), width=120, color_system=None)
    before = sys.gettrace()  # a coverage or mutation tool's, kept for the tests after this
    sys.settrace(tracer)
    try:
        result = parse(text, "large.json")
        render_result(result, summarize(result), console)
    finally:
        sys.settrace(before)
    return count[0]


def test_a_large_result_is_what_memprof_trace_writes():
    text = large_trace(SMALL)
    document = json.loads(text)
    assert len(document["measurements"]) == SMALL
    copies = [m for m in document["measurements"] if m["name"].startswith("[CUDA memcpy ")]
    assert len({(m["name"], m["bytes"]) for m in copies}) == len(copies)  # distinct sizes
    assert sum(group["calls"] for group in document["extra"]["copies"]) == len(copies)
    parse(text, "large.json")  # every check passes: structurally real


def test_loading_and_rendering_grow_linearly_with_the_measurements():
    small, large = lines_run(large_trace(SMALL)), lines_run(large_trace(LARGE))
    growth = large / small
    assert growth < 1.5 * LARGE / SMALL, f"{small} lines for {SMALL}, {large} for {LARGE}"


def test_a_file_is_read_with_the_cycle_collector_paused_then_restored(monkeypatch):
    """Each collection during a decode walks every object made so far (a 100,000-measurement
    trace's decode: 270 ms with the collector, 130 ms without); a refused file restores it too."""
    import gc

    from memprof.model import results
    from memprof.model.schema import SchemaError

    seen: list[bool] = []

    def check_values(result):
        seen.append(gc.isenabled())
        if len(seen) == 2:
            raise SchemaError("created_at", "is refused here")

    text = large_trace(SMALL)  # itself loads a recorded trace
    monkeypatch.setattr(results, "_check_values", check_values)
    parse(text, "large.json")
    with pytest.raises(InvalidArgument, match=r"large\.json: created_at is refused here"):
        parse(text, "large.json")
    assert seen == [False, False]
    assert gc.isenabled()
    gc.disable()  # a caller's choice is kept
    try:
        parse(text, "large.json")
        assert not gc.isenabled()
    finally:
        gc.enable()
