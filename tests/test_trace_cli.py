"""`memprof trace` on the command line without a GPU: arguments, errors, and the program's
exit code, output, exceptions and Ctrl-C passing through (CUPTI replaced by a fake collector)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprof.cli import app
from memprof.errors import InvalidArgument
from memprof.experiments import load as load_result
from memprof.experiments.trace import WORK_CALLS_NOTE
from memprof.trace import collect as tracing
from memprof.trace.stacks import CallRecorder, call_kind
from tests.test_trace import program_records

runner = CliRunner()


class FakeCollector:
    """Stands in for CUPTI: records nothing itself, hands back fixed records."""

    started = 0
    calls: CallRecorder | None = None  # the recorder the last one was handed

    def __init__(self, device_index: int = 0, calls: CallRecorder | None = None) -> None:
        self.device_index = device_index
        FakeCollector.calls = calls

    def start(self) -> None:
        FakeCollector.started += 1

    def finish(self) -> tracing.Recording:
        """The calls the recorder would have been called back for (CallRecorder._enable)."""
        gpu, api = program_records()
        every = self.calls is not None and self.calls.every_call
        api = [call for call in api if every or call_kind(call.name) is not None]
        return tracing.Recording(gpu, api, None, "no counters here", "Fake GPU", "1.0")


@pytest.fixture
def fake_cupti(monkeypatch):
    FakeCollector.started = 0
    monkeypatch.setattr(tracing, "CuptiCollector", FakeCollector)
    return FakeCollector


def script(tmp_path: Path, body: str, name: str = "program.py") -> Path:
    path = tmp_path / name
    path.write_text(body)
    return path


def invoke(*arguments: str):
    return runner.invoke(app, ["trace", "--bandwidth", "none", *arguments])


def test_targets_parse_as_python_takes_them():
    assert tracing.parse_target(["a.py", "-x", "--json", "y"], None) == tracing.Program(
        "a.py", None, ("-x", "--json", "y")
    )
    assert tracing.parse_target(["1", "2"], "pkg.tool") == tracing.Program(
        None, "pkg.tool", ("1", "2")
    )
    with pytest.raises(InvalidArgument, match="name the program"):
        tracing.parse_target([], None)


def test_a_missing_script_is_one_line_before_cupti_starts(tmp_path, fake_cupti):
    result = invoke(str(tmp_path / "absent.py"))
    assert result.exit_code == 2
    assert (
        result.output.strip()
        == f"memprof: error: cannot open {tmp_path / 'absent.py'}: no such file"
    )
    assert fake_cupti.started == 0


def test_stacks_without_a_stack_depth_is_one_line_before_the_program_runs(tmp_path, fake_cupti):
    program = tmp_path / "ran.py"
    program.write_text(f"open({str(tmp_path / 'ran.txt')!r}, 'w').close()\n")
    result = runner.invoke(app, ["trace", "--stacks", "--stack-depth", "0", str(program)])
    assert result.exit_code == 2
    assert result.output.strip() == (
        "memprof: error: --stacks shows each line's callers, but --stack-depth 0 records no "
        "lines: give a depth of 1 or more"
    )
    assert fake_cupti.started == 0 and not (tmp_path / "ran.txt").exists()
    assert (
        runner.invoke(app, ["trace", "--stacks", "--stack-depth", "1", str(program)]).exit_code == 0
    )
    assert (tmp_path / "ran.txt").exists()


def test_a_missing_module_is_one_line(fake_cupti):
    result = runner.invoke(app, ["trace", "-m", "no_such_module_here"])
    assert result.exit_code == 2
    assert "no module named no_such_module_here" in result.output
    assert fake_cupti.started == 0


def test_exit_code_output_and_arguments_pass_through(tmp_path, fake_cupti):
    seen = tmp_path / "argv.txt"
    program = script(
        tmp_path,
        "import sys\n"
        f"open({str(seen)!r}, 'w').write(repr(sys.argv))\n"
        "print('program output')\n"
        "raise SystemExit(3)\n",
    )
    saved_argv = sys.argv[:]
    result = invoke(str(program), "--json", "x.json", "-q")
    assert result.exit_code == 3, result.output
    assert seen.read_text() == repr([str(program), "--json", "x.json", "-q"])
    assert result.stdout == "program output\n"  # the profile goes to stderr
    assert "Profiling result:" in result.stderr
    assert f"{program} exited with code 3" in " ".join(result.stderr.split())
    assert not Path("x.json").exists()
    assert sys.argv == saved_argv
    assert fake_cupti.started == 1


def test_a_program_that_ends_normally_exits_0_and_a_message_exits_1(tmp_path, fake_cupti):
    assert invoke(str(script(tmp_path, "x = 1\n"))).exit_code == 0
    result = invoke(str(script(tmp_path, "import sys\nsys.exit('giving up')\n", "msg.py")))
    assert result.exit_code == 1
    assert result.stderr.startswith("giving up\n")


def test_an_exception_prints_the_programs_traceback_then_the_profile(tmp_path, fake_cupti):
    program = script(tmp_path, "def load():\n    raise ValueError('bad input')\n\nload()\n")
    result = invoke(str(program))
    assert result.exit_code == 1
    stderr = result.stderr
    assert stderr.startswith("Traceback (most recent call last):\n")
    assert f'File "{program}", line 4, in <module>' in stderr
    assert "ValueError: bad input" in stderr
    assert "runpy" not in stderr and "memprof" not in stderr.split("ValueError")[0]
    assert stderr.index("ValueError: bad input") < stderr.index("Profiling result:")


def test_ctrl_c_in_the_program_ends_with_130_after_the_profile(tmp_path, fake_cupti):
    result = invoke(str(script(tmp_path, "raise KeyboardInterrupt\n")))
    assert result.exit_code == 130
    assert "KeyboardInterrupt" in result.stderr
    assert "Profiling result:" in result.stderr


def test_a_module_runs_with_the_working_directory_on_its_path(tmp_path, fake_cupti, monkeypatch):
    script(tmp_path, "HELPER = 'found'\n", "tracehelper.py")
    script(
        tmp_path,
        "import sys\nfrom tracehelper import HELPER\nprint(HELPER, sys.argv[1:])\n",
        "tracemain.py",
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # find_spec looks before the run
    result = runner.invoke(app, ["trace", "--bandwidth", "none", "-m", "tracemain", "a", "-b"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "found ['a', '-b']\n"


def test_a_script_imports_its_neighbours(tmp_path, fake_cupti):
    script(tmp_path, "VALUE = 42\n", "neighbour_for_trace.py")
    program = script(tmp_path, "from neighbour_for_trace import VALUE\nprint(VALUE)\n")
    result = invoke(str(program))
    assert result.exit_code == 0, result.output
    assert result.stdout == "42\n"
    assert str(tmp_path) not in sys.path  # put back afterwards


def test_json_of_a_trace_renders_again_with_report(tmp_path, fake_cupti):
    saved = tmp_path / "trace.json"
    program = script(tmp_path, "pass\n")
    assert invoke("--json", str(saved), "-q", str(program)).exit_code == 0
    result = load_result(saved)
    assert result.command == "trace"
    assert result.extra.gpu_name == "Fake GPU"
    report = runner.invoke(app, ["report", str(saved)])
    assert report.exit_code == 0, report.output
    assert "[CUDA memcpy HtoD] pageable -> device" in report.output
    assert runner.invoke(app, ["diff", str(saved), str(saved)]).exit_code == 0


def test_only_work_calls_are_recorded_unless_all_calls_is_given(tmp_path, fake_cupti):
    program = script(tmp_path, "pass\n")
    work, every = tmp_path / "work.json", tmp_path / "every.json"
    assert invoke("--json", str(work), "-q", str(program)).exit_code == 0
    assert fake_cupti.calls.every_call is False  # CUPTI is asked to leave the others out
    result = load_result(work)
    calls = {m.name for m in result.measurements if m.group == "api"}
    assert calls == {"cuMemcpyHtoD_v2", "cuMemcpyHtoDAsync_v2", "cuMemcpyDtoH_v2"}
    assert result.parameters.all_calls is False
    shown = runner.invoke(app, ["report", str(work)])
    assert WORK_CALLS_NOTE.format(launch="") in " ".join(shown.output.split())
    assert invoke("--all-calls", "--json", str(every), "-q", str(program)).exit_code == 0
    assert fake_cupti.calls.every_call is True
    result = load_result(every)
    assert "cuCtxCreate_v2" in {m.name for m in result.measurements if m.group == "api"}
    assert result.parameters.all_calls is True
    shown = runner.invoke(app, ["report", str(every)])
    assert shown.exit_code == 0 and "--all-calls" not in shown.output


def test_a_file_of_work_calls_holding_another_call_is_refused(tmp_path, fake_cupti):
    saved = tmp_path / "work.json"
    assert invoke("--json", str(saved), "-q", str(script(tmp_path, "pass\n"))).exit_code == 0
    data = json.loads(saved.read_text())
    call = next(m for m in data["measurements"] if m["group"] == "api")
    data["measurements"].append({**call, "name": "cuCtxCreate_v2"})
    del data["extra"]["timeline"]  # which would lack the call (test_trace_timeline)
    saved.write_text(json.dumps(data))
    with pytest.raises(InvalidArgument, match="'cuCtxCreate_v2', which neither launches"):
        load_result(saved)
    data["parameters"]["all_calls"] = True  # every call: any call belongs
    saved.write_text(json.dumps(data))
    assert load_result(saved).parameters.all_calls is True


def test_the_advice_figures_are_measured_by_memprof_run_in_this_process(
    tmp_path, monkeypatch, fake_cupti
):
    """With no cache, trace measures this GPU's pinned bandwidth and small-copy costs with
    memprof's own sweep and smallcopies through memprof.run, in this process (no subprocess),
    on the program's GPU, and saves the figures those Results give."""
    import subprocess

    from memprof import api
    from memprof import cli_trace as command
    from memprof.experiments import experiment_named
    from memprof.model import params as declared
    from tests.conftest import load_fixture

    recorded = {name: load_fixture(name) for name in ("sweep", "smallcopies")}
    asked = []

    def run(name: str, *, device: int = 0, **params) -> object:
        declared.make(experiment_named(name).Params, **params)  # as memprof.run checks them
        asked.append((name, device, params))
        return recorded[name]

    def no_subprocess(*arguments, **settings):
        raise AssertionError("trace started a process")

    monkeypatch.setattr(api, "run", run)
    monkeypatch.setattr(subprocess, "Popen", no_subprocess)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    saved = tmp_path / "trace.json"
    program = script(tmp_path, "print('ran')\n")
    ran = runner.invoke(app, ["trace", "--device", "1", "--json", str(saved), str(program)])
    assert ran.exit_code == 0, ran.output
    sweep = {"powers": (24,), "kinds": ("pinned",), "repeat": 5, "warmup": 1}
    assert asked == [("sweep", 1, sweep), ("smallcopies", 1, {"directions": ("h2d",)})]
    extra = load_result(saved).extra
    figures = command.pinned_bandwidth_of(recorded["sweep"])
    assert {k: extra.pinned_bandwidth[k] for k in figures} == figures
    assert extra.pinned_bandwidth["how"] == "measured now with memprof sweep (then cached)"
    costs = command.small_copy_costs(recorded["smallcopies"])
    assert extra.small_copies.copies == costs["copies"] == 128
    powers = recorded["smallcopies"].parameters.powers  # of float32: 4 KiB to 256 KiB
    assert [cost.bytes for cost in extra.small_copies.costs] == [4 << p for p in powers]
    assert extra.small_copies.costs[0].pinned_ms == costs["costs"][0]["pinned_ms"]
