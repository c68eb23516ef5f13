"""Every file a command reads is safe from every file it writes: report's and diff's results,
plot's, check's --reference, the program trace runs and each of its arguments, and memprof's
cache folder. Each command here is run with each of its outputs aimed at each of its inputs
(spelt as given, through a link, and as a hard link), and the input must come out unchanged,
refused in one line with exit 2 before any work; the same outputs aimed elsewhere are written,
so a refusal is the input's doing."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprof.cli import app
from memprof.errors import ExitCode
from memprof.trace import collect as tracing
from tests.test_trace_cli import FakeCollector

runner = CliRunner()
FIXTURES = Path(__file__).parent / "fixtures"
CHECK = FIXTURES / "h200_check.json"
PINNED = FIXTURES / "h200_pinned_p20.json"


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """A working folder of the user's: copies of two results, a program, its data, a package."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (tmp_path / "a.json").write_bytes(CHECK.read_bytes())
    (tmp_path / "b.json").write_bytes(CHECK.read_bytes())
    (tmp_path / "prog.py").write_text("import sys\nprint('ran', sys.argv[1:])\n")
    (tmp_path / "data.csv").write_text("x,y\n1,2\n")
    (tmp_path / "tracedmod_inputs.py").write_text("print('module ran')\n")
    package = tmp_path / "tracedpkg_inputs"
    package.mkdir()
    (package / "__init__.py").write_text("raise RuntimeError('finding tool must not run me')\n")
    (package / "tool.py").write_text("print('tool ran')\n")
    yield tmp_path
    for name in [name for name in sys.modules if name.startswith("traced")]:
        del sys.modules[name]  # the user's modules, imported by a run


@pytest.fixture
def no_gpu(monkeypatch):
    """No PyCUDA and a fake CUPTI: a GPU command past its checks exits 3; trace runs."""
    monkeypatch.setitem(sys.modules, "pycuda", None)
    monkeypatch.setattr(tracing, "CuptiCollector", FakeCollector)


# (command line with {out} where an output goes, the input that output is aimed at)
RUNS = [
    (["report", "a.json", "{option}", "{out}"], "a.json"),
    (["report", "a.json", "b.json", "{option}", "{out}"], "b.json"),
    (["diff", "a.json", "b.json", "{option}", "{out}"], "b.json"),
    (["check", "--reference", "a.json", "{option}", "{out}"], "a.json"),
    (["trace", "--bandwidth", "none", "{option}", "{out}", "prog.py"], "prog.py"),
    (["trace", "--bandwidth", "none", "{option}", "{out}", "prog.py", "data.csv"], "data.csv"),
    (["trace", "--bandwidth", "none", "{option}", "{out}", "prog.py", "--in=data.csv"], "data.csv"),
    (
        ["trace", "--bandwidth", "none", "{option}", "{out}", "-m", "tracedmod_inputs"],
        "tracedmod_inputs.py",
    ),
    (
        ["trace", "--bandwidth", "none", "{option}", "{out}", "-m", "tracedpkg_inputs.tool"],
        "tracedpkg_inputs/tool.py",
    ),
]
OPTIONS = {  # the outputs each command takes
    "report": ("--json", "--csv", "--junit"),
    "diff": ("--json", "--junit"),
    "check": ("--json", "--csv", "--junit"),
    "trace": ("--json", "--csv", "--timeline"),
}
CASES = [
    pytest.param(line, aimed, option, id=f"{' '.join(line[:2])}-{aimed}-{option}")
    for line, aimed in RUNS
    for option in OPTIONS[line[0]]
    if not (option == "--json" and line[:3] == ["report", "a.json", "b.json"])  # one result
]


def spellings(folder: Path, aimed: str) -> list[str]:
    """The input by its name, by its absolute path, through a link, and as a hard link."""
    (folder / "link").symlink_to(folder / aimed)
    os.link(folder / aimed, folder / "hardlink")
    return [aimed, str(folder / aimed), "link", "hardlink"]


def command(line: list[str], option: str, out: str) -> list[str]:
    return [out if word == "{out}" else option if word == "{option}" else word for word in line]


@pytest.mark.parametrize(("line", "aimed", "option"), CASES)
def test_no_output_is_written_over_an_input(folder, no_gpu, line, aimed, option):
    before = (folder / aimed).read_bytes()
    for out in spellings(folder, aimed):
        ran = runner.invoke(app, command(line, option, out))
        assert ran.exit_code == ExitCode.USAGE, (out, ran.output)
        assert ran.stderr.count("\n") == 1 and "would overwrite the input" in ran.stderr
        assert ran.stdout == ""  # refused before any work: the program did not run
        assert (folder / aimed).read_bytes() == before


@pytest.mark.parametrize(("line", "aimed", "option"), CASES)
def test_the_same_output_aimed_elsewhere_is_not_refused(folder, no_gpu, line, aimed, option):
    ran = runner.invoke(app, command(line, option, "elsewhere.out"))
    if line[0] == "check":  # measured: it gets as far as asking for PyCUDA
        assert ran.exit_code == ExitCode.ENVIRONMENT, ran.output
    else:
        assert ran.exit_code in (ExitCode.OK, ExitCode.CHECK_FAILED), ran.output
        assert (folder / "elsewhere.out").stat().st_size > 0


def test_finding_a_modules_file_imports_nothing_of_its_package(folder, no_gpu):
    ran = runner.invoke(app, ["trace", "--json", "t.json", "-m", "tracedpkg_inputs.tool"])
    assert "tracedpkg_inputs" not in sys.modules or ran.exit_code == 1  # the program's own
    assert ran.exit_code in (0, 1), ran.output  # its __init__ raises when the program runs


@pytest.mark.parametrize("option", ["--json", "--csv", "--junit"])
def test_no_output_goes_into_memprofs_cache_folder(folder, no_gpu, option):
    cache = folder / "cache" / "memprof"
    cache.mkdir(parents=True)
    kept = cache / "pinned_bandwidth.json"
    kept.write_text("{}")
    for out in (kept, cache / "new.json", folder / "cache" / "memprof"):
        ran = runner.invoke(app, ["report", "a.json", option, str(out)])
        assert ran.exit_code == ExitCode.USAGE, ran.output
        assert ran.stderr.count("\n") == 1
    assert kept.read_text() == "{}" and sorted(p.name for p in cache.iterdir()) == [kept.name]
    beside = runner.invoke(app, ["report", "a.json", option, str(folder / "cache" / "x.out")])
    assert beside.exit_code == 0, beside.output  # beside the cache folder is the user's own


def test_plot_never_draws_into_the_cache_folder(folder, no_gpu):
    pytest.importorskip("matplotlib")
    cache = folder / "cache" / "memprof"
    cache.mkdir(parents=True)
    ran = runner.invoke(app, ["plot", "a.json", "-o", str(cache / "a.svg")])
    assert ran.exit_code == ExitCode.USAGE, ran.output
    assert list(cache.iterdir()) == []


@pytest.mark.parametrize(
    "command",
    [["report"], ["report", "--csv", "out.csv"], ["plot", "-o", "out.svg"]],
)
def test_a_file_given_twice_is_refused_however_spelt(tmp_path, monkeypatch, command):
    """Twice, report showed and exported every row twice (as two GPUs' runs) and plot drew
    it twice; diff compares a file with itself, which is how its noise is seen."""
    if command[0] == "plot":
        pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    Path("r.json").write_bytes(PINNED.read_bytes())
    Path("link.json").symlink_to("r.json")
    for second, words in (("r.json", "twice"), ("./r.json", "twice"), ("link.json", "twice (as")):
        ran = runner.invoke(app, [command[0], "r.json", second, *command[1:]])
        assert ran.exit_code == ExitCode.USAGE, ran.output
        assert ran.stderr.count("\n") == 1 and f"r.json is given {words}" in ran.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "r.json"]
    assert runner.invoke(app, ["diff", "r.json", "link.json"]).exit_code == 0


def test_a_result_named_dash_points_at_dev_stdin(tmp_path, monkeypatch):
    """`--json -` is stdout, so a user reads `report -` as stdin: it said only 'No such file'."""
    monkeypatch.chdir(tmp_path)
    for command in (["report", "-"], ["diff", str(PINNED), "-"]):
        ran = runner.invoke(app, command)
        assert ran.exit_code == ExitCode.USAGE, ran.output
        assert ran.stderr.strip() == (
            "memprof: error: cannot read -: No such file or directory (standard input is "
            "/dev/stdin)"
        )
    Path("-").write_bytes(PINNED.read_bytes())  # a file named "-" is read as any other
    assert runner.invoke(app, ["report", "-q", "-"]).exit_code == 0
