"""What memprof saves loads back: a trace whose host-to-host copies block the host (as XLA's
do) is counted alike in its copy groups and its blocked rows, and saved; a Result that the
loader would refuse is shown, not saved, its records kept beside the file for a bug report,
and memprof exits 70 naming the check."""

from __future__ import annotations

from pathlib import Path

from memprof.experiments import load as load_result
from tests.test_trace_lines import fake_gpu, run_trace  # noqa: F401 (the fixture)

MiB = 1 << 20

# XLA's host-to-host copies, as the H200's JAX trace held them: Async calls from pageable
# memory into pinned (the driver copies them on the host before the call returns), beside
# a synchronous pinned-to-pinned one and an upload.
HOST_TO_HOST = """\
from fake_gpu_library import gpu

for _ in range(3):
    gpu.cupti.memcpy("HTOH", 1 << 20, 40_000, src=1, dst=2, flags=1, call="cuMemcpyAsync")
gpu.cupti.memcpy("HTOH", 4096, 2_000, src=2, dst=2, flags=0, call="cuMemcpyAsync")
gpu.to_device(1 << 20, pinned=True)
"""


def test_blocking_host_to_host_copies_are_counted_alike_and_the_trace_loads(
    fake_gpu,  # noqa: F811
    tmp_path: Path,
    unfolded_advice,
):
    script = tmp_path / "host_to_host.py"
    script.write_text(HOST_TO_HOST)
    saved = tmp_path / "t.json"
    ran = run_trace("--json", saved, script)
    assert ran.exit_code == 0, ran.output
    result = load_result(saved)
    groups = {(g.direction, g.source, g.destination): g for g in result.extra.copies}
    staged = groups["HtoH", "pageable", "pinned"]
    assert (staged.calls, staged.blocking_calls, staged.blocking_copies) == (3, 0, 3)
    synchronous = groups["HtoH", "pinned", "pinned"]
    assert (synchronous.calls, synchronous.blocking_copies) == (1, 1)
    assert groups["HtoD", "pinned", "device"].blocking_copies == 0
    blocked = {(b.name, b.bytes): b.calls for b in result.extra.blocked}
    assert blocked == {
        ("[CUDA memcpy HtoH] pageable -> pinned", MiB): 3,
        ("[CUDA memcpy HtoH] pinned -> pinned", 4096): 1,
    }
    text = " ".join(ran.stderr.split())
    assert "4 copies blocked the host" in text
    assert "3 asynchronous calls from or to pageable memory" in text


def unloadable_trace(monkeypatch) -> None:
    """Plant the H200's bug: a blocked row the copy groups do not count."""
    from memprof.trace import collect

    counted = collect.blocked_copies

    def one_too_many(gpu, api):
        rows = counted(gpu, api)
        rows[0].calls += 1
        return rows

    monkeypatch.setattr(collect, "blocked_copies", one_too_many)


def test_a_run_the_loader_would_refuse_is_shown_not_saved_and_kept_for_a_bug_report(
    fake_gpu,  # noqa: F811
    tmp_path: Path,
    monkeypatch,
):
    unloadable_trace(monkeypatch)
    script = tmp_path / "host_to_host.py"
    script.write_text(HOST_TO_HOST)
    saved, table = tmp_path / "t.json", tmp_path / "t.csv"
    saved.write_text("an earlier run\n")
    ran = run_trace("--json", saved, "--csv", table, script)
    assert ran.exit_code == 70, ran.output
    assert "Profiling result:" in ran.stderr  # shown all the same
    assert saved.read_text() == "an earlier run\n" and not table.exists()
    (kept,) = tmp_path.glob("t.json.*.unloadable.json")
    error = ran.stderr.strip().splitlines()[-1]
    check = "the trace result: extra.blocked[0].calls is 4, but 3 such copies were measured"
    assert error.startswith(f"memprof: error: {check}: the loader would refuse it")
    assert f"--json {saved} and --csv {table} was not written" in error
    assert f"kept in {kept} for a bug report" in error
    assert '"command": "trace"' in kept.read_text()


def test_a_refused_run_sent_to_stdout_keeps_its_records_in_the_temporary_folder(
    tmp_path: Path, monkeypatch, capsys
):
    """`--json -` of a run the loader would refuse (a GPU command's: trace's stdout is the
    program's, where no output may go): nothing on stdout, the records in the temporary
    folder, exit 70."""
    import pytest

    from memprof.errors import ExitCode, MemprofError
    from memprof.experiments import summarize
    from memprof.output.emit import Output, emit
    from tests.conftest import FIXTURES

    folder = tmp_path / "temporary"
    folder.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(folder))
    result = load_result(FIXTURES / "h200_pinned_p20.json")
    result.measurements[0].bytes = 3  # bytes its parameters do not make: refused
    with pytest.raises(MemprofError) as raised:
        emit([result], summarize, Output.named("-", None, quiet=True, no_color=True))
    assert raised.value.exit_code == ExitCode.INTERNAL
    assert capsys.readouterr().out == ""  # no half a file for the reader of the pipe
    (kept,) = folder.glob("memprof.*.unloadable.json")
    assert str(kept) in str(raised.value)


def test_a_run_saved_nowhere_is_not_held_to_the_loader(
    fake_gpu,  # noqa: F811
    tmp_path: Path,
    monkeypatch,
):
    unloadable_trace(monkeypatch)
    script = tmp_path / "host_to_host.py"
    script.write_text(HOST_TO_HOST)
    assert run_trace(script).exit_code == 0
    assert list(tmp_path.glob("*.unloadable.json")) == []


def test_report_saves_what_it_has_just_loaded_without_checking_it_twice(tmp_path, monkeypatch):
    """The loader's checks held as report read the file: a second pass would double the time
    of saving a large file again."""
    from typer.testing import CliRunner

    import memprof.experiments
    from memprof.cli import app

    monkeypatch.setattr(memprof.experiments, "refusal", lambda result: "checked twice")
    fixture = Path(__file__).parent / "fixtures" / "h200_trace_pycuda.json"
    saved = tmp_path / "again.json"
    ran = CliRunner().invoke(app, ["report", "--quiet", str(fixture), "--json", str(saved)])
    assert ran.exit_code == 0, ran.output
    assert load_result(saved).command == "trace"
