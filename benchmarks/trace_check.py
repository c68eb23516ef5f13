"""Does `memprof trace` see exactly what a program did, at the program's own timing? GPU machine.

Each example under examples/ knows by construction how many copies of which kind and size
it makes, times them itself with CUDA events, and prints one `memprof-example: {json}` line.
Each runs bare and under `memprof trace --json`; then:

1. Counts and bytes: every (direction, source kind, destination kind, size) the program
   reports has exactly that many copies in the trace, and the trace has no other copies.
2. Time: the trace's copy time (CUPTI) of copies of 1 MiB or more, summed, against the
   program's own event timing of the same copies. Target: within 5% (per row and in total).
3. Overhead, examples/small_copies.py (10,000 copies of 4 KiB): the program's own wall time
   (first line to last, inside the program) traced against bare, median of ROUNDS
   alternating runs. Target: under 10%. The whole process (memprof's import, CUPTI start,
   rendering) is printed beside it, not judged: that fixed cost does not grow with the program.

    python3 benchmarks/trace_check.py [--rounds N]
Exit status 0 when every target is met, 1 otherwise. Examples whose library is missing
(torch) are reported as skipped.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memprof.results import Result  # noqa: E402

EXAMPLES = (  # (script, the library it needs)
    ("examples/pycuda_copies.py", "pycuda"),
    ("examples/torch_copies.py", "torch"),
    ("examples/small_copies.py", "pycuda"),
)
OVERHEAD_EXAMPLE = "examples/small_copies.py"
LARGE_BYTES = 1 << 20
TIME_TOLERANCE = 0.05
OVERHEAD_TARGET = 0.10
PREFIX = "memprof-example: "
FAILURES: list[str] = []


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


def environment() -> dict[str, str]:
    python_path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": python_path, "COLUMNS": "200"}


def traced(script: str, json_path: Path) -> list[str]:
    return [sys.executable, "-m", "memprof", "trace", "--json", str(json_path), script]


def row_name(copy: dict) -> str:
    return f"[CUDA memcpy {copy['direction']}] {copy['source']} -> {copy['destination']}"


def check_copies(name: str, report: dict, result: Result) -> None:
    """Counts and bytes exact, and copy time of >= 1 MiB within 5% of the program's events."""
    traced_copies = {
        (m.name, m.bytes): m for m in result.measurements if m.name.startswith("[CUDA memcpy")
    }
    expected = {(row_name(c), c["bytes"]): c for c in report["copies"]}
    print(f"\n{name}: copies, program's own count and events against the trace")
    print(f"  {'copy':<44} {'bytes':>10} {'count':>6} {'traced':>6} {'events':>10} {'CUPTI':>10}")
    event_total = cupti_total = 0.0
    for key, copy in expected.items():
        m = traced_copies.get(key)
        calls = len(m.samples_ms) if m else 0
        cupti_ms = sum(m.samples_ms) if m else 0.0
        event_ms = copy["event_ms"]
        ratio = ""
        if event_ms is not None and copy["bytes"] >= LARGE_BYTES:
            event_total += event_ms
            cupti_total += cupti_ms
            ratio = f"{cupti_ms / event_ms - 1:+.1%}"
            if abs(cupti_ms / event_ms - 1) > TIME_TOLERANCE:
                FAILURES.append(f"{name}: {key[0]} {key[1]} B: CUPTI {ratio} against events")
        events_text = f"{event_ms:.4f}" if event_ms is not None else "-"
        print(
            f"  {key[0]:<44} {key[1]:>10} {copy['count']:>6} {calls:>6} "
            f"{events_text:>10} {cupti_ms:>10.4f} {ratio}"
        )
        if calls != copy["count"]:
            FAILURES.append(f"{name}: {key[0]} {key[1]} B: {calls} traced, {copy['count']} made")
    for key, m in traced_copies.items():
        if key not in expected:
            print(f"  unexpected in the trace: {key[0]} {key[1]} B x{len(m.samples_ms)}")
            FAILURES.append(f"{name}: the trace has copies the program did not make: {key}")
    traced_bytes = sum(m.bytes * len(m.samples_ms) for m in traced_copies.values())
    made_bytes = sum(c["bytes"] * c["count"] for c in report["copies"])
    print(f"  bytes: program {made_bytes}, trace {traced_bytes}")
    if traced_bytes != made_bytes:
        FAILURES.append(f"{name}: {traced_bytes} bytes traced, {made_bytes} copied")
    memsets = {m.bytes: len(m.samples_ms) for m in result.measurements if m.operation == "memset"}
    for memset in report.get("memsets", []):
        if memsets.get(memset["bytes"], 0) != memset["count"]:
            FAILURES.append(f"{name}: memsets of {memset['bytes']} B: {memsets}")
    if event_total:
        deviation = cupti_total / event_total - 1
        print(
            f"  copies of 1 MiB or more: events {event_total:.4f} ms, CUPTI {cupti_total:.4f} ms "
            f"({deviation:+.2%}; target within {TIME_TOLERANCE:.0%})"
        )
        if abs(deviation) > TIME_TOLERANCE:
            FAILURES.append(f"{name}: total copy time {deviation:+.2%} against events")


def check_overhead(rounds: int) -> None:
    """The 10,000-copy program's own wall time, bare and traced, alternating."""
    program_bare, program_traced, process_bare, process_traced, loop_bare, loop_traced = (
        [] for _ in range(6)
    )
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "trace.json"
        run(traced(OVERHEAD_EXAMPLE, path))  # warm: caches, the bandwidth measurement
        for _ in range(rounds):
            report, wall_s, _ = run([sys.executable, OVERHEAD_EXAMPLE])
            program_bare.append(report["wall_s"])
            loop_bare.append(report["loop_s"])
            process_bare.append(wall_s)
            report, wall_s, _ = run(traced(OVERHEAD_EXAMPLE, path))
            program_traced.append(report["wall_s"])
            loop_traced.append(report["loop_s"])
            process_traced.append(wall_s)
    median = statistics.median
    overhead = median(program_traced) / median(program_bare) - 1
    print(f"\n{OVERHEAD_EXAMPLE}: wall time, median of {rounds} alternating rounds")
    for label, bare, traced_s in (
        ("program (its first line to its last)", program_bare, program_traced),
        ("its copy loop alone", loop_bare, loop_traced),
        ("whole process (memprof's start and report too)", process_bare, process_traced),
    ):
        print(
            f"  {label:<48} bare {median(bare):.3f} s, traced {median(traced_s):.3f} s "
            f"({median(traced_s) / median(bare) - 1:+.1%})"
        )
    print(f"  target: program's wall time under +{OVERHEAD_TARGET:.0%}: {overhead:+.1%}")
    if overhead >= OVERHEAD_TARGET:
        FAILURES.append(f"tracing overhead {overhead:+.1%} of the program's wall time")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="overhead rounds (default 5)")
    rounds = parser.parse_args().rounds
    for script, library in EXAMPLES:
        if importlib.util.find_spec(library) is None:
            print(f"\n{script}: skipped, {library} is not installed here")
            continue
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "trace.json"
            _, bare_wall_s, _ = run([sys.executable, script])
            report, traced_wall_s, completed = run(traced(script, path))
            result = Result.load(path)
        print(f"\n{script}: bare {bare_wall_s:.2f} s, traced {traced_wall_s:.2f} s (process)")
        print(completed.stderr)  # the trace itself, as the user sees it
        check_copies(script, report, result)
    if importlib.util.find_spec("pycuda") is not None:
        check_overhead(rounds)
    print()
    for failure in FAILURES:
        print(f"FAILED: {failure}")
    print("all targets met" if not FAILURES else f"{len(FAILURES)} targets missed")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
