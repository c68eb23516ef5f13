"""A first run that works: from a checkout in a folder named memprof (as README clones it),
with a distribution name of memprof's own, and install hints that are commands that work."""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

from typer.testing import CliRunner

from memprof import errors
from memprof.cli import app
from memprof.errors import install_command

ROOT = Path(__file__).resolve().parent.parent
PINNED = ROOT / "tests" / "fixtures" / "h200_pinned_p20.json"


def test_where_a_summary_failed_names_memprofs_file_from_a_checkout_named_memprof(
    tmp_path, monkeypatch
):
    """The planted bug lives in a file under .../memprof/tests/, as a test in a checkout
    named memprof does: the line must still name memprof's own file that called it."""
    from memprof.experiments import pinned

    planted = tmp_path / "memprof" / "tests" / "planted.py"
    planted.parent.mkdir(parents=True)
    namespace: dict = {}
    code = "def broken(result, *rest):\n    return result.parameters.power / 0\n"
    exec(compile(code, str(planted), "exec"), namespace)
    monkeypatch.setattr(pinned, "figure", namespace["broken"])  # what its summary calls
    ran = CliRunner().invoke(app, ["report", str(PINNED)])
    assert ran.exit_code == 2
    assert "(ZeroDivisionError: division by zero, in pinned.py:" in ran.output
    assert "planted.py" not in ran.output


PYPROJECT = (ROOT / "pyproject.toml").read_text()  # read by hand: tomllib is Python 3.11+


def setting(name: str) -> str:
    return re.search(rf"^{re.escape(name)} = (.+)$", PYPROJECT, re.MULTILINE).group(1)


def test_the_distribution_is_not_the_other_memprof_and_the_command_is():
    assert ast.literal_eval(setting("name")) == errors.DISTRIBUTION == "cuda-memprof"
    assert ast.literal_eval(setting('"scripts/memprof"')) == "memprof"  # its own script


def test_the_extras_hint_lists_what_the_cuda_extra_installs():
    assert shlex.split(errors.CUDA_PACKAGES) == ast.literal_eval(setting("cuda"))


def test_from_a_checkout_the_hint_installs_this_folder_wherever_it_is_typed():
    assert install_command() == f"pip install -e {shlex.quote(f'{ROOT}[cuda]')}"


def test_installed_any_other_way_the_hint_names_the_packages(tmp_path, monkeypatch):
    installed = tmp_path / "site-packages" / "memprof" / "errors.py"
    installed.parent.mkdir(parents=True)
    monkeypatch.setattr(errors, "__file__", str(installed))
    assert install_command() == f"pip install {errors.CUDA_PACKAGES}"
    (tmp_path / "site-packages" / "pyproject.toml").write_text('[project]\nname = "memprof"\n')
    assert install_command() == f"pip install {errors.CUDA_PACKAGES}"  # another project's
