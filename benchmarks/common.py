"""What the benchmarks share (`python3 benchmarks/X.py` puts this folder on the path): the
H200's targets and this GPU's allowance on them, the tally of targets missed, building and
running a reference, and running memprof's command line or an example program as a user does."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ALLOWANCE = {"H200": 1.0, "H100": 1.3}  # issue 24: the H100 is allowed 1.3x the H200's targets
NVIDIA_SMI_NAME = ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", "0"]
EXAMPLE_PREFIX = "memprof-example: "  # the line each program under examples/ reports on
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # `import memprof` finds this checkout's
Result = Any  # what memprof.run and memprof.load return (memprof's public API names no type)


def allowance(gpu_name: str) -> float:
    """What the H200's targets are multiplied by on this GPU: 1.0 where the issue names no
    allowance (another GPU is held to the H200's targets)."""
    return next((factor for model, factor in ALLOWANCE.items() if model in gpu_name), 1.0)


def gpu_name() -> str:
    """GPU 0's name as nvidia-smi gives it; "" where there is none."""
    try:
        done = subprocess.run(NVIDIA_SMI_NAME, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def verdict(value: float, h200_target: float, factor: float = 1.0) -> str:
    """'met' where value is within the target times this GPU's allowance, else 'MISSED'."""
    return "met" if value <= h200_target * factor else "MISSED"


class Misses(list):
    """The targets a benchmark missed, each by what it is; the exit status follows them.
    Timing targets (`timing`) are printed alike but never decide the exit status: a shared
    machine's noise is no bug."""

    def __init__(self) -> None:
        super().__init__()
        self.timing: list[str] = []

    def judge(self, met: bool, what: str, timing: bool = False) -> str:
        if not met:
            (self.timing if timing else self).append(what)
        return "met" if met else "MISSED"

    def status(self) -> int:
        """Print each target missed, or that all were met; 1 where any but a timing one was."""
        print()
        for what in self:
            print(f"MISSED: {what}")
        for what in self.timing:
            print(f"MISSED (timing, not the exit status): {what}")
        missed = len(self) + len(self.timing)
        print("all targets met" if not missed else f"{missed} target(s) missed")
        return 1 if self else 0


def nvcc(source: str, out: Path, *flags: str) -> Path:
    """benchmarks/SOURCE built with nvcc into `out`: a reference that measures without memprof."""
    binary = out / Path(source).stem
    command = ["nvcc", "-O2", "-o", str(binary), str(ROOT / "benchmarks" / source), *flags]
    subprocess.run(command, check=True)
    return binary


def reference_output(binary: Path, *arguments: object) -> str:
    """What a reference program run with ARGUMENTS prints (a failed run raises)."""
    command = [str(binary), *map(str, arguments)]
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout


def python_environment(checkout: Path = ROOT, bytecode: str = "", **extra: str) -> dict[str, str]:
    """This environment with `checkout` first on PYTHONPATH (a kit's packages after it); with
    `bytecode`, the folder .pyc files go to, so that each command starts as an installed one
    does (pip writes them) also where the sources are read-only."""
    kept = dict(os.environ)
    if bytecode:
        kept.pop("PYTHONDONTWRITEBYTECODE", None)
    path = [p for p in kept.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(ROOT)]
    kept["PYTHONPATH"] = os.pathsep.join([str(checkout), *path])
    return {**kept, **({"PYTHONPYCACHEPREFIX": bytecode} if bytecode else {}), **extra}


def bytecode_cache() -> str:
    """A folder of this run's own for bytecode, removed at exit."""
    folder = tempfile.mkdtemp(prefix="memprof-pycache-")
    atexit.register(shutil.rmtree, folder, True)
    return folder


def timed(command: list[str], **options: Any) -> tuple[subprocess.CompletedProcess, float]:
    """COMMAND run to its end, its output captured (text), and its wall time."""
    start = time.perf_counter()
    ran = subprocess.run(command, capture_output=True, text=True, **options)
    return ran, time.perf_counter() - start


def memprof_json(path: Path, *arguments: str) -> tuple[Result, float]:
    """`memprof ARGUMENTS --json PATH` run as a user runs it, its output kept beside PATH as
    .log: the Result it saved and its wall time (a run that fails ends the benchmark)."""
    import memprof

    command = [sys.executable, "-m", "memprof", *arguments, "--json", str(path)]
    ran, wall_s = timed(command, cwd=ROOT, env=python_environment())
    path.with_suffix(".log").write_text(ran.stdout + ran.stderr)
    if ran.returncode != 0:
        sys.exit(f"memprof {' '.join(arguments)}: exit {ran.returncode}: {ran.stderr}")
    return memprof.load(path), wall_s


def rows(result: Result, **columns: object) -> list[dict]:
    """The rows of a Result's CSV (memprof.frame) whose columns hold these values."""
    import memprof

    frame = memprof.frame(result)
    for column, value in columns.items():
        frame = frame[frame[column].astype(str) == str(value)]
    return frame.to_dict("records")


def run_example(command: list[str]) -> tuple[dict, float, subprocess.CompletedProcess]:
    """A program of examples/ (bare or under a recorder): its own report, the process's wall
    time, and the completed process."""
    completed, wall_s = timed(command, cwd=ROOT, timeout=600, env=python_environment(COLUMNS="100"))
    lines = [line for line in completed.stdout.splitlines() if line.startswith(EXAMPLE_PREFIX)]
    if completed.returncode != 0 or len(lines) != 1:
        raise RuntimeError(
            f"{' '.join(command)} exited {completed.returncode}:\n"
            f"{completed.stdout[-2000:]}\n{completed.stderr[-3000:]}"
        )
    return json.loads(lines[0].removeprefix(EXAMPLE_PREFIX)), wall_s, completed
