"""Does memprof measure what an independent program measures? Run on the GPU machine.

Two comparisons at 256 MiB, pageable and pinned, HtoD and DtoH (GB/s = 10^9 B/s):

1. Same buffer, same process: memprof's copy timing (memory.copy under its profiler, the
   path every command uses) alternates call by call with an independent reference that
   calls libcuda through ctypes with its own events, on the very same host buffer. Drift of
   the machine and the placement of pages touch both alike. Targets: pinned within 2%,
   pageable within 5%. The exit status follows this comparison.
2. Whole programs: `memprof pinned` against a C++ program using the CUDA runtime API, each
   allocating its own memory, alternating over rounds. Pinned agrees closely; pageable
   copies depend on where the host pages land, which differs from one process to the next
   (the round-to-round ratios show how much), so this comparison is printed, not judged.

Then the wall time of `memprof pinned --power 20` with a warm kernel cache (target 1.5 s
or less).

    python3 benchmarks/fidelity.py [--repeat 20] [--rounds 3]
Exit status 0 when every target is met, 1 otherwise.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

from memprof import memory
from memprof.experiments.pinned import PinnedParams
from memprof.experiments.pinned import run as run_pinned
from memprof.formatting import bandwidth_gb_per_s
from memprof.session import GpuSession

POWER = 26  # 2^26 float32 = 256 MiB
NBYTES = 4 << POWER
TOLERANCE = {"pinned": 0.02, "pageable": 0.05}
WALL_TARGET_S = 1.5
KEYS = [(kind, direction) for kind in ("pageable", "pinned") for direction in ("h2d", "d2h")]


def reference_medians(repeat: int) -> dict[tuple[str, str], float]:
    """Median copy times of the C++ runtime-API program (its own allocations)."""
    source = Path(__file__).with_name("reference_bandwidth.cu")
    with tempfile.TemporaryDirectory() as build:
        binary = Path(build) / "reference_bandwidth"
        subprocess.run(["nvcc", "-O2", "-o", str(binary), str(source)], check=True)
        output = subprocess.run(
            [str(binary), str(NBYTES), str(repeat)], check=True, capture_output=True, text=True
        ).stdout
    medians = {}
    for line in output.splitlines():
        kind, direction, median_ms = line.split()
        medians[kind, direction] = float(median_ms)
    return medians


def pinned_command_medians(repeat: int) -> dict[tuple[str, str], float]:
    """Median copy times of `memprof pinned` at 256 MiB."""
    with GpuSession(0) as session:
        result = run_pinned(session, PinnedParams(power=POWER, repeat=repeat, warmup=2))
    if not result.passed:
        sys.exit("memprof's own verification failed")
    return {key: result.find(key[1], key[0], "gpu").stats.median_ms for key in KEYS}


class CtypesTimer:
    """The reference path: libcuda through ctypes, its own events, no PyCUDA, no memprof."""

    def __init__(self) -> None:
        lib = ctypes.CDLL("libcuda.so.1")
        self.lib = lib
        lib.cuEventCreate.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint]
        lib.cuEventRecord.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        lib.cuEventSynchronize.argtypes = [ctypes.c_void_p]
        lib.cuEventElapsedTime_v2.argtypes = [
            ctypes.POINTER(ctypes.c_float),
            ctypes.c_void_p,
            ctypes.c_void_p,
        ]
        lib.cuMemcpyHtoD_v2.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t]
        lib.cuMemcpyDtoH_v2.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t]
        self.start, self.stop = ctypes.c_void_p(), ctypes.c_void_p()
        for event in (self.start, self.stop):
            self._check(lib.cuEventCreate(ctypes.byref(event), 0))

    def _check(self, code: int) -> None:
        if code != 0:
            raise RuntimeError(f"libcuda call failed with CUresult {code}")

    def copy_ms(self, direction: str, host_address: int, device_address: int, nbytes: int) -> float:
        lib = self.lib
        self._check(lib.cuEventRecord(self.start, None))
        if direction == "h2d":
            self._check(lib.cuMemcpyHtoD_v2(device_address, host_address, nbytes))
        else:
            self._check(lib.cuMemcpyDtoH_v2(host_address, device_address, nbytes))
        self._check(lib.cuEventRecord(self.stop, None))
        self._check(lib.cuEventSynchronize(self.stop))
        elapsed = ctypes.c_float()
        self._check(lib.cuEventElapsedTime_v2(ctypes.byref(elapsed), self.start, self.stop))
        return elapsed.value


def same_buffer_medians(repeat: int) -> tuple[dict, dict]:
    """memprof's copy timing and the ctypes reference, alternating on the same buffers."""
    ours, theirs = {}, {}
    with GpuSession(0) as session:
        timer = CtypesTimer()
        device = memory.allocate(session, "device", NBYTES // 4)
        for kind in ("pageable", "pinned"):
            host = memory.allocate(session, kind, NBYTES // 4)
            host.array[:] = 1.0
            for direction in ("h2d", "d2h"):
                source, target = (host, device) if direction == "h2d" else (device, host)
                address = host.array.ctypes.data
                reference = []
                for index in range(repeat + 2):  # two warm-ups of each, then alternate
                    with session.profiler.paused() if index < 2 else nullcontext():
                        memory.copy(session, target, source)
                    sample = timer.copy_ms(direction, address, device.device_pointer, NBYTES)
                    if index >= 2:
                        reference.append(sample)
                theirs[kind, direction] = statistics.median(reference)
            host.free()
        measurements = session.profiler.measurements()
    for m in measurements:
        if m.group == "gpu" and m.operation in ("h2d", "d2h"):
            ours[m.kind, m.operation] = m.stats.median_ms
    return ours, theirs


def wall_time_s(arguments: list[str], runs: int = 3) -> float:
    command = [sys.executable, "-m", "memprof", *arguments]
    subprocess.run(command, check=True, capture_output=True)  # warm PyCUDA's kernel cache
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def print_table(title: str, ours: dict, theirs: dict, judged: bool) -> bool:
    print(title)
    header = ("memory", "dir", "memprof", "reference", "ratio", "target")
    print("  {:9} {:4} {:>9} {:>10} {:>7} {:>8}  verdict".format(*header))
    all_met = True
    for kind, direction in KEYS:
        mine = bandwidth_gb_per_s(NBYTES, ours[kind, direction])
        reference = bandwidth_gb_per_s(NBYTES, theirs[kind, direction])
        ratio = mine / reference
        met = abs(ratio - 1) <= TOLERANCE[kind]
        all_met &= met
        verdict = ("met" if met else "MISSED") if judged else "(not judged)"
        target = "±" + format(TOLERANCE[kind], ".0%")
        figures = f"{mine:9.2f} {reference:10.2f} {ratio:7.4f} {target:>8}"
        print(f"  {kind:9} {direction:4} {figures}  {verdict}")
    return all_met


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    ours, theirs = same_buffer_medians(args.repeat)
    all_met = print_table(
        f"1. Same buffers, alternating call by call, median of {args.repeat}: memprof's copy "
        "timing vs libcuda through ctypes",
        ours,
        theirs,
        judged=True,
    )

    rounds = [
        (reference_medians(args.repeat), pinned_command_medians(args.repeat))
        for _ in range(args.rounds)
    ]
    print(
        f"2. Whole programs, {args.rounds} alternating rounds: "
        "`memprof pinned` vs CUDA C++ (runtime API)"
    )
    for index, (reference, measured) in enumerate(rounds, start=1):
        ratios = ", ".join(f"{k} {d} {reference[k, d] / measured[k, d]:.3f}" for k, d in KEYS)
        print(f"  round {index}, memprof/reference bandwidth: {ratios}")
    print_table(
        "  medians over the rounds:",
        {key: statistics.median(m[key] for _, m in rounds) for key in KEYS},
        {key: statistics.median(r[key] for r, _ in rounds) for key in KEYS},
        judged=False,
    )

    wall = wall_time_s(["pinned", "--power", "20"])
    met = wall <= WALL_TARGET_S
    all_met &= met
    print(
        f"wall time of `memprof pinned --power 20` (warm kernel cache, median of 3): "
        f"{wall:.2f} s (target <= {WALL_TARGET_S} s) {'met' if met else 'MISSED'}"
    )
    return 0 if all_met else 1


if __name__ == "__main__":
    sys.exit(main())
