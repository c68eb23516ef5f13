"""memprof trace's counting and its cache checks held at their edges, each where a mutation
round (issue 37) found it untested: a cache entry's date just inside and just outside its
length, its refusals in their own words, a program's exit code, and which frames read as
whose (pure parts of memprof.trace.stacks)."""

from __future__ import annotations

import os
import site
import sys
import sysconfig
import time
import types
from types import SimpleNamespace

import pytest

from memprof.core import activity
from memprof.core.activity import GpuRecord
from memprof.errors import EnvironmentProblem, InvalidArgument
from memprof.model.lines import Frame
from memprof.trace import collect, stacks
from memprof.trace.stacks import CallRecorder, CodeFilter

GPU = ("NVIDIA H200", "580.1")
GOOD_PINNED = {
    "h2d_gb_per_s": 51.0,
    "d2h_gb_per_s": 52.0,
    "bytes": 64 << 20,
    "gpu_name": GPU[0],
    "driver_version": GPU[1],
    "measured_at": "2026-11-23T05:09:36+00:00",
}
COST = {"bytes": 4096, "pinned_ms": 0.0027, "pageable_ms": 0.0051, "gathered_ms": 0.0009}
GOOD_SMALL = {"copies": 128, "costs": [COST], "clock": "wall"}

# ISO dates Python reads, 40 and 41 characters long (fractional seconds of 4 and 5 digits)
DATE_40 = "2026-11-23T05:09:36.1234+00:00:00.000000"
DATE_41 = "2026-11-23T05:09:36.12345+00:00:00.000000"


def test_a_cached_date_of_40_characters_is_read_and_one_of_41_is_not():
    assert (len(DATE_40), len(DATE_41)) == (40, 41)
    assert collect.identity_problem({**GOOD_PINNED, "measured_at": DATE_40}, GPU) is None
    assert collect.identity_problem({**GOOD_PINNED, "measured_at": DATE_41}, GPU) == (
        f'measured_at is "{DATE_41[:39]}, not a date and time'
    )


@pytest.mark.parametrize(
    ("measured_at", "said"), [(None, "null"), (20261123, "20261123"), ("x" * 50, '"' + "x" * 39)]
)
def test_a_cached_date_that_is_no_text_or_too_long_is_named_cut_to_40(measured_at, said):
    entry = {**GOOD_PINNED, "measured_at": measured_at}
    assert collect.identity_problem(entry, GPU) == f"measured_at is {said}, not a date and time"


def test_a_cached_pinned_figure_out_of_range_is_refused_naming_its_field():
    entry = {**GOOD_PINNED, "h2d_gb_per_s": 0}
    assert collect.pinned_problem(entry) == "h2d_gb_per_s is 0: expected a number (0.1, 1000]"


def test_cached_small_copies_are_refused_each_in_its_own_words():
    assert collect.small_copies_problem({**GOOD_SMALL, "clock": "gpu"}) == (
        "its costs are GPU time, measured before memprof took the wall clock per copy"
    )
    assert collect.small_copies_problem({**GOOD_SMALL, "copies": 0}) == (
        "copies is 0: expected an integer 1 to 2^20"
    )
    twice = {**GOOD_SMALL, "costs": [COST, {**COST, "pinned_ms": 0.003}]}
    assert collect.small_copies_problem(twice) == "costs has one size twice"


def test_a_cached_small_copy_of_exactly_a_tib_is_read_and_one_byte_more_is_not():
    largest = collect.MAX_CACHED_BYTES
    at_edge = {**GOOD_SMALL, "costs": [{**COST, "bytes": largest}]}
    assert collect.small_copies_problem(at_edge) is None
    past = {**GOOD_SMALL, "costs": [{**COST, "bytes": largest + 1}]}
    assert collect.small_copies_problem(past) == (
        f"costs has a size of {largest + 1} bytes, more than {largest}"
    )


@pytest.mark.parametrize(
    ("code", "status"), [(None, 0), (0, 0), (3, 3), (-1, 255), (256, 0), (257, 1)]
)
def test_a_programs_exit_status_is_what_the_shell_sees(code, status, capsys):
    assert collect.exit_code_of(SystemExit(code)) == status
    assert capsys.readouterr().err == ""


def test_a_programs_exit_message_is_printed_and_its_status_is_1(capsys):
    assert collect.exit_code_of(SystemExit("no data")) == 1
    assert capsys.readouterr().err == "no data\n"


# -- whose a frame's file is (memprof.trace.stacks.CodeFilter) -------------------------------


def test_a_generated_files_name_is_shown_as_python_gave_it(tmp_path):
    code = CodeFilter(str(tmp_path))
    assert code.display("<frozen runpy>") == "<frozen runpy>"
    assert code.display("<string>") == "<string>"


def test_a_file_under_nested_library_folders_is_shown_from_the_innermost(tmp_path):
    """site-packages inside the standard library's folder: torch's file is shown from
    site-packages, not as site-packages/torch/..., whichever order the folders come in."""
    stdlib = tmp_path / "lib" / "python3.12"
    site = stdlib / "site-packages"
    torch_file = site / "torch" / "nn" / "module.py"
    program = tmp_path / "prog"
    for libraries in ((str(stdlib), str(site)), (str(site), str(stdlib))):
        code = CodeFilter(str(program), libraries=libraries)
        assert code.display(str(torch_file)) == "torch/nn/module.py"
        assert code.display(str(stdlib / "json" / "decoder.py")) == "json/decoder.py"
    named = CodeFilter(str(program), named=(str(site / "torch"),), libraries=(str(stdlib),))
    assert named.display(str(torch_file)) == "torch/nn/module.py"
    assert named.display(str(program / "data" / "x.py")) == "data/x.py"
    assert named.display(str(tmp_path / "elsewhere.py")) == os.path.realpath(
        tmp_path / "elsewhere.py"
    )


class _Holder:
    def method(self) -> None:
        """A method: its frame is named with its class."""


def _helper() -> None:
    """A function at module level."""


def test_recorded_frames_are_named_with_their_class_and_kept_apart_by_code_and_line():
    """Two codes at one line, and one code at two lines, are three frames; a method is
    named Class.method as Python 3.11's co_qualname names it."""
    here = os.path.dirname(os.path.realpath(__file__))
    recorder = CallRecorder(CodeFilter(here), depth=5)
    method, helper = _Holder.method.__code__, _helper.__code__
    recorder.stacks = {
        7: ("program", ((method, 10), (helper, 10))),
        8: ("thread", ((helper, 12), (method, 10))),
    }
    name = os.path.basename(__file__)
    in_method, in_helper = Frame(name, 10, "_Holder.method"), Frame(name, 10, "_helper")
    assert recorder.recorded() == {
        7: ("program", (in_method, in_helper)),
        8: ("thread", (Frame(name, 12, "_helper"), in_method)),
    }


@pytest.mark.parametrize(
    ("torch", "benchmark"),
    [
        (SimpleNamespace(backends=SimpleNamespace(cudnn=SimpleNamespace(benchmark=True))), True),
        (SimpleNamespace(backends=SimpleNamespace(cudnn=SimpleNamespace(benchmark=False))), False),
        (SimpleNamespace(backends=SimpleNamespace(cudnn=SimpleNamespace(benchmark=1))), None),
        (SimpleNamespace(), None),  # a torch of the program's own, without backends
    ],
)
def test_cudnn_benchmark_is_read_as_the_program_left_it_or_none(monkeypatch, torch, benchmark):
    monkeypatch.setitem(sys.modules, "torch", torch)
    assert collect.cudnn_benchmark() is benchmark


def test_cudnn_benchmark_without_torch_is_none(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert collect.cudnn_benchmark() is None


# -- the collector's start ------------------------------------------------------------------


@pytest.fixture
def devices(monkeypatch):
    """CUPTI present, `state["count"]` CUDA devices, and activity tracing refused (each test
    ends at the first refusal it reaches)."""
    state = {"count": 1, "started": [], "why": "CUPTI is in use by another profiler"}
    monkeypatch.setattr(activity, "cupti_unavailable_reason", lambda: None)
    monkeypatch.setattr(collect, "_cuda_init", lambda: state["count"])

    def refuse(device_index, keep_all=False):
        state["started"].append(device_index)
        assert keep_all is True  # a trace keeps every record, its own included
        return None, state["why"]

    monkeypatch.setattr(activity.ActivityLog, "start", staticmethod(refuse))
    return state


def test_without_cupti_the_trace_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(activity, "cupti_unavailable_reason", lambda: "cupti-python is absent")
    with pytest.raises(EnvironmentProblem) as raised:
        collect.CuptiCollector().start()
    assert str(raised.value) == f"cupti-python is absent: {collect.CUPTI_INSTALL_HINT}"


@pytest.mark.parametrize(
    ("device", "count", "said"),
    [
        (1, 1, "--device 1 does not exist: this machine has 1 CUDA device"),
        (2, 2, "--device 2 does not exist: this machine has 2 CUDA devices"),
        (-1, 3, "--device -1 does not exist: this machine has 3 CUDA devices"),
    ],
)
def test_a_device_past_the_last_is_refused_in_one_line(devices, device, count, said):
    devices["count"] = count
    with pytest.raises(InvalidArgument) as raised:
        collect.CuptiCollector(device).start()
    assert str(raised.value) == said
    assert devices["started"] == []


@pytest.mark.parametrize(("device", "count"), [(0, 1), (1, 2)])
def test_the_last_device_is_traced(devices, device, count):
    devices["count"] = count
    with pytest.raises(EnvironmentProblem, match=r"^CUPTI is in use by another profiler$"):
        collect.CuptiCollector(device).start()
    assert devices["started"] == [device]


def test_the_collector_traces_device_0_unless_told(devices):
    with pytest.raises(EnvironmentProblem):
        collect.CuptiCollector().start()
    assert devices["started"] == [0]


def test_activity_tracing_refused_without_a_reason_is_said_so(devices):
    devices["why"] = None
    with pytest.raises(EnvironmentProblem) as raised:
        collect.CuptiCollector().start()
    assert str(raised.value) == "CUPTI refused activity tracing"


# -- the collector's finish -----------------------------------------------------------------


class _Log:
    """ActivityLog's reading side, holding no GPU record."""

    def __init__(self, refusal: str | None) -> None:
        self.unified_memory_refusal = refusal
        self.flushed = False

    def flush(self) -> None:
        self.flushed = True

    def all_gpu_records(self) -> list:
        return []

    def unified_memory_totals(self) -> dict:
        return {"HtoD": {"bytes": 4096.0}}


@pytest.mark.parametrize(
    ("refusal", "totals"), [(None, {"HtoD": {"bytes": 4096.0}}), ("no unified memory", None)]
)
def test_a_finished_trace_keeps_its_callbacks_failures_and_unified_memory(
    monkeypatch, refusal, totals
):
    asked = []
    monkeypatch.setattr(collect, "_synchronize_current_context", lambda: None)
    monkeypatch.setattr(collect, "device_identity", lambda i: asked.append(i) or ("G", "1.0"))
    calls = CallRecorder(None)
    calls.failures, calls.first_failure, calls.own = 2, "OSError: no such folder", {5}
    collector = collect.CuptiCollector(3, calls)
    collector.log = _Log(refusal)
    recording = collector.finish()
    assert collector.log.flushed and asked == [3]
    assert (recording.gpu_name, recording.driver_version) == ("G", "1.0")
    assert recording.stacks_note == (
        "memprof's callback failed on 2 calls, whose lines and host times are missing "
        "(the first: OSError: no such folder)"
    )
    assert (recording.unified_memory, recording.unified_memory_note) == (totals, refusal)
    assert (recording.own_calls, recording.stacks) == (frozenset({5}), None)


def test_a_finished_trace_whose_callbacks_never_failed_has_no_note(monkeypatch):
    monkeypatch.setattr(collect, "_synchronize_current_context", lambda: None)
    monkeypatch.setattr(collect, "device_identity", lambda i: ("G", "1.0"))
    collector = collect.CuptiCollector(0, CallRecorder(None))
    collector.log = _Log(None)
    assert collector.finish().stacks_note is None


# -- kernel names (demangled) ----------------------------------------------------------------


def _kernel(name: str, category: str = "kernel", start_ns: int = 0) -> GpuRecord:
    return GpuRecord(category, name, start_ns, start_ns + 1000, correlation_id=start_ns)


@pytest.fixture
def cxxfilt(tmp_path, monkeypatch):
    """A c++filt alone on PATH that writes what it was given to `given` and answers each
    line with `demangled:` and the line, or runs `state["script"]` instead."""
    folder = tmp_path / "bin"
    folder.mkdir()
    given = tmp_path / "given"
    state = {"script": f'tee {given} | sed "s/^/demangled:/"', "given": given}
    tools = os.environ["PATH"]  # the script's own tee and sed

    def install() -> None:
        tool = folder / "c++filt"
        tool.write_text(f"#!/bin/sh\nPATH={tools}\n{state['script']}\n")
        tool.chmod(0o755)

    monkeypatch.setenv("PATH", str(folder))
    state["install"] = install
    return state


def test_mangled_kernel_names_are_demangled_once_each_and_nothing_else(cxxfilt):
    cxxfilt["install"]()
    records = [
        _kernel("_Z3mulPfi", start_ns=1),
        _kernel("_Z3addPfi", start_ns=2),
        _kernel("_Z3mulPfi", start_ns=3),
        _kernel("plain_kernel", start_ns=4),
        _kernel("_ZHTOD", category="memcpy", start_ns=5),  # a copy's name is no symbol
        _kernel("Z3addPfi", start_ns=6),
    ]
    named = collect.demangled(records)
    assert [r.name for r in named] == [
        "demangled:_Z3mulPfi",
        "demangled:_Z3addPfi",
        "demangled:_Z3mulPfi",
        "plain_kernel",
        "_ZHTOD",
        "Z3addPfi",
    ]
    assert [(r.start_ns, r.correlation_id) for r in named] == [(n, n) for n in range(1, 7)]
    assert cxxfilt["given"].read_text() == "_Z3addPfi\n_Z3mulPfi"  # sorted, once each


@pytest.mark.parametrize(
    "script",
    [
        'echo "one line for two names"',  # an answer that does not pair with the names
        "exit 3 # and no answer at all",
        "sleep 0.1; kill -9 $$",  # killed
    ],
)
def test_a_c_filt_that_answers_wrongly_leaves_the_names_mangled(cxxfilt, script):
    cxxfilt["script"] = script
    cxxfilt["install"]()
    records = [_kernel("_Z3mulPfi"), _kernel("_Z3addPfi")]
    assert collect.demangled(records) == records


def test_without_c_filt_or_mangled_names_the_records_are_kept_as_they_are(cxxfilt, tmp_path):
    records = [_kernel("_Z3mulPfi")]
    assert collect.demangled(records) is records  # no c++filt on PATH
    cxxfilt["script"] = f"touch {tmp_path / 'ran'}"
    cxxfilt["install"]()
    plain = [_kernel("plain_kernel"), _kernel("_Zcopy", category="memcpy")]
    assert collect.demangled(plain) is plain
    assert not (tmp_path / "ran").exists()  # not run for nothing


def test_a_c_filt_that_cannot_run_leaves_the_names_mangled(cxxfilt):
    cxxfilt["install"]()
    (cxxfilt["given"].parent / "bin" / "c++filt").write_text("#!/nonexistent/shell\n")
    records = [_kernel("_Z3mulPfi")]
    assert collect.demangled(records) == records


# -- which folders are whose (memprof.trace.stacks) ----------------------------------------


def test_this_pythons_library_folders_are_found_resolved_and_sorted(monkeypatch, tmp_path):
    real = tmp_path / "real" / "site-packages"
    real.mkdir(parents=True)
    (tmp_path / "link").mkdir()
    (tmp_path / "link" / "site-packages").symlink_to(real)
    debian = tmp_path / "dist-packages"
    debian.mkdir()
    plain = tmp_path / "lib"
    plain.mkdir()
    extra = [str(tmp_path / "link" / "site-packages"), str(debian), str(plain)]
    monkeypatch.setattr(sys, "path", [*sys.path, *extra])
    folders = stacks.python_library_folders()
    assert folders == sorted(set(folders))
    wanted = [sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib")]
    wanted += [*site.getsitepackages(), site.getusersitepackages(), str(real), str(debian)]
    assert {os.path.realpath(folder) for folder in wanted} <= set(folders)
    assert str(plain) not in folders and "" not in folders
    assert str(tmp_path / "link" / "site-packages") not in folders  # resolved


def test_a_package_is_found_by_its_folders_a_module_by_its_file_and_neither_if_absent(
    monkeypatch, tmp_path
):
    import json

    (tmp_path / "lone_module_of_a_test.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert stacks.package_folders("json") == [os.path.realpath(os.path.dirname(json.__file__))]
    module = stacks.package_folders("lone_module_of_a_test")
    assert module == [str((tmp_path / "lone_module_of_a_test.py").resolve())]
    assert stacks.package_folders("no_such_package_here") == []
    assert stacks.package_folders("") == []


def test_a_scripts_filter_holds_the_script_and_the_packages_folders(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("")
    code = CodeFilter.for_program(str(script), None)
    assert (code.program_folder, code.program) == (str(tmp_path), (str(script),))
    assert code.own == (os.path.dirname(os.path.dirname(os.path.realpath(stacks.__file__))),)
    assert code.named == tuple(
        f for n in stacks.LIBRARY_PACKAGES for f in stacks.package_folders(n)
    )
    assert code.skipped == tuple(
        f for n in stacks.SKIPPED_PACKAGES for f in stacks.package_folders(n)
    )
    assert code.libraries == tuple(stacks.python_library_folders())


def test_a_modules_filter_is_the_working_folder_and_its_top_packages_folders(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = CodeFilter.for_program(None, "xml.etree.ElementTree")
    assert code.program_folder == str(tmp_path.resolve())
    assert code.program == tuple(stacks.package_folders("xml"))
    assert code.program  # xml's folder, not xml.etree's nor nothing


def test_cupti_and_the_libraries_named_are_found_where_installed(monkeypatch, tmp_path):
    for name in ("cupti", "torch"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    code = CodeFilter.for_program(None, "json")
    assert str(tmp_path / "cupti") in code.skipped and str(tmp_path / "cupti") not in code.named
    assert str(tmp_path / "torch") in code.named and str(tmp_path / "torch") not in code.skipped


def test_each_of_sysconfigs_and_sites_folders_is_a_librarys(monkeypatch, tmp_path):
    named = ("stdlib", "platstdlib", "purelib", "platlib", "site", "user")
    paths = {name: str(tmp_path / name) for name in named}
    monkeypatch.setattr(sysconfig, "get_paths", lambda: {k: paths[k] for k in named[:4]})
    monkeypatch.setattr(site, "getsitepackages", lambda: [paths["site"]])
    monkeypatch.setattr(site, "getusersitepackages", lambda: paths["user"])
    monkeypatch.setattr(sys, "path", [])
    assert stacks.python_library_folders() == sorted(paths.values())


def test_a_site_module_without_its_functions_leaves_sysconfigs_folders(monkeypatch, tmp_path):
    """virtualenv's old site.py had no getsitepackages: not a failure."""
    monkeypatch.setattr(sysconfig, "get_paths", lambda: {"stdlib": str(tmp_path)})
    monkeypatch.delattr(site, "getsitepackages")
    monkeypatch.delattr(site, "getusersitepackages")
    monkeypatch.setattr(sys, "path", [])
    assert stacks.python_library_folders() == [str(tmp_path)]


# -- what to run, and the Result ---------------------------------------------------------------


def _refusal(program: collect.Program) -> str:
    with pytest.raises(InvalidArgument) as raised:
        collect.check_program(program)
    return str(raised.value)


def test_no_program_is_refused_saying_how_to_name_one():
    with pytest.raises(InvalidArgument) as raised:
        collect.parse_target([], None)
    assert str(raised.value) == "name the program to trace: memprof trace SCRIPT.py [ARGS...]"


def test_a_program_python_could_not_run_is_refused_in_its_own_words(tmp_path, monkeypatch):
    assert _refusal(collect.Program("", None)) == "memprof trace: the program's file name is empty"
    folder = tmp_path / "tool"
    folder.mkdir()
    assert _refusal(collect.Program(str(folder), None)) == (
        f"cannot run {folder}: a folder without __main__.py"
    )
    (folder / "__main__.py").write_text("")
    collect.check_program(collect.Program(str(folder), None))  # runs as python FOLDER does
    assert _refusal(collect.Program(None, ".tool")) == (
        "-m '.tool': not a module name (such as pkg.tool)"
    )
    broken = types.ModuleType("broken_module_of_a_test")
    broken.__spec__ = None
    monkeypatch.setitem(sys.modules, "broken_module_of_a_test", broken)
    assert _refusal(collect.Program(None, "broken_module_of_a_test.x")) == (
        "cannot run -m broken_module_of_a_test.x: broken_module_of_a_test.__spec__ is None"
    )


def _traced(**options) -> collect.Result:
    gpu = [GpuRecord("memcpy", "HTOD", 0, 1000, 4096, "pinned", "device", True, 1)]
    recording = collect.Recording(gpu, [], gpu_name="NVIDIA H200", driver_version="580")
    return collect.trace_result(
        collect.Program("p.py", None), collect.Outcome(0), recording, 0, {}, **options
    )


def test_a_traces_lines_note_says_why_there_are_no_lines_only_where_there_are_none():
    default = _traced()
    assert (default.parameters.stack_depth, default.parameters.stacks) == (0, False)
    assert default.extra.lines_note == "not recorded (--stack-depth 0)"
    assert _traced(stack_depth=5).extra.lines_note is None
    assert _traced(stack_depth=5, stacks=True).parameters.stacks is True


def test_small_copy_costs_measured_by_the_wall_clock_say_so(tmp_path):
    measured = {**GOOD_SMALL, "costs": [{**COST, "batched_ms": None}]}
    figures = collect.small_copy_figures(
        0, *GPU, "cache", lambda device: measured, tmp_path / "small_copies.json"
    )
    assert (figures.clock, figures.copies) == ("wall", 128)
    assert figures.how == "measured now with memprof smallcopies (then cached)"


PROGRAM = """\
import sys
if __name__ == "__main__":
    with open(sys.argv[1], "w") as seen:
        seen.write(sys.argv[0])
"""


def test_a_script_and_a_module_run_as_main_with_pythons_argv(tmp_path, monkeypatch):
    """`python SCRIPT` and `python -m MODULE` both run as __main__, argv[0] the file."""
    script = tmp_path / "prog_for_trace.py"
    script.write_text(PROGRAM)
    monkeypatch.syspath_prepend(str(tmp_path))
    for program in (
        collect.Program(str(script), None, (str(tmp_path / "seen"),)),
        collect.Program(None, "prog_for_trace", (str(tmp_path / "seen"),)),
    ):
        before = time.perf_counter()
        outcome = collect.run_program(program)
        took = time.perf_counter() - before
        assert (outcome.exit_code, outcome.error) == (0, None)
        assert 0 < outcome.wall_s <= took
        assert (tmp_path / "seen").read_text() == str(script)
        (tmp_path / "seen").unlink()


def test_cudnn_benchmark_is_read_only_of_a_program_that_imported_torch(tmp_path, monkeypatch):
    torch = SimpleNamespace(backends=SimpleNamespace(cudnn=SimpleNamespace(benchmark=True)))
    monkeypatch.setitem(sys.modules, "torch", torch)  # memprof's or another's, not the program's
    script = tmp_path / "plain.py"
    script.write_text("x = 1\n")
    outcome = collect.run_program(collect.Program(str(script), None))
    assert (outcome.cudnn_benchmark, outcome.libraries) == (None, ())


def test_an_async_copy_into_pageable_memory_blocks_and_one_without_a_call_took_none():
    into_pageable = GpuRecord("memcpy", "DTOH", 0, 1000, 4096, "device", "pageable", True, 9)
    assert collect.is_blocking(into_pageable)
    (group,) = collect.copy_groups([into_pageable], [])
    assert (group.calls, group.call_ms, group.blocked_ms, group.blocking_copies) == (1, 0, 0, 1)
