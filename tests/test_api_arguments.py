"""The Python API refuses a wrong argument in a sentence naming it (TypeError for a wrong type,
InvalidArgument for a wrong value), before any GPU work; numpy integers and bools are taken as
the Python values they hold, and numpy floats refused where an integer is declared."""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy
import pytest
from rich.console import Console

import memprof
from memprof import api
from memprof.errors import InvalidArgument
from tests.conftest import FIXTURES


@pytest.fixture
def runs(monkeypatch):
    """What memprof.run hands the measuring core (no GPU here)."""
    made = []

    def record(experiment, params, options, progress):
        made.append((experiment.name, params, options))
        return "a result", []

    monkeypatch.setattr(api, "run_experiment", record)
    return made


def test_numpy_integers_and_bools_are_their_python_values(runs):
    assert memprof.run("pinned", power=numpy.int64(20), repeat=numpy.int32(5)) == "a result"
    memprof.run("managed", prefetch=numpy.bool_(False), device=numpy.int64(1))
    memprof.run("sweep", powers=numpy.arange(10, 13))
    (_, pinned, _), (_, managed, options), (_, sweep, _) = runs
    assert pinned.power == 20 and type(pinned.power) is int and pinned.repeat == 5
    assert managed.prefetch is False and options.device == 1 and type(options.device) is int
    assert sweep.powers == (10, 11, 12)


@pytest.mark.parametrize("value", [numpy.float64(20), 20.0, True, numpy.bool_(True)])
def test_a_float_or_bool_for_an_integer_field_is_still_refused(runs, value):
    with pytest.raises(InvalidArgument, match="power is"):
        memprof.run("pinned", power=value)
    assert runs == []


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda: memprof.run(None), TypeError, "memprof.run: command must be a str"),
        (lambda: memprof.run("pinned", device="all"), InvalidArgument, "run_each_gpu"),
        (lambda: memprof.run("pinned", device="0"), TypeError, "device must be a GPU index"),
        (lambda: memprof.run("pinned", device=True), TypeError, "device must be a GPU index"),
        (lambda: memprof.run("pinned", device=64), InvalidArgument, "device=64: a GPU index"),
        (lambda: memprof.run("pinned", device=-1), InvalidArgument, "device=-1"),
        (lambda: memprof.run("pinned", timing=None), TypeError, "timing must be a str"),
        (lambda: memprof.run("pinned", timing="gpu"), InvalidArgument, "timing='gpu'"),
        (lambda: memprof.run("pinned", affinity="no"), TypeError, "affinity must be True"),
        (lambda: memprof.run("pinned", progress=5), TypeError, "progress must be a function"),
        (lambda: memprof.run("trace"), InvalidArgument, "runs a program"),
        (lambda: memprof.render(None), TypeError, "memprof.render: result must be a Result"),
        (lambda: memprof.render("run.json"), TypeError, "result must be a Result"),
        (lambda: memprof.load(None), TypeError, "memprof.load: path must be a str or a path"),
        (lambda: memprof.load(5), TypeError, "path must be a str or a path, not int"),
        (lambda: memprof.load_all(5), TypeError, "memprof.load_all: path must be a str or a"),
    ],
)
def test_a_wrong_argument_is_named(runs, call, error, words):
    with pytest.raises(error, match=words.replace("(", r"\(")):
        call()
    assert runs == []


def test_device_edges(runs):
    memprof.run("pinned", device=0)
    memprof.run("pinned", device=63)
    assert [options.device for _, _, options in runs] == [0, 63]


def test_render_refuses_a_console_that_is_not_one():
    result = memprof.load(FIXTURES / "h200_info.json")
    with pytest.raises(TypeError, match="console must be a rich Console, not int"):
        memprof.render(result, console=5)


def test_an_experiment_over_every_gpu_takes_no_device(runs):
    memprof.run("peer")
    memprof.run("hostlink", device=None)
    assert [options.device for _, _, options in runs] == [None, None]
    for device in (0, 3, numpy.int64(1)):  # measured every GPU whatever it said
        with pytest.raises(InvalidArgument) as refused:
            memprof.run("peer", device=device)
        assert str(refused.value) == (
            f"memprof.run: device={int(device)}: peer measures every GPU at once and takes "
            "no device"
        )
    assert len(runs) == 2


def test_one_gpus_experiment_measures_gpu_0_where_no_device_is_given(runs):
    memprof.run("pinned")
    memprof.run("pinned", device=None)
    memprof.run("pinned", device=numpy.int64(2))
    assert [options.device for _, _, options in runs] == [0, 0, 2]


def test_max_noise_is_a_target_unless_repeat_fixes_the_count(runs):
    memprof.run("pinned")
    memprof.run("pinned", max_noise=numpy.float64(2.5))
    memprof.run("pinned", repeat=5)
    (_, _, default), (_, _, given), (_, exact, fixed) = runs
    assert default.max_noise_pct == 1.0 and given.max_noise_pct == 2.5
    assert exact.repeat == 5 and fixed.max_noise_pct == 1.0  # unused: exactly 5
    with pytest.raises(InvalidArgument, match=r"max_noise decides .* repeat=N repeats exactly"):
        memprof.run("pinned", repeat=5, max_noise=2)
    assert len(runs) == 3


@pytest.mark.parametrize(
    ("keywords", "words"),
    [
        ({"verbose": "yes"}, "memprof.diff: verbose must be True or False, not str"),
        ({"verbose": None}, "memprof.diff: verbose must be True or False, not None"),
        ({"only": 5}, r"memprof.diff: only must be a str or strings"),
        ({"only": [b"gpu"]}, r"memprof.diff: only must be a str or strings"),
    ],
)
def test_diff_names_its_own_wrong_argument(keywords, words):
    """Not another function's argument (affinity), nor Python's 'int is not iterable'."""
    result = memprof.load(FIXTURES / "h200_pinned_p20.json")
    with pytest.raises(TypeError, match=words):
        memprof.diff(result, result, **keywords)


def test_diff_takes_a_numpy_bool_for_verbose():
    result = memprof.load(FIXTURES / "h200_pinned_p20.json")
    assert memprof.diff(result, result, verbose=numpy.bool_(True)).verdict == "passed"


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("run.svg/", "path run.svg/: names a directory (it ends in /)"),
        ("-", "path -: a picture is written to a file"),
        ("/dev/stdout", "path /dev/stdout: a picture is written to a file"),
    ],
)
def test_plot_takes_a_picture_name_as_the_command_line_does(tmp_path, monkeypatch, name, words):
    """As `plot -o`: a name ending in / is a folder, never the file run.svg (Path() drops
    the slash), and a stream is no picture's file."""
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    result = memprof.load(FIXTURES / "h200_pinned_p20.json")
    with pytest.raises(InvalidArgument, match=re.escape(f"memprof.plot: {words}")):
        memprof.plot(result, name)
    assert list(tmp_path.iterdir()) == []


def test_one_size_with_several_sizes_is_refused_before_a_run_the_loader_would_refuse(runs):
    """single_size (what --power sets) with two powers was measured, and its saved Result was
    then refused by memprof.load ('parameters.powers has 2 sizes, but single_size says one')."""
    with pytest.raises(InvalidArgument, match="powers has 2 sizes, but single_size says one"):
        memprof.run("zerocopy", powers=(5, 6), single_size=True)
    memprof.run("zerocopy", powers=(5,), single_size=True)
    memprof.run("zerocopy", powers=(5, 6))
    assert [params.powers for _, params, _ in runs] == [(5,), (5, 6)]


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda: memprof.load("run.json\0"), "cannot read run.json"),
        (lambda: memprof.load_all("run.json\0"), "cannot read run.json"),
        (lambda: memprof.run("check", reference="run.json\0"), "--reference: cannot read"),
        (lambda: memprof.run("check", thresholds="t.json\0"), "--thresholds t.json"),
        (
            lambda: memprof.plot(memprof.load(FIXTURES / "h200_info.json"), "x\0.svg"),
            r"memprof.plot: path 'x\x00.svg': a file name cannot hold a NUL character",
        ),
    ],
)
def test_a_nul_in_a_file_name_is_refused_naming_it(call, words):
    """Python's open() raised ValueError('embedded null byte') from inside memprof (check's
    files are read before the GPU is asked for: no GPU is needed here)."""
    with pytest.raises(InvalidArgument) as refused:
        call()
    assert words in str(refused.value)


def test_a_file_the_run_reads_may_be_a_path_as_memprof_load_takes(runs):
    """reference=Path(...) was refused ('reference is PosixPath: expected a string'), though
    memprof.load and memprof.plot take a Path; it is kept as its str."""
    memprof.run("check", reference=FIXTURES / "h200_check.json", thresholds=Path("t.json"))
    [(_, params, _)] = runs
    assert params.reference == str(FIXTURES / "h200_check.json")
    assert params.thresholds == "t.json"
    with pytest.raises(InvalidArgument, match="reference is 5: expected a string"):
        memprof.run("check", reference=5)
    with pytest.raises(InvalidArgument, match="host_buffer is PosixPath"):
        memprof.run("pinned", host_buffer=Path("numpy"))  # not a file: as it was


@pytest.mark.parametrize(
    ("command", "keywords", "hint"),
    [
        ("zerocopy", {"power": 20}, "; --power N is powers=(N,), single_size=True)"),
        ("sweep", {"from_": 10, "to": 12}, "(the sizes are powers=(N, ...), powers of two"),
        ("alloc", {"step": 2}, "(the sizes are powers=(N, ...), powers of two of floats)"),
    ],
)
def test_a_sweeps_command_line_sizes_as_keywords_say_how_they_are_spelt(
    runs, command, keywords, hint
):
    """docs/python-api.md: keywords are the options' names, but a sweep's --power, --from,
    --to and --step are one tuple: 'unknown parameter' alone left the user to guess."""
    with pytest.raises(InvalidArgument, match=re.escape(hint)):
        memprof.run(command, **keywords)
    with pytest.raises(InvalidArgument) as plain:
        memprof.run("pinned", step=1)  # no sweep: nothing to hint at
    assert str(plain.value).endswith("choose from host_buffer, power, repeat, warmup")


def test_diff_refuses_what_the_command_line_refuses_so_a_gate_cannot_pass_on_nothing():
    """memprof.diff(pinned, check, fail_above=5) compared no figure and returned 'passed';
    a gate over runs timed apart (CUPTI against events) returned a verdict where
    `memprof diff --fail-above` exits 2. allow_not_comparable=True is the option's."""
    quiet = Console(file=io.StringIO())
    pinned = memprof.load(FIXTURES / "h200_pinned_p20.json")
    events = memprof.load(FIXTURES / "h200_pinned_p20_events.json")
    check = memprof.load(FIXTURES / "h200_check.json")
    for allowed in (False, True):
        with pytest.raises(InvalidArgument, match=r"A \(pinned\) and B \(check\) have no measure"):
            memprof.diff(pinned, check, quiet, fail_above=5, allow_not_comparable=allowed)
    with pytest.raises(InvalidArgument, match="allow_not_comparable=True compares them anyway"):
        memprof.diff(pinned, events, quiet, fail_above=5)
    gated = memprof.diff(pinned, events, quiet, fail_above=5, allow_not_comparable=True)
    assert gated.verdict == "regressed" and gated.rows
    assert memprof.diff(pinned, events, quiet).rows  # no gate: shown, their differences said
    assert memprof.diff(pinned, pinned, quiet, fail_above=5).verdict == "passed"
    with pytest.raises(TypeError, match="allow_not_comparable must be True or False, not str"):
        memprof.diff(pinned, events, quiet, allow_not_comparable="yes")


def test_diff_refuses_an_only_that_selects_no_figure():
    """fail_above=5 with only='bogus' judged no figure and returned 'passed'; the command line
    refuses --only bogus (exit 2)."""
    quiet = Console(file=io.StringIO())
    pinned = memprof.load(FIXTURES / "h200_pinned_p20.json")
    with pytest.raises(InvalidArgument, match=r"only='bogus': no figure in both runs is of"):
        memprof.diff(pinned, pinned, quiet, fail_above=5, only="bogus")
    assert memprof.diff(pinned, pinned, quiet, fail_above=5, only="gpu").rows
