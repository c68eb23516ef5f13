"""Every benchmark still imports against today's memprof, so a refactor that breaks one fails
here rather than on the GPU machine days later (two once broke silently); run_all.sh runs
every benchmark there is, and README's benchmark table names each one."""

from __future__ import annotations

import importlib.util
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"
SCRIPTS = sorted(BENCHMARKS.glob("*.py"))


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_every_benchmark_imports(path, monkeypatch, fake_pycuda):
    fake_pycuda("")  # copy_load.py is plain PyCUDA: its import is all that runs here
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # as `python3 benchmarks/X.py` has it
    spec = importlib.util.spec_from_file_location(f"benchmark_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert path.stem == "targets" or callable(module.main)


def test_run_all_runs_every_benchmark_and_readme_lists_each():
    run_all = (BENCHMARKS / "run_all.sh").read_text()
    run = set(re.findall(r"benchmarks/(\w+\.(?:py|sh))", run_all)) - {"run_all.sh"}
    # targets.py: imported by budgets.py and startup.py; torch_profiler_run.py and
    # cupti_client.py: run by trace_overhead.py
    helpers = {"targets.py", "torch_profiler_run.py", "cupti_client.py"}
    assert sorted(p.name for p in SCRIPTS if p.name not in run | helpers) == []
    shell = {p.name for p in BENCHMARKS.glob("*.sh")} - {"run_all.sh"}
    assert sorted(shell - run) == []
    readme = (ROOT / "README.md").read_text()
    listed = set(re.findall(r"`benchmarks/(\w+\.\w+)`", readme))
    assert sorted(listed - {p.name for p in BENCHMARKS.iterdir()}) == []  # none gone
    assert sorted(run - {"copy_load.py"} - listed) == []  # copy_load: check-beside-load's


def test_run_all_knows_each_name_it_lists():
    listed = subprocess.run(
        ["bash", str(BENCHMARKS / "run_all.sh"), "--list"], capture_output=True, text=True
    ).stdout.split()
    cases = re.findall(r"^    ([\w-]+)\)", (BENCHMARKS / "run_all.sh").read_text(), re.M)
    assert len(listed) >= 10 and sorted(listed) == sorted(cases)


def test_run_all_logs_each_benchmark_and_sums_them_up_past_a_failure(tmp_path):
    python = tmp_path / "python"  # stands in for each benchmark: one meets, one fails
    python.write_text(
        "#!/bin/bash\n"
        'case "$1" in\n'
        '*report_scale.py) echo "report 1.21x json.load (target 1.5x): met"; echo chatter ;;\n'
        '*startup.py) echo chatter; echo "cannot start"; exit 2 ;;\n'
        "esac\n"
    )
    python.chmod(0o755)
    out = tmp_path / "out"
    env = {"PATH": "/usr/bin:/bin", "OUT": str(out), "PYTHON": str(python)}
    script = str(BENCHMARKS / "run_all.sh")
    done = subprocess.run(["bash", script, "startup", "report-scale"], env=env, cwd=ROOT)
    assert done.returncode == 1  # one failed
    summary = (out / "summary.txt").read_text()
    assert re.search(
        r"== startup: .*\n   exit 2, \d+ s\n   \| chatter\n   \| cannot start\n", summary
    )
    met = r"   \| report 1.21x json.load \(target 1.5x\): met\n$"
    assert re.search(r"== report-scale: .*\n   exit 0, \d+ s\n" + met, summary)
    assert (out / "report-scale.log").read_text() == (
        "report 1.21x json.load (target 1.5x): met\nchatter\n"
    )


def test_the_cupti_client_counts_each_kernel_copy_and_memset_cupti_hands_it(monkeypatch, tmp_path):
    """benchmarks/cupti_client.py is the reference trace_overhead.py holds memprof's counts
    to: run on tests/fake_cupti.py's driver, it counts what that driver recorded, runs the
    program as `python` would and keeps its exit status."""
    import ctypes
    import json
    import sys
    import types

    from tests.fake_cupti import FakeCupti
    from tests.fake_library import FakeLibrary

    cupti = FakeCupti()
    monkeypatch.setitem(sys.modules, "cupti", types.SimpleNamespace(cupti=cupti))
    library = types.ModuleType("fake_gpu_library")
    library.gpu = FakeLibrary(cupti)
    monkeypatch.setitem(sys.modules, "fake_gpu_library", library)
    monkeypatch.setattr(ctypes, "CDLL", lambda name: types.SimpleNamespace(cuInit=lambda f: 0))
    script = tmp_path / "program.py"
    script.write_text(
        "import sys\nfrom fake_gpu_library import gpu\n"
        "for _ in range(3):\n    gpu.to_device(4096)\n    gpu.launch()\n"
        "gpu.to_host(4096)\ngpu.cupti.memset(64, 1000)\nsys.exit(sys.argv[1] == 'x')\n"
    )
    out = tmp_path / "counts.json"
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location("cupti_client", BENCHMARKS / "cupti_client.py")
    client = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(client)
    monkeypatch.setattr(sys, "argv", ["cupti_client.py", "--out", str(out), str(script), "x"])
    monkeypatch.setattr(sys, "path", list(sys.path))
    assert client.main() == 1  # the program's sys.exit(True)
    assert json.loads(out.read_text()) == {"kernels": 3, "copies": 4, "memsets": 1}
    assert cupti.enabled == set()  # switched off after the program
