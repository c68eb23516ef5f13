"""The lines of a traced program, without a GPU: `memprof trace` end to end on the fake CUPTI
(tests/fake_cupti.py: its callbacks, its records, the same correlation ids), the Where tables
and the advice that names a line, saved lines checked on load, `diff` of a line that got
slower, the CSV rows, and old traces without lines.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import types
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprof.cli import app
from memprof.core import api_callbacks
from memprof.core.activity import ApiRecord, GpuRecord
from memprof.errors import InvalidArgument
from memprof.experiments import load as load_result
from memprof.experiments import parse as parse_result
from memprof.experiments import trace as summary
from memprof.model.lines import CallChain, Frame, SourceLine
from memprof.model.schema import SchemaError
from memprof.output.diff import CHANGE_NOTE, compare
from memprof.output.where import where_rows
from memprof.trace import collect as tracing
from memprof.trace import stacks as stacks_module
from memprof.trace.collect import Outcome, Program, Recording, trace_result
from tests.conftest import FIXTURES, render_text
from tests.fake_cupti import FakeCupti
from tests.fake_library import FakeLibrary

runner = CliRunner()
KiB, MiB = 1 << 10, 1 << 20


def diff(first, second, *options, **named):
    """What `memprof diff` shows of two runs."""
    return compare(first, second, *options, **named).summary


# -- memprof trace on the fake CUPTI ---------------------------------------------------------


@pytest.fixture
def fake_gpu(monkeypatch, tmp_path):
    """CUPTI and the driver replaced by tests/fake_cupti.py (this folder a library's, as
    torch's is); the program's modules forgotten afterwards."""
    cupti = FakeCupti()
    module = types.ModuleType("cupti")
    module.cupti = cupti
    monkeypatch.setitem(sys.modules, "cupti", module)
    monkeypatch.setattr(tracing, "_cuda_init", lambda: 1)
    connect = api_callbacks.connect  # the fake's libcupti, as this process's
    monkeypatch.setattr(api_callbacks, "connect", lambda library=None: connect(cupti.library))
    # memprof's own wait for the program's work (its code is memprof's): never a line
    made = {"cupti": cupti}
    exec(
        compile("def sync():\n    cupti.call('cuCtxSynchronize')\n", tracing.__file__, "exec"), made
    )
    monkeypatch.setattr(tracing, "_synchronize_current_context", made["sync"])
    monkeypatch.setattr(tracing, "device_identity", lambda index: ("Fake GPU", "1.0"))
    named = (*stacks_module.LIBRARY_PACKAGES, "tests")
    monkeypatch.setattr(stacks_module, "LIBRARY_PACKAGES", named)
    skipped = (*stacks_module.SKIPPED_PACKAGES, "tests.fake_cupti")  # the driver's: C, no frames
    monkeypatch.setattr(stacks_module, "SKIPPED_PACKAGES", skipped)
    library = types.ModuleType("fake_gpu_library")
    library.gpu = FakeLibrary(cupti)
    monkeypatch.setitem(sys.modules, "fake_gpu_library", library)
    modules = set(sys.modules)
    yield cupti
    for name in set(sys.modules) - modules:
        del sys.modules[name]


MAIN = """\
from fake_gpu_library import gpu
import transfers_for_where as transfers

def main():
    for _ in range(3):
        transfers.upload(gpu, 1 << 20)  # caller: first
    for _ in range(2):
        transfers.upload(gpu, 1 << 20)  # caller: second
    for _ in range(4):
        gpu.to_device(4096, pinned=True)  # line: direct
    for _ in range(2):
        transfers.download(gpu, 2048)
    gpu.launch()
    for _ in range(3):
        gpu.synchronize()  # line: wait

main()  # caller: module
"""
TRANSFERS = """\
def upload(gpu, nbytes):
    return gpu.to_device(nbytes)  # line: upload

def download(gpu, nbytes):
    return gpu.to_host(nbytes)  # line: download
"""


def two_files(folder: Path) -> Path:
    """A program of two files whose copies come from three lines."""
    (folder / "transfers_for_where.py").write_text(TRANSFERS)
    script = folder / "main.py"
    script.write_text(MAIN)
    return script


def line_of(path: Path, marker: str) -> int:
    (number,) = [n for n, text in enumerate(path.read_text().splitlines(), 1) if marker in text]
    return number


def run_trace(*arguments: object):
    return runner.invoke(app, ["trace", "--bandwidth", "none", *map(str, arguments)])


def test_two_files_whose_copies_come_from_three_lines_show_those_three(fake_gpu, tmp_path):
    script = two_files(tmp_path)
    saved = tmp_path / "trace.json"
    ran = run_trace("--json", saved, script)
    assert ran.exit_code == 0, ran.output
    result = load_result(saved)
    transfers = tmp_path / "transfers_for_where.py"
    copies = {
        (line.file, line.line): line.calls
        for line in result.extra.lines
        if line.activity not in ("wait", "alloc", "free", "memset")
    }
    assert copies == {
        ("transfers_for_where.py", line_of(transfers, "line: upload")): 5,
        ("transfers_for_where.py", line_of(transfers, "line: download")): 2,
        ("main.py", line_of(script, "line: direct")): 4,
    }
    (upload,) = [line for line in result.extra.lines if line.activity == "HtoD pageable -> device"]
    assert upload.function == "upload" and upload.origin == "program"
    assert [(chain.calls, chain.frames[0].line) for chain in upload.chains] == [
        (3, line_of(script, "caller: first")),
        (2, line_of(script, "caller: second")),
    ]
    assert upload.chains[0].frames[1] == Frame(
        "main.py", line_of(script, "caller: module"), "<module>"
    )
    (waits,) = [line for line in result.extra.lines if line.activity == "wait"]
    assert (waits.line, waits.calls) == (line_of(script, "line: wait"), 3)  # memprof's own: not
    assert result.parameters.stack_depth == 5 and result.extra.lines_note is None
    text = " ".join(ran.stderr.split())
    assert f"transfers_for_where.py:{line_of(transfers, 'line: upload')} 5 5 MiB" in text
    assert "Where: copies HtoD pageable -> device" in text
    assert fake_gpu.subscriber is None  # unsubscribed once the program ended


def test_stacks_show_each_lines_callers(fake_gpu, tmp_path):
    script = two_files(tmp_path)
    ran = run_trace("--stacks", script)
    assert ran.exit_code == 0, ran.output
    assert f"← main.py:{line_of(script, 'caller: first')} main" in ran.stderr
    assert "← main.py" not in run_trace(script).stderr


def test_stack_depth_zero_walks_no_stack_and_says_so(fake_gpu, tmp_path):
    saved = tmp_path / "trace.json"
    ran = run_trace("--stack-depth", 0, "--json", saved, two_files(tmp_path))
    assert ran.exit_code == 0, ran.output
    assert fake_gpu.subscribed == 1  # the calls' host times are still taken
    assert "Source lines: not recorded (--stack-depth 0)." in ran.stderr
    assert "Where:" not in ran.stderr
    result = load_result(saved)
    assert result.extra.lines is None and result.parameters.stack_depth == 0
    assert {m.name for m in result.measurements if m.group == "api"} >= {"cuMemcpyAsync"}


def test_stack_depth_is_refused_outside_its_range(fake_gpu, tmp_path):
    ran = run_trace("--stack-depth", 65, two_files(tmp_path))
    assert ran.exit_code == 2
    assert "65 is outside the allowed range 0 to 64" in ran.output


def test_cupti_refusing_its_callbacks_leaves_the_profile_and_says_why(fake_gpu, tmp_path):
    fake_gpu.library.refuse_subscribe = 39  # CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
    ran = run_trace(two_files(tmp_path))
    assert ran.exit_code == 0, ran.output
    assert "Profiling result:" in ran.stderr
    text = " ".join(ran.stderr.split())
    assert (
        "Source lines: CUPTI refused its callbacks "
        "(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED): no call's host time or line was "
        "recorded." in text
    )


def test_a_depth_of_one_keeps_the_line_and_no_callers(fake_gpu, tmp_path):
    saved = tmp_path / "trace.json"
    assert run_trace("--stack-depth", 1, "--json", saved, two_files(tmp_path)).exit_code == 0
    assert all(line.chains == [] for line in load_result(saved).extra.lines)


# -- saved lines are checked on load --------------------------------------------------------


@pytest.fixture
def saved_trace(fake_gpu, tmp_path) -> dict:
    saved = tmp_path / "trace.json"
    assert run_trace("--json", saved, two_files(tmp_path)).exit_code == 0
    return json.loads(saved.read_text())


def refused(data: dict, tmp_path: Path) -> str:
    path = tmp_path / "tampered.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InvalidArgument) as error:
        load_result(path)
    return str(error.value)


def test_saved_lines_that_contradict_the_copies_are_refused(saved_trace, tmp_path):
    copies = next(i for i, s in enumerate(saved_trace["extra"]["lines"]) if s["bytes"] > MiB)
    data = json.loads(json.dumps(saved_trace))
    data["extra"]["lines"][copies]["bytes"] -= MiB
    data["extra"]["lines"][copies]["smallest_bytes"] = 0
    assert "extra.lines" in refused(data, tmp_path)
    data = json.loads(json.dumps(saved_trace))
    data["extra"]["lines"][copies]["gpu_ms_each"][0] *= 2
    assert "ms of HtoD pageable -> device" in refused(data, tmp_path)
    data = json.loads(json.dumps(saved_trace))
    data["extra"]["lines"].append(data["extra"]["lines"][-1])
    assert "again" in refused(data, tmp_path)
    data = json.loads(json.dumps(saved_trace))
    data["parameters"]["stack_depth"] = 2  # chains of 2 callers kept at depth 5
    assert "a stack depth of 2 keeps 1 callers" in refused(data, tmp_path)
    data = json.loads(json.dumps(saved_trace))
    data["extra"]["lines"][copies]["origin"] = "none"  # a line with a file
    assert "origin 'none'" in refused(data, tmp_path)
    data = json.loads(json.dumps(saved_trace))
    data["extra"]["lines"][copies]["activity"] = "teleport"
    assert "not an activity memprof names" in refused(data, tmp_path)


@pytest.mark.parametrize(
    ("calls", "smallest", "largest", "total", "kept"),
    [
        (1, 5, 5, 5, True),
        (1, 0, 10**15, 0, False),  # one call of no bytes claiming a 1 PB largest
        (1, 4, 6, 5, False),  # one call is its own smallest and largest
        (3, 1, 10, 12, True),  # the largest, and two of the smallest
        (3, 1, 10, 21, True),  # the smallest, and two of the largest
        (3, 1, 10, 11, False),
        (3, 1, 10, 22, False),
    ],
)
def test_a_lines_bytes_hold_its_smallest_and_its_largest_call(
    calls, smallest, largest, total, kept
):
    made = SourceLine(
        activity="HtoD pageable -> device",
        file="train.py",
        line=7,
        function="step",
        origin="program",
        calls=calls,
        api=["cuMemcpyHtoD"],
        bytes=total,
        smallest_bytes=smallest,
        largest_bytes=largest,
    )
    if kept:
        made.check_consistency()
    else:
        with pytest.raises(SchemaError, match="bytes"):
            made.check_consistency()


def test_no_call_of_a_programs_line_outlasts_the_program(tmp_path):
    """A call's host time is within the program's wall time; another thread's may go on."""
    data = json.loads((FIXTURES / "h200_trace_pycuda.json").read_text())
    wall_ms = data["extra"]["wall_s"] * 1e3
    index = next(i for i, s in enumerate(data["extra"]["lines"]) if s["host_ms_each"])

    def saved(call_ms: float, origin: str = "program") -> dict:
        edited = json.loads(json.dumps(data))
        edited["extra"]["lines"][index]["host_ms_each"][0] = call_ms
        edited["extra"]["lines"][index]["origin"] = origin
        return edited

    assert parse_result(json.dumps(saved(wall_ms)))
    shown = refused(saved(wall_ms * 1.001), tmp_path)
    assert f"extra.lines[{index}].host_ms_each holds a call of 242.27ms, longer than the " in shown
    assert shown.endswith("program's 242.03ms (extra.wall_s)")
    assert refused(saved(wall_ms * 1.001, "library"), tmp_path)
    assert parse_result(json.dumps(saved(wall_ms * 2, "thread")))


@pytest.mark.parametrize(
    ("fixture", "call", "more", "shown"),
    [
        ("h200_trace_managed", "cuMemAllocManaged", 0, None),
        ("h200_trace_managed", "cuMemAllocManaged", 1, "hold 2 calls of cuMemAllocManaged"),
        ("h200_trace_pycuda", "cuMemAlloc", 1, "hold 4 calls of cuMemAlloc"),  # 2 + 1 + 1
    ],
)
def test_the_lines_make_no_more_calls_than_the_profile_counts(tmp_path, fixture, call, more, shown):
    """Summed over every line that made only that call (two lines allocate: 2 and 1 calls)."""
    data = json.loads((FIXTURES / f"{fixture}.json").read_text())
    line = next(s for s in data["extra"]["lines"] if s["api"] == [call])
    line["calls"] += more
    if shown is None:
        assert parse_result(json.dumps(data))
        return
    counted = 1 if call == "cuMemAllocManaged" else 3
    assert refused(data, tmp_path).endswith(f"{shown}, but the profile counts {counted}")


def test_a_trace_saved_before_lines_loads_and_renders_without_them():
    result = load_result(FIXTURES / "legacy_v2_trace_torch.json")
    assert result.extra.lines is None and result.extra.lines_note is None
    text = render_text(result)
    assert "Where:" not in text and "Source lines" not in text
    assert where_rows(result) == []


def test_a_recorded_trace_names_its_lines_on_screen_and_one_csv_row_each():
    result = load_result(FIXTURES / "h200_trace_torch.json")  # recorded on the H200
    lines = result.extra.lines
    assert lines and result.extra.lines_note is None
    assert "Where:" in render_text(result)
    rows = where_rows(result)
    assert len(rows) == len(lines)
    assert {(row["source_file"], row["source_line"]) for row in rows} == {
        (s.file, s.line) for s in lines
    }
    # each row named as its callers are written: file:line function
    assert [row["name"] for row in rows] == [f"{s.file}:{s.line} {s.function}" for s in lines]


# -- the Where tables and the advice --------------------------------------------------------


def line(
    activity: str = "HtoD pageable -> device",
    number: int = 42,
    calls: int = 1,
    nbytes: int = 4 * MiB,
    gpu_ms: float = 1.0,
    host_ms: float = 1.0,
    origin: str = "program",
    api: tuple[str, ...] = ("cudaMemcpyAsync",),
    file: str = "train.py",
) -> SourceLine:
    """A line of `calls` equal calls, each `nbytes`, `gpu_ms` and `host_ms` in all."""
    work = activity not in ("wait", "alloc", "free", "register", "prefetch")
    return SourceLine(
        activity=activity,
        file=file if origin != "none" else "",
        line=number if origin != "none" else 0,
        function="step" if origin != "none" else "",
        origin=origin,
        calls=calls,
        api=list(api),
        bytes=nbytes * calls if work else 0,
        smallest_bytes=nbytes if work else 0,
        largest_bytes=nbytes if work else 0,
        gpu_ms_each=[gpu_ms / calls] * calls if work else [],
        host_ms_each=[host_ms / calls] * calls,
    )


def test_the_top_lines_are_those_leading_any_column():
    gpu = line(number=1, gpu_ms=9.0)
    nbytes = line(number=2, nbytes=64 * MiB, gpu_ms=0.5)
    host = line(number=3, host_ms=9.0, gpu_ms=0.5)
    calls = line(number=4, calls=50, nbytes=KiB, gpu_ms=0.1, host_ms=0.1)
    second = line(number=5, calls=20, nbytes=2 * MiB, gpu_ms=5.0, host_ms=5.0)
    lines = [gpu, nbytes, host, calls, second]
    assert summary.top_lines(lines, top=1) == [gpu, host, nbytes, calls]  # the most time first
    assert second in summary.top_lines(lines, top=2)
    waits = [line("wait", n, n + 1, host_ms=float(n)) for n in (1, 2)]
    assert summary.top_lines(waits, top=1) == [waits[1]]  # no GPU time or bytes to lead


def test_top_lines_of_equal_time_put_the_more_called_first():
    once, often = line(number=1, calls=1), line(number=2, calls=5)  # 2 ms each
    assert summary.top_lines([once, often]) == [often, once]


def test_a_where_table_sums_the_lines_it_does_not_show_and_marks_each_columns_most():
    lines = [line(number=n, calls=n, gpu_ms=float(n), host_ms=n / 2) for n in range(1, 7)]
    table = summary.where_table("HtoD pageable -> device", lines, False)
    assert table.title == "Where: copies HtoD pageable -> device"
    assert [row[0] for row in table.rows] == [
        "train.py:6",
        "train.py:5",
        "train.py:4",
        "(3 other lines)",
    ]
    assert table.rows[-1][1:] == ["6", "24 MiB", "6.0000ms", "3.0000ms"]
    columns = {table.headers[column] for _, column in table.highlighted}
    assert columns == {"Calls", "Bytes", "GPU time", "Host"}
    assert {row for row, _ in table.highlighted} == {0}
    waits = summary.where_table("wait", [line("wait", api=("cudaStreamSynchronize",))], False)
    assert waits.headers == ["Line", "Call", "Calls", "Host"]
    assert waits.rows == [["train.py:42", "cudaStreamSynchronize", "1", "1.0000ms"]]


def test_a_where_table_of_calls_shows_each_callers_frames_and_its_other_lines_whole():
    """A wait table with callers, every cell: the title of its kind, a line's calls joined
    (or -), its function beside it, each chain's frames below it with the chain's calls only
    beside the first, and the other lines' row, blank where it has no call to name."""
    chain = CallChain(2, [Frame("loop.py", 10, "outer"), Frame("main.py", 20, "main")])
    two = ("cudaStreamSynchronize", "cudaDeviceSynchronize")
    top = dataclasses.replace(line("wait", 4, calls=4, host_ms=4.0, api=two), chains=[chain])
    waits = [top, *(line("wait", n, calls=n, host_ms=float(n), api=()) for n in (3, 2, 1))]
    table = summary.where_table("wait", waits, True)
    assert table.title == "Where: waits for the GPU"
    assert table.rows == [
        ["train.py:4 step", "cudaStreamSynchronize, cudaDeviceSynchronize", "4", "4.0000ms"],
        ["  ← loop.py:10 outer", "", "2", ""],
        ["  ← main.py:20 main", "", "", ""],
        ["train.py:3", "-", "3", "3.0000ms"],
        ["train.py:2", "-", "2", "2.0000ms"],
        ["(1 other line)", "", "1", "1.0000ms"],
    ]
    others = table.figures[-1]["calls"]
    assert (others.name, others.parts, others.formula) == (
        "Where: waits for the GPU, 1 other line",
        (waits[-1],),
        "lines",
    )
    assert summary.where_table("wait", waits, False).rows[0][0] == "train.py:4"


@pytest.mark.parametrize(("host_ms", "marked"), [(0.5, True), (0.0, False)])
def test_a_where_tables_most_is_marked_below_a_millisecond_and_not_at_none(host_ms, marked):
    table = summary.where_table("wait", [line("wait", host_ms=host_ms, api=())], False)
    assert ((0, 3) in table.highlighted) == marked  # Host, its fourth column
    assert (0, 2) in table.highlighted  # its one call


def test_a_where_tables_tie_marks_the_first_row_shown():
    first, second = (line("wait", n, calls=5, host_ms=3.0 - n) for n in (1, 2))
    table = summary.where_table("wait", [second, first], False)
    assert [row[0] for row in table.rows] == ["train.py:1", "train.py:2"]
    assert sorted(table.highlighted) == [(0, 2), (0, 3)]  # calls tie: the first shown


def test_where_tables_put_copies_first_the_most_gpu_time_first_then_calls_in_their_order():
    """Copies by GPU time (1 ms after 5), then the calls in CALL_KINDS' order, not by name
    (memset before alloc), and how to read them under the last, with its top said."""
    lines = [
        line("wait", 1, api=()),
        line("alloc", 2, api=()),
        line("HtoD pageable -> device", 3, gpu_ms=1.0),
        line("DtoH device -> pinned", 4, gpu_ms=5.0),
        line("memset", 5, api=()),
    ]
    assert [activity for activity, _ in summary.by_activity(lines)] == [
        "DtoH device -> pinned",
        "HtoD pageable -> device",
        "memset",
        "alloc",
        "wait",
    ]
    tables = summary.where_tables(lines, show_chains=True)
    assert [table.title for table in tables] == [
        "Where: copies DtoH device -> pinned",
        "Where: copies HtoD pageable -> device",
        "Where: memsets",
        "Where: allocations",
        "Where: waits for the GPU",
    ]
    assert tables[-1].notes == [summary.WHERE_NOTE.format(top=3)]
    assert "Shown: the 3 lines with the most GPU time" in tables[-1].notes[0]


def test_lines_not_of_the_program_say_what_they_are():
    assert line(origin="thread").place == "train.py:42 (other thread)"
    assert line(origin="library", file="torch/x.py").place == "torch/x.py:42 (library)"
    assert line(origin="none").place == "(no stack recorded)"


def test_the_where_tables_fit_80_columns(fake_gpu, tmp_path):
    saved = tmp_path / "trace.json"
    assert run_trace("--json", saved, "--stacks", two_files(tmp_path)).exit_code == 0
    ran = runner.invoke(app, ["report", str(saved)], env={"COLUMNS": "80"})
    start = ran.stdout.index("Where:")
    where = ran.stdout[start:].split("\n\n")[:4]
    assert all(len(text) <= 80 for block in where for text in block.splitlines())


def test_the_advice_names_the_line_with_its_copies_and_the_librarys_remedy():
    pageable = line(calls=134, nbytes=4 * MiB, gpu_ms=38.6, host_ms=41.0)
    (said,) = summary.line_advice([pageable], ["torch"])
    assert said == (
        "train.py:42: 134 pageable HtoD copies of 4 MiB, 38.600ms of GPU time, the host "
        "blocked 41.000ms: pass pin_memory=True to the DataLoader (or pin the tensor once, "
        ".pin_memory()) and copy with non_blocking=True."
    )
    back = line("DtoH device -> pageable")
    assert "copy into a pinned tensor" in summary.line_advice([back], ["torch"])[0]
    assert "cupyx.empty_pinned" in summary.line_advice([back], ["cupy", "pycuda"])[0]
    assert "pagelocked_empty" in summary.line_advice([pageable], ["pycuda"])[0]
    assert "numba.cuda.pinned_array" in summary.line_advice([pageable], ["numba"])[0]
    assert "cudaHostAlloc" in summary.line_advice([pageable], [])[0]


def test_pageable_copies_of_64_kib_are_advised_as_pageable_smaller_ones_as_small():
    at = line(nbytes=64 * KiB, calls=2)
    (said,) = summary.line_advice([at], [])
    assert "2 pageable HtoD copies of 64 KiB" in said
    below = line(nbytes=64 * KiB - 1, calls=2)
    (said,) = summary.line_advice([below], [])
    assert "pageable" not in said and "gather them into one buffer" in said
    assert summary.line_advice([line(nbytes=4 * KiB, calls=1)], []) == []  # once: no loop
    (once,) = summary.line_advice([line(calls=1)], [])
    assert once.startswith("train.py:42: 1 pageable HtoD copy of 4 MiB, ")


@pytest.mark.parametrize(("nbytes", "advised"), [(1, True), (0, False)])
def test_repeated_copies_of_a_byte_are_small_and_of_none_are_not_advised(nbytes, advised):
    said = summary.line_advice([line(nbytes=nbytes, calls=2)], [])
    assert said == (
        [
            "train.py:42: 2 copies of 1 B, 1.0000ms of GPU time, the host blocked 1.0000ms: "
            "each is latency, not bandwidth; gather them into one buffer and copy it once."
        ]
        if advised
        else []
    )


def test_the_small_copies_advised_are_the_three_lines_that_made_the_most():
    """The most calls first, not the most time: each is latency, paid per call."""
    lines = [line(number=n, nbytes=KiB, calls=n + 1, gpu_ms=10.0 / n) for n in range(1, 5)]
    said = summary.line_advice(lines, [])
    assert [s.split(":")[1] for s in said] == ["4", "3", "2"]
    assert said[0].startswith("train.py:4: 5 copies of 1 KiB")


def test_waits_allocations_and_frees_are_advised_where_a_line_repeats_them():
    for activity, words in (("wait", "waits"), ("alloc", "allocations"), ("free", "frees")):
        assert summary.line_advice([line(activity, calls=1, api=("x",))], []) == []
        (said,) = summary.line_advice([line(activity, calls=2, api=("x",))], [])
        assert said.startswith(f"train.py:42: 2 {words} (x), the host blocked 1.0000ms: ")
    assert summary.line_advice([line("prefetch", calls=9, api=("x",))], []) == []
    both = ("cudaStreamSynchronize", "cudaDeviceSynchronize")
    (waits,) = summary.line_advice([line("wait", calls=2, api=both)], [])
    assert waits.startswith(f"train.py:42: 2 waits ({both[0]}, {both[1]}), the host")
    (allocs,) = summary.line_advice([line("alloc", calls=2, api=("cuMemAlloc", "x"))], [])
    assert allocs.startswith("train.py:42: 2 allocations (cuMemAlloc, x), the host")
    torch_wait = summary.line_advice([line("wait", calls=2, api=("x",))], ["torch"])[0]
    assert torch_wait.endswith("synchronize only where it needs a result.")


def wait(calls: int = 3, *api: str) -> SourceLine:
    return line("wait", calls=calls, api=api or ("cudaStreamSynchronize",))


def back(nbytes: int, calls: int = 3, direction: str = "DtoH device -> pageable") -> SourceLine:
    return line(direction, calls=calls, nbytes=nbytes)


@pytest.mark.parametrize(
    ("waited", "beside", "cause"),
    [
        (wait(), [back(16)], "item"),  # one complex128 back, then its stream's wait
        (wait(), [back(17)], "copy"),  # more than one value: a blocking copy's wait
        (wait(), [back(4), back(4, direction="HtoD pageable -> device")], "copy"),
        (wait(3), [back(1 * MiB, calls=3)], "copy"),  # one wait per copy
        (wait(4), [back(1 * MiB, calls=3)], "stream"),  # more waits than the copies made
        (wait(3, "cudaEventSynchronize"), [back(4)], "event"),  # not the copy's own wait
        (wait(3, "cudaStreamSynchronize"), [], "stream"),
        (wait(3, "cuStreamSynchronize", "cuCtxSynchronize"), [], "device"),  # the broadest
        (wait(3, "cudaDeviceSynchronize"), [], "device"),
        (wait(3, "cuEventSynchronize"), [], "event"),
        (wait(3, "cuStreamWaitEvent"), [], "other"),
    ],
)
def test_each_wait_gets_the_cause_its_calls_and_its_lines_copies_show(waited, beside, cause):
    assert summary.wait_cause(waited, [waited, *beside]) == cause


def test_each_cause_has_its_own_sentence_in_the_librarys_words():
    cases = {
        "item": (wait(), [back(4)], ".item(), float() or a print", "a copy of 4 B"),
        "copy": (wait(), [back(MiB)], "without non_blocking=True", "non_blocking=True"),
        "event": (wait(3, "cudaEventSynchronize"), [], "before that event was recorded", ""),
        "stream": (wait(4), [back(MiB)], "on that stream", "event recorded right after"),
        "device": (wait(3, "cudaDeviceSynchronize"), [], "torch.cuda.synchronize()", ""),
    }
    sentences = set()
    for cause, (waited, beside, *words) in cases.items():
        (said,) = summary.line_advice([waited, *beside], ["torch"])[-1:]
        assert said.startswith("train.py:42: 3 waits") or said.startswith("train.py:42: 4 w")
        assert all(word in said for word in words), (cause, said)
        sentences.add(said.split(": ", 3)[-1])
    assert len(sentences) == len(cases)
    plain = summary.line_advice([wait(3, "cudaDeviceSynchronize")], [])[0]
    assert "cudaDeviceSynchronize, cuCtxSynchronize" in plain and "torch" not in plain


def test_only_the_programs_own_lines_are_advised_the_costliest_three():
    lines = [line(number=n, calls=2, gpu_ms=float(n)) for n in range(1, 5)]
    said = summary.line_advice(lines, [])
    assert [text.split(":")[1] for text in said] == ["4", "3", "2"]
    assert summary.line_advice([line(origin="library"), line(origin="none")], []) == []
    assert summary.line_advice([line(origin="thread", calls=2)], [])[0].startswith(
        "train.py:42 (other thread): "
    )


# -- the CSV and diff ------------------------------------------------------------------------


def traced(durations_us: list[float], file: str = "train.py") -> tracing.Result:
    """A trace of copies whose GPU times are `durations_us`, all made at `file`:42."""
    gpu = [
        GpuRecord("memcpy", "HTOD", 0, int(us * 1000), MiB, "pageable", "device", False, 10 + i)
        for i, us in enumerate(durations_us)
    ]
    api = [
        ApiRecord("cuMemcpyHtoD_v2", us / 1000 + 0.01, 10 + i) for i, us in enumerate(durations_us)
    ]
    frames = (Frame(file, 42, "step"), Frame(file, 80, "main"))
    stacks = {10 + i: ("program", frames) for i in range(len(durations_us))}
    recording = Recording(gpu, api, None, None, "NVIDIA H200", "580", stacks=stacks)
    program = Program(file, None, ())
    result = trace_result(program, Outcome(0, None, 1.0), recording, 0, {"how": "test"}, None, 5)
    return parse_result(result.to_json())


def test_a_line_that_got_slower_is_named_by_diff():
    steady = [100.0, 101.0, 99.0, 100.5, 99.5]
    same = diff(traced(steady), traced([100.2, 100.8, 99.1, 100.0, 99.9]))
    assert "Source lines: 1 line in both traces, B slower at 0." in same.conclusions
    slower = diff(traced(steady), traced([180.0, 181.0, 179.0, 180.5, 179.5]))
    (lines_table,) = [t for t in slower.tables if t.title.startswith("Source lines")]
    assert lines_table.rows[0][0] == "train.py:42 HtoD pageable -> device"
    assert lines_table.rows[0][-1] == "B slower"
    assert (
        "Source lines: 1 line in both traces, B slower at 1: train.py:42 HtoD pageable -> "
        "device (1.80x)." in slower.conclusions
    )
    moved = diff(traced(steady), traced(steady, file="other.py"))
    assert "Source lines unmatched: 1 only in A, 1 only in B." in moved.conclusions
    old = load_result(FIXTURES / "h200_trace_torch.json")
    assert all(not t.title.startswith("Source lines") for t in diff(old, traced(steady)).tables)
    assert lines_table.headers == ["Line", "Calls A/B", "A median", "B median", "B / A", "Change"]
    assert lines_table.rows[0][1:5] == ["5/5", "100.00us", "180.00us", "1.800x"]
    assert lines_table.notes == [CHANGE_NOTE]  # no line moved by its mean alone


LINE_COLUMNS = (
    "name",
    "operation",
    "kind",
    "bytes",
    "calls",
    "source_file",
    "source_line",
    "source_function",
    "gpu_ms",
    "host_ms",
    "callers",
)  # a line's CSV row, what export reads


def test_csv_rows_of_lines_are_literal_and_complete():
    result = traced([100.0, 200.0], file="evil\x1b[31m.py")
    (row,) = where_rows(result)
    assert set(row) == set(LINE_COLUMNS)
    assert row["source_file"] == "evil\\x1b[31m.py"
    assert (row["calls"], row["bytes"], row["source_line"]) == (2, 2 * MiB, 42)
    assert row["gpu_ms"] == pytest.approx(0.3)
    assert row["callers"] == "evil\\x1b[31m.py:80 main"
    assert where_rows(load_result(FIXTURES / "legacy_v2_trace_pycuda.json")) == []


def test_a_callers_chain_is_kept_in_the_saved_result():
    result = traced([100.0])
    (saved,) = result.extra.lines
    assert saved.chains == [CallChain(1, [Frame("train.py", 80, "main")])]


def test_a_saved_file_name_reaches_the_terminal_literally():
    text = render_text(traced([100.0, 200.0], file="evil\x1b[31m.py"))
    assert "\x1b" not in text
    assert "evil\\x1b[31m.py:42" in text  # the Where table and the advice alike
    assert text.count("evil\\x1b[31m.py:42") >= 2


def test_the_csv_holds_a_traces_lines_beside_its_measurements():
    from memprof.experiments import summarize
    from memprof.output.export import csv_rows

    result = traced([100.0, 200.0])
    rows = csv_rows(result, summarize(result).figures)
    lines = [row for row in rows if row["group"] == "line"]
    assert len(rows) == len(result.measurements) + len(result.extra.copies) + 1  # and its copies
    (line,) = lines
    assert (line["source_file"], line["source_line"], line["calls"]) == ("train.py", 42, 2)
    assert line["gpu_ms"] == pytest.approx(0.3)
    assert line["name"] == "train.py:42 step"


def lines_diff(a_ms: list[list[float]], b_ms: list[list[float]], verbose: bool = True):
    """diff's Source lines table and conclusions of two traces whose lines train.py:42,
    :43, ... took these GPU times per call."""
    a, b = traced([1.0] * 5), traced([1.0] * 5)
    for result, times in ((a, a_ms), (b, b_ms)):
        first = result.extra.lines[0]
        result.extra.lines[:] = [
            dataclasses.replace(first, line=42 + n, gpu_ms_each=each)
            for n, each in enumerate(times)
        ]
    shown = diff(a, b, verbose=verbose)
    (lines_table,) = [t for t in shown.tables if t.title.startswith("Source lines")]
    return lines_table, shown.conclusions


def test_a_line_without_gpu_times_in_one_trace_is_a_row_and_the_next_is_compared():
    """CUPTI may drop a copy's records: its line has calls but no GPU time in that trace.
    It is said to have none, in its own row, and the lines after it are still compared."""
    steady = [0.100, 0.101, 0.099, 0.1005, 0.0995]
    slower = [value * 1.8 for value in steady]
    table, conclusions = lines_diff([[], steady], [slower, slower, slower])
    assert table.rows == [
        ["train.py:42 HtoD pageable -> device", "5/5", "-", "-", "-", "no valid samples"],
        [
            "train.py:43 HtoD pageable -> device",
            "5/5",
            "100.00us",
            "180.00us",
            "1.800x",
            "B slower",
        ],
    ]
    assert "Source lines unmatched: 0 only in A, 1 only in B." in conclusions


def test_a_line_that_took_no_time_in_a_is_named_slower_without_a_ratio():
    steady = [0.100, 0.101, 0.099, 0.1005, 0.0995]
    twice = [value * 2 for value in steady]
    table, conclusions = lines_diff([[0.0] * 5, steady], [[0.1] * 5, twice])
    assert [row[-2:] for row in table.rows] == [["-", "B slower"], ["2.000x", "B slower"]]
    assert (
        "Source lines: 2 lines in both traces, B slower at 2: train.py:42 HtoD pageable -> "
        "device; train.py:43 HtoD pageable -> device (2.00x)." in conclusions
    )


@pytest.mark.parametrize(
    ("a_ms", "b_ms"),
    [([0.0, 0.0, 0.0, 0.1, 0.1], [0.0] * 5), ([0.0] * 5, [0.0, 0.0, 0.0, 0.1, 0.1])],
)
def test_a_line_whose_mean_is_zero_in_one_trace_is_not_held_to_its_mean(a_ms, b_ms):
    """Both medians 0: within noise; a mean of 0 has no relative error to compare by."""
    table, _ = lines_diff([a_ms], [b_ms])
    assert table.rows[0][-2:] == ["1.000x", "within noise"]


def test_the_short_table_lists_a_changed_line_after_one_within_noise():
    steady = [0.100, 0.101, 0.099, 0.1005, 0.0995]
    table, _ = lines_diff([steady, steady], [steady, [value * 2 for value in steady]], False)
    assert [row[0] for row in table.rows] == ["train.py:43 HtoD pageable -> device"]


def test_a_line_whose_large_calls_alone_got_slower_is_named_by_its_mean():
    """4 KiB and 32 MiB copies on one line: the median is a small copy's, so a slowdown of
    the large ones alone is seen in the mean (the line's total over its calls)."""
    mixed = [5.0, 5.1, 4.9, 5.0, 5.05, 2000.0, 2001.0]
    large_slower = [5.0, 5.1, 4.9, 5.0, 5.05, 10000.0, 10005.0]
    shown = diff(traced(mixed), traced(large_slower))
    (lines_table,) = [t for t in shown.tables if t.title.startswith("Source lines")]
    assert lines_table.rows[0][-1] == "B slower (mean)"
    assert lines_table.rows[0][-2] == f"{sum(large_slower) / sum(mixed):.3f}x"
    assert lines_table.notes == [
        CHANGE_NOTE,
        "(mean): the line's time over all its calls moved beyond its own noise (the standard "
        "error of each mean) while its median call did not: its larger calls alone changed. "
        "B / A is then of the means.",
    ]
    assert any("B slower at 1: train.py:42" in line for line in shown.conclusions)
    unchanged = diff(traced(mixed), traced([5.0, 5.0, 4.95, 5.1, 5.0, 2001.0, 2000.5]))
    (lines_table,) = [t for t in unchanged.tables if t.title.startswith("Source lines")]
    assert lines_table.rows[0][-1] == "within noise"
    small = [5.0 + 0.01 * (i % 7) for i in range(30)]  # the median stays a small call's
    large = [2000.0 + i for i in range(20)]
    faster = diff(traced(small + large), traced(small + [value / 10 for value in large]))
    (lines_table,) = [t for t in faster.tables if t.title.startswith("Source lines")]
    assert lines_table.rows[0][-1] == "B faster (mean)"
    assert any("B slower at 0." in line for line in faster.conclusions)


def test_a_lines_large_calls_moving_within_their_own_spread_are_within_noise():
    """Four 32 MiB copies that vary 3.1 to 4.0 ms within a run: 12% more on their mean is
    within what that spread explains, though the median's (small copies') noise is 2%."""
    small = [0.0051, 0.0050, 0.0052, 0.0049, 0.0050, 0.0051, 0.0050, 0.0049]
    large = [3070.0, 3950.0, 3400.0, 3800.0]
    a, b = traced(small + large), traced(small + [value * 1.12 for value in large])
    (lines_table,) = [t for t in diff(a, b).tables if t.title.startswith("Source lines")]
    assert lines_table.rows[0][-1] == "within noise"
    far = traced(small + [value * 3 for value in large])
    (lines_table,) = [t for t in diff(a, far).tables if t.title.startswith("Source lines")]
    assert lines_table.rows[0][-1] == "B slower (mean)"


def test_the_where_note_points_at_stacks_only_where_the_callers_are_not_shown():
    lines = load_result(FIXTURES / "h200_trace_torch.json").extra.lines
    hint = "A trace run with `memprof trace --stacks` shows each line's callers."
    without = summary.where_tables(lines, show_chains=False)[-1].notes[-1]
    shown = summary.where_tables(lines, show_chains=True)[-1].notes[-1]
    assert without.endswith(hint) and hint not in shown
    assert without.removesuffix(" " + hint) == shown


def test_each_finding_carries_its_share_of_the_run_and_the_costliest_come_first():
    scale = summary.RunScale(wall_ms=1000.0, gpu_ms=100.0)  # these lines' and others'
    small = line(number=1, calls=2, gpu_ms=20.0, host_ms=30.0)  # 3% of the run
    large = line(number=2, calls=2, gpu_ms=25.0, host_ms=40.0)  # 4%
    waited = line("wait", number=3, calls=2, api=("cudaDeviceSynchronize",), host_ms=60.0)
    queued = line(number=4, calls=2, gpu_ms=50.0, host_ms=0.5)  # its GPU time is its cost
    said = summary.line_advice([small, large, waited, queued], [], scale)
    assert [s.split(":")[1] for s in said] == ["3", "4", "2", "1"]  # by cost, any finding
    assert (
        "25.000ms of GPU time (25.00% of all), the host blocked 40.000ms (4.00% of the run)"
        in said[2]
    )
    assert "the host blocked 60.000ms (6.00% of the run)" in said[0]


@pytest.mark.parametrize(("host_ms", "folded"), [(10.0, False), (9.99, True)])
def test_findings_under_1_percent_of_the_run_fold_into_one_line(host_ms, folded):
    scale = summary.RunScale(wall_ms=1000.0, gpu_ms=50.0)
    lines = [line(number=n, calls=2, gpu_ms=1.0, host_ms=host_ms) for n in (7, 8)]
    said = summary.line_advice(lines, [], scale)
    if not folded:
        assert len(said) == 2 and all("(1.00% of the run)" in s for s in said)
        assert said[0] == (
            "train.py:7: 2 pageable HtoD copies of 4 MiB, 1.0000ms of GPU time (2.00% of "
            "all), the host blocked 10.000ms (1.00% of the run): allocate the host buffer "
            "pinned (cudaHostAlloc, cuMemHostAlloc) once and reuse it."
        )
        return
    (one,) = said
    assert one.startswith("2 findings at train.py:7, train.py:8 cost under 1% of the program's")
    assert "(2.0000ms and 19.980ms together)" in one


def test_a_share_of_the_run_is_of_any_wall_time_above_zero():
    assert summary.RunScale(wall_ms=0.5, gpu_ms=1.0).of_run(0.25) == 0.5
    assert summary.RunScale(wall_ms=0.0, gpu_ms=1.0).of_run(0.25) == 0.0  # not recorded


@pytest.mark.parametrize(("findings", "more"), [(5, ""), (6, " and 1 more")])
def test_a_folded_line_names_five_places_and_counts_the_rest(findings, more):
    """Three pageable lines (the most advised of one finding), then small copies."""
    lines = [
        line(number=n, calls=2, nbytes=4 * MiB if n <= 3 else KiB, gpu_ms=0.5, host_ms=0.5)
        for n in range(1, findings + 1)
    ]
    (said,) = summary.line_advice(lines, [], summary.RunScale(wall_ms=1000.0, gpu_ms=50.0))
    places = ", ".join(f"train.py:{n}" for n in range(1, 6))
    assert said.startswith(f"{findings} findings at {places}{more} cost under 1% of the")


def test_a_recorded_traces_findings_carry_the_shares_the_profile_gives():
    result = load_result(FIXTURES / "h200_trace_pycuda.json")
    said = [s for s in summary.summarize(result).conclusions if "% of the run)" in s]
    first = next(s for s in said if s.startswith("pycuda_copies.py:52: "))
    (row,) = [
        m for m in result.extra.lines if (m.line, m.activity) == (52, "HtoD pageable -> device")
    ]
    gpu = sum(s for m in result.measurements if m.group == "gpu" for s in m.samples_ms)
    assert f"({100 * row.gpu_ms / gpu:.2f}% of all)" in first
    assert f"({100 * row.host_ms / (result.extra.wall_s * 1e3):.2f}% of the run)" in first


def calls(activity: str, *api: str) -> SourceLine:
    return line(activity, calls=3, api=api)


@pytest.mark.parametrize(
    ("made", "library", "cause"),
    [
        (calls("free", "cudaFree"), None, "free"),
        (calls("free", "cuMemFree", "cuMemFreeHost"), None, "free"),
        (calls("free", "cudaFreeHost"), "torch", "free"),  # pinned memory: not the cache's
        (calls("free", "cudaFree"), "torch", "torch free"),
        (calls("free", "cudaFree"), "cupy", "free"),
        (calls("free", "cudaFreeAsync"), None, "pool"),
        (calls("free", "cuMemFreeAsync"), "torch", "pool"),
        (calls("free", "cudaFreeAsync", "cudaFree"), None, "free"),  # one device-wide is enough
        (calls("free", "cuMemRelease"), None, "other free"),
        (calls("alloc", "cudaMalloc"), None, "alloc"),
        (calls("alloc", "cuMemAlloc"), "torch", "alloc"),  # the driver's: not the cache's
        (calls("alloc", "cudaMalloc"), "torch", "torch alloc"),
        (calls("alloc", "cudaMallocAsync"), "torch", "pool"),
        (calls("alloc", "cuMemAllocFromPoolAsync", "cuMemAllocAsync"), None, "pool"),
        (calls("alloc", "cuMemAllocAsync", "cuMemAlloc"), None, "alloc"),
        (calls("alloc", "cudaHostAlloc"), "torch", "pin"),
        (calls("alloc", "cuMemHostAlloc", "cudaMallocHost"), None, "pin"),
        (calls("alloc", "cuMemHostAlloc", "cuMemCreate"), None, "alloc"),
        (calls("alloc", *summary.PINNING_ALLOCS), None, "pin"),  # every pinning call
        (calls("register", "cuMemHostRegister"), None, "register"),
        (calls("register", "cuMemHostRegister", "cuMemHostUnregister"), None, "unregister"),
        (calls("register", "cudaHostUnregister"), "torch", "unregister"),
    ],
)
def test_each_allocator_call_gets_the_cause_its_calls_and_library_show(made, library, cause):
    assert summary.call_cause(made, library) == cause


def test_each_allocator_cause_has_its_own_sentence():
    cases = {
        "free": (calls("free", "cudaFree"), [], "every stream of the GPU", "cudaMallocAsync"),
        "torch free": (calls("free", "cudaFree"), ["torch"], "empty_cache() in the loop"),
        "pool": (calls("free", "cudaFreeAsync"), [], "wait for no other work"),
        "other free": (calls("free", "cuMemRelease"), [], "free once, after the loop"),
        "alloc": (calls("alloc", "cudaMalloc"), [], "can wait for the GPU", "cuMemPool"),
        "torch alloc": (calls("alloc", "cudaMalloc"), ["torch"], "a new shape"),
        "pin": (calls("alloc", "cudaHostAlloc"), [], "pins the pages of a new host buffer"),
        "register": (calls("register", "cuMemHostRegister"), [], "register the buffer once"),
        "unregister": (calls("register", "cuMemHostUnregister"), [], "unregister it after"),
    }
    sentences = set()
    for cause, (made, libraries, *words) in cases.items():
        (said,) = summary.line_advice([made], libraries)
        assert said.startswith(f"train.py:42: 3 {summary.CALL_WORDS[made.activity]}"), said
        assert all(word in said for word in words), (cause, said)
        sentences.add(said.split(": ", 3)[-1])
    assert len(sentences) == len(cases)
    assert "cudaFree waits" not in summary.line_advice([calls("free", "cudaFree")], [])[0]


def copied(kind: str, *chains: tuple[int, list[int]], direction: str = "HtoD") -> SourceLine:
    """A helper's copy line (upload at helpers.py:27) whose calls came up the chains given
    as (calls, [caller lines in train.py, innermost first])."""
    source, destination = (kind, "device") if direction == "HtoD" else ("device", kind)
    made = line(
        f"{direction} {source} -> {destination}",
        number=27,
        calls=sum(calls for calls, _ in chains) or 3,
        file="helpers.py",
    )
    made.chains = [
        CallChain(calls, [Frame("train.py", number, "main") for number in numbers])
        for calls, numbers in chains
    ]
    return made


@pytest.mark.parametrize(
    ("pageable", "beside", "named"),
    [
        # a helper making pinned copies for line 40 and pageable ones for line 36
        (
            copied("pageable", (3, [36, 90])),
            [copied("pinned", (2, [40, 90]))],
            [("train.py:36", 3)],
        ),
        # two callers, no pinned copy at the helper: both chose pageable memory
        (copied("pageable", (3, [36]), (2, [40])), [], [("train.py:36", 3), ("train.py:40", 2)]),
        # the caller of the most copies first, whatever the order of the chains and names
        (copied("pageable", (2, [36]), (3, [40])), [], [("train.py:40", 3), ("train.py:36", 2)]),
        (copied("pageable", (3, [36, 90])), [], []),  # one caller: the copy's line is enough
        (copied("pageable"), [copied("pinned", (2, [40]))], []),  # no chain recorded
        # the same caller passes both: they part one frame further up, at line 70
        (
            copied("pageable", (3, [36, 70])),
            [copied("pinned", (2, [36, 80]))],
            [("train.py:70", 3)],
        ),
        (copied("pageable", (3, [36])), [copied("pinned", (2, [36]))], []),  # no parting shown
        # pinned copies the other way tell nothing of where this way's memory came from
        (
            copied("pageable", (3, [36])),
            [copied("pinned", (2, [40]), direction="DtoH")],
            [],
        ),
    ],
)
def test_a_helpers_pageable_copies_name_the_caller_that_chose_pageable(pageable, beside, named):
    assert summary.pageable_callers(pageable, [pageable, *beside]) == named


def test_the_advice_on_a_helpers_pageable_copies_names_the_line_to_change():
    helper = copied("pageable", (3, [36, 90]))
    pinned = copied("pinned", (2, [40, 90]))
    (said,) = summary.line_advice([helper, pinned], ["torch"])
    assert said.startswith("helpers.py:27: 3 pageable HtoD copies of 4 MiB")
    assert said.endswith(
        "; the pageable memory came from train.py:36 (3 copies): the line to change."
    )
    (two,) = summary.line_advice([copied("pageable", (2, [36]), (1, [40]))], ["torch"])
    assert two.endswith(
        "non_blocking=True; the pageable memory came from train.py:36 (2 copies), "
        "train.py:40 (1 copy): the line to change."
    )
    (alone,) = summary.line_advice([copied("pageable", (3, [36, 90]))], ["torch"])
    assert "came from" not in alone


def test_the_trace_ends_each_stack_walk_at_the_code_that_runs_the_program(
    fake_gpu, tmp_path, monkeypatch
):
    """Issue 38, item 7: the recorder is told where memprof's runner is, so a walk ends
    there rather than at the bottom of memprof's CLI; the lines are the same (the tests of
    this file)."""
    made = []

    class Kept(stacks_module.CallRecorder):
        def __init__(self, *arguments, **options):
            super().__init__(*arguments, **options)
            made.append(self)

    monkeypatch.setattr(tracing, "CallRecorder", Kept)
    ran = run_trace("--json", tmp_path / "t.json", two_files(tmp_path))
    assert ran.exit_code == 0, ran.output
    (recorder,) = made
    assert recorder.runner is tracing.run_program.__code__
    assert recorder.stacks  # it recorded
