"""Issue 17's targets, measured side by side on the GPU machine.

    python3 benchmarks/allocators_and_small_copies.py [--out DIR]

Builds benchmarks/allocators_reference.cu and benchmarks/smallcopies_reference.cu with nvcc
(CUDA C++ on the driver API: the same calls, counts and sizes, a different route: no Python,
no CUPTI, std::chrono around host calls, events around gated back-to-back batches), runs
memprof's own measurements in this process, and prints memprof / reference:

- pool allocation (reused right after cuMemFreeAsync) and its free (cuMemFreeAsync), from the
  default pool and from the pool keeping memory, at 2 MiB and 64 MiB;
- VMM map (cuMemMap) at 2 MiB and 64 MiB;
- one call per copy from pinned memory, 128 copies of 4 KiB, GPU time per copy;
- one cuMemcpyBatchAsync of 128 copies of 4 KiB, GPU time per copy.

Target: every ratio within 10% (0.90 to 1.10). memprof times a driver call by CUPTI's record
of it; the same calls timed by memprof's host clock (--timing events: Python's cost of a call
included) are printed beside, for information. Then `memprof smallcopies` with its defaults
in at most 10 s of wall clock (the second of two runs, kernel cache warm).

Every log, reference output and memprof Result goes under DIR ($OUT where set, else
./allocators-and-small-copies). Exit status 0 when every target is met.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import memprof
from memprof.model.results import MissingMeasurement, Result

HERE = Path(__file__).resolve().parent
ALLOC_POWERS = (19, 24)  # 2 MiB (one VMM granule on Hopper) and 64 MiB
COPY_POWER, COPIES = 10, 128  # 4 KiB, as a training step's small tensors
REPEAT = 30
TOLERANCE = 0.10
SMALLCOPIES_LIMIT_S = 10.0
FAILURES: list[str] = []


def log(out: Path, line: str = "") -> None:
    print(line, flush=True)
    with (out / "summary.txt").open("a") as summary:
        summary.write(line + "\n")


def build(source: str, out: Path) -> Path:
    binary = out / Path(source).stem
    command = ["nvcc", "-O2", "-std=c++17", "-o", str(binary), str(HERE / source), "-lcuda"]
    subprocess.run(command, check=True)
    return binary


def reference(binary: Path, arguments: list[int], out: Path) -> dict[tuple[str, int], float]:
    """name -> median ms, from lines "NAME [DIRECTION] BYTES MS"."""
    ran = subprocess.run(
        [str(binary), *map(str, arguments)], check=True, capture_output=True, text=True
    )
    (out / f"{binary.name}-{'-'.join(map(str, arguments))}.txt").write_text(ran.stdout)
    found = {}
    for line in ran.stdout.splitlines():
        *name, nbytes, ms = line.split()
        found["_".join(name), int(nbytes)] = float(ms)
    return found


def saved(result: Result, out: Path, name: str) -> Result:
    (out / f"{name}.json").write_text(result.to_json() + "\n")
    if not result.passed:
        failed = "; ".join(f"{c.name}: {c.detail}" for c in result.checks if not c.passed)
        sys.exit(f"memprof's own verification failed ({name}): {failed}")
    return result


def median(result: Result, group: str, operation: str, kind: str, nbytes: int) -> tuple[float, str]:
    measurement = result.find(operation, kind, group, nbytes)
    return measurement.stats.median_ms, measurement.source


def compare(
    out: Path, what: str, ours: tuple[float, str], theirs: float, target: bool = True
) -> None:
    ours_ms, source = ours
    ratio = ours_ms / theirs
    verdict = "information"
    if target:
        met = abs(ratio - 1) <= TOLERANCE
        verdict = "met" if met else "MISSED"
        if not met:
            FAILURES.append(what)
    log(
        out,
        f"{what}: memprof {ours_ms * 1e3:.3f} us ({source}), reference {theirs * 1e3:.3f} us, "
        f"ratio {ratio:.3f} ({verdict})",
    )


TARGETS = (  # label, memprof's operation and kind, the reference's name
    ("pool allocation, reused", "alloc_reused", "pool", "pool_alloc_reused"),
    ("pool free (cuMemFreeAsync)", "free_call", "pool", "pool_free"),
    ("kept pool allocation, reused", "alloc_reused", "pool_kept", "pool_kept_alloc_reused"),
    ("kept pool free (cuMemFreeAsync)", "free_call", "pool_kept", "pool_kept_free"),
    ("VMM map (cuMemMap)", "map", "vmm", "vmm_map"),
)
ALSO = (  # printed for information, no target
    ("pool, new", "alloc_new", "pool", "pool_alloc_new"),
    ("pool, sync after free", "sync_after_free", "pool", "pool_sync_after_free"),
    ("kept pool, trim", "trim", "pool_kept", "pool_kept_trim"),
    ("VMM create", "create", "vmm", "vmm_create"),
    ("VMM set access", "set_access", "vmm", "vmm_set_access"),
    ("VMM unmap", "unmap", "vmm", "vmm_unmap"),
    ("cuMemAlloc", "alloc_new", "device", "device_alloc_new"),
)


def allocators(out: Path) -> None:
    binary = build("allocators_reference.cu", out)
    runs = {}
    for timing in ("cupti", "events"):
        result = memprof.run("alloc", powers=ALLOC_POWERS, repeat=REPEAT, warmup=2, timing=timing)
        runs[timing] = saved(result, out, f"alloc-{timing}")
    if runs["cupti"].extra.allocators is None:
        sys.exit(f"this GPU or driver measured no pool and no VMM: {runs['cupti'].extra.skipped}")
    log(out, f"Pools and virtual memory management: driver calls, median of {REPEAT}")
    for power in ALLOC_POWERS:
        nbytes = 4 << power
        theirs = reference(binary, [nbytes, REPEAT], out)
        for rows, target in ((TARGETS, True), (ALSO, False)):
            for label, operation, kind, name in rows:
                what = f"{label}, {nbytes >> 20} MiB"
                what = what if target else f"  (also) {what}"
                try:
                    ours = median(runs["cupti"], "api", operation, kind, nbytes)
                    compare(out, what, ours, theirs[name, nbytes], target)
                    if target:
                        host = median(runs["events"], "api", operation, kind, nbytes)
                        compare(
                            out, "  same, memprof's host clock", host, theirs[name, nbytes], False
                        )
                except MissingMeasurement as error:
                    if target:
                        FAILURES.append(what)
                    log(out, f"{what}: memprof recorded no {error.wanted}")


def small_copies(out: Path) -> None:
    binary = build("smallcopies_reference.cu", out)
    nbytes = 4 << COPY_POWER
    result = saved(
        memprof.run(
            "smallcopies",
            powers=(COPY_POWER,),
            copies=COPIES,
            directions=("h2d", "d2h"),
            repeat=REPEAT,
            warmup=2,
        ),
        out,
        "smallcopies-4KiB",
    )
    if "batched" not in result.extra.ways:
        FAILURES.append("cuMemcpyBatchAsync")
        log(out, f"cuMemcpyBatchAsync: MISSED, skipped: {result.extra.skipped}")
    theirs = reference(binary, [nbytes, COPIES, REPEAT], out)
    log(out, f"{COPIES} copies of {nbytes >> 10} KiB, GPU time per copy, median of {REPEAT}")
    for direction in ("h2d", "d2h"):
        for way in ("pinned", "batched"):
            if way not in result.extra.ways:
                continue
            total_ms, source = median(result, "span", direction, way, nbytes)
            target = direction == "h2d"  # the targets are host to device
            compare(
                out,
                f"{way}, {direction}",
                (total_ms / COPIES, source),
                theirs[f"{way}_{direction}", nbytes],
                target,
            )


def defaults_wall_time(out: Path) -> None:
    command = [sys.executable, "-m", "memprof", "smallcopies", "--quiet"]
    subprocess.run(command, check=True)  # the kernel cache warm
    start = time.perf_counter()
    subprocess.run([*command, "--json", str(out / "smallcopies-defaults.json")], check=True)
    wall = time.perf_counter() - start
    met = wall <= SMALLCOPIES_LIMIT_S
    if not met:
        FAILURES.append("smallcopies wall time")
    verdict = "met" if met else "MISSED"
    log(out, f"memprof smallcopies (defaults): {wall:.2f} s wall (target <= 10 s): {verdict}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = os.environ.get("OUT") or "allocators-and-small-copies"
    parser.add_argument("--out", type=Path, default=Path(default))
    out = parser.parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.txt").write_text("")
    allocators(out)
    log(out)
    small_copies(out)
    log(out)
    defaults_wall_time(out)
    log(out)
    log(out, "all targets met" if not FAILURES else f"MISSED: {', '.join(FAILURES)}")
    (out / "failures.json").write_text(json.dumps(FAILURES) + "\n")
    return 0 if not FAILURES else 1


if __name__ == "__main__":
    sys.exit(main())
