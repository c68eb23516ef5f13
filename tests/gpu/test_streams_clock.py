"""On the GPU: `memprof streams` times through the measuring core, each timeline on one clock.

Each timing mode runs in a process of its own (the command line, --json), as a user runs it:
CUPTI stays enabled in a process once started, and the events run must not pay for it.
Run with -s to see the comparison of CUPTI's records with the events beside them.
"""

from __future__ import annotations

import itertools
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from memprof.experiments import load
from memprof.experiments.streams import MODES, mode_labels, stage_sums

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
STREAMS = 4
ARGUMENTS = ["--power", "24", "--streams", str(STREAMS), "--repeat", "5", "--warmup", "1"]
TOUCHING_MS = 0.001  # one operation may start within 1 us of the previous one's end


def streams_run(timing: str, folder: Path):
    path = folder / f"streams_{timing}.json"
    ran = subprocess.run(
        [sys.executable, "-m", "memprof", "streams", *ARGUMENTS, "--timing", timing,
         "--json", str(path)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
        env=dict(os.environ, COLUMNS="80"),
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    return load(path), ran.stdout


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("streams")
    return {timing: streams_run(timing, folder) for timing in ("cupti", "events")}


def rows(result, mode: str) -> list[tuple]:
    return [tuple(row) for row in getattr(result.extra.timelines, mode)]


def overlap_ms(a: tuple, b: tuple) -> float:
    return max(0.0, min(a[4], b[4]) - max(a[3], b[3]))


@pytest.mark.parametrize("timing", ["cupti", "events"])
def test_every_mode_verifies_and_every_chunk_is_placed_from_zero(runs, timing):
    result, _ = runs[timing]
    assert result.passed and len(result.checks) == 3
    expected = {"cupti": "cupti", "events": "gated events"}[timing]
    assert result.extra.timeline_source == expected
    for mode in MODES:
        timeline = rows(result, mode)
        assert len(timeline) == 3 * STREAMS
        assert {row[0] for row in timeline} == ({0} if mode == "serial" else set(range(STREAMS)))
        assert min(row[3] for row in timeline) == 0.0
        assert all(0 <= row[3] <= row[4] for row in timeline)
    gpu = [m for m in result.measurements if m.group in ("gpu", "span")]
    assert {m.source for m in gpu} == {"cupti" if timing == "cupti" else "events"}
    if timing == "cupti":  # the gated events beside every record, as a check
        assert all(len(m.events_ms) == len(m.samples_ms) for m in gpu if m.group == "gpu")


@pytest.mark.parametrize("timing", ["cupti", "events"])
def test_one_stream_runs_one_operation_at_a_time(runs, timing):
    result, _ = runs[timing]
    timeline = sorted(rows(result, "serial"), key=lambda row: row[3])
    for before, after in itertools.pairwise(timeline):
        assert after[3] >= before[4] - TOUCHING_MS, (before, after)


def test_cupti_shows_copies_running_under_kernels_on_other_streams(runs):
    result, _ = runs["cupti"]
    timeline = rows(result, "overlapped")
    overlapped = [
        overlap_ms(a, b)
        for a in timeline
        for b in timeline
        if a[0] < b[0] and a[2] != b[2]  # different streams, different engines
    ]
    longest_copy = max(row[4] - row[3] for row in timeline if row[2] == "h2d")
    assert max(overlapped) > 0.5 * longest_copy  # real concurrency, not a touching edge
    labels = mode_labels(STREAMS)
    totals = {m.kind: m.stats.median_ms for m in result.measurements if m.operation == "total"}
    assert totals[labels["overlapped"]] < 0.8 * totals[labels["serial"]]


def test_cupti_and_events_agree_on_one_stream(runs):
    """One stream, one engine at a time: the engine correction is exact there, so the
    events beside CUPTI's records time the same operation: never shorter (beyond 3% of
    noise), and longer only by what an event pair adds (3-4%, 9-11 us at 0.3 ms on the
    H200s). How close they come is benchmarks/fidelity.py's to judge, not a test's."""
    result, _ = runs["cupti"]
    label = mode_labels(STREAMS)["serial"]
    print()
    for m in result.measurements:
        if m.group != "gpu" or m.operation == "driver_call":
            continue
        cupti, events = statistics.median(m.samples_ms), statistics.median(m.events_ms)
        print(f"{m.kind:20} {m.operation:7} CUPTI {cupti:.4f} ms  events {events:.4f} ms  "
              f"{events / cupti - 1:+.1%}")  # fmt: skip
        if m.kind == label:
            assert 0.97 * cupti <= events <= 1.10 * cupti + 0.005


def test_the_two_timings_agree_on_the_totals(runs):
    """Each run calibrates its kernel on its own (the iterations differ from run to run), so
    the two runs' totals are not the same work. What each timing must get right: a serial
    run's total is the sum of its stages (one stream, back to back), and the share overlap
    saves is the same whichever clock timed it."""
    labels = mode_labels(STREAMS)
    totals, stages = {}, {}
    print()
    for timing, (result, _) in runs.items():
        totals[timing] = {
            m.kind: m.stats.median_ms for m in result.measurements if m.operation == "total"
        }
        stages[timing] = sum(s.median_ms for s in stage_sums(result, "serial").values())
        serial = totals[timing][labels["serial"]]
        print(f"{timing:6} iterations {result.extra.iterations}: serial total {serial:.4f} ms, "
              f"its stages {stages[timing]:.4f} ms")  # fmt: skip
        assert serial == pytest.approx(stages[timing], rel=0.10)
    saved = {
        timing: totals[timing][labels["overlapped"]] / totals[timing][labels["serial"]]
        for timing in totals
    }
    print(f"overlapped / serial: CUPTI {saved['cupti']:.3f}  events {saved['events']:.3f}")
    assert saved["events"] == pytest.approx(saved["cupti"], rel=0.10)


@pytest.mark.parametrize("timing", ["cupti", "events"])
def test_the_output_fits_80_columns_and_names_its_source(runs, timing):
    _, stdout = runs[timing]
    timeline_lines = [line for line in stdout.splitlines() if line.startswith("stream ")]
    assert timeline_lines and all(len(line) <= 80 for line in timeline_lines)
    footnote = {"cupti": "GPU activities are CUPTI's records", "events": "Timing: CUDA events"}
    assert footnote[timing] in " ".join(stdout.split())
