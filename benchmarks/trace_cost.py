"""Where `memprof trace`'s overhead comes from: examples/resnet_train.py's training loop with
CUPTI's activity kinds switched on one group at a time. GPU machine with PyTorch.

Each configuration runs in a process of its own (CUPTI's switches are process-wide), the
configurations alternating, --rounds times each; the figure is the program's own loop time
(first batch to the last .item()), median of the rounds, against the bare program run the
same way (runpy, in a process that imported nothing else):

    bare        no CUPTI
    kernel      CONCURRENT_KERNEL
    copies      + MEMCPY, MEMSET
    driver      + DRIVER (every driver call's record)
    runtime     + RUNTIME (every runtime call's record)
    external    + EXTERNAL_CORRELATION: the kinds memprof trace enables ...
    um          + UNIFIED_MEMORY_COUNTER: ... all of them
    selected    um, with the records of calls that neither launch nor copy, set, allocate,
                free, register, prefetch or wait switched off (cudaGetDevice, ...)
    callbacks   memprof's work calls and its stack recorder (lines) as `memprof trace`
                starts them, each callback counted and timed (by call, at entry and exit)
    no-driver   kernel, copies, RUNTIME, EXTERNAL_CORRELATION (no driver records)
    log         memprof's ActivityLog (its Python reading of the records) without lines
    trace       `memprof trace --bandwidth none` as the user runs it (lines, the default;
                the work calls alone)
    trace-flat  the same with --stack-depth 0 (no lines)

Each configuration with a buffer callback also says how many buffers CUPTI delivered while
the program ran and the time its callback took (the records read in Python under the GIL).

    python3 benchmarks/trace_cost.py [--rounds 3] [--steps 30] [--only a,b,...]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import runpy
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "resnet_train.py"
PREFIX = "memprof-example: "
STEADY_AFTER = 5  # steps that load kernels and plan convolutions, left out of the step time
KIND_GROUPS = {
    "kernel": ["CONCURRENT_KERNEL"],
    "copies": ["CONCURRENT_KERNEL", "MEMCPY", "MEMSET"],
    "driver": ["CONCURRENT_KERNEL", "MEMCPY", "MEMSET", "DRIVER"],
    "runtime": ["CONCURRENT_KERNEL", "MEMCPY", "MEMSET", "DRIVER", "RUNTIME"],
    "external": [
        "CONCURRENT_KERNEL",
        "MEMCPY",
        "MEMSET",
        "DRIVER",
        "RUNTIME",
        "EXTERNAL_CORRELATION",
    ],
    "no-driver": ["CONCURRENT_KERNEL", "MEMCPY", "MEMSET", "RUNTIME", "EXTERNAL_CORRELATION"],
}
CONFIGURATIONS = [
    "bare",
    *KIND_GROUPS,
    "um",
    "log",
    "selected",
    "callbacks",
    "trace",
    "trace-flat",
]


def start_counted_recorder(delivered: dict) -> dict[str, list]:
    """CUPTI as `memprof trace` starts it (work calls, lines at the default depth), with the
    stack recorder's callback counted and timed: name -> [callbacks, seconds in them]."""
    from memprof.core.activity import ActivityLog
    from memprof.trace.stacks import CodeFilter, StackRecorder, is_work_call

    log, why_not = ActivityLog.start(0, keep_all=True, record_call=is_work_call)
    assert log is not None, why_not
    recorder = StackRecorder(CodeFilter.for_program(str(EXAMPLE), None))
    by_name: dict[str, list] = {}
    names: dict[tuple[int, int], str] = {}
    original = recorder._on_api

    def counted(userdata, domain, cbid, data) -> None:
        start = time.perf_counter()
        original(userdata, domain, cbid, data)
        seconds = time.perf_counter() - start
        key = (int(domain), int(cbid))
        if key not in names:
            names[key] = str(log.cupti.get_callback_name(domain, cbid))
        entry = by_name.setdefault(names[key], [0, 0.0])
        entry[0] += 1
        entry[1] += seconds
        delivered["seconds"] += seconds
        delivered["records"] += 1

    recorder._on_api = counted
    note = recorder.start(log.cupti)
    assert note is None, note
    return by_name


def child(configuration: str, steps: int) -> None:
    """Switch on the configuration's kinds, run the example in this process, report."""
    sys.path.insert(0, str(ROOT))
    delivered = {"buffers": 0, "records": 0, "seconds": 0.0}

    def requested() -> tuple[int, int]:
        return 32 << 20, 0

    def completed(records: list) -> None:
        start = time.perf_counter()
        delivered["buffers"] += 1
        delivered["records"] += len(records)
        delivered["seconds"] += time.perf_counter() - start

    log = None
    if configuration != "bare":
        import ctypes

        ctypes.CDLL("libcuda.so.1").cuInit(0)
        from cupti import cupti

        if configuration == "callbacks":
            callbacks = start_counted_recorder(delivered)
        if configuration in ("um", "log", "selected"):
            from memprof.core.activity import ActivityLog
            from memprof.trace.stacks import is_work_call

            selected = is_work_call if configuration == "selected" else None
            log, why_not = ActivityLog.start(0, keep_all=True, record_call=selected)
            assert log is not None, why_not
            if configuration != "log":  # memprof's kinds, read by a callback that only counts
                cupti.activity_register_callbacks(requested, completed)
            else:
                reading = log._buffer_completed

                def timed(records: list) -> None:
                    start = time.perf_counter()
                    reading(records)
                    delivered["buffers"] += 1
                    delivered["records"] += len(records)
                    delivered["seconds"] += time.perf_counter() - start

                cupti.activity_register_callbacks(log._buffer_requested, timed)
        elif configuration in KIND_GROUPS:
            for name in KIND_GROUPS[configuration]:
                cupti.activity_enable(getattr(cupti.ActivityKind, name))
            cupti.activity_register_callbacks(requested, completed)
    sys.argv = [str(EXAMPLE), "--steps", str(steps)]
    runpy.run_path(str(EXAMPLE), run_name="__main__")
    during = dict(delivered)
    if configuration == "callbacks":
        top = sorted(callbacks.items(), key=lambda item: -item[1][0])[:8]
        during["calls"] = {name: [count, round(seconds * 1e3, 2)] for name, (count, seconds) in top}
    if configuration != "bare":
        from cupti import cupti

        cupti.activity_flush_all(1)
    print(PREFIX.replace("example", "cost") + json.dumps({"during": during, "all": delivered}))
    sys.stdout.flush()
    # CUPTI delivers the records of the driver calls made while Python tears down (PyTorch's
    # frees) to a callback whose interpreter is gone: leave without tearing down.
    os._exit(0)


def run(configuration: str, steps: int) -> dict:
    python_path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    environment = {**os.environ, "PYTHONPATH": python_path, "COLUMNS": "100"}
    if configuration.startswith("trace"):
        command = [sys.executable, "-m", "memprof", "trace", "--bandwidth", "none"]
        if configuration == "trace-flat":
            command += ["--stack-depth", "0"]
        command += [str(EXAMPLE), "--steps", str(steps)]
    else:
        command = [sys.executable, __file__, "--child", configuration, "--steps", str(steps)]
    done = subprocess.run(
        command, capture_output=True, text=True, cwd=ROOT, env=environment, timeout=600
    )
    found = {"example": None, "cost": None}
    for line in done.stdout.splitlines():
        for key in found:
            if line.startswith(f"memprof-{key}: "):
                found[key] = json.loads(line.split(": ", 1)[1])
    if done.returncode != 0 or found["example"] is None:
        raise RuntimeError(f"{configuration}: exit {done.returncode}\n{done.stderr[-3000:]}")
    steady = found["example"]["step_s"][STEADY_AFTER:]
    return {
        "loop_s": found["example"]["loop_s"],
        "step_s": statistics.median(steady) if steady else math.nan,
        "cost": found["cost"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--only", default=",".join(CONFIGURATIONS))
    parser.add_argument("--child")
    options = parser.parse_args()
    if options.child:
        child(options.child, options.steps)
        return 0
    chosen = ["bare", *(c for c in options.only.split(",") if c != "bare")]
    run("bare", options.steps)  # warm: caches, cuDNN plans
    loops: dict[str, list[float]] = {c: [] for c in chosen}
    steps: dict[str, list[float]] = {c: [] for c in chosen}
    costs: dict[str, dict | None] = {}
    for _ in range(options.rounds):
        for configuration in chosen:
            ran = run(configuration, options.steps)
            print(
                f"  {configuration}: loop {ran['loop_s']:.3f} s, step {ran['step_s'] * 1e3:.2f} ms"
                f" {ran['cost'] or ''}",
                flush=True,
            )
            loops[configuration].append(ran["loop_s"])
            steps[configuration].append(ran["step_s"])
            costs[configuration] = ran["cost"]
    bare = statistics.median(loops["bare"])
    bare_step = statistics.median(steps["bare"])
    print(f"{EXAMPLE.name} --steps {options.steps}, median of {options.rounds} rounds")
    for configuration in chosen:
        loop = statistics.median(loops[configuration])
        step = statistics.median(steps[configuration])
        line = (
            f"  {configuration:<11} loop {loop:.3f} s  {loop / bare:.3f}x bare; "
            f"steady step {step * 1e3:.2f} ms  {step / bare_step:.3f}x bare"
        )
        cost = costs.get(configuration)
        if cost:
            during, total = cost["during"], cost["all"]
            line += (
                f"  during the run: {during['buffers']} buffers, {during['records']} records, "
                f"{during['seconds'] * 1e3:.1f} ms reading; in all {total['records']} records"
            )
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
