"""Issues 17 and 22's targets for alloc and smallcopies, GPU machine: memprof against native
C++ programs on the driver API (benchmarks/allocators_reference.cu, smallcopies_reference.cu:
the same calls, counts and sizes, no Python, no CUPTI), --rounds interleaved rounds, each the
native program then memprof; medians of the rounds' medians compared.

1. Driver calls of pools and VMM at 2 and 64 MiB (CUPTI's record of each call): within
   max(10%, 0.1 us) of native, or "floor shown" where memprof marks the figure as near the
   floor of how it times calls (cuCtxGetDevice). Beside: both floors, each figure less its
   own, and memprof's host clock (--timing events).
2. Small copies, 128 of 4 and 16 KiB, both directions, wall clock per copy (first call to
   the stream synchronized): batched within 1.3x of native (issue 22); memprof in a fresh
   process with --timing events (no CUPTI) beside. GPU time per copy, gated events both
   sides: host to device within 10% (issue 17).

    python3 benchmarks/allocators_and_small_copies.py [--out DIR] [--rounds N]
Every reference output and Result goes under DIR ($OUT where set, else
./allocators-and-small-copies). Exit status 0 when every target is met.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
from pathlib import Path

from common import Misses, Result, memprof_json, nvcc, reference_output

import memprof

ALLOC_POWERS = (19, 24)  # 2 MiB (one VMM granule on Hopper) and 64 MiB
COPY_POWERS, COPIES = (10, 12), 128  # 4 and 16 KiB, as a training step's small tensors
REPEAT = 30
ROUNDS = 3
ALLOC = {"powers": ALLOC_POWERS, "repeat": REPEAT, "warmup": 2}  # memprof.run's parameters
SMALLCOPIES = {**ALLOC, "powers": COPY_POWERS, "copies": COPIES, "directions": ("h2d", "d2h")}
TOLERANCE, ABSOLUTE_MS = 0.10, 0.0001  # a call: within max(10%, 0.1 us)
FLOOR_SHARE = 0.10  # memprof marks a call's figure as near its floor past a tenth of it
WALL_TOLERANCE = 1.3  # batched small copies' wall clock: at most 1.3x native
GPU_TOLERANCE = 0.10  # the GPU time of small copies: within 10% (issue 17)
FAILURES = Misses()


def reference(binary: Path, arguments: list[int], out: Path, round_: int) -> dict:
    """name -> median ms, from lines "NAME... BYTES MS" (the name's words joined by _)."""
    output = reference_output(binary, *arguments)
    name = f"{binary.name}-{'-'.join(map(str, arguments))}-round{round_}.txt"
    (out / name).write_text(output)
    found = {}
    for line in output.splitlines():
        *words, nbytes, ms = line.split()
        found["_".join(words), int(nbytes)] = float(ms)
    return found


def saved(out: Path, name: str, command: str, **parameters: object) -> Result:
    """memprof.run(COMMAND, PARAMETERS), kept as DIR/NAME.json; its verification must pass."""
    result = memprof.run(command, **parameters)
    (out / f"{name}.json").write_text(result.to_json() + "\n")
    if not result.passed:
        failed = "; ".join(f"{c.name}: {c.detail}" for c in result.checks if not c.passed)
        sys.exit(f"memprof's own verification failed ({name}): {failed}")
    return result


def us(ms: float) -> str:
    return f"{ms * 1e3:.3f} us"


# -- 1. driver calls ------------------------------------------------------------------------

CALL_TARGETS = (  # label, memprof's operation and kind, the reference's name
    ("pool allocation, reused", "alloc_reused", "pool", "pool_alloc_reused"),
    ("pool free (cuMemFreeAsync)", "free_call", "pool", "pool_free"),
    ("kept pool allocation, reused", "alloc_reused", "pool_kept", "pool_kept_alloc_reused"),
    ("kept pool free (cuMemFreeAsync)", "free_call", "pool_kept", "pool_kept_free"),
    ("VMM map (cuMemMap)", "map", "vmm", "vmm_map"),
    ("VMM address reserve", "reserve", "vmm", "vmm_reserve"),
)
CALLS_ALSO = (  # printed for information, no target
    ("pool, new", "alloc_new", "pool", "pool_alloc_new"),
    ("pool, sync after free", "sync_after_free", "pool", "pool_sync_after_free"),
    ("kept pool, trim", "trim", "pool_kept", "pool_kept_trim"),
    ("VMM create", "create", "vmm", "vmm_create"),
    ("VMM set access", "set_access", "vmm", "vmm_set_access"),
    ("VMM unmap", "unmap", "vmm", "vmm_unmap"),
    ("cuMemAlloc", "alloc_new", "device", "device_alloc_new"),
)
NATIVE_FLOORS = ("pool_call_floor", "pool_kept_call_floor", "vmm_call_floor")


def call_floor_ms(result: Result) -> float | None:
    """The floor of how a run timed its driver calls: the median of every cuCtxGetDevice
    (next to nothing) it timed as it timed them; None where it recorded none."""
    floors = [m for m in result.measurements if (m.group, m.operation) == ("api", "call_floor")]
    return statistics.median(s for m in floors for s in m.samples_ms) if floors else None


def call_verdict(ours_ms: float, theirs_ms: float, floor_ms: float | None) -> str:
    """met: within max(10%, 0.1 us); floor shown: memprof marks it as near its floor."""
    if abs(ours_ms - theirs_ms) <= max(TOLERANCE * theirs_ms, ABSOLUTE_MS):
        return "met"
    if floor_ms is not None and floor_ms > FLOOR_SHARE * ours_ms:
        return "floor shown"
    return "MISSED"


def allocators(out: Path, rounds: int) -> None:
    binary = nvcc("allocators_reference.cu", out, "-std=c++17", "-lcuda")
    ours: dict[tuple[str, str, int], list[float]] = {}
    theirs: dict[tuple[str, int], list[float]] = {}
    floors: list[float] = []
    rows_shown = (*CALL_TARGETS, *CALLS_ALSO)
    for round_ in range(rounds):
        for power in ALLOC_POWERS:
            for key, ms in reference(binary, [4 << power, REPEAT], out, round_).items():
                theirs.setdefault(key, []).append(ms)
        result = saved(out, f"alloc-cupti-round{round_}", "alloc", timing="cupti", **ALLOC)
        if result.extra.allocators is None:
            sys.exit(f"this GPU or driver measured no pool and no VMM: {result.extra.skipped}")
        floor = call_floor_ms(result)
        if floor is None:
            sys.exit("memprof alloc recorded no floor of its driver calls (call_floor)")
        floors.append(floor)
        for (_, operation, kind, _), power in itertools.product(rows_shown, ALLOC_POWERS):
            nbytes = 4 << power
            try:
                value = result.find(operation, kind, "api", nbytes).stats.median_ms
            except KeyError:  # memprof's MissingMeasurement: none recorded
                continue
            ours.setdefault((operation, kind, nbytes), []).append(value)
    events = saved(out, "alloc-events", "alloc", timing="events", **ALLOC)
    our_floor = statistics.median(floors)
    native_floor = statistics.median(
        statistics.median(theirs[name, 4 << power])
        for name in NATIVE_FLOORS
        for power in ALLOC_POWERS
    )
    print(f"Driver calls, medians of {REPEAT}, median of {rounds} interleaved rounds")
    print(
        f"floor (cuCtxGetDevice): memprof {us(our_floor)} (CUPTI's records), native "
        f"{us(native_floor)} (std::chrono)",
    )
    for (label, operation, kind, name), power in itertools.product(rows_shown, ALLOC_POWERS):
        nbytes = 4 << power
        target = (label, operation, kind, name) in CALL_TARGETS  # CALLS_ALSO: information
        what = f"{label}, {nbytes >> 20} MiB"
        if (operation, kind, nbytes) not in ours:
            if target:
                FAILURES.append(what)
            print(f"{what}: memprof recorded no {operation} of {kind}")
            continue
        mine = statistics.median(ours[operation, kind, nbytes])
        native = statistics.median(theirs[name, nbytes])
        verdict = call_verdict(mine, native, our_floor) if target else "information"
        if verdict == "MISSED":
            FAILURES.append(what)
        print(
            f"{'' if target else '  (also) '}{what}: memprof {us(mine)}, native "
            f"{us(native)}, ratio {mine / native:.3f} ({verdict}); less each floor: "
            f"{us(mine - our_floor)} / {us(native - native_floor)}",
        )
        if target:
            host = events.find(operation, kind, "api", nbytes).stats.median_ms
            print(f"  same, memprof's host clock: {us(host)}, ratio {host / native:.3f}")


# -- 2. small copies ----------------------------------------------------------------------------

WAYS = ("pinned", "pageable", "batched", "gathered", "kernel")
GATED = ("pinned", "batched")  # the ways whose GPU time both sides take between gated events


def small_copies(out: Path, rounds: int) -> None:
    binary = nvcc("smallcopies_reference.cu", out, "-std=c++17", "-lcuda")
    sizes = [4 << power for power in COPY_POWERS]
    cases = list(itertools.product(("h2d", "d2h"), sizes, WAYS))  # in the order printed
    fresh = ["--from", str(COPY_POWERS[0]), "--to", str(COPY_POWERS[-1]), "--step", "2"]
    fresh += ["--copies", str(COPIES), "--repeat", str(REPEAT), "--warmup", "2"]
    fresh += ["--timing", "events", "--quiet"]  # a fresh process timed with events: no CUPTI
    walls: dict[tuple[str, str, str, int], list[float]] = {}  # (who, way, direction, size)
    gpu: dict[tuple[str, str, str, int], list[float]] = {}
    for round_ in range(rounds):
        for nbytes in sizes:
            native = reference(binary, [nbytes, COPIES, REPEAT], out, round_)
            for direction, way in itertools.product(("h2d", "d2h"), WAYS):
                key = ("native", way, direction, nbytes)
                walls.setdefault(key, []).append(native[f"wall_{way}_{direction}", nbytes])
                if way in GATED:
                    gpu.setdefault(key, []).append(native[f"{way}_{direction}", nbytes])
        bare = out / f"smallcopies-events-round{round_}.json"
        runs = {
            "memprof": saved(out, f"smallcopies-round{round_}", "smallcopies", **SMALLCOPIES),
            "no CUPTI": memprof_json(bare, "smallcopies", *fresh)[0],
        }
        for who, result in runs.items():
            if "batched" not in result.extra.ways:
                sys.exit(f"cuMemcpyBatchAsync skipped: {result.extra.skipped}")
            for direction, nbytes, way in cases:
                wall = result.find(f"{direction}_wall", way, "host", nbytes).stats.median_ms
                walls.setdefault((who, way, direction, nbytes), []).append(wall / COPIES)
                if way in GATED:
                    total = result.find(direction, way, "span", nbytes).stats.median_ms
                    gpu.setdefault((who, way, direction, nbytes), []).append(total / COPIES)
    print(f"{COPIES} small copies, wall clock per copy (first call to stream synchronized),")
    print(f"medians of {REPEAT}, median of {rounds} interleaved rounds: memprof / native")
    for direction, nbytes, way in cases:
        mine = statistics.median(walls["memprof", way, direction, nbytes])
        bare = statistics.median(walls["no CUPTI", way, direction, nbytes])
        native = statistics.median(walls["native", way, direction, nbytes])
        ratio = mine / native
        what = f"{way}, {direction}, {nbytes >> 10} KiB"
        verdict = "information"
        if way == "batched":
            verdict = FAILURES.judge(ratio <= WALL_TOLERANCE, f"wall clock of {what}")
        print(
            f"{what}: memprof {us(mine)}, native {us(native)}, ratio {ratio:.2f} "
            f"({verdict}); without CUPTI in the process {us(bare)} ({bare / native:.2f})",
        )
    print()
    print("GPU time per copy (gated events), memprof / native")
    for direction, nbytes, way in (case for case in cases if case[2] in GATED):
        mine = statistics.median(gpu["memprof", way, direction, nbytes])
        native = statistics.median(gpu["native", way, direction, nbytes])
        ratio = mine / native
        what = f"{way}, {direction}, {nbytes >> 10} KiB"
        verdict = "information"
        if direction == "h2d":  # issue 17's targets are host to device
            verdict = FAILURES.judge(abs(ratio - 1) <= GPU_TOLERANCE, f"GPU time of {what}")
        print(f"{what}: memprof {us(mine)}, native {us(native)}, ratio {ratio:.3f} ({verdict})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = os.environ.get("OUT") or "allocators-and-small-copies"
    parser.add_argument("--out", type=Path, default=Path(default))
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    arguments = parser.parse_args()
    out = arguments.out
    out.mkdir(parents=True, exist_ok=True)
    allocators(out, arguments.rounds)
    print()
    small_copies(out, arguments.rounds)
    return FAILURES.status()


if __name__ == "__main__":
    sys.exit(main())
