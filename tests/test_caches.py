"""Caches are input: a FIFO, a device, a huge or deeply nested file, a value of the wrong type
or range (NaN, 1e400, 0 bytes, 0 ms, "true" for a number), figures of another GPU: each is
ignored with one warning line and made again, and a trace keeps its program's exit code."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import stat
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from memprof import cache
from memprof import cli_trace as tracing
from memprof.cli import app
from memprof.experiments import load as load_result
from memprof.experiments import trace as trace_summary
from memprof.trace import collect
from memprof.trace.collect import SmallCopyCost, SmallCopyFigures
from tests.test_kernels import FakeDriver, compiled
from tests.test_trace_cli import FakeCollector

MiB = 1 << 20
GPU = ("NVIDIA H200", "580.1")
KEY = "NVIDIA H200 | driver 580.1"
GOOD_PINNED = {
    "h2d_gb_per_s": 51.0,
    "d2h_gb_per_s": 52.0,
    "bytes": 64 * MiB,
    "gpu_name": GPU[0],
    "driver_version": GPU[1],
    "measured_at": "2026-11-23T05:09:36+00:00",
}
GOOD_SMALL = {
    "copies": 128,
    "costs": [
        {
            "bytes": 4096,
            "pinned_ms": 0.0027,
            "pageable_ms": 0.0051,
            "gathered_ms": 0.0009,
            "batched_ms": None,
        }
    ],
    "clock": "wall",
    "gpu_name": GPU[0],
    "driver_version": GPU[1],
    "measured_at": "2026-11-23T05:09:36+00:00",
}


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    """Each test sees its own warnings (they are said once per process)."""
    monkeypatch.setattr(cache, "_warned", set())


class Blocked(BaseException):
    """Raised where a read blocked: no `except OSError` (or Exception) can swallow it."""


@contextlib.contextmanager
def no_hang(seconds: int = 5):
    """Fail instead of hanging where a read would block for ever."""

    def stop(signum, frame):
        raise Blocked(f"blocked for {seconds} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def warnings_in(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("memprof: warning:")]


# -- reading a cache file --------------------------------------------------------------------


def test_a_fifo_in_place_of_a_cache_is_not_waited_on(tmp_path, capsys):
    fifo = tmp_path / "pinned_bandwidth.json"
    os.mkfifo(fifo)
    with no_hang():
        assert cache.read_json(fifo) is None
        assert cache.read_json(fifo) is None  # read again: said once
    assert warnings_in(capsys.readouterr().err) == [
        f"memprof: warning: ignored the cache {fifo}: it is not a regular file"
    ]


def test_a_link_to_dev_zero_is_not_read(tmp_path, capsys):
    link = tmp_path / "small_copies.json"
    link.symlink_to("/dev/zero")
    assert cache.read_bytes(link, 1 << 20) is None
    assert "not a regular file" in capsys.readouterr().err


def test_a_cache_over_its_cap_is_not_read(tmp_path, capsys):
    big = tmp_path / "big.json"
    big.write_bytes(b" " * 101)
    assert cache.read_bytes(big, 100) is None
    assert "larger than 100 bytes" in capsys.readouterr().err
    big.write_bytes(b" " * 100)
    assert cache.read_bytes(big, 100) == b" " * 100  # the cap itself is allowed


def test_a_missing_cache_is_silent(tmp_path, capsys):
    assert cache.read_json(tmp_path / "absent.json") is None
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"a": NaN}', "not JSON"),
        ('{"a": Infinity}', "not JSON"),
        ('{"a": 1e400}', "not JSON"),
        ("[" * 100_000 + "]" * 100_000, "nested too deep"),
        ("\udcff", "not JSON"),
        ("{", "not JSON"),
    ],
)
def test_json_a_cache_cannot_hold(tmp_path, capsys, text, reason):
    path = tmp_path / "c.json"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    assert cache.read_json(path) is None
    [line] = warnings_in(capsys.readouterr().err)
    assert reason in line


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"a": NaN}', "not JSON: NaN is not a number"),
        ('{"a": -Infinity}', "not JSON: -Infinity is not a number"),
        ('{"a": 1e400}', "not JSON: 1e400 is not a finite number"),
        ("[" * 100_000 + "]" * 100_000, "nested too deep"),
    ],
)
def test_why_a_json_cache_was_refused_is_said_word_for_word(tmp_path, capsys, text, reason):
    path = tmp_path / "c.json"
    path.write_text(text)
    assert cache.read_json(path) is None
    assert warnings_in(capsys.readouterr().err) == [
        f"memprof: warning: ignored the cache {path}: {reason}"
    ]


def unreadable(path: Path, why: str) -> None:
    """`path` made a cache that cannot be used for `why`."""
    if why == "fifo":
        os.mkfifo(path)
    elif why == "large":
        path.write_bytes(b"1" * (cache.JSON_CACHE_BYTES + 1))
    elif why == "loop":
        path.symlink_to(path.name)  # a link to itself: os.open fails
    else:
        path.write_text("{")


@pytest.mark.parametrize(
    ("why", "reason"),
    [
        ("fifo", "it is not a regular file"),
        ("large", f"larger than {cache.JSON_CACHE_BYTES} bytes"),
        ("loop", os.strerror(errno.ELOOP)),  # the system's words, without [Errno 40] and path
        (
            "json",
            "not JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
        ),
    ],
)
def test_each_unusable_cache_file_is_said_once_and_another_is_said_too(
    tmp_path, capsys, why, reason
):
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    unreadable(first, why)
    unreadable(second, why)
    with no_hang():
        for path in (first, first, second, second):
            assert cache.read_json(path) is None
    assert warnings_in(capsys.readouterr().err) == [
        f"memprof: warning: ignored the cache {path}: {reason}" for path in (first, second)
    ]


def test_a_cache_file_that_grows_after_its_size_was_read_is_read_no_further_than_its_cap(
    tmp_path, capsys, monkeypatch
):
    """The size checked (os.fstat) is the file's when opened; what is read is bounded anyway."""
    path = tmp_path / "c.json"
    path.write_bytes(b"1" * 10_000)
    real_fstat, asked = os.fstat, []

    def grown_since(descriptor):
        status = list(real_fstat(descriptor))
        status[stat.ST_SIZE] = 100  # the file's size when it was opened
        return os.stat_result(status)

    class Spied:
        def __init__(self, *arguments, **named):
            self.file = open(*arguments, **named)  # noqa: SIM115 - closed in __exit__

        def __enter__(self):
            return self

        def __exit__(self, *exception):
            self.file.close()

        def read(self, size=-1):
            asked.append(size)
            return self.file.read(size)

    monkeypatch.setattr(os, "fstat", grown_since)
    monkeypatch.setattr(cache, "open", Spied, raising=False)
    assert cache.read_bytes(path, 100) is None
    assert asked == [101]
    assert "larger than 100 bytes" in capsys.readouterr().err


def test_a_terminal_in_place_of_a_cache_never_becomes_the_controlling_terminal(tmp_path):
    """A session leader without a terminal that opens one takes it as its own, unless it
    opens with O_NOCTTY (then /dev/tty cannot be opened): checked in a child process."""
    leader, follower = os.openpty()
    name = os.ttyname(follower)
    os.close(follower)
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's exit status is the finding
        code = 3
        try:
            os.setsid()
            quiet = os.open(os.devnull, os.O_WRONLY)
            os.dup2(quiet, 2)  # the warning is not this test's
            if cache.read_bytes(Path(name), 100) is None:
                try:
                    os.close(os.open("/dev/tty", os.O_RDWR))
                    code = 1  # the cache's terminal became this session's
                except OSError:
                    code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(child, 0)
    os.close(leader)
    assert os.waitstatus_to_exitcode(status) == 0


def test_store_writes_through_a_hidden_temporary_in_the_caches_own_folder(tmp_path, monkeypatch):
    """Renamed over the cache, the temporary must be on its file system (os.replace is atomic
    only there) and named for it, hidden: `.pinned_bandwidth.json.XXXX`."""
    real_replace, renamed = os.replace, []
    monkeypatch.setattr(os, "replace", lambda a, b: renamed.append((a, b)) or real_replace(a, b))
    path = tmp_path / "memprof" / "pinned_bandwidth.json"
    cache.store(path, b"{}")
    assert path.read_bytes() == b"{}"
    ((temporary, target),) = renamed
    assert Path(target) == path and Path(temporary).parent == path.parent
    assert Path(temporary).name.startswith(".pinned_bandwidth.json.")
    assert sorted(p.name for p in path.parent.iterdir()) == ["pinned_bandwidth.json"]


def test_a_cache_that_can_be_neither_renamed_nor_cleaned_up_is_skipped(tmp_path, monkeypatch):
    def refuse(*arguments):
        raise PermissionError(errno.EACCES, "refused")

    monkeypatch.setattr(os, "replace", refuse)
    monkeypatch.setattr(os, "unlink", refuse)
    path = tmp_path / "pinned_bandwidth.json"
    cache.store(path, b"{}")  # no exception: a cache is never worth a failed run
    assert not path.exists()


def test_a_cache_warning_is_yellow_where_colour_is_on(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.delenv("NO_COLOR", raising=False)
    cache.warn_once("key", "ignored the cache x")
    assert capsys.readouterr().err.startswith("\x1b[33mmemprof: warning: ignored the cache x")


# -- where the cache is ----------------------------------------------------------------------


def test_a_relative_xdg_cache_home_is_ignored(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")
    assert cache.cache_directory() == tmp_path / ".cache" / "memprof"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "abs"))
    assert cache.cache_directory() == tmp_path / "abs" / "memprof"


@pytest.fixture
def homeless(monkeypatch):
    """HOME unset, and no passwd entry for this user (a container run with --user N)."""
    import pwd

    def no_entry(uid):
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    monkeypatch.delenv("HOME", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setattr(pwd, "getpwuid", no_entry)


def test_without_a_home_there_is_no_cache_and_one_note(homeless, capsys, monkeypatch):
    from memprof.core import kernels

    assert cache.cache_directory() is None
    monkeypatch.setattr(kernels, "_nvcc", lambda session, source, name, arch: b"CUBIN x")
    assert compiled(FakeDriver()) == compiled(FakeDriver()) == b"CUBIN x"  # no crash
    measured = {"h2d_gb_per_s": 50.0, "d2h_gb_per_s": 49.0, "bytes": 64 * MiB}
    figures = collect.pinned_bandwidth(0, *GPU, "cache", lambda device: measured)
    assert figures["how"].startswith("measured now")  # measuring, not crashing
    [line] = warnings_in(capsys.readouterr().err)
    assert line == (
        "memprof: warning: no cache: HOME is not set and this user has no home directory, so "
        "kernels are compiled and figures measured on every run (set HOME or XDG_CACHE_HOME)"
    )


# -- the kernel cache ------------------------------------------------------------------------


@pytest.fixture
def kernel_cache(monkeypatch, tmp_path):
    from memprof.core import kernels

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    runs = []
    monkeypatch.setattr(kernels, "_nvcc", lambda *a: runs.append(1) or b"CUBIN %d" % len(runs))
    compiled(FakeDriver())
    [path] = (tmp_path / "memprof" / "kernels").iterdir()
    return path, runs


@pytest.mark.parametrize("replace", ["fifo", "dev_zero", "directory", "truncated", "empty"])
def test_a_kernel_cache_that_is_not_a_whole_cubin_is_compiled_again(kernel_cache, capsys, replace):
    path, runs = kernel_cache
    data = path.read_bytes()
    path.unlink()
    if replace == "fifo":
        os.mkfifo(path)
    elif replace == "dev_zero":
        path.symlink_to("/dev/zero")
    elif replace == "directory":
        path.mkdir()
    else:
        path.write_bytes(data[:-3] if replace == "truncated" else b"")
    with no_hang():
        assert compiled(FakeDriver()) == b"CUBIN 2"
    assert len(runs) == 2
    assert len(warnings_in(capsys.readouterr().err)) == 1


def test_a_cubin_cut_short_never_reaches_the_driver(kernel_cache):
    """The driver reads an image without its length: a cut one must not get there."""
    path, _ = kernel_cache
    driver = FakeDriver()
    path.write_bytes(path.read_bytes()[:-1])  # still starts "CUBIN": the fake would take it
    compiled(driver)
    assert driver.loaded == [b"CUBIN 2"]


# -- the figures memprof trace reads ---------------------------------------------------------


def write_cache(path: Path, entry: object) -> None:
    path.write_text(json.dumps({KEY: entry}))


def never_measured(device_index: int) -> dict:
    raise AssertionError("a good cached figure is measured again")


def bad(entry: dict, **changes) -> dict:
    return {**entry, **changes}


@pytest.mark.parametrize(
    "entry",
    [
        bad(GOOD_PINNED, h2d_gb_per_s="true"),
        bad(GOOD_PINNED, h2d_gb_per_s=True),
        bad(GOOD_PINNED, d2h_gb_per_s=0),
        bad(GOOD_PINNED, d2h_gb_per_s=-5.0),
        bad(GOOD_PINNED, h2d_gb_per_s=671089.0),  # no host link carries that
        bad(GOOD_PINNED, bytes=0),
        bad(GOOD_PINNED, bytes=4.5),
        bad(GOOD_PINNED, measured_at="yesterday"),
        bad(GOOD_PINNED, gpu_name="NVIDIA H100"),  # another GPU's, filed under this one
        bad(GOOD_PINNED, driver_version="590.2"),
        {k: v for k, v in GOOD_PINNED.items() if k != "bytes"},
        "51.0",
        [GOOD_PINNED],
    ],
)
def test_a_cached_pinned_figure_that_makes_no_sense_is_measured_again(tmp_path, capsys, entry):
    path = tmp_path / "pinned_bandwidth.json"
    write_cache(path, entry)
    measured = {"h2d_gb_per_s": 50.0, "d2h_gb_per_s": 49.0, "bytes": 64 * MiB}
    figures = collect.cached_figures(
        path, GPU, "cache", lambda: measured, "memprof sweep", collect.pinned_problem
    )
    assert figures["how"] == "measured now with memprof sweep (then cached)"
    assert figures["h2d_gb_per_s"] == 50.0
    [line] = warnings_in(capsys.readouterr().err)
    assert f"ignored {KEY!r} in the cache {path}" in line and "(measured again)" in line
    assert json.loads(path.read_text())[KEY]["h2d_gb_per_s"] == 50.0  # the cache made again


def test_a_good_cached_figure_is_used_and_says_whose(tmp_path, capsys):
    path = tmp_path / "pinned_bandwidth.json"
    write_cache(path, {**GOOD_PINNED, "extra": "not copied into the Result"})
    figures = collect.pinned_bandwidth(0, *GPU, "cache", never_measured, path)
    assert figures["h2d_gb_per_s"] == 51.0 and "extra" not in figures
    assert figures["how"] == (
        f"cached in {path}, measured on NVIDIA H200 (driver 580.1) 2026-11-23T05:09:36+00:00"
    )
    assert capsys.readouterr().err == ""


def test_figures_at_the_edges_of_their_ranges(tmp_path):
    """The checks' boundaries: just inside is used, just outside is measured again."""
    least, limit = collect.HOST_LINK_GB_PER_S
    assert collect.pinned_problem(bad(GOOD_PINNED, h2d_gb_per_s=limit)) is None
    assert collect.pinned_problem(bad(GOOD_PINNED, h2d_gb_per_s=limit * 1.001))
    assert collect.pinned_problem(bad(GOOD_PINNED, d2h_gb_per_s=least * 1.001)) is None
    assert collect.pinned_problem(bad(GOOD_PINNED, d2h_gb_per_s=least))  # 1e-9 GB/s: nonsense
    assert collect.pinned_problem(bad(GOOD_PINNED, bytes=collect.SMALL_COPY_BYTES)) is None
    assert collect.pinned_problem(bad(GOOD_PINNED, bytes=collect.SMALL_COPY_BYTES - 1))
    cost = GOOD_SMALL["costs"][0]
    fastest, slowest = collect.SMALL_COPY_MS
    for name in ("pinned_ms", "pageable_ms", "gathered_ms", "batched_ms"):
        for used in (fastest * 1.001, slowest):
            assert (
                collect.small_copies_problem(bad(GOOD_SMALL, costs=[{**cost, name: used}])) is None
            )
        for refused in (0.0, fastest, 1e-12, slowest * 1.0005):
            assert collect.small_copies_problem(bad(GOOD_SMALL, costs=[{**cost, name: refused}]))
    assert collect.small_copies_problem(bad(GOOD_SMALL, copies=1)) is None
    assert collect.small_copies_problem(GOOD_SMALL) is None
    assert collect.small_copies_problem(bad(GOOD_SMALL, copies=0))


@pytest.mark.parametrize(
    "entry",
    [
        bad(GOOD_SMALL, copies="true"),
        bad(GOOD_SMALL, copies=True),
        bad(GOOD_SMALL, costs=[]),
        bad(GOOD_SMALL, costs=[{**GOOD_SMALL["costs"][0], "bytes": 0}]),
        bad(GOOD_SMALL, costs=[{**GOOD_SMALL["costs"][0], "gathered_ms": 0}]),
        bad(GOOD_SMALL, costs=[{**GOOD_SMALL["costs"][0], "pinned_ms": "0.1"}]),
        bad(GOOD_SMALL, costs=[{**GOOD_SMALL["costs"][0], "surprise": 1}]),
        bad(GOOD_SMALL, costs=[GOOD_SMALL["costs"][0]] * 2),
        bad(GOOD_SMALL, costs=[{**GOOD_SMALL["costs"][0], "bytes": (1 << 40) + 1}]),
        bad(GOOD_SMALL, costs="many"),
        bad(GOOD_SMALL, clock="gpu"),  # GPU time, cached by a memprof before the wall clock
        {k: v for k, v in GOOD_SMALL.items() if k != "clock"},
    ],
)
def test_cached_small_copy_costs_that_make_no_sense_are_measured_again(tmp_path, capsys, entry):
    path = tmp_path / "small_copies.json"
    write_cache(path, entry)
    measured = {k: GOOD_SMALL[k] for k in ("copies", "costs", "clock")}
    figures = collect.small_copy_figures(0, *GPU, "cache", lambda device: measured, path)
    assert figures.how == "measured now with memprof smallcopies (then cached)"
    assert figures.costs == [SmallCopyCost(**GOOD_SMALL["costs"][0])]
    assert len(warnings_in(capsys.readouterr().err)) == 1


def test_a_measurement_that_makes_no_sense_is_not_cached(tmp_path):
    path = tmp_path / "small_copies.json"
    nonsense = {**GOOD_SMALL, "costs": [{**GOOD_SMALL["costs"][0], "pinned_ms": 0.0}]}
    figures = collect.small_copy_figures(0, *GPU, "cache", lambda device: nonsense, path)
    assert figures.how.startswith("not usable: memprof smallcopies measured figures")
    assert figures.costs == [] and not path.exists()


def test_a_saved_trace_with_a_0_byte_small_copy_renders(tmp_path):
    figures = SmallCopyFigures("cached", 128, [SmallCopyCost(0, 0.003, 0.005, 0.001, 0.0)])
    line = trace_summary.measured_gain(figures, 4096.0, from_pageable=False)
    assert "0 B" in line or "0 bytes" in line


def test_a_trace_with_bad_caches_keeps_its_programs_exit_code_and_saves(tmp_path, monkeypatch):
    """The issue's case: damaged caches end nothing after the program ran; the Result
    trace saves loads again."""
    folder = tmp_path / "memprof"
    folder.mkdir()
    (folder / "pinned_bandwidth.json").write_text('{"Fake GPU | driver 1.0": ' + "[" * 100_000)
    os.mkfifo(folder / "small_copies.json")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(collect, "CuptiCollector", FakeCollector)
    monkeypatch.setattr(
        tracing,
        "measure_pinned_bandwidth",
        lambda device: {"h2d_gb_per_s": 50.0, "d2h_gb_per_s": 49.0, "bytes": 64 * MiB},
    )
    small = {k: GOOD_SMALL[k] for k in ("copies", "costs", "clock")}
    monkeypatch.setattr(tracing, "measure_small_copies", lambda device: small)
    program = tmp_path / "program.py"
    program.write_text("import sys\nprint('ran')\nsys.exit(3)\n")
    saved = tmp_path / "trace.json"
    with no_hang():
        ran = CliRunner().invoke(app, ["trace", "--json", str(saved), str(program)])
    assert ran.exit_code == 3, ran.output
    assert ran.stdout == "ran\n"
    assert len(warnings_in(ran.stderr)) == 2  # one per cache
    result = load_result(saved)
    assert result.extra.pinned_bandwidth["h2d_gb_per_s"] == 50.0
    assert result.extra.small_copies.copies == 128
    assert SimpleNamespace(**result.extra.pinned_bandwidth).how.startswith("measured now")


def test_pycudas_own_compiler_cache_is_never_read(monkeypatch):
    """memprof caches cubins itself (checked); PyCUDA's cache would be read unchecked and
    needs a home, so nvcc is asked with PyCUDA's cache off."""
    import sys
    from types import ModuleType

    from memprof.core import kernels

    asked = {}
    compiler = ModuleType("pycuda.compiler")
    compiler.compile = lambda source, **settings: asked.update(settings) or b"CUBIN"
    monkeypatch.setitem(sys.modules, "pycuda", ModuleType("pycuda"))
    monkeypatch.setitem(sys.modules, "pycuda.compiler", compiler)
    monkeypatch.setattr(kernels.shutil, "which", lambda name: "/usr/bin/nvcc")
    session = SimpleNamespace(cuda=FakeDriver())
    assert kernels._nvcc(session, "source", "sum_arrays.cu", "sm_90") == b"CUBIN"
    assert asked["cache_dir"] is False
