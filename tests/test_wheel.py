"""The wheel carries kernels/*.cu and memprof finds them once installed (no checkout around)."""

import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel `pip wheel` builds, by hatchling's own builder in this process: pip started a
    Python for itself and another for the build hook (2.4 CPU s; this 0.1)."""
    pytest.importorskip(
        "hatchling", reason="building the wheel needs hatchling (pip install -e '.[test]')"
    )
    from hatchling.builders.wheel import WheelBuilder

    out = tmp_path_factory.mktemp("dist")
    [built] = WheelBuilder(str(ROOT)).build(directory=str(out), versions=["standard"])
    assert Path(built).name.startswith("cuda_memprof-")  # the distribution's name (pyproject)
    return Path(built)


def test_wheel_contains_the_kernel_sources(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    for source in (ROOT / "kernels").glob("*.cu"):
        assert f"memprof/kernels/{source.name}" in names
    assert "memprof/cli.py" in names
    assert "memprof/result.schema.json" in names  # the published contract (docs/formats.md)


def test_wheel_installs_memprofs_own_command_script(wheel):
    """The `memprof` command is scripts/memprof (Ctrl-C from its first instruction), made
    executable, and no installer-written console script beside it."""
    archive = zipfile.ZipFile(wheel)
    [script] = [info for info in archive.infolist() if info.filename.endswith("/scripts/memprof")]
    assert script.external_attr >> 16 & 0o111  # executable once installed
    assert archive.read(script).startswith(b"#!python\n")  # the installer writes its python
    entry_points = [name for name in archive.namelist() if name.endswith("entry_points.txt")]
    assert all(b"console_scripts" not in archive.read(name) for name in entry_points)


def test_installed_wheel_finds_its_kernels_in_a_fresh_environment(wheel, tmp_path):
    environment = tmp_path / "venv"
    venv.create(environment)  # without pip: ensurepip took 5 of the test's 18 s
    python = environment / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    install = ("install", "-q", "--no-deps", "--no-index", "--target", site, str(wheel))
    subprocess.run(  # into its site-packages, by this pip
        [sys.executable, "-m", "pip", *install],
        check=True,
        capture_output=True,
    )
    script = (
        "import memprof.core.kernels as k; print(k.kernel_directory()); "
        "source = k.kernel_source('sum_arrays.cu'); "
        "print(k.parse_signatures(source)['sumArraysGPU'].display)"
    )
    alone = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    completed = subprocess.run(  # the installed memprof, not a checkout on PYTHONPATH
        [str(python), "-c", script],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=alone,
    )
    directory, signature = completed.stdout.strip().splitlines()
    assert Path(directory).is_relative_to(environment)
    assert Path(directory).parts[-2:] == ("memprof", "kernels")
    assert signature == "sumArraysGPU(float*, float*, float*, int)"
