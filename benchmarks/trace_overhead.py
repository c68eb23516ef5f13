"""What `memprof trace` costs a training run, and whether it still counts what torch.profiler
counts. GPU machine with PyTorch.

examples/resnet_train.py (ResNet-18 training, batches copied from pageable memory, the loss
read every step) runs, alternating, ROUNDS times each: bare, traced (source lines, the
default), and traced with --stack-depth 0 (no CUPTI callbacks, no lines); then once under
torch.profiler (benchmarks/torch_profiler_run.py). Then:

1. Overhead: the program's training loop (its own clock, first batch to the last .item()),
   median of the rounds, traced against bare. Target: at most 1.10x. Beside it, not
   judged: the median step after the first five (a long run's cost per step), and the loop
   under torch.profiler (the same CUPTI records, PyTorch's own tracer). With --stack-depth 0
   beside it: what the lines themselves cost. The whole process is printed beside, not
   judged (memprof's own start-up and report are a fixed cost).
2. Counts: kernels, memsets and copies by direction and memory kinds, traced with lines,
   traced without, and torch.profiler's. Target: all three equal.
3. Lines: the trace names the program's lines (`# memprof-line:` comments) with one copy
   per step each.

    python3 benchmarks/trace_overhead.py [--rounds 3] [--steps 30]
Exit status 0 when every target is met, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import memprof  # noqa: E402
from memprof.model.results import Result  # noqa: E402

EXAMPLE = "examples/resnet_train.py"
OVERHEAD_TARGET = 1.10
STEADY_AFTER = 5
PREFIX = "memprof-example: "
FAILURES: list[str] = []


def environment() -> dict[str, str]:
    python_path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": python_path, "COLUMNS": "100"}


def run(command: list[str]) -> tuple[dict, float, subprocess.CompletedProcess]:
    """The program's own report, the process's wall time, and the completed process."""
    start = time.perf_counter()
    completed = subprocess.run(
        command, capture_output=True, text=True, cwd=ROOT, timeout=600, env=environment()
    )
    wall_s = time.perf_counter() - start
    lines = [line for line in completed.stdout.splitlines() if line.startswith(PREFIX)]
    if completed.returncode != 0 or len(lines) != 1:
        raise RuntimeError(
            f"{' '.join(command)} exited {completed.returncode}:\n"
            f"{completed.stdout[-2000:]}\n{completed.stderr[-3000:]}"
        )
    return json.loads(lines[0][len(PREFIX) :]), wall_s, completed


def traced(path: Path, steps: int, *options: str) -> list[str]:
    command = [sys.executable, "-m", "memprof", "trace", "--bandwidth", "none"]
    return [*command, "--json", str(path), *options, EXAMPLE, "--steps", str(steps)]


def steady_step_s(report: dict) -> float:
    """The median step after the first STEADY_AFTER (which load kernels and plan
    convolutions): what tracing costs a long training run per step."""
    steps = report["step_s"]
    return statistics.median(steps[STEADY_AFTER:] or steps)  # --steps 5 or fewer: all of them


def counts(result: Result) -> dict:
    """Kernels, memsets and copies by activity, as torch_profiler_run.py writes them."""
    kernels = memsets = 0
    copies: dict[str, int] = {}
    for m in result.measurements:
        if m.group != "gpu":
            continue
        if m.operation == "kernel":
            kernels += len(m.samples_ms)
        elif m.operation == "memset":
            memsets += len(m.samples_ms)
        elif m.name.startswith("[CUDA memcpy "):
            direction = m.name.split("]")[0].removeprefix("[CUDA memcpy ")
            activity = f"{direction} {m.name.split('] ', 1)[1]}"
            copies[activity] = copies.get(activity, 0) + len(m.samples_ms)
    return {"kernels": kernels, "memsets": memsets, "copies": copies}


def marked_lines() -> dict[str, str]:
    """`resnet_train.py:NN` of each `# memprof-line: NAME` comment, by name."""
    marks = {}
    for number, text in enumerate((ROOT / EXAMPLE).read_text().splitlines(), 1):
        found = re.search(r"# memprof-line: (\w+)\s*$", text)  # ends a line of code, not prose
        if found:
            marks[found[1]] = f"resnet_train.py:{number}"
    return marks


def check_lines(result: Result, steps: int) -> None:
    """Each marked line named, with one copy per step (its waits shown, not judged)."""
    lines = result.extra.lines or []
    print("\nLines the trace names for the marked ones (one copy per step each):")
    for name, place in marked_lines().items():
        found = {s.activity: s.calls for s in lines if f"{s.file}:{s.line}" == place}
        copies = sum(calls for activity, calls in found.items() if "->" in activity)
        print(f"  {name:<8} {place:<22} {found}")
        if copies != steps:
            FAILURES.append(f"line {name} ({place}): {copies} copies, {steps} expected")
    print(f"  {sum(1 for s in lines if s.origin == 'program')} lines of the program in all")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=30)
    options = parser.parse_args()
    rounds, steps = options.rounds, options.steps
    loops: dict[str, list[float]] = {"bare": [], "traced": [], "no lines": []}
    steps_s: dict[str, list[float]] = {"bare": [], "traced": [], "no lines": []}
    processes: dict[str, list[float]] = {"bare": [], "traced": [], "no lines": []}
    with tempfile.TemporaryDirectory() as folder:
        with_lines, without = Path(folder) / "lines.json", Path(folder) / "flat.json"
        profiled = Path(folder) / "profiler.json"
        run([sys.executable, EXAMPLE, "--steps", str(steps)])  # warm: caches, cuDNN plans
        completed = None
        for _ in range(rounds):
            for label, command in (
                ("bare", [sys.executable, EXAMPLE, "--steps", str(steps)]),
                ("traced", traced(with_lines, steps)),
                ("no lines", traced(without, steps, "--stack-depth", "0")),
            ):
                report, wall_s, ran = run(command)
                loops[label].append(report["loop_s"])
                steps_s[label].append(steady_step_s(report))
                processes[label].append(wall_s)
                completed = ran if label == "traced" else completed
        profiler_command = [sys.executable, "benchmarks/torch_profiler_run.py"]
        profiler_report, _, _ = run(
            [*profiler_command, "--out", str(profiled), EXAMPLE, "--steps", str(steps)]
        )
        seen = {
            "traced": counts(memprof.load(with_lines)),
            "no lines": counts(memprof.load(without)),
            "torch.profiler": json.loads(profiled.read_text()),
        }
        result = memprof.load(with_lines)
    print(completed.stderr)  # the last traced run, as the user sees it
    if "callback failed" in " ".join(completed.stderr.split()):
        FAILURES.append("memprof's callback failed on some calls: their lines are missing")
    median = statistics.median
    print(f"{EXAMPLE} --steps {steps}: median of {rounds} alternating rounds")
    for label in loops:
        ratio = median(loops[label]) / median(loops["bare"])
        step_ratio = median(steps_s[label]) / median(steps_s["bare"])
        print(
            f"  {label:<9} training loop {median(loops[label]):.3f} s ({ratio:.3f}x bare), "
            f"steady step {median(steps_s[label]) * 1e3:.2f} ms ({step_ratio:.3f}x), "
            f"whole process {median(processes[label]):.2f} s"
        )
    profiled_loop = profiler_report["loop_s"]
    print(
        f"  torch.profiler (one run, for reference): training loop {profiled_loop:.3f} s "
        f"({profiled_loop / median(loops['bare']):.3f}x bare), "
        f"steady step {steady_step_s(profiler_report) * 1e3:.2f} ms"
    )
    overhead = median(loops["traced"]) / median(loops["bare"])
    print(f"  target: traced at most {OVERHEAD_TARGET:.2f}x bare: {overhead:.3f}x")
    if overhead > OVERHEAD_TARGET:
        FAILURES.append(f"tracing overhead {overhead:.3f}x the bare training loop")
    print("\nCounts (kernels, memsets, copies by direction and memory kinds):")
    for label, figures in seen.items():
        print(f"  {label:<15} {json.dumps({k: figures[k] for k in ('kernels', 'memsets')})}")
        for activity, count in sorted(figures["copies"].items()):
            print(f"  {'':<15} {activity}: {count}")
    reference = seen["torch.profiler"]
    for name, count in sorted(reference.get("gpu_annotations_not_counted", {}).items()):
        print(f"  {'':<15} (a range torch draws on the GPU, not a kernel: {name} x{count})")
    for label in ("traced", "no lines"):
        for key in ("kernels", "memsets", "copies"):
            if seen[label][key] != reference[key]:
                FAILURES.append(
                    f"{label} {key}: {seen[label][key]}, torch.profiler {reference[key]}"
                )
    check_lines(result, steps)
    print()
    for failure in FAILURES:
        print(f"FAILED: {failure}")
    print("all targets met" if not FAILURES else f"{len(FAILURES)} targets missed")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
