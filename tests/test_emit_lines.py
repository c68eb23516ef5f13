"""What memprof.output.emit says and where, word for word, at the edges a mutation round found
untested (issue 37: mutmut 3.8.1 on memprof/output/emit.py): the refusals of Output, the
failed check's line, the notes shown once, the records of a run the loader would refuse, and
what showing and saving say when either fails, each plain under --no-color."""

from __future__ import annotations

import dataclasses
import errno
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from memprof.errors import InvalidArgument, MemprofError, SaveFailed, VerificationFailed
from memprof.experiments import load_all_summarized
from memprof.model.results import Result
from memprof.model.summary import Summary, Table
from memprof.output import emit as emitting
from memprof.output.emit import Output, emit, notes_once
from memprof.output.files import destination

FIXTURES = Path(__file__).parent / "fixtures"
ESCAPE = "\x1b["


def pinned() -> tuple[Result, Summary]:
    [loaded] = load_all_summarized(FIXTURES / "h200_pinned_p20.json")
    return loaded


# -- Output: what the command line's words make, and what it refuses ----------------------------


def test_quiet_beside_verbose_is_refused_in_one_whole_line():
    with pytest.raises(InvalidArgument) as refused:
        Output.named(None, None, True, False, verbose=True)
    assert str(refused.value) == (
        "--quiet prints nothing but errors and --verbose prints every verification: "
        "give one of them"
    )


@pytest.mark.parametrize(("no_color", "verbose"), [(True, True), (False, False)])
def test_the_words_colour_and_verbosity_are_kept_as_given(no_color, verbose):
    output = Output.named(None, None, False, no_color, verbose=verbose)
    assert (output.no_color, output.verbose, output.quiet) == (no_color, verbose, False)


def test_stdout_is_refused_where_it_is_the_traced_programs_in_one_whole_line():
    output = Output(json=destination("-", "--json"), on_stderr=True)
    with pytest.raises(InvalidArgument) as refused:
        output.check()
    assert str(refused.value) == (
        "--json -: stdout is the traced program's, where the two could not be told apart: "
        "send it to a file"
    )


def test_stderr_is_refused_where_the_tables_are_shown_there_in_one_whole_line():
    output = Output(csv=destination("/dev/stderr", "--csv"), on_stderr=True)
    with pytest.raises(InvalidArgument) as refused:
        output.check()
    assert str(refused.value) == (
        "--csv /dev/stderr: the tables are shown on stderr, where the two could not be told "
        "apart: send it to a file, or add --quiet"
    )
    dataclasses.replace(output, quiet=True).check()  # nothing else is on stderr then


# -- emit: the tables, the files, the verdicts --------------------------------------------------


@pytest.mark.parametrize(
    ("failed", "line"),
    [
        (["copy A: FAIL"], "check failed: copy A: FAIL"),
        (["copy A: FAIL", "copy B: FAIL"], "check failed: copy A: FAIL (and 1 more)"),
        (["A", "B", "C"], "check failed: A (and 2 more)"),
    ],
)
def test_a_failed_check_names_the_first_line_and_how_many_more(failed, line):
    result, summary = pinned()
    with pytest.raises(VerificationFailed) as judged:
        emit([result], lambda _: dataclasses.replace(summary, failed=failed), Output(quiet=True))
    assert str(judged.value) == line


def test_verbose_lists_every_verification_and_without_it_they_are_counted(capsys):
    result, summary = pinned()
    for verbose in (False, True):
        emit([result], lambda _: summary, Output(no_color=True, verbose=verbose))
        shown = capsys.readouterr().out
        assert ("(--verbose lists them)" in shown) is not verbose
        assert all((check.name in shown) is verbose for check in result.checks)


def test_the_csv_holds_the_derived_figures_as_exports_csv(tmp_path):
    from memprof.output.export import csv_text

    result, summary = pinned()
    assert summary.derived  # the rows after the measurements' that this test holds
    target = tmp_path / "run.csv"
    emit([result], lambda _: summary, Output.named(None, str(target), True, False))
    expected = csv_text([result], [summary.figures], [summary.derived])
    assert target.read_bytes() == expected.encode()


def test_the_timeline_is_the_first_results_chrome_trace(tmp_path):
    from memprof.output.timeline import chrome_trace

    [(result, summary)] = load_all_summarized(FIXTURES / "h200_trace_pycuda.json")
    target = tmp_path / "run.trace.json"
    output = Output.named(None, None, True, False, timeline=str(target))
    emit([result], lambda _: summary, output, loaded=True)
    assert target.read_text() == chrome_trace(result)


@pytest.mark.parametrize("no_color", [False, True])
def test_no_color_holds_for_the_tables_and_the_saved_line(tmp_path, monkeypatch, capsys, no_color):
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.delenv("NO_COLOR", raising=False)
    result, summary = pinned()
    target = tmp_path / "run.json"
    emit([result], lambda _: summary, Output.named(str(target), None, False, no_color))
    shown = capsys.readouterr()
    assert (ESCAPE in shown.out) is not no_color
    assert (ESCAPE in shown.err) is not no_color
    assert shown.err.replace("\x1b[0m", "").endswith(f"saved {target}\n")


# -- notes shown once -----------------------------------------------------------------------------


def test_a_runs_notes_shown_before_are_named_as_the_runs_above_where_no_gpu_is_named():
    run = SimpleNamespace(gpu_index=None)  # a run that names no GPU (a trace may not)
    shown: dict = {}
    notes_once(Summary(tables=[Table("t", ["a"], notes=["x"])]), run, shown)
    later = Summary(tables=[Table("t", ["a"], notes=["x"]), Table("u", ["a"], notes=["y"])])
    kept = notes_once(later, run, shown)
    assert [table.notes for table in kept.tables] == [["Notes as for the run above."], ["y"]]


# -- a run the loader would refuse: not saved, its records kept --------------------------------


class Refusing:
    """The loader's views, refusing every result with its own words."""

    def __init__(self, why: str) -> None:
        self.why, self.views = why, Result.views

    def __getattr__(self, name: str):
        return getattr(self.views, name)

    def refusal(self, result: Result) -> str:
        return self.why

    def not_one_run(self, results: list[Result]) -> None:
        return None


def refused_line(tmp_path, monkeypatch, count: int, why: str = "bad bytes") -> str:
    result, summary = pinned()
    monkeypatch.setattr(Result, "views", Refusing(why))
    output = Output.named(str(tmp_path / "run.json"), None, True, False)
    with pytest.raises(MemprofError) as unsaved:
        emit([result] * count, lambda _: summary, output)
    assert unsaved.value.exit_code == 70 and not (tmp_path / "run.json").exists()
    return str(unsaved.value)


@pytest.mark.parametrize(
    ("count", "more"), [(1, ""), (2, " (and 1 more results)"), (3, " (and 2 more results)")]
)
def test_a_refused_run_names_its_check_how_many_more_and_every_file_kept(
    tmp_path, monkeypatch, count, more
):
    line = refused_line(tmp_path, monkeypatch, count)
    kept = sorted(tmp_path.glob("*.unloadable.json"))
    assert len(kept) == count
    assert line.startswith(
        f"bad bytes{more}: the loader would refuse it, so --json {tmp_path / 'run.json'} was "
        "not written (a bug in memprof); its records are kept in "
    )
    named = line.split("its records are kept in ", 1)[1].removesuffix(" for a bug report")
    assert sorted(named.split(", ")) == [str(path) for path in kept]
    result, _ = pinned()
    assert kept[0].read_text() == result.to_json() + "\n"


def test_records_that_cannot_be_json_are_kept_as_python_writes_them(tmp_path, monkeypatch):
    def unwritable(self) -> str:
        raise ValueError("Out of range float values are not JSON compliant")

    monkeypatch.setattr(Result, "to_json", unwritable)
    refused_line(tmp_path, monkeypatch, 1)
    [kept] = tmp_path.glob("*.unloadable.json")
    result, _ = pinned()
    assert kept.read_text() == repr(result) + "\n"


@pytest.mark.parametrize(
    ("error", "said"),
    [
        (OSError(errno.EACCES, "Permission denied"), "nowhere (Permission denied)"),
        (OSError("the folder is gone"), "nowhere (the folder is gone)"),
    ],
)
def test_records_no_folder_takes_are_said_to_be_kept_nowhere(tmp_path, monkeypatch, error, said):
    def refuse(*given):
        raise error

    monkeypatch.setattr(emitting, "write_new_beside", refuse)
    assert refused_line(tmp_path, monkeypatch, 1).endswith(f"kept in {said} for a bug report")


# -- showing and saving when either fails --------------------------------------------------------


def failing_json(error: BaseException):
    def text() -> str:
        raise error

    return {"--json": text}


def test_what_showing_and_saving_lost_are_both_said_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(emitting.sys, "stdout", None)
    target = tmp_path / "run.json"
    output = Output.named(str(target), None, False, True)
    with pytest.raises(SaveFailed) as lost:
        emitting._show_then_save(lambda console: None, failing_json(TypeError("no")), output)
    assert (
        str(lost.value)
        == f"stdout: not shown: it is closed; --json {target}: not saved: TypeError: no"
    )


def test_a_closed_stderr_is_named_where_the_tables_go_there(monkeypatch):
    monkeypatch.setattr(emitting.sys, "stderr", None)
    assert emitting._show(lambda console: None, True, True) == ["stderr: not shown: it is closed"]


@pytest.mark.parametrize("on_stderr", [False, True])
@pytest.mark.parametrize(
    ("error", "said"),
    [
        (BrokenPipeError(), None),
        (OSError(errno.ENOSPC, "No space left on device"), "No space left on device"),
        (OSError("the terminal went away"), "the terminal went away"),
    ],
)
def test_a_stream_that_fails_while_showing_is_silenced_and_said(
    monkeypatch, on_stderr, error, said
):
    silenced = []
    monkeypatch.setattr(
        emitting, "silence_closed_stdout", lambda stderr=False: silenced.append(stderr)
    )

    def render(console) -> None:
        raise error

    problems = emitting._show(render, True, on_stderr)
    name = "stderr" if on_stderr else "stdout"
    assert problems == ([] if said is None else [f"{name}: not shown: {said}"])
    assert silenced == [on_stderr]


def test_the_files_are_saved_and_said_plainly_when_showing_failed(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FORCE_COLOR", "1")
    target = tmp_path / "run.json"
    output = Output.named(str(target), None, False, True)

    def render(console) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        emitting._show_then_save(render, failing_json(ValueError("nan")), output)
    assert (
        capsys.readouterr().err == f"memprof: error: --json {target}: not saved: ValueError: nan\n"
    )


def test_a_closed_pipe_on_one_file_leaves_the_next_saved_and_said(tmp_path, monkeypatch, capsys):
    silenced = []
    monkeypatch.setattr(
        emitting, "silence_closed_stdout", lambda stderr=False: silenced.append(stderr)
    )
    target = tmp_path / "run.csv"
    output = Output.named("-", str(target), False, True)
    wanted = {"--json": output.json, "--csv": output.csv}
    texts = {**failing_json(BrokenPipeError()), "--csv": lambda: "a,b\n"}
    assert emitting.save_each(wanted, texts, output) == []
    assert target.read_text() == "a,b\n" and silenced == [False]
    assert capsys.readouterr().err == f"saved {target}\n"


@pytest.mark.parametrize(
    ("name", "silenced"), [("-", [False]), ("/dev/stderr", [True]), ("file.json", [])]
)
def test_a_failed_write_silences_the_stream_it_was_and_no_other(
    tmp_path, monkeypatch, name, silenced
):
    calls = []
    monkeypatch.setattr(
        emitting, "silence_closed_stdout", lambda stderr=False: calls.append(stderr)
    )
    target = destination(name if name != "file.json" else str(tmp_path / name), "--json")
    output = Output(json=target, quiet=True)
    texts = failing_json(OSError(errno.ENOSPC, "No space left on device"))
    assert emitting.save_each({"--json": target}, texts, output) == [
        f"--json {target}: not saved: No space left on device"
    ]
    assert calls == silenced


def test_a_stream_saved_to_is_said_to_be_stdout(monkeypatch, capsys):
    written = []
    monkeypatch.setattr(emitting, "write_output", lambda target, text: written.append(text))
    output = Output.named("-", None, False, True)
    assert emitting.save_each({"--json": output.json}, {"--json": lambda: "{}\n"}, output) == []
    assert (written, capsys.readouterr().err) == (["{}\n"], "saved to stdout\n")


def test_a_diff_is_saved_as_memprofs_json_is_one_space_deep_with_its_reasons(tmp_path):
    """The diff's file reads as a result's does (one space per level, a newline at the end),
    naming both inputs and why they are not comparable."""
    from typer.testing import CliRunner

    from memprof import cli

    first, second = FIXTURES / "h200_pinned_p20.json", FIXTURES / "h200_pinned_p20_events.json"
    target = tmp_path / "diff.json"
    ran = CliRunner().invoke(
        cli.app, ["diff", str(first), str(second), "--json", str(target), "-q"]
    )
    assert ran.exit_code == 0, ran.output
    text = target.read_text()
    document = json.loads(text)
    assert text == json.dumps(document, indent=1) + "\n"
    assert (document["format"], document["a"], document["b"]) == (
        "memprof diff",
        str(first),
        str(second),
    )
    assert document["not_comparable"] and all(
        isinstance(w, str) for w in document["not_comparable"]
    )
