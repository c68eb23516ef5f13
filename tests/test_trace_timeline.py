"""A trace's timeline: kept in the Result (memprof.model.timeline), written as Chrome trace
JSON by `memprof trace --timeline` and `memprof report --timeline` (memprof.output.timeline),
its events as long as the profile's, each GPU operation on its stream, each call on its
thread with its line; on the fake CUPTI (tests/fake_cupti.py), whose records say where each
operation ran."""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprof.cli import app
from memprof.errors import ExitCode
from memprof.experiments import load as load_result
from memprof.experiments import trace as trace_summary
from memprof.experiments.trace import dominant, time_verdict
from memprof.model.timeline import (
    Breakdown,
    Covered,
    Timeline,
    bin_ns,
    breakdown,
    merged,
    over_time,
)
from memprof.output import files
from memprof.output.timeline import GPU_PID_BASE, HOST_PID
from tests.test_trace_lines import fake_gpu, line_of  # noqa: F401  (a fixture)

runner = CliRunner()
FIXTURES = Path(__file__).parent / "fixtures"

PROGRAM = """\
from fake_gpu_library import gpu

for _ in range(3):
    gpu.to_device(1 << 20)  # line: upload
gpu.launch()
gpu.cupti.kernel("reduceOther", 5_000, stream=9)
gpu.synchronize()  # line: wait
gpu.to_host(4096)  # line: download
"""


def run(*arguments: object):
    return runner.invoke(app, [*map(str, arguments)])


@pytest.fixture
def traced(fake_gpu, tmp_path):  # noqa: F811
    """The program traced with --json and --timeline: (script, result path, timeline)."""
    script = tmp_path / "main.py"
    script.write_text(PROGRAM)
    saved, drawn = tmp_path / "run.json", tmp_path / "timeline.json"
    ran = run("trace", "--bandwidth", "none", "--json", saved, "--timeline", drawn, script)
    assert ran.exit_code == 0, ran.output
    return script, saved, json.loads(drawn.read_text())


def complete(document: dict) -> list[dict]:
    return [event for event in document["traceEvents"] if event["ph"] == "X"]


def test_every_event_has_what_chrome_trace_needs(traced):
    _, _, document = traced
    for event in document["traceEvents"]:
        assert {"name", "ph", "ts", "dur", "pid", "tid"} <= event.keys(), event
        assert event["ph"] in ("X", "M")
        assert event["dur"] >= 0 and event["ts"] >= 0
    names = {
        (e["pid"], e["tid"], e["name"]): e["args"]
        for e in document["traceEvents"]
        if e["ph"] == "M"
    }
    assert names[HOST_PID, 0, "process_name"]["name"].startswith("host: ")
    assert names[GPU_PID_BASE, 0, "process_name"] == {"name": "GPU 0 (Fake GPU)"}
    assert names[GPU_PID_BASE, 9, "thread_name"] == {"name": "stream 9"}


def test_gpu_work_is_on_its_stream_and_calls_on_their_thread(traced):
    _, _, document = traced
    events = complete(document)
    gpu = [e for e in events if e["cat"] != "api"]
    assert {(e["name"], e["pid"], e["tid"]) for e in gpu if e["cat"] == "kernel"} == {
        ("sumArrays", GPU_PID_BASE, 7),
        ("reduceOther", GPU_PID_BASE, 9),
    }
    copies = [e for e in gpu if e["cat"] == "memcpy"]
    assert len(copies) == 4 and {e["tid"] for e in copies} == {7}
    assert {e["pid"] for e in events if e["cat"] == "api"} == {HOST_PID}
    # the thread that made the calls: this one (CUPTI calls back on the caller's thread)
    assert {e["tid"] for e in events if e["cat"] == "api"} == {threading.get_native_id()}


def assert_durations_are_the_profiles(document: dict, result) -> None:
    """Each profile row's samples are its events' durations, one for one."""
    drawn: dict[tuple[str, str], list[float]] = {}
    for event in complete(document):
        group = "api" if event["cat"] == "api" else "gpu"
        drawn.setdefault((group, event["name"]), []).append(event["dur"] / 1e3)  # us -> ms
    measured: dict[tuple[str, str], list[float]] = {}
    for m in result.measurements:
        measured.setdefault((m.group, m.name), []).extend(m.samples_ms)
    assert drawn.keys() == measured.keys()
    for key, samples in measured.items():
        assert len(drawn[key]) == len(samples), key
        assert all(map(math.isclose, sorted(drawn[key]), sorted(samples))), key


def test_durations_are_the_profiles(traced):
    _, saved, document = traced
    assert_durations_are_the_profiles(document, load_result(saved))


def test_each_call_and_copy_carries_its_line(traced):
    script, _, document = traced
    events = complete(document)
    upload = f"main.py:{line_of(script, 'line: upload')}"
    download = f"main.py:{line_of(script, 'line: download')}"
    wait = f"main.py:{line_of(script, 'line: wait')}"
    by_line: dict[str, set[str]] = {}
    for event in events:
        if "line" in event["args"]:
            by_line.setdefault(event["args"]["line"], set()).add(event["name"])
    assert by_line[upload] == {
        "cudaMemcpyAsync",
        "cuMemcpyAsync",
        "[CUDA memcpy HtoD] pageable -> device",
    }
    assert by_line[download] == {"cuMemcpyDtoH_v2", "[CUDA memcpy DtoH] device -> pageable"}
    assert by_line[wait] == {"cudaStreamSynchronize_v3020"}
    kernels = [e for e in events if e["cat"] == "kernel"]
    assert all("line" not in e["args"] for e in kernels)  # launches take no stack
    copies = [e for e in events if e["cat"] == "memcpy"]
    assert sorted(e["args"]["bytes"] for e in copies) == [4096] + [1 << 20] * 3


def test_report_draws_the_saved_trace_as_the_trace_did(traced, tmp_path):
    _, saved, document = traced
    again = tmp_path / "again.json"
    ran = run("report", saved, "--timeline", again, "--quiet")
    assert ran.exit_code == 0, ran.output
    assert json.loads(again.read_text()) == document


def test_the_timeline_is_written_by_temporary_file_and_rename(traced, tmp_path, monkeypatch):
    _, saved, _ = traced
    target = tmp_path / "drawn.json"
    target.write_text("the previous timeline\n")
    replaced = []
    real_replace = files.os.replace
    monkeypatch.setattr(files.os, "replace", lambda a, b: replaced.append(b) or real_replace(a, b))
    assert run("report", saved, "--timeline", target, "--quiet").exit_code == 0
    assert replaced == [target]


def test_a_timeline_never_goes_over_an_input(fake_gpu, tmp_path):  # noqa: F811
    script = tmp_path / "main.py"
    script.write_text(PROGRAM)
    ran = run("trace", "--bandwidth", "none", "--timeline", script, script)
    assert ran.exit_code == ExitCode.USAGE, ran.output
    assert script.read_text() == PROGRAM and fake_gpu.correlation == 5000  # nothing ran
    saved = tmp_path / "run.json"
    assert run("trace", "--bandwidth", "none", "--json", saved, script).exit_code == 0
    before = saved.read_text()
    ran = run("report", saved, "--timeline", saved)
    assert ran.exit_code == ExitCode.USAGE and saved.read_text() == before
    ran = run("report", saved, "--timeline", tmp_path / "t.json", "--json", tmp_path / "t.json")
    assert ran.exit_code == ExitCode.USAGE


def test_a_trace_saved_without_times_says_so_in_one_line(tmp_path):
    drawn = tmp_path / "t.json"
    ran = run("report", FIXTURES / "legacy_v2_trace_pycuda.json", "--timeline", drawn)
    assert ran.exit_code == ExitCode.USAGE
    assert "saved before memprof kept each event's time" in ran.output
    assert len(ran.output.strip().splitlines()) == 1 and not drawn.exists()
    ran = run("report", FIXTURES / "h200_pinned_p20.json", "--timeline", drawn)
    assert ran.exit_code == ExitCode.USAGE and "only `memprof trace` records one" in ran.output
    assert not drawn.exists()


def saved_trace(traced) -> dict:
    return json.loads(traced[1].read_text())


def refusal(data: dict, tmp_path: Path) -> str:
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(data))
    ran = run("report", path)
    assert ran.exit_code == ExitCode.USAGE, ran.output
    return " ".join(ran.output.split())


def test_a_timeline_whose_durations_are_not_the_profiles_is_refused(traced, tmp_path):
    data = saved_trace(traced)
    row = data["extra"]["timeline"]["gpu"][0]
    row[3] += 1
    assert "the profile measured" in refusal(data, tmp_path)


def test_a_timeline_missing_an_event_is_refused(traced, tmp_path):
    data = saved_trace(traced)
    data["extra"]["timeline"]["api"].pop()
    assert "the profile measured" in refusal(data, tmp_path)


def test_a_timeline_naming_a_line_or_name_that_is_not_there_is_refused(traced, tmp_path):
    data = saved_trace(traced)
    data["extra"]["timeline"]["api"][0][4] = len(data["extra"]["lines"])
    assert "names line" in refusal(data, tmp_path)
    data = saved_trace(traced)
    data["extra"]["timeline"]["gpu"][0][1] = len(data["extra"]["timeline"]["names"])
    assert "names" in refusal(data, tmp_path)
    data = saved_trace(traced)
    data["extra"]["timeline"]["version"] = 2
    assert "timeline.version" in refusal(data, tmp_path)


TRACE_FIXTURES = sorted(FIXTURES.glob("h200_trace_*.json")) + sorted(
    (FIXTURES / "traces").glob("h200_trace_*.json")
)


@pytest.mark.parametrize("path", TRACE_FIXTURES, ids=lambda p: p.name)
def test_a_recorded_traces_timeline_is_its_profile(path, tmp_path):
    """Over the GPU's own recordings, once they are recorded with timelines (until then
    each skips, saying how to record it)."""
    if "timeline" not in json.loads(path.read_text())["extra"]:
        pytest.skip(f"{path.name} was recorded before timelines: tools/record_fixtures.sh")
    drawn = tmp_path / "t.json"
    ran = run("report", path, "--timeline", drawn, "--quiet")
    assert ran.exit_code == 0, ran.output
    document = json.loads(drawn.read_text())
    assert_durations_are_the_profiles(document, load_result(path))
    streams = {(e["pid"], e["tid"]) for e in document["traceEvents"] if e["name"] == "thread_name"}
    gpu = [e for e in complete(document) if e["cat"] != "api"]
    assert gpu and all((e["pid"], e["tid"]) in streams and e["pid"] >= GPU_PID_BASE for e in gpu)


def test_a_timeline_is_drawn_from_one_trace_at_a_time(traced, tmp_path):
    _, saved, _ = traced
    drawn, other = tmp_path / "t.json", tmp_path / "other.json"
    other.write_bytes(Path(saved).read_bytes())  # a second trace (one file twice is refused)
    ran = run("report", saved, other, "--timeline", drawn)
    assert ran.exit_code == ExitCode.USAGE and "--timeline saves one result" in ran.output
    assert not drawn.exists()


# -- where the time went ---------------------------------------------------------------------


def timeline_of(gpu: list[tuple], api: list[tuple] = ()) -> Timeline:
    """gpu: (category, start_ns, end_ns, device, stream); api: (start_ns, end_ns, line)."""
    return Timeline(
        1,
        0,
        ["k", "call"],
        [
            (c, 0, start, end - start, device, stream, 0, -1)
            for c, start, end, device, stream in gpu
        ],
        [(1, start, end - start, 1, line) for start, end, line in api],
    )


def test_the_run_splits_into_computing_copying_both_and_idle_per_gpu():
    timeline = timeline_of(
        [
            (0, 0, 10, 0, 7),  # a kernel
            (0, 5, 12, 0, 9),  # another, on another stream: its streams are merged
            (1, 8, 20, 0, 7),  # a copy, partly under them
            (2, 30, 35, 0, 7),  # a memset: copying
            (0, 0, 50, 1, 7),  # GPU 1 computes all along
        ]
    )
    zero, one = breakdown(timeline, 100)
    assert (zero.device, zero.computing_ns, zero.copying_ns, zero.both_ns) == (0, 8, 13, 4)
    assert zero.idle_ns == 100 - 8 - 13 - 4 and zero.wall_ns == 100
    assert (one.device, one.computing_ns, one.idle_ns) == (1, 50, 50)
    assert [(gap.start_ns, gap.duration_ns) for gap in zero.gaps] == [(20, 10)]
    assert one.gaps == []


def test_the_longest_gaps_come_first_with_the_line_the_host_was_at():
    timeline = timeline_of(
        [(0, 0, 10, 0, 7), (0, 20, 30, 0, 7), (0, 100, 110, 0, 7), (0, 115, 120, 0, 7)],
        [(2, 8, 0), (12, 18, 1), (40, 90, 2), (95, 99, 3)],
    )
    (share,) = breakdown(timeline, 200, gaps=2)
    assert [(g.start_ns, g.duration_ns, g.line, g.during) for g in share.gaps] == [
        (30, 70, 2, True),  # the call that overlapped it most, not the last one
        (10, 10, 1, True),
    ]
    # no call during the gap: the last one before it, said to be before
    (share,) = breakdown(timeline_of([(0, 0, 10, 0, 7), (0, 50, 60, 0, 7)], [(2, 8, 5)]), 100)
    assert [(g.line, g.during) for g in share.gaps] == [(5, False)]


def parts(computing: int, copying: int, both: int, idle: int) -> Breakdown:
    wall = computing + copying + both + idle
    return Breakdown(0, wall, computing, copying, both, [])


@pytest.mark.parametrize(
    ("share", "verdict", "words"),
    [
        (parts(500, 0, 0, 501), "idle", "GPU 0 sat idle 50.05% of the program's"),
        (parts(501, 0, 0, 500), "computing", "GPU 0 computed 50.05% of the program's"),
        (parts(100, 401, 0, 400), "copying", "copied, computing nothing, 44.51%"),
        (parts(100, 400, 0, 401), "idle", "sat idle 44.51%"),
        (parts(100, 300, 301, 300), "both", "copied while it computed for 30.07%"),
        (parts(100, 301, 300, 300), "copying", "copied, computing nothing, 30.07%"),
        (parts(400, 400, 0, 200), "computing", "GPU 0 computed 40.00%"),  # ties: the first
        (parts(0, 300, 300, 300), "copying", "copied, computing nothing, 33.33%"),
        (parts(100, 0, 300, 300), "both", "copied while it computed for 42.86%"),
    ],
)
def test_the_first_verdict_is_the_largest_part_on_either_side_of_a_tie(share, verdict, words):
    assert dominant(share) == verdict
    assert words in time_verdict(share)


def test_an_idle_gpu_is_said_first_with_what_the_table_shows(traced):
    _, saved, _ = traced
    result = load_result(saved)
    summary = trace_summary.summarize(result)
    table = summary.tables[0]
    assert table.title == "Where the time went" and table.headers[-1] == "Idle"
    idle = table.rows[0][-1].split()[-1]  # "18.711ms 99.03%" -> its share
    assert summary.conclusions[1].startswith(f"GPU 0 sat idle {idle} of the program's")
    (share,) = breakdown(result.extra.timeline, round(result.extra.wall_s * 1e9))
    assert idle == f"{100 * share.idle_ns / share.wall_ns:.2f}%"
    gaps = summary.tables[1]
    wait = f"main.py:{line_of(traced[0], 'line: wait')} (wait)"
    assert gaps.title == "Longest idle gaps" and gaps.rows[0][-1] == wait


def test_a_trace_saved_without_a_timeline_says_nothing_of_where_the_time_went():
    result = load_result(FIXTURES / "legacy_v2_trace_pycuda.json")
    summary = trace_summary.summarize(result)
    assert all("time went" not in table.title for table in summary.tables)
    assert not any(line.startswith("GPU ") for line in summary.conclusions)


def test_the_time_tables_fit_80_columns(traced):
    _, saved, _ = traced
    ran = runner.invoke(app, ["report", str(saved)], env={"COLUMNS": "80"})
    assert ran.exit_code == 0
    shown = ran.output[ran.output.index("Where the time went") : ran.output.index("Copies by")]
    assert "Longest idle gaps" in shown and max(map(len, shown.splitlines())) <= 80
    verdict = ran.output[ran.output.index("GPU 0 sat idle") :].split("\n\n")[0]
    assert max(map(len, verdict.splitlines())) <= 80


# -- the run over time (memprof plot) ------------------------------------------------------------


def test_a_window_of_intervals_covers_what_clipping_each_one_does():
    """Covered.within bisects and differences running totals; clipping each interval to
    the window and adding up is the plain rule it must agree with, at every edge."""
    import random

    rng = random.Random(38)
    for _ in range(200):
        intervals = []
        for _ in range(rng.randrange(0, 8)):
            start = rng.randrange(0, 60)
            intervals.append((start, start + rng.randrange(0, 15)))
        covered = Covered(intervals)
        union = merged(intervals)
        for lo in range(-1, 80, 3):
            for hi in range(lo, 82, 4):
                plain = sum(max(0, min(e, hi) - max(s, lo)) for s, e in union)
                assert covered.within(lo, hi) == plain, (intervals, lo, hi)
        assert covered.within() == sum(e - s for s, e in union)


def test_the_bins_add_up_to_the_breakdown_exactly():
    timeline = timeline_of(
        [(0, 0, 10, 0, 7), (0, 5, 12, 0, 9), (1, 8, 20, 0, 7), (2, 30, 35, 0, 7),
         (0, 0, 50, 1, 7)],
        [(40, 61, -1)],
    )  # fmt: skip
    shares = breakdown(timeline, 100)
    binned = over_time(timeline, at_most=4)  # 61 ns in bins of 20: the last one 1 ns
    assert [b.device for b in binned] == [0, 1] and binned[0].bin_ns == 20
    assert [b.width_ns(k) for b in binned[:1] for k in range(4)] == [20, 20, 20, 1]
    assert binned[0].parts == [(8, 8, 4), (0, 5, 0), (0, 0, 0), (0, 0, 0)]
    for share, bins in zip(shares, binned, strict=True):
        parts = (share.computing_ns, share.copying_ns, share.both_ns)
        assert tuple(sum(p[i] for p in bins.parts) for i in range(3)) == parts
        idle = sum(bins.idle_ns(k) for k in range(len(bins.parts)))
        assert share.idle_ns - idle == share.wall_ns - bins.end_ns == 100 - 61


@pytest.mark.parametrize(
    ("span_ns", "width_ns"),
    [(0, 1), (100, 1), (101, 2), (200, 2), (201, 5), (500, 5), (501, 10),
     (9_801_253_132, 100_000_000), (10_000_000_000, 100_000_000),
     (10_000_000_001, 200_000_000), (50_000_000, 500_000), (4_973_523_937, 50_000_000)],
)  # fmt: skip
def test_the_bin_is_the_shortest_round_one_that_makes_a_hundred_at_most(span_ns, width_ns):
    """A 9.8 s run in bins of 100 ms, a 50 ms one in bins of 500 us: each about 100."""
    assert bin_ns(span_ns) == width_ns
    assert -(-span_ns // width_ns) <= 100


def test_the_time_tables_cells_are_each_gpus_parts_and_gaps(monkeypatch):
    """Each cell whole, for two GPUs numbered neither 0 nor alike: the GPU's number, each
    part in ms (1.000051 ms, where a millionth less says 1.0000ms) and its share of its own
    run, each gap's start, length and line, and both tables' notes."""
    from types import SimpleNamespace

    from memprof.model.timeline import NO_LINE, Gap

    gap = Gap(2_500_000, 1_250_000, NO_LINE, False)
    shares = [
        Breakdown(1, 4_000_000, 1_000_051, 1_000_000, 500_000, [gap]),
        Breakdown(3, 2_000_000, 0, 500_000, 0, []),
    ]
    monkeypatch.setattr(trace_summary, "breakdown_of", lambda result: shares)
    result = SimpleNamespace(extra=SimpleNamespace(lines=[]))
    (parts_table, gaps_table), verdicts = trace_summary.time_tables(result)
    assert parts_table.title == "Where the time went"
    assert parts_table.headers == ["GPU", "Computing", "Copying", "Both", "Idle"]
    assert parts_table.rows == [
        ["1", "1.0001ms 25.00%", "1.0000ms 25.00%", "500.00us 12.50%", "1.4999ms 37.50%"],
        ["3", "0ns 0.00%", "500.00us 25.00%", "0ns 0.00%", "1.5000ms 75.00%"],
    ]
    assert parts_table.notes == [trace_summary.BREAKDOWN_NOTE]
    assert gaps_table.title == "Longest idle gaps"
    assert gaps_table.headers == ["GPU", "At", "Idle for", "Host at"]
    assert gaps_table.rows == [["1", "2.5000ms", "1.2500ms", "(no recorded call)"]]
    assert gaps_table.notes == [trace_summary.GAPS_NOTE]
    assert verdicts == [time_verdict(share) for share in shares]
