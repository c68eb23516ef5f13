"""Does the way memprof records CUPTI's activity lengthen the driver calls it times?

Short asynchronous driver calls (a 4-byte cuMemsetD8Async, a 4-byte cuMemcpyHtoDAsync from
pinned memory) are made back to back, each timed twice: by CUPTI's API record (what memprof's
[api] rows show) and by the host clock around the Python call (perf_counter_ns: a second
route, which also pays PyCUDA's own cost, alike in every configuration). Each configuration
runs in a fresh process (CUPTI's setup is per process), the configurations interleaved over
--rounds rounds:

    bare        no CUPTI at all: the host clock only
    all         every driver call recorded (memprof before f3c197c)
    no-events   the cuEvent calls switched off one by one (record_call=experiment_call)

`all` and `no-events` each twice: memprof reading CUPTI's buffers in place, and cupti-python
making an object of each record ("objects").

    python3 benchmarks/api_overhead.py [--rounds 5] [--calls 3000]

Prints each configuration's medians (of the rounds' medians) in microseconds.

On the H100 (3 rounds of 3,000 calls) no configuration stood apart from the others beyond
what one process differs from the next: memset 1.33 to 2.10 us by CUPTI, memcpy 2.13 to 3.52,
in no order of configuration. What one process pays for a short driver call varies that
much by itself (zerocopy's cuMemcpyHtoDAsync: 2.7 to 13 us, two runs of each of 14 commits).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

CONFIGS = ("bare", "all", "all-objects", "no-events", "no-events-objects")
CALLS = ("cuMemsetD8Async", "cuMemcpyHtoDAsync")


def one(config: str, calls: int) -> dict[str, dict[str, float]]:
    """Run in this process: {call: {"cupti_us": median, "host_us": median}}."""
    import numpy as np
    import pycuda.driver as cuda

    from memprof.core import activity

    cuda.init()
    log = None
    if config != "bare":
        if config.endswith("objects"):
            activity.ActivityLog._read_buffers_here = lambda self: None
        record_call = activity.experiment_call if config.startswith("no-events") else None
        log, why = activity.ActivityLog.start(0, record_call=record_call)
        assert log is not None, why
        reading = "in place" if log._buffers is not None else "objects"
        assert reading == ("objects" if config.endswith("objects") else "in place"), reading
    context = cuda.Device(0).make_context()
    try:
        stream = cuda.Stream()
        device = cuda.mem_alloc(4)
        host = cuda.pagelocked_empty(1, np.float32)
        actions = {
            "cuMemsetD8Async": lambda: cuda.memset_d8_async(device, 0, 4, stream),
            "cuMemcpyHtoDAsync": lambda: cuda.memcpy_htod_async(device, host, stream),
        }
        found = {}
        for index, (name, action) in enumerate(actions.items()):
            for _ in range(100):  # warm-up, untagged
                action()
            stream.synchronize()
            tag = 1000 + index
            if log is not None:
                log.push(tag)
            host_ns = []
            for call in range(calls):
                start = time.perf_counter_ns()
                action()
                host_ns.append(time.perf_counter_ns() - start)
                if call % 200 == 199:
                    stream.synchronize()  # the queue never fills
            if log is not None:
                log.pop()
            stream.synchronize()
            found[name] = {"host_us": statistics.median(host_ns) / 1e3}
            if log is not None:
                log.flush()
                records = [r for r in log.api_records().get(tag, []) if r.name.startswith(name)]
                assert len(records) >= calls, (name, len(records))
                found[name]["cupti_us"] = statistics.median(r.duration_ms for r in records) * 1e3
        device.free()
        host.base.free()
    finally:
        context.pop()
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--one", choices=CONFIGS, help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.one:
        print(json.dumps(one(arguments.one, arguments.calls)))
        return 0
    runs: dict[str, list[dict]] = {config: [] for config in CONFIGS}
    for _ in range(arguments.rounds):
        for config in CONFIGS:
            done = subprocess.run(
                [sys.executable, __file__, "--one", config, "--calls", str(arguments.calls)],
                capture_output=True,
                text=True,
            )
            if done.returncode:
                print(f"{config}: failed\n{done.stderr}", file=sys.stderr)
                return 1
            runs[config].append(json.loads(done.stdout.splitlines()[-1]))
    print(f"median of {arguments.rounds} rounds' medians, {arguments.calls} calls each (us)")
    print(f"{'configuration':<20}" + "".join(f"{c + ' cupti':>24}{'host':>8}" for c in CALLS))
    for config, found in runs.items():
        cells = []
        for call in CALLS:
            for key in ("cupti_us", "host_us"):
                values = [run[call][key] for run in found if key in run[call]]
                cells.append(f"{statistics.median(values):.3f}" if values else "-")
        row = "".join(f"{cells[2 * i]:>24}{cells[2 * i + 1]:>8}" for i in range(len(CALLS)))
        print(f"{config:<20}{row}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
