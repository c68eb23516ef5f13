"""Mutation testing for memprof: plant small bugs one at a time and see whether a test fails.

Usage (from the repository root, in the virtual environment README.md installs):

    python tools/mutate.py memprof/model/formatting.py memprof/model/statistics.py \\
        memprof/output/diff.py memprof/output/export.py memprof/model/params.py \\
        memprof/cli_options.py:within,device_choice

    python tools/mutate.py memprof/model/formatting.py --jobs 2 --show-killed
    python tools/mutate.py memprof/model/results.py \\
        --pytest-args="--deselect tests/test_x.py::test_y"

    python tools/mutate.py --coverage /tmp/coverage.json memprof/model/ceilings.py
    python tools/mutate.py memprof/experiments/check.py:judge --tests tests/test_check.py

Each argument is a module path, optionally followed by ':' and the functions (or classes)
to mutate in it, comma-separated; without them the whole module is mutated. The script
prints each module's score (killed / mutants) and every surviving mutant as
`path:line  original  ->  mutant`. Exit status: 0 when the total score reaches --target
(85% by default), 1 below it, 2 when the unmutated suite does not pass.

Mutations (one per mutant): comparison operators (< <=, > >=, == !=, in / not in, is /
is not), + -, * /, // /, % *, ** *, << >>, and / or, a removed `not` or unary minus,
integer constants and whole floats under 100 +1 and -1, other floats under 100 (thresholds
such as 0.9) x0.9 and x1.1, larger floats (scales such as 1e9) x2 and /2, True / False, a
term dropped (a + b -> a, a - b -> a, a * b -> b: a prefetch's own time left out, a count
left unsubtracted, a factor forgotten), a negated bare `if` condition,
min / max, floor / ceil, median / mean, any / all, abs(x) -> x, and the statistics read in
the wrong field (.min_ms / .max_ms, .median_ms / .mean_ms). Strings are never mutated;
neither is a line ending in `# pragma: no mutate`, nor a `strict=` keyword.

How it stays fast on two cores: the suite runs once under a line tracer to learn which
tests execute each line of the mutated modules. Each mutant then runs, in a forked child
with pytest already imported, only the tests that reach its line (all tests for lines that
run at import time; none, and the mutant counts as survived, for lines no test reaches).
The mutated module is served from memory by an import hook: the files on disk never
change, so an interrupted run leaves nothing behind. Tests that run memprof in a subprocess
see the unmutated code, so the score is, if anything, an underestimate. The tests of files
aimed at the mutated module or at verdicts run first, the others only if those pass. By
default the GPU tests (marker gpu) and tests/test_wheel.py (it builds a wheel in a
subprocess) are left out.

--coverage FILE keeps that first run's findings in FILE and reuses them while no .py file
under memprof/ or tests/ has changed (and FILE covers the modules asked for), so several
runs over one module each pay for the whole suite once (benchmarks/mutation.sh does that).
--tests runs fewer tests than the whole suite (a quicker look while writing tests; the
score then counts only what those tests catch).
"""

from __future__ import annotations

import argparse
import ast
import copy
import fnmatch
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import shlex
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PYTEST_ARGS = ["-m", "not gpu", "--ignore=tests/test_wheel.py", "-p", "no:cacheprovider"]
PRAGMA = "# pragma: no mutate"

COMPARE_SWAPS: dict[type, list[type]] = {
    ast.Lt: [ast.LtE, ast.Gt],
    ast.LtE: [ast.Lt, ast.GtE],
    ast.Gt: [ast.GtE, ast.Lt],
    ast.GtE: [ast.Gt, ast.LtE],
    ast.Eq: [ast.NotEq],
    ast.NotEq: [ast.Eq],
    ast.In: [ast.NotIn],
    ast.NotIn: [ast.In],
    ast.Is: [ast.IsNot],
    ast.IsNot: [ast.Is],
}
BINARY_SWAPS: dict[type, list[type]] = {
    ast.Add: [ast.Sub],
    ast.Sub: [ast.Add],
    ast.Mult: [ast.Div],
    ast.Div: [ast.Mult],
    ast.FloorDiv: [ast.Div],
    ast.Mod: [ast.Mult],
    ast.Pow: [ast.Mult],
    ast.LShift: [ast.RShift],
    ast.RShift: [ast.LShift],
}
NAME_SWAPS = {
    "min": "max",
    "max": "min",
    "floor": "ceil",
    "ceil": "floor",
    "median": "mean",
    "mean": "median",
    "fmean": "median",
    "any": "all",
    "all": "any",
    # memprof's statistics, read in the wrong column
    "min_ms": "max_ms",
    "max_ms": "min_ms",
    "median_ms": "mean_ms",
    "mean_ms": "median_ms",
}


@dataclass
class Mutant:
    path: str  # relative to the repository root
    index: int  # position of the mutated node in ast.walk order
    kind: str  # what is changed, for apply()
    detail: object  # which operator, or the new value
    lines: tuple[int, int]  # first and last line of the mutated node
    original: str = ""
    mutated: str = ""
    outcome: str = ""  # killed, survived, unreached, timeout


@dataclass
class Module:
    path: str
    functions: list[str]
    source: str = ""
    tree: ast.Module | None = None
    mutants: list[Mutant] = field(default_factory=list)


# -- finding mutants --------------------------------------------------------------------------


def parse_target(spec: str) -> Module:
    path, _, functions = spec.partition(":")
    resolved = (ROOT / path).resolve()
    if not resolved.is_file():
        raise SystemExit(f"mutate: error: {path}: no such file")
    module = Module(str(resolved.relative_to(ROOT)), [f for f in functions.split(",") if f])
    module.source = resolved.read_text()
    module.tree = ast.parse(module.source)
    return module


def _scopes(tree: ast.Module, functions: list[str]) -> list[ast.AST]:
    """The nodes to mutate inside: the named functions or classes, or the whole module."""
    if not functions:
        return [tree]
    found: dict[str, list[ast.AST]] = {}
    for node in ast.walk(tree):  # every definition of a name: a function and a method alike
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found.setdefault(node.name, []).append(node)
    missing = [name for name in functions if name not in found]
    if missing:
        raise SystemExit(f"mutate: error: not found: {', '.join(missing)}")
    return [node for name in functions for node in found[name]]


def _skipped_nodes(tree: ast.Module) -> set[int]:
    """ids of nodes never mutated: docstrings, strict= keywords, and their insides."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            skipped.add(id(body[0].value))
        if isinstance(node, ast.keyword) and node.arg == "strict":
            skipped.update(id(child) for child in ast.walk(node.value))
        if isinstance(node, ast.JoinedStr):
            skipped.update(id(child) for child in ast.walk(node) if isinstance(child, ast.Constant))
    return skipped


def find_mutants(module: Module) -> list[Mutant]:
    tree = module.tree
    lines = module.source.splitlines()
    inside = {id(node) for scope in _scopes(tree, module.functions) for node in ast.walk(scope)}
    skipped = _skipped_nodes(tree)
    mutants = []
    for index, node in enumerate(ast.walk(tree)):
        if id(node) not in inside or id(node) in skipped or not hasattr(node, "lineno"):
            continue
        span = (node.lineno, node.end_lineno or node.lineno)
        if any(lines[n - 1].rstrip().endswith(PRAGMA) for n in range(span[0], span[1] + 1)):
            continue
        for kind, detail in _mutations(node):
            mutants.append(Mutant(module.path, index, kind, detail, span))
    for mutant in mutants:
        mutant.original, mutant.mutated = _describe(tree, mutant)
    return sorted(mutants, key=lambda m: (m.lines[0], m.index))


def _mutations(node: ast.AST) -> Iterator[tuple[str, object]]:
    if isinstance(node, ast.Compare):
        for position, op in enumerate(node.ops):
            for new in COMPARE_SWAPS.get(type(op), []):
                yield "compare", (position, new)
    elif isinstance(node, ast.BinOp | ast.AugAssign):
        for new in BINARY_SWAPS.get(type(node.op), []):
            yield "binop", new
        if isinstance(node, ast.BinOp) and not _is_text(node.left) and not _is_text(node.right):
            if isinstance(node.op, ast.Add | ast.Sub):
                yield "drop_term", "left"  # a + b -> a: the second term forgotten
            elif isinstance(node.op, ast.Mult):
                yield "drop_term", "right"  # a * b -> b: the factor forgotten
    elif isinstance(node, ast.BoolOp):
        yield "boolop", ast.Or if isinstance(node.op, ast.And) else ast.And
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not | ast.USub):
        yield "drop_unary", None
    elif isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool):
            yield "constant", not value
        elif isinstance(value, int) or (
            isinstance(value, float) and value.is_integer() and abs(value) < 100
        ):
            yield "constant", value + 1
            yield "constant", value - 1
        elif isinstance(value, float) and abs(value) < 100:  # a threshold moved by 10%
            yield "constant", round(value * 0.9, 6)
            yield "constant", round(value * 1.1, 6)
        elif isinstance(value, float):  # a scale (1e3, 1e9): off by one would change nothing
            yield "constant", value * 2
            yield "constant", value / 2
    elif isinstance(node, ast.If | ast.While | ast.IfExp) and isinstance(
        node.test, ast.Name | ast.Attribute | ast.Call | ast.Subscript
    ):
        yield "negate_test", None
    elif isinstance(node, ast.Name) and node.id in NAME_SWAPS:
        yield "name", NAME_SWAPS[node.id]
    elif isinstance(node, ast.Attribute) and node.attr in NAME_SWAPS:
        yield "attribute", NAME_SWAPS[node.attr]
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "abs"
        and len(node.args) == 1
    ):
        yield "drop_call", None


def _is_text(node: ast.AST) -> bool:
    """A string literal or f-string: + joins words there, it adds nothing."""
    return isinstance(node, ast.JoinedStr) or (
        isinstance(node, ast.Constant) and isinstance(node.value, str)
    )


def apply(tree: ast.Module, mutant: Mutant) -> tuple[ast.Module, ast.AST]:
    """A copy of the tree with the mutant's change; also the node as it now reads."""
    tree = copy.deepcopy(tree)
    nodes = list(ast.walk(tree))
    node = nodes[mutant.index]
    kind, detail = mutant.kind, mutant.detail
    if kind == "compare":
        position, new = detail
        node.ops[position] = new()
    elif kind == "binop" or kind == "boolop":
        node.op = detail()
    elif kind == "constant":
        node.value = detail
    elif kind == "negate_test":
        node.test = ast.UnaryOp(ast.Not(), node.test)
    elif kind == "name":
        node.id = detail
    elif kind == "attribute":
        node.attr = detail
    elif kind in ("drop_unary", "drop_call", "drop_term"):
        if kind == "drop_term":
            replacement = node.left if detail == "left" else node.right
        else:
            replacement = node.operand if kind == "drop_unary" else node.args[0]
        _replace(nodes, node, replacement)
        node = replacement
    ast.fix_missing_locations(tree)
    return tree, node


def _replace(nodes: list[ast.AST], old: ast.AST, new: ast.AST) -> None:
    for parent in nodes:
        for name, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, name, new)
                return
            if isinstance(value, list) and any(item is old for item in value):
                setattr(parent, name, [new if item is old else item for item in value])
                return
    raise AssertionError("node without a parent")


def _describe(tree: ast.Module, mutant: Mutant) -> tuple[str, str]:
    before = list(ast.walk(tree))[mutant.index]
    _, after = apply(tree, mutant)
    if mutant.kind == "negate_test":
        return ast.unparse(before.test), ast.unparse(after.test)
    return ast.unparse(before), ast.unparse(after)


# -- running the tests in forked children -----------------------------------------------------


class _MutantFinder:
    """Serves one module from source held in memory, the file on disk untouched."""

    def __init__(self, name: str, path: str, code: object) -> None:
        self.name, self.path, self.code = name, path, code

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name:
            return None
        return importlib.util.spec_from_file_location(
            fullname, self.path, loader=_MutantLoader(fullname, self.path, self.code)
        )


class _MutantLoader(importlib.machinery.SourceFileLoader):
    def __init__(self, fullname: str, path: str, code: object) -> None:
        super().__init__(fullname, path)
        self._code = code

    def get_code(self, fullname):
        return self._code


class _LineRecorder:
    """A pytest plugin: which tests execute which lines of the files under test."""

    def __init__(self, files: set[str]) -> None:
        self.files = files
        self.current: str | None = None
        self.by_test: dict[str, set[tuple[str, int]]] = {}
        self.outside: set[tuple[str, int]] = set()  # lines run while no test was running

    def _global(self, frame, event, arg):
        if frame.f_code.co_filename in self.files:
            return self._local
        return None

    def _local(self, frame, event, arg):
        if event == "line":
            line = (frame.f_code.co_filename, frame.f_lineno)
            if self.current is None:
                self.outside.add(line)
            else:
                self.by_test.setdefault(self.current, set()).add(line)
        return self._local

    def start(self) -> None:
        sys.settrace(self._global)

    def pytest_runtest_logstart(self, nodeid, location):
        self.current = nodeid
        self.by_test.setdefault(nodeid, set())
        if sys.gettrace() is not self._global:  # a test set its own tracer and cleared it:
            sys.settrace(self._global)  # every later test would look like it reached nothing

    def pytest_runtest_logfinish(self, nodeid, location):
        self.current = None


def _module_name(path: str) -> str:
    return path.removesuffix(".py").replace("/", ".").removesuffix(".__init__")


def _run_child(target, timeout_s: float) -> tuple[str, float]:
    """Fork, run target() in the child (its return value is the exit status), and wait."""
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child
        status = 3
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            status = target()
        finally:
            os._exit(status if isinstance(status, int) else 3)
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            return ("survived" if code == 0 else "killed"), time.monotonic() - started
        if time.monotonic() - started > timeout_s:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return "timeout", time.monotonic() - started
        time.sleep(0.02)


def _sources_digest() -> str:
    """A digest of every .py file under memprof/ and tests/: what a baseline depends on."""
    digest = hashlib.sha256()
    for folder in ("memprof", "tests"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def cached_baseline(modules: list[Module], pytest_args: list[str], cache: Path | None) -> dict:
    """baseline(), or the one saved in `cache` while the sources and pytest's arguments are
    those it was made from and it traced every module asked for."""
    files = sorted({str(ROOT / m.path) for m in modules})
    key = {"sources": _sources_digest(), "pytest_args": pytest_args}
    if cache is not None and cache.is_file():
        try:
            saved = json.loads(cache.read_text())
        except (OSError, ValueError):
            saved = {}
        if saved.get("key") == key and set(files) <= set(saved.get("files", [])):
            print(f"mutate: the suite's coverage from {cache}", file=sys.stderr)
            return saved
    data = baseline(set(files), pytest_args)
    if cache is not None and data.get("code") == 0:
        cache.write_text(json.dumps({**data, "key": key, "files": files}))
    return data


def baseline(files: set[str], pytest_args: list[str]) -> dict:
    """Run the unmutated suite once under the line recorder; what each test reaches."""
    with tempfile.NamedTemporaryFile("r", suffix=".json", delete=False) as handle:
        report = Path(handle.name)

    def child() -> int:
        import pytest

        recorder = _LineRecorder(files)
        recorder.start()
        code = pytest.main([*pytest_args], plugins=[recorder])
        sys.settrace(None)
        lines: dict[str, list[str]] = {}
        for test, seen in recorder.by_test.items():
            for file, line in seen:
                lines.setdefault(f"{file}:{line}", []).append(test)
        report.write_text(
            json.dumps(
                {
                    "code": int(code),
                    "tests": list(recorder.by_test),
                    "lines": lines,
                    "outside": [f"{f}:{n}" for f, n in recorder.outside],
                }
            )
        )
        return int(code)

    outcome, seconds = _run_child(child, timeout_s=3600)
    data = json.loads(report.read_text() or "{}")
    report.unlink()
    data["seconds"] = seconds
    if outcome != "survived":
        data.setdefault("code", 1)
    return data


def run_mutants(
    modules: list[Module], coverage: dict, pytest_args: list[str], jobs: int, timeout_s: float
) -> None:
    """Each mutant's outcome, `jobs` children at a time."""
    mutants = [m for module in modules for m in module.mutants]
    pending: list[tuple[Mutant, list[str]]] = []
    for mutant in mutants:
        tests = _tests_reaching(mutant, coverage)
        if tests is None:
            mutant.outcome = "unreached"
        else:
            pending.append((mutant, tests))
    trees = {module.path: module.tree for module in modules}
    running: dict[int, tuple[Mutant, float]] = {}
    done = 0
    total = len(pending)
    while pending or running:
        while pending and len(running) < jobs:
            mutant, tests = pending.pop(0)
            pid = _fork_mutant(mutant, trees[mutant.path], tests, pytest_args)
            running[pid] = (mutant, time.monotonic())
        finished, status = os.waitpid(-1, os.WNOHANG)
        if finished:
            mutant, _ = running.pop(finished)
            code = os.waitstatus_to_exitcode(status)
            mutant.outcome = "survived" if code == 0 else "killed"
            done += 1
            _progress(done, total)
            continue
        for pid, (mutant, started) in list(running.items()):
            if time.monotonic() - started > timeout_s:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                running.pop(pid)
                mutant.outcome = "timeout"
                done += 1
        time.sleep(0.01)
    if total:
        print(file=sys.stderr)


def _progress(done: int, total: int) -> None:
    """On a terminal, a counter kept up to date; in a log, a line every 25 mutants."""
    if sys.stderr.isatty():
        print(f"\rmutants run: {done}/{total}", end="", file=sys.stderr, flush=True)
    elif done % 25 == 0 or done == total:
        print(f"mutants run: {done}/{total}", file=sys.stderr, flush=True)


def _fork_mutant(mutant: Mutant, tree: ast.Module, tests: list[str], pytest_args) -> int:
    pid = os.fork()
    if pid:
        return pid
    status = 3
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        mutated, _ = apply(tree, mutant)
        path = str(ROOT / mutant.path)
        code = compile(mutated, path, "exec")
        sys.meta_path.insert(0, _MutantFinder(_module_name(mutant.path), path, code))
        sys.dont_write_bytecode = True
        import pytest

        for group in _first_and_rest(mutant, tests):  # the likely killers first
            status = int(pytest.main(["-x", "-q", *pytest_args, *group]))
            if status != 0:
                break
    finally:
        os._exit(status)


def _first_and_rest(mutant: Mutant, tests: list[str]) -> list[list[str]]:
    """The tests in files aimed at the mutated module (tests/test_<its name>*.py) or at
    verdicts (tests/test_verdicts_*.py), then the others: most mutants die in the first
    group, and the rest of the suite's files are then never collected."""
    stem = Path(mutant.path).stem.lstrip("_")
    patterns = ("tests/test_verdicts_*.py", f"tests/test_{stem}*.py")
    first = [t for t in tests if any(fnmatch.fnmatch(t.split("::")[0], p) for p in patterns)]
    chosen = set(first)
    return [group for group in (first, [t for t in tests if t not in chosen]) if group]


def _tests_reaching(mutant: Mutant, coverage: dict) -> list[str] | None:
    """The tests that execute the mutant's lines; all for import-time lines; None if none."""
    file = str(ROOT / mutant.path)
    first, last = mutant.lines
    keys = [f"{file}:{line}" for line in range(first, last + 1)]
    tests = sorted({test for key in keys for test in coverage["lines"].get(key, [])})
    if tests:
        return tests
    outside = set(coverage["outside"])
    if any(key in outside for key in keys):
        return list(coverage["tests"])
    return None


# -- report -----------------------------------------------------------------------------------


def report(modules: list[Module], show_killed: bool) -> float:
    """Print the score per module and the survivors; return the total score."""
    total = killed = 0
    print(f"{'module':<44} {'mutants':>7} {'killed':>7} {'survived':>8} {'score':>7}")
    for module in modules:
        count = len(module.mutants)
        dead = sum(m.outcome in ("killed", "timeout") for m in module.mutants)
        total += count
        killed += dead
        name = module.path + (f":{','.join(module.functions)}" if module.functions else "")
        score = f"{dead / count:.1%}" if count else "-"
        print(f"{name:<44} {count:>7} {dead:>7} {count - dead:>8} {score:>7}")
    overall = killed / total if total else 1.0
    print(f"{'total':<44} {total:>7} {killed:>7} {total - killed:>8} {overall:>7.1%}")
    survivors = [m for module in modules for m in module.mutants if m.outcome not in ("killed",)]
    shown = [m for m in survivors if m.outcome != "timeout"]
    if shown:
        print("\nsurviving mutants:")
        for m in shown:
            note = "  (no test reaches this line)" if m.outcome == "unreached" else ""
            print(f"  {m.path}:{m.lines[0]}  {m.original}  ->  {m.mutated}{note}")
    if show_killed:
        print("\nkilled mutants:")
        for module in modules:
            for m in module.mutants:
                if m.outcome in ("killed", "timeout"):
                    print(f"  {m.path}:{m.lines[0]}  {m.original}  ->  {m.mutated}  ({m.outcome})")
    return overall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Plant small bugs in memprof modules one at a time; print the mutation score."
    )
    parser.add_argument("modules", nargs="+", help="path[:function,function...]")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="children at once")
    parser.add_argument("--target", type=float, default=0.85, help="score to reach (0-1)")
    parser.add_argument(
        "--pytest-args",
        default="",
        help="more pytest arguments, as one string (e.g. --deselect of a failing test)",
    )
    parser.add_argument("--show-killed", action="store_true", help="list killed mutants too")
    parser.add_argument("--list", action="store_true", help="list the mutants, run nothing")
    parser.add_argument(
        "--coverage", type=Path, help="keep the suite's coverage here and reuse it while valid"
    )
    parser.add_argument(
        "--tests", nargs="+", default=["tests"], help="test files or folders (default: tests)"
    )
    options = parser.parse_args(argv)
    os.chdir(ROOT)
    sys.path.insert(0, str(ROOT))

    modules = [parse_target(spec) for spec in options.modules]
    for module in modules:
        module.mutants = find_mutants(module)
    if options.list:
        for module in modules:
            for m in module.mutants:
                print(f"{m.path}:{m.lines[0]}  {m.original}  ->  {m.mutated}")
        return 0

    pytest_args = DEFAULT_PYTEST_ARGS + shlex.split(options.pytest_args)
    for heavy in ("numpy", "rich.console", "rich.table", "typer", "pytest"):
        __import__(heavy)  # once, before forking: each child starts with them imported
    coverage = cached_baseline(modules, [*pytest_args, *options.tests], options.coverage)
    if coverage.get("code") != 0:
        print(
            "mutate: error: the unmutated test suite does not pass (pytest exit "
            f"{coverage.get('code')}); fix it or --deselect the failing tests",
            file=sys.stderr,
        )
        return 2
    timeout_s = max(10.0, 3 * coverage["seconds"])
    started = time.monotonic()
    run_mutants(modules, coverage, pytest_args, max(1, options.jobs), timeout_s)
    overall = report(modules, options.show_killed)
    print(
        f"\n{sum(len(m.mutants) for m in modules)} mutants in {time.monotonic() - started:.0f} s "
        f"(baseline suite {coverage['seconds']:.1f} s, {len(coverage['tests'])} tests); "
        f"target {options.target:.0%}"
    )
    return 0 if overall >= options.target else 1


if __name__ == "__main__":
    sys.exit(main())
