"""The Python API's refusals word for word, its edges on both sides, and what it hands on: each
wrong argument is named with the kind it was (a None is 'None'), each value just inside an edge
is taken and just outside it refused, and what a caller gives (progress, timing, affinity, the
noise target) reaches the measuring core unchanged (issue 37: mutmut 3.8.1 on memprof/api.py)."""

from __future__ import annotations

import io
import json
import re
import subprocess
from pathlib import Path

import pytest
from rich.console import Console

import memprof
from memprof import api
from memprof.errors import InvalidArgument, SaveFailed
from memprof.experiments import experiment_named
from memprof.experiments.base import UNREAD, no_progress
from memprof.model.results import RUN_SET_FORMAT
from memprof.output.render import render_result
from tests.conftest import FIXTURES

PINNED = FIXTURES / "h200_pinned_p20.json"


@pytest.fixture
def runs(monkeypatch):
    """What memprof.run and run_each_gpu hand the measuring core (no GPU here)."""
    made = []

    def record(experiment, params, options, progress, inputs=None):
        made.append((experiment.name, params, options, progress, inputs))
        return f"{experiment.name} on {options.device}", [f"{experiment.name} {options.device}"]

    monkeypatch.setattr(api, "run_experiment", record)
    return made


PROGRESS = "progress must be a function (description, done, total), not"


@pytest.mark.parametrize(
    ("command", "keywords", "error", "words"),
    [
        (None, {}, TypeError, "command must be a str such as 'pinned', not None"),
        (5, {}, TypeError, "command must be a str such as 'pinned', not int"),
        (
            "pinned",
            {"device": "all"},
            InvalidArgument,
            "device='all': give one GPU's index (0, 1, ...); memprof.api.run_each_gpu runs "
            "every GPU in turn",
        ),
        ("pinned", {"device": "0"}, TypeError, "device must be a GPU index (int), not str"),
        ("pinned", {"device": 1.0}, TypeError, "device must be a GPU index (int), not float"),
        ("pinned", {"timing": 5}, TypeError, "timing must be a str, not int"),
        (
            "pinned",
            {"timing": "gpu"},
            InvalidArgument,
            "timing='gpu': choose from auto, cupti, events",
        ),
        ("pinned", {"progress": 5}, TypeError, f"{PROGRESS} int"),
        ("pinned", {"progress": None}, TypeError, f"{PROGRESS} None"),
        ("pinned", {"max_noise": "2"}, TypeError, "max_noise must be a number, not str"),
        ("pinned", {"max_noise": True}, TypeError, "max_noise must be a number, not bool"),
        ("pinned", {"affinity": 1}, TypeError, "affinity must be True or False, not int"),
    ],
)
def test_a_wrong_argument_to_run_is_refused_in_these_words(runs, command, keywords, error, words):
    with pytest.raises(error) as refused:
        memprof.run(command, **keywords)
    assert str(refused.value) == f"memprof.run: {words}"
    assert runs == []


@pytest.mark.parametrize(
    ("max_noise", "taken"), [(1e-9, True), (100, True), (0, False), (-1, False), (100.001, False)]
)
def test_max_noise_is_a_percentage_above_0_up_to_100(runs, max_noise, taken):
    if taken:
        memprof.run("pinned", max_noise=max_noise)
        assert runs[0][2].max_noise_pct == max_noise
        return
    with pytest.raises(InvalidArgument) as refused:
        memprof.run("pinned", max_noise=max_noise)
    assert str(refused.value) == (
        f"memprof.run: max_noise: {max_noise:g} is outside the allowed range (0, 100] %"
    )
    assert runs == []


def test_run_hands_on_its_progress_timing_and_affinity(runs):
    def shown(description: str, done: int, total: int) -> None:
        pass

    memprof.run("pinned")
    memprof.run("pinned", progress=shown, timing="events", affinity=False)
    (_, _, default, quiet, _), (_, _, given, told, _) = runs
    assert (default.timing, default.affinity, quiet) == ("auto", True, no_progress)
    assert (given.timing, given.affinity, told) == ("events", False, shown)


def test_run_each_gpu_hands_each_run_what_it_was_given_and_keeps_every_failure(runs):
    def shown(description: str, done: int, total: int) -> None:
        pass

    params = experiment_named("pinned").Params(power=12)
    done = api.run_each_gpu("pinned", params, "events", False, shown, count=2, max_noise_pct=2.5)
    assert [(name, options.device) for name, _, options, _, _ in runs] == [
        ("pinned", 0),
        ("pinned", 1),
        ("hostlink", None),
    ]
    for name, chosen, options, progress, inputs in runs:
        assert (options.timing, options.affinity, options.max_noise_pct) == ("events", False, 2.5)
        assert progress is shown
        if name == "pinned":
            assert chosen is params and inputs is None  # pinned reads no file
        else:  # hostlink, over every GPU: its own Params, its inputs its own to read
            assert chosen == experiment_named("hostlink").Params() and inputs is UNREAD
    assert done.cleanup_failures == ["pinned 0", "pinned 1", "hostlink None"]
    api.run_each_gpu("pinned", params, count=1)
    (_, _, options, progress, _) = runs[-1]
    assert (options.timing, options.affinity, progress) == ("auto", True, no_progress)


def test_render_prints_what_the_report_prints_and_names_a_wrong_console():
    result = memprof.load(PINNED)
    rendered, reported = io.StringIO(), io.StringIO()
    memprof.render(result, Console(file=rendered, width=80))
    render_result(result, api.summarize(result), Console(file=reported, width=80))
    assert rendered.getvalue() == reported.getvalue()
    assert "Pinned" in rendered.getvalue() or "pinned" in rendered.getvalue()
    with pytest.raises(TypeError) as refused:
        memprof.render(result, console=5)
    assert str(refused.value) == "memprof.render: console must be a rich Console, not int"


@pytest.mark.parametrize(
    ("value", "kind"), [(5, "int"), ("run.json", "str (memprof.load reads a file)")]
)
def test_frame_and_plot_name_what_they_take_in_full(value, kind):
    for function in ("frame", "plot"):
        with pytest.raises(TypeError) as refused:
            getattr(memprof, function)(value)
        assert str(refused.value) == (
            f"memprof.{function}: results must be a Result or a list of Results (from "
            f"memprof.run or memprof.load), not {kind}"
        )


def test_plot_of_no_result_is_refused_in_these_words():
    with pytest.raises(InvalidArgument) as refused:
        memprof.plot([])
    assert str(refused.value) == ("memprof.plot: results is empty: give a Result or a list of them")


def test_plot_file_names_its_option_or_the_picture_beside_the_run(tmp_path):
    pytest.importorskip("matplotlib")
    saved = tmp_path / "run.json"
    saved.write_bytes(PINNED.read_bytes())
    with pytest.raises(InvalidArgument) as refused:
        api.plot_file([saved], "-")
    assert str(refused.value).startswith("--output -: a picture is written to a file")
    (tmp_path / "run.svg").mkdir()  # where the picture beside it would go
    with pytest.raises(InvalidArgument) as refused:
        api.plot_file([saved], None)
    assert str(refused.value).startswith(f"picture {tmp_path / 'run.svg'}")
    with pytest.raises(InvalidArgument) as refused:
        api.plot_file([Path("/dev/stdin")], None)
    assert str(refused.value) == (
        "/dev/stdin is not a file in a folder of yours, so the picture has no name beside "
        "it: give -o FILE.svg"
    )


def test_a_picture_not_saved_is_save_failed_naming_its_file(tmp_path):
    class Unsaved:
        def save(self, path: Path) -> None:
            raise PermissionError(13, "Permission denied")

    with pytest.raises(SaveFailed, match=re.escape(f"{tmp_path}: not saved: Permission denied")):
        api.save_picture(Unsaved(), tmp_path)


def test_plot_file_names_each_gpus_run_of_a_device_all_file(tmp_path):
    """A file of --device all's runs names each of its GPUs' runs, not the file alone."""
    pytest.importorskip("matplotlib")
    checks = [FIXTURES / "fleet" / f"h200x4_check_gpu{i}.json" for i in range(4)]
    every = tmp_path / "all.json"
    found = [json.loads(path.read_text()) for path in checks]
    every.write_text(json.dumps({"format": RUN_SET_FORMAT, "format_version": 1, "results": found}))
    with pytest.raises(InvalidArgument) as refused:
        api.plot_file([every, PINNED], str(tmp_path / "both.svg"))
    assert str(refused.value) == (
        f"{every}: GPU 0 is a check run and {PINNED} a pinned run: a picture compares runs of "
        "one command"
    )


def test_plot_file_refuses_another_process_descriptor_naming_plot(tmp_path):
    """A run read through another process's descriptor has no folder of ours to go beside."""
    pytest.importorskip("matplotlib")
    saved = tmp_path / "run.json"
    saved.write_bytes(PINNED.read_bytes())
    with saved.open("rb") as held:
        other = subprocess.Popen(["sleep", "30"], stdin=held)
    try:
        through = Path(f"/proc/{other.pid}/fd/0")
        if not through.is_file():
            pytest.skip("this system shows no other process's descriptors")
        with pytest.raises(InvalidArgument) as refused:
            api.plot_file([through], None)
    finally:
        other.kill()
        other.wait()
    assert str(refused.value).startswith(f"plot {through}: names a descriptor of another process")


def quiet() -> Console:
    return Console(file=io.StringIO(), width=80)


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (None, "None"),
        (5, "int"),
        ("run.json", "str (memprof.load reads a file)"),
        (b"run.json", "bytes (memprof.load reads a file)"),
        (Path("run.json"), f"{type(Path()).__name__} (memprof.load reads a file)"),
    ],
)
def test_a_result_argument_is_named_with_what_it_was(value, kind):
    """A file's name is told memprof.load reads it; anything else is not."""
    must = "must be a Result (from memprof.run or memprof.load), not"
    result = memprof.load(PINNED)
    for call, named in [
        (lambda: memprof.render(value), "memprof.render: result"),
        (lambda: memprof.diff(value, result, quiet()), "memprof.diff: first"),
        (lambda: memprof.diff(result, value, quiet()), "memprof.diff: second"),
    ]:
        with pytest.raises(TypeError) as refused:
            call()
        assert str(refused.value) == f"{named} {must} {kind}"


def test_diff_names_a_wrong_console_and_a_wrong_only_in_full():
    result = memprof.load(PINNED)
    with pytest.raises(TypeError) as refused:
        memprof.diff(result, result, 5)
    assert str(refused.value) == "memprof.diff: console must be a rich Console, not int"
    with pytest.raises(TypeError) as refused:
        memprof.diff(result, result, quiet(), only=5)
    assert str(refused.value) == (
        "memprof.diff: only must be a str or strings (gbps, gpu, api, host, or a pattern)"
    )


@pytest.mark.parametrize(
    ("fail_above", "taken"),
    [(0, True), (0.5, True), (1000, True), (-0.001, False), (1000.001, False), (True, False)],
)
def test_diff_takes_a_gate_from_0_to_1000_percent(fail_above, taken):
    result = memprof.load(PINNED)
    if taken:
        assert memprof.diff(result, result, quiet(), fail_above=fail_above).fail_above == (
            fail_above / 100
        )
        return
    with pytest.raises(InvalidArgument) as refused:
        memprof.diff(result, result, quiet(), fail_above=fail_above)
    assert str(refused.value) == (
        f"memprof.diff: fail_above is a percentage from 0 to 1000, not {fail_above!r}"
    )


def test_diff_without_a_gate_has_none_and_lists_changed_rows_unless_verbose():
    pinned = memprof.load(PINNED)
    events = memprof.load(FIXTURES / "h200_pinned_p20_events.json")
    shown = memprof.diff(pinned, events, quiet())
    every = memprof.diff(pinned, events, quiet(), verbose=True)
    assert shown.fail_above is None and len(shown.rows) == len(every.rows) == 20
    assert len(shown.summary.tables[0].rows) < len(every.summary.tables[0].rows) == 20


def test_diff_of_runs_with_nothing_in_common_says_so_in_these_words():
    pinned, check = memprof.load(PINNED), memprof.load(FIXTURES / "h200_check.json")
    with pytest.raises(InvalidArgument) as refused:
        memprof.diff(pinned, check, quiet())
    assert str(refused.value) == (
        "A (pinned) and B (check) have no measurement in common: nothing to compare (diff two "
        "runs of one command, at the same sizes)"
    )


def test_plot_names_its_labels_and_its_runs_of_two_commands_in_full():
    pytest.importorskip("matplotlib")
    pinned, check = memprof.load(PINNED), memprof.load(FIXTURES / "h200_check.json")
    for labels, error, words in [
        (5, TypeError, "memprof.plot: labels must be a list of str, not int"),
        ("a", TypeError, "memprof.plot: labels must be a list of str, not str"),
        ([5], TypeError, "memprof.plot: labels must be a list of str"),
        (["a", "b"], InvalidArgument, "labels: 2 given for 1 run: give one per run"),
    ]:
        with pytest.raises(error) as refused:
            memprof.plot(pinned, labels=labels)
        assert str(refused.value) == words
    with pytest.raises(InvalidArgument) as refused:
        memprof.plot([pinned, pinned], labels=["a"])
    assert str(refused.value) == "labels: 1 given for 2 runs: give one per run"
    with pytest.raises(InvalidArgument) as refused:
        memprof.plot([pinned, check])
    assert str(refused.value) == (
        "results[0] is a pinned run and results[1] a check run: a picture compares runs of "
        "one command"
    )
    with pytest.raises(InvalidArgument) as refused:
        memprof.plot(pinned, "-")
    assert str(refused.value) == (
        "memprof.plot: path -: a picture is written to a file, whose name says its format: "
        "give FILE.svg, .png, .pdf or .html"
    )


def test_diff_says_the_first_reason_runs_are_not_comparable_and_counts_the_others():
    pinned, events = memprof.load(PINNED), memprof.load(FIXTURES / "h200_pinned_p20_events.json")
    device1 = memprof.load(FIXTURES / "h200x2_pinned_p20_device1.json")
    zerocopy = memprof.load(FIXTURES / "h200_zerocopy_p20.json")
    allow = "; allow_not_comparable=True compares them anyway"
    for first, second, gate, words in [
        (pinned, events, 5, "timing source: A CUPTI's records, B gated CUDA events"),
        (
            events,
            device1,
            5,
            "host affinity: A host thread on CPUs 0-15, local to the GPU (no NUMA node), B host "
            "thread on CPUs 0-31, local to the GPU (no NUMA node) (and 1 more)",
        ),
        (pinned, zerocopy, None, "commands: A pinned, B zerocopy"),
        (pinned, zerocopy, 5, "commands: A pinned, B zerocopy (and 1 more)"),
    ]:
        with pytest.raises(InvalidArgument) as refused:
            memprof.diff(first, second, quiet(), fail_above=gate)
        assert str(refused.value) == f"A and B are not comparable: {words}{allow}"


def test_diff_names_the_kinds_an_only_may_choose():
    pinned = memprof.load(PINNED)
    with pytest.raises(InvalidArgument) as refused:
        memprof.diff(pinned, pinned, quiet(), only="bogus")
    assert str(refused.value) == (
        "memprof.diff: only='bogus': no figure in both runs is of that kind or matches that "
        "pattern (kinds: gbps, gpu, api, host)"
    )
