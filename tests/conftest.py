"""Shared test set-up: GPU tests skip with the reason where no GPU or no PyCUDA is present."""

from __future__ import annotations

import atexit
import contextlib
import functools
import gc
import os
import pickle
import shutil
import signal
import sys
import tempfile
import textwrap
import time
import types
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"

# A suite started in the background of a script (`tool &` without job control: a mutation
# run) inherits SIGINT ignored, and so would every program its Ctrl-C tests start: one
# pressed there would never arrive. Python's own handler makes the children's SIGINT default.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# The collector less often: a worker allocates millions of objects and holds a few hundred
# thousand (collected tests, loaded fixtures), which each full collection goes through, and
# every GpuSession a test opens (gc.freeze, then gc.unfreeze) makes the next one full. At
# Python's thresholds (700, 10, 10) the collector took a fifth of the suite's time.
gc.set_threshold(10_000, 10, 10)

# Where bytecode may not be written beside the sources (PYTHONDONTWRITEBYTECODE, as on the CI
# machine), every Python the tests start (several hundred, and pytest-xdist's workers) compiled
# memprof from source again: 70 ms a process. They share one cache for the session instead,
# outside the checkout (as benchmarks/common.py does for the pythons it starts).


def _link_installed_bytecode(folder: str) -> None:
    """Links in the cache `folder` to the bytecode installed beside the sources of the
    packages on sys.path (pip and Python's installer write it in __pycache__), which a cache
    folder hides: each Python the tests start compiled numpy, pandas, matplotlib, pip and
    IPython from source again (a Jupyter kernel's test: 8.7 CPU s, 3.2 with these links).
    Hard links where it may (a symbolic link cost ten times the CPU); Python writes a new
    file over a link where a source changed, never through it."""
    tail = f".{sys.implementation.cache_tag}.pyc"
    seen = set()

    def link(directory: str) -> None:
        if directory in seen:
            return
        seen.add(directory)
        try:
            with os.scandir(directory) as entries:
                entries = list(entries)
        except OSError:  # unreadable: its modules compile as before
            return
        for entry in entries:
            if entry.name == "__pycache__" and entry.is_dir():
                compiled = [name for name in os.listdir(entry.path) if name.endswith(tail)]
                if compiled:
                    os.makedirs(folder + directory, exist_ok=True)
                for name in compiled:
                    source, cached = f"{entry.path}/{name}", f"{folder}{directory}/{name}"
                    try:
                        os.link(source, cached)
                    except OSError:  # another file system, or another user's file
                        os.symlink(source, cached)
            elif entry.is_dir() and os.path.exists(f"{entry.path}/__init__.py"):
                link(entry.path)  # a package: the folders that are none hold no modules

    for top in map(os.path.abspath, sys.path):
        if os.path.isdir(top):
            link(top)


BYTECODE_FOLDER: str | None = None
if os.environ.get("PYTHONDONTWRITEBYTECODE") and "PYTHONPYCACHEPREFIX" not in os.environ:
    BYTECODE_FOLDER = tempfile.mkdtemp(prefix="memprof-tests-bytecode-")
    _link_installed_bytecode(BYTECODE_FOLDER)
    os.environ["PYTHONPYCACHEPREFIX"] = BYTECODE_FOLDER
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    atexit.register(shutil.rmtree, BYTECODE_FOLDER, ignore_errors=True)
IMPORTED_AT = time.time()  # a worker's: after the controller wrote the tests' bytecode


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """pytest-xdist's controller rewrites the tests' asserts once into that cache, before its
    workers start and read them there: each rewrote all 6,000 for itself (5 s a worker)."""
    config = session.config
    if BYTECODE_FOLDER is None or not config.pluginmanager.has_plugin("dsession"):
        return  # no cache of ours, or the process that collects: it rewrites as it imports
    if config.getoption("assertmode") == "rewrite":
        with contextlib.suppress(Exception):  # pytest changed: each worker rewrites, as before
            _rewrite_tests(config, BYTECODE_FOLDER)


def _test_files(config: pytest.Config) -> list[Path]:
    """The test modules under the paths pytest was given (tests/ when none)."""
    found = set()
    for argument in config.args:
        path = Path(config.invocation_params.dir, argument.split("::")[0])
        if path.is_dir():
            found.update(path.rglob("test_*.py"))
        elif path.is_file():
            found.add(path)
    return sorted(found)


def _rewrite_tests(config: pytest.Config, folder: str) -> None:
    """What pytest writes where a test module is imported and bytecode may be written, by
    its own steps (they have no public names)."""
    from _pytest.assertion import rewrite

    state = types.SimpleNamespace(trace=lambda message: None)
    for source in [Path(__file__), *_test_files(config)]:
        place = Path(folder, *source.parts[1:-1])  # rewrite.get_cache_dir's, with its prefix
        place.mkdir(parents=True, exist_ok=True)
        hashed, code = rewrite._rewrite_test(source, config)
        rewrite._write_pyc(state, code, hashed, place / (source.name[:-3] + rewrite.PYC_TAIL))


# Files whose tests draw the same pictures (test_plot's cache): on one worker, each is drawn once.
PICTURE_TESTS = (
    "test_plot.py",
    "test_plot_style.py",
    "test_plot_runs.py",
    "test_plot_values.py",
    "test_plot_marks.py",
)


def worker_share(nodeid: str) -> str:
    """The tests one pytest-xdist worker takes together: a test's file, or all the pictures'."""
    path = nodeid.split("::", 1)[0]
    return "pictures" if Path(path).name in PICTURE_TESTS else path


# The shares that take seconds, longest first (a quiet run's, 2 workers): handed out before
# the others (then the most tests first, as pytest-xdist orders), so that no worker ends the
# run alone on one. A wheel built, a Jupyter kernel and a copy of the tree tested are one
# test each, which pytest-xdist's order left to the end while the other worker sat idle.
LONG_SHARES = (
    "pictures",
    "test_hostile_results.py",
    "test_narrow_terminals.py",
    "test_interrupt.py",
    "test_render_layout.py",
    "test_diff_selection.py",
    "test_wheel.py",
    "test_python_api_doc.py",
    "test_toy.py",
    "test_trace_timeline.py",
    "test_contract.py",
    "test_golden.py",
    "test_kernels.py",
    "test_ci.py",
)


def handed_out_first(queue: dict[str, dict[str, bool]]) -> dict[str, dict[str, bool]]:
    """pytest-xdist's queue of shares (worker_share: their tests) in the order to hand out."""

    def rank(share: str) -> tuple[int, int]:
        name = Path(share).name
        long = LONG_SHARES.index(name) if name in LONG_SHARES else len(LONG_SHARES)
        return long, -len(queue[share])

    return {share: queue[share] for share in sorted(queue, key=rank)}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """pytest -n's workers take a file's tests together (worker_share), not some of each: a
    file's caches (a fixture loaded, rendered or drawn once for its tests) were each filled
    by both workers. Any --dist but the default (load) is left as asked."""
    if config.getoption("dist") != "load":
        return None
    from collections import OrderedDict

    from xdist.scheduler import LoadScopeScheduling

    class ByShare(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return worker_share(nodeid)

        def _assign_work_unit(self, node: object) -> None:
            self.workqueue = OrderedDict(handed_out_first(self.workqueue))
            super()._assign_work_unit(node)

    return ByShare(config, log)


@functools.cache
def gpu_unavailable_reason() -> str | None:
    """Why GPU tests cannot run here, or None when they can."""
    try:
        import pycuda.driver as cuda
    except ImportError as error:
        return f"PyCUDA is not importable here ({error})"
    try:
        cuda.init()
        if cuda.Device.count() == 0:
            return "the CUDA driver sees no GPU"
    except cuda.Error as error:
        return f"no usable CUDA device ({error})"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if gpu_items and (reason := gpu_unavailable_reason()):
        for item in gpu_items:
            item.add_marker(pytest.mark.skip(reason=f"needs a GPU: {reason}"))


@pytest.fixture
def unfolded_advice(monkeypatch):
    """trace's advice said piece by piece, however little of the run each costs: for tests of
    its words on recordings (or fake programs) where every piece costs under 1% of the run."""
    from memprof.experiments import trace

    monkeypatch.setattr(trace, "FOLD_SHARE", 0.0)


@pytest.fixture
def fixture_path() -> callable:
    return lambda name: FIXTURES / name


def load_fixture(name: str):
    """A Result recorded on the GPU machine, by its name without h200_ and .json."""
    return _loaded(FIXTURES / f"h200_{name}.json")


def load_trace(name: str):
    """A trace of an example recorded on the H200 as a user runs it, by its name without
    h200_trace_ and .json. They live in fixtures/traces/, apart from the fixtures every
    sweep renders and draws: their real kernel names (up to 400 characters) and long runs
    are more than the profile layout's and the pictures' sweeps were written for."""
    return _loaded(FIXTURES / "traces" / f"h200_trace_{name}.json")


def load_older(name: str):
    """A Result recorded on the H200 by the memprof before this one (schema 3: before the
    call floor, host allocations made once and prebuilt batch arguments), without legacy_v3_."""
    return _loaded(FIXTURES / f"legacy_v3_{name}.json")


def load_legacy(name: str):
    """A Result an older memprof recorded on the H200 (schema 2: before NVML's GPU state, the
    host side of pageable copies and the allocators), by its name without legacy_v2_."""
    return _loaded(FIXTURES / f"legacy_v2_{name}.json")


def _loaded(path: Path):
    """memprof's load of a fixture, checked once per session: each caller gets a copy of its
    own (unpickled), so a test that changes its Result changes nobody else's."""
    return pickle.loads(_pickled(path))


@functools.cache
def _pickled(path: Path) -> bytes:
    from memprof.experiments import load

    return pickle.dumps(load(path))


def render_text(result, width: int = 200) -> str:
    """What `memprof report` prints for a Result, without colours."""
    from rich.console import Console

    from memprof.experiments import summarize
    from memprof.output.render import render_result

    console = Console(width=width, record=True, color_system=None)
    render_result(result, summarize(result), console)
    return console.export_text()


def replace(obj, **changes):
    """A copy of a Result's part (a msgspec Struct) or of Params/Extra (dataclasses) with
    some fields changed."""
    import dataclasses

    import msgspec

    if isinstance(obj, msgspec.Struct):
        return msgspec.structs.replace(obj, **changes)
    return dataclasses.replace(obj, **changes)


def plain(obj):
    """A Result's part, Params or Extra as plain JSON data (what a file holds)."""
    import msgspec

    return msgspec.to_builtins(obj)


def array_bytes(result) -> int:
    """The bytes of one array of a run on arrays of one size: 2^power elements (float64 where
    its Params say so, float32 otherwise), computed here apart from memprof's own code."""
    element = 8 if getattr(result.parameters, "dtype", "float32") == "float64" else 4
    return element << result.parameters.power


def failing_check(text: str) -> str:
    """A result file's JSON with its first check failed, as a GPU result that did not match
    numpy is saved (passed false, and the mismatch its detail)."""
    import json

    document = json.loads(text)
    document["checks"][0].update(passed=False, detail="Arrays do not match! 1 of 8 elements")
    return json.dumps(document, indent=1)


def as_printed(cell: str, header: str) -> str:
    """A summary table's cell as nvprof prints times ("16.720us"): a column written in one
    unit ("Median (ms)": 0.016720) read back, its mark ("*") kept; any other cell as it is."""
    import re
    from decimal import Decimal

    from memprof.model.formatting import TIME_UNITS_NS, format_nvprof_time

    unit = re.search(r" \((ns|us|ms|s)\)$", header)
    number = re.fullmatch(r"(\d+(?:\.\d+)?)(\W?)", cell)
    if unit is None or number is None:
        return cell
    nanoseconds = Decimal(number[1]) * TIME_UNITS_NS[unit[1]]
    return format_nvprof_time(float(nanoseconds)) + number[2]


def printed_rows(table) -> list[list[str]]:
    """Every row of a summary table, each time as nvprof prints it (as_printed)."""
    return [
        [as_printed(cell, header) for cell, header in zip(row, table.headers, strict=True)]
        for row in table.rows
    ]


@pytest.fixture
def fake_pycuda(tmp_path, monkeypatch):
    """Install a stand-in pycuda whose driver module has the given source (no GPU here)."""

    def install(driver_source: str) -> None:
        package = tmp_path / "pycuda"
        package.mkdir()
        (package / "__init__.py").write_text("VERSION_TEXT = 'fake'\n")
        (package / "driver.py").write_text(textwrap.dedent(driver_source))
        monkeypatch.syspath_prepend(str(tmp_path))
        for name in [m for m in sys.modules if m.split(".")[0] == "pycuda"]:
            monkeypatch.delitem(sys.modules, name)

    yield install
    for name in [m for m in sys.modules if m.split(".")[0] == "pycuda"]:
        del sys.modules[name]
