"""Every long command's wall time from the shell, beside its budget (issue 24), in one run.

Each command runs as a user runs it (`python -m memprof CMD --quiet`, a fresh process), --runs
times after an untimed warm run; with --baseline DIR, an older checkout's interleaved with ours.
Prints each median (and range) beside its budget (the H200's; 1.3x on an H100), met or MISSED.

    python3 benchmarks/budgets.py [--runs 3] [--baseline ../memprof-before] [--only sweep,check]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from common import ROOT, allowance, bytecode_cache, gpu_name, python_environment, timed, verdict

BUDGETS_S = {
    "compare": 3.0,
    "sweep": 6.0,
    "alloc": 8.0,
    "managed": 5.0,
    "smallcopies": 3.0,
    "check": 2.0,
    "pinlimit": 30.0,  # issue 41, at its default cap
    "pinned --power 20": 1.0,  # CUPTI on
}
BYTECODE_CACHE = bytecode_cache()  # one of this run's own, as an installed memprof has it


def wall_s(checkout: Path, command: str) -> float:
    """Seconds one `memprof COMMAND --quiet` of that checkout takes, start to exit."""
    run = [sys.executable, "-m", "memprof", *command.split(), "--quiet"]
    done, elapsed = timed(run, cwd=checkout, env=python_environment(checkout, BYTECODE_CACHE))
    if done.returncode not in (0, 1):  # 1: a check that failed still ran in full
        raise SystemExit(f"{checkout}: memprof {command} exited {done.returncode}: {done.stderr}")
    return elapsed


def shown(times: list[float]) -> str:
    return f"{statistics.median(times):6.2f} s ({min(times):.2f}-{max(times):.2f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="an older checkout, timed beside ours")
    parser.add_argument("--only", default=",".join(BUDGETS_S), help="comma-separated commands")
    arguments = parser.parse_args()
    checkouts = {"this": ROOT}
    if arguments.baseline:
        checkouts["baseline"] = arguments.baseline.resolve()
    met = True
    gpu = gpu_name()
    factor = allowance(gpu)
    print(f"GPU: {gpu or 'unknown'}: the H200's budgets x{factor:g}")
    print(f"{'command':<18} {'budget':>7}  " + "  ".join(f"{n:<22}" for n in checkouts))
    for command in arguments.only.split(","):
        times: dict[str, list[float]] = {name: [] for name in checkouts}
        for checkout in checkouts.values():
            wall_s(checkout, command)  # warm: kernels compiled, caches filled
        for run in range(arguments.runs):
            names = list(checkouts)
            for name in names[run % len(names) :] + names[: run % len(names)]:
                times[name].append(wall_s(checkouts[name], command))
        budget = BUDGETS_S[command] * factor
        ours = statistics.median(times["this"])
        outcome = verdict(ours, BUDGETS_S[command], factor)
        met &= outcome == "met"
        cells = "  ".join(f"{shown(t):<22}" for t in times.values())
        baseline = times.get("baseline")
        ratio = f"  {ours / statistics.median(baseline):.2f}x the baseline" if baseline else ""
        print(f"{command:<18} {budget:>5.1f} s  {cells}{ratio}  {outcome}", flush=True)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
