"""Does `memprof trace` see exactly what a program did, at the program's own timing? GPU machine.

Each example under examples/ makes known copies, times them itself with CUDA events and prints
one `memprof-example: {json}` line; each runs bare and under `memprof trace --json`:
1. Counts and bytes: every (direction, source kind, destination kind, size) the program
   reports has exactly that many copies in the trace, and the trace has no other copies.
2. Time: copies of 1 MiB or more within 5% of the program's events (per row and in total):
   blocking copies (synchronous, or pageable) by "blocked", the time their calls held the
   host (as the events bracket them, staging included); asynchronous ones by "GPU" (CUPTI's).
3. Overhead, examples/small_copies.py (10,000 pageable copies of 4 KiB): its copy loop traced
   against bare, median of --rounds alternating runs: under 10% with lines on; --stack-depth 0
   and the program's and the process's wall times printed beside, not judged.

    python3 benchmarks/trace_check.py [--rounds N]
Exit status 0 when every target is met. Examples whose library (torch) is missing are skipped.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
from pathlib import Path

from common import Misses, Result, run_example

import memprof

EXAMPLES = (  # (script, the library it needs)
    ("examples/pycuda_copies.py", "pycuda"),
    ("examples/torch_copies.py", "torch"),
    ("examples/small_copies.py", "pycuda"),
)
OVERHEAD_EXAMPLE = "examples/small_copies.py"
LARGE_BYTES = 1 << 20
TIME_TOLERANCE = 0.05
OVERHEAD_TARGET = 0.10
FAILURES = Misses()


def traced(script: str, json_path: Path, *options: str) -> list[str]:
    return [sys.executable, "-m", "memprof", "trace", "--json", str(json_path), *options, script]


def row_name(copy: dict) -> str:
    return f"[CUDA memcpy {copy['direction']}] {copy['source']} -> {copy['destination']}"


def trace_figure(key: tuple[str, int], count: int, m: object, blocked: dict) -> tuple[float, str]:
    """The trace's time of one row, and which: "blocked" where every copy of it blocked the
    host and was paired with its call, "GPU" (CUPTI's memcpy records) otherwise."""
    row = blocked.get(key)
    if row is not None and row.calls == count and row.paired == count:
        return row.blocked_ms, "blocked"
    return (sum(m.samples_ms) if m else 0.0), "GPU"


def check_copies(name: str, report: dict, result: Result) -> None:
    """Counts and bytes exact, and copy time of >= 1 MiB within 5% of the program's events."""
    traced_copies = {
        (m.name, m.bytes): m for m in result.measurements if m.name.startswith("[CUDA memcpy")
    }
    blocked = {(b.name, b.bytes): b for b in result.extra.blocked or []}
    expected = {(row_name(c), c["bytes"]): c for c in report["copies"]}
    print(f"\n{name}: copies, program's own count and events against the trace")
    print(
        f"  {'copy':<44} {'bytes':>10} {'count':>6} {'traced':>6} {'events':>10} "
        f"{'GPU (DMA)':>10} {'blocked':>10} {'compared':>9}"
    )
    event_total = trace_total = 0.0
    for key, copy in expected.items():
        m = traced_copies.get(key)
        calls = len(m.samples_ms) if m else 0
        gpu_ms = sum(m.samples_ms) if m else 0.0
        blocked_text = f"{blocked[key].blocked_ms:.4f}" if key in blocked else "-"
        trace_ms, which = trace_figure(key, copy["count"], m, blocked)
        event_ms = copy["event_ms"]
        ratio = ""
        if event_ms is not None and copy["bytes"] >= LARGE_BYTES:
            event_total += event_ms
            trace_total += trace_ms
            ratio = f"{which} {trace_ms / event_ms - 1:+.1%}"
            if abs(trace_ms / event_ms - 1) > TIME_TOLERANCE:
                FAILURES.append(f"{name}: {key[0]} {key[1]} B: {ratio} against events")
        events_text = f"{event_ms:.4f}" if event_ms is not None else "-"
        print(
            f"  {key[0]:<44} {key[1]:>10} {copy['count']:>6} {calls:>6} "
            f"{events_text:>10} {gpu_ms:>10.4f} {blocked_text:>10} {ratio:>9}"
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
        deviation = trace_total / event_total - 1
        print(
            f"  copies of 1 MiB or more: events {event_total:.4f} ms, trace {trace_total:.4f} ms "
            f"(blocked for blocking copies, GPU for asynchronous ones; {deviation:+.2%}; "
            f"target within {TIME_TOLERANCE:.0%})"
        )
        if abs(deviation) > TIME_TOLERANCE:
            FAILURES.append(f"{name}: total copy time {deviation:+.2%} against events")


def check_overhead(rounds: int) -> None:
    """Part 3: the copy loop bare, traced (lines on: a CUPTI callback at each copy call;
    judged) and with --stack-depth 0 (CUPTI's records alone), alternating."""
    runs = {"bare": [], "traced": [], "no lines": []}  # (loop, program wall, process wall)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "trace.json"
        commands = {
            "bare": [sys.executable, OVERHEAD_EXAMPLE],
            "traced": traced(OVERHEAD_EXAMPLE, path),
            "no lines": traced(OVERHEAD_EXAMPLE, path, "--stack-depth", "0"),
        }
        run_example(commands["traced"])  # warm: caches, the bandwidth measurement
        for _ in range(rounds):
            for label, command in commands.items():
                report, wall_s, _ = run_example(command)
                runs[label].append((report["loop_s"], report["wall_s"], wall_s))
        copies = sum(copy["count"] for copy in report["copies"])
    median = statistics.median

    def at(label: str, part: int) -> float:
        return median(sample[part] for sample in runs[label])

    print(f"\n{OVERHEAD_EXAMPLE}: wall time, median of {rounds} alternating rounds")
    for part, what in enumerate(
        ("its copy loop", "program (its first line to its last)", "whole process")
    ):
        cells = [f"bare {at('bare', part):.3f} s"]
        for label in ("traced", "no lines"):
            ratio = at(label, part) / at("bare", part) - 1
            cells.append(f"{label} {at(label, part):.3f} s ({ratio:+.1%})")
        print(f"  {what:<38} " + ", ".join(cells))
    for label in ("traced", "no lines"):
        added_us = (at(label, 0) - at("bare", 0)) / copies * 1e6
        print(f"  {label}: {added_us:+.2f} us a copy in the loop")
    print(
        "  (the program's wall is shorter traced: memprof calls cuInit and starts CUPTI before "
        "the program's first line, so the driver start-up the bare program pays is already done)"
    )
    for label in ("traced", "no lines"):
        overhead = at(label, 0) / at("bare", 0) - 1
        judged = label == "traced"
        print(
            f"  target: copy loop under +{OVERHEAD_TARGET:.0%}, {label}"
            f"{' (judged: the default)' if judged else ' (CUPTI alone, printed)'}: {overhead:+.1%}"
        )
        if judged and overhead >= OVERHEAD_TARGET:
            FAILURES.append(f"tracing overhead {overhead:+.1%} of the program's copy loop")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="overhead rounds (default 5)")
    rounds = parser.parse_args().rounds
    if rounds < 1:
        parser.error(f"--rounds {rounds}: at least 1")
    for script, library in EXAMPLES:
        if importlib.util.find_spec(library) is None:
            print(f"\n{script}: skipped, {library} is not installed here")
            continue
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "trace.json"
            _, bare_wall_s, _ = run_example([sys.executable, script])
            report, traced_wall_s, completed = run_example(traced(script, path))
            result = memprof.load(path)
        print(f"\n{script}: bare {bare_wall_s:.2f} s, traced {traced_wall_s:.2f} s (process)")
        print(completed.stderr)  # the trace itself, as the user sees it
        check_copies(script, report, result)
    if importlib.util.find_spec("pycuda") is not None:
        check_overhead(rounds)
    return FAILURES.status()


if __name__ == "__main__":
    sys.exit(main())
