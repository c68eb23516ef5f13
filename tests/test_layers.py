"""The package's layers, read from its imports (those inside functions too): data flows one
way (arguments -> experiment -> Result -> renderer), so no module imports from a layer above
its own, and no modules import each other in a loop."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "memprof"

# lowest first; a module may import its own layer and those below
LAYERS = [
    ("memprof.errors", "memprof.interrupts", "memprof.version"),
    ("memprof.model",),
    ("memprof.core", "memprof.output", "memprof.cache"),  # cache warns through output
    ("memprof.trace",),
    ("memprof.experiments",),
    # trace's command runs experiments for its advice (memprof.run), as the API does
    ("memprof.api", "memprof.cli_options", "memprof.cli_commands", "memprof.cli_trace"),
    ("memprof.cli", "memprof.__main__", "memprof"),
]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in PACKAGE.rglob("*.py")}


def layer_of(module: str) -> int:
    """The layer of the longest prefix that names one."""
    best = (-1, -1)
    for rank, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                best = max(best, (len(prefix), rank))
    assert best[1] >= 0, f"{module} is in no layer: add it to LAYERS"
    return best[1]


def imports_of(module: str) -> set[str]:
    """The memprof modules `module` imports, anywhere in its code."""
    tree = ast.parse(MODULES[module].read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:  # `from memprof.experiments import base`: a module
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if submodule in MODULES else node.module)
    return {name for name in found if name in MODULES and name != module}


@functools.cache
def graph() -> dict[str, set[str]]:
    """Each module's memprof imports: read when a test asks, not by every pytest-xdist
    worker as it collects (half a second each)."""
    return {module: imports_of(module) for module in MODULES}


def test_every_module_has_a_layer():
    for module in MODULES:
        layer_of(module)


def test_no_module_imports_from_a_layer_above_its_own():
    upward = [
        f"{module} -> {imported}"
        for module, imported_modules in graph().items()
        for imported in imported_modules
        if layer_of(imported) > layer_of(module)
    ]
    assert upward == []


def test_no_modules_import_each_other_in_a_loop():
    """Package faces (an __init__ importing its own submodules) are not loops: Python runs
    the face first. Any other cycle is."""

    def is_face_of(package: str, module: str) -> bool:
        return MODULES[package].name == "__init__.py" and module.startswith(package + ".")

    loops = []
    state: dict[str, str] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for imported in sorted(graph()[module]):
            if is_face_of(imported, module):
                continue
            if state.get(imported) == "open":
                loops.append(" -> ".join([*path[path.index(imported) :], imported]))
            elif imported not in state:
                visit(imported, [*path, imported])
        state[module] = "done"

    for module in sorted(graph()):
        if module not in state:
            visit(module, [module])
    assert loops == []


def test_the_reader_finds_imports_inside_functions_and_of_submodules():
    assert "memprof.model.results" in graph()["memprof.experiments"]  # inside load()
    assert "memprof.api" in graph()["memprof"]  # imported inside __getattr__
    assert "memprof.experiments.base" in graph()["memprof.experiments.pinned"]


def test_no_module_defines_a_function_or_class_twice():
    """A second definition silently replaces the first (register's run once called its
    summary's table builder, with five arguments for two): every name is defined once."""
    twice = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text())
        scopes = [tree, *(node for node in tree.body if isinstance(node, ast.ClassDef))]
        for scope in scopes:
            names = [
                node.name
                for node in scope.body
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                and not any(  # @overload and @x.setter define one name on purpose
                    isinstance(d, ast.Attribute) or getattr(d, "id", "") == "overload"
                    for d in node.decorator_list
                )
            ]
            twice += [f"{module}: {name}" for name in set(names) if names.count(name) > 1]
    assert twice == []
