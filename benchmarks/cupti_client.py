"""Run a Python program under a bare CUPTI client: the least any tracer of its GPU work costs,
which `memprof trace` is set against (benchmarks/trace_overhead.py). GPU machine.

    python3 benchmarks/cupti_client.py --out PATH SCRIPT [ARGS...]

cupti-python's API only, apart from memprof: activity records of kernels, copies and memsets
(no callbacks, no stacks), each kept in a list as CUPTI hands them over, as a tracer must. The
program runs as `python SCRIPT ARGS` would, exit status included. PATH gets
{"kernels": N, "copies": N, "memsets": N}.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import runpy
import sys

BUFFER_BYTES = 8 << 20


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("script")
    parser.add_argument("arguments", nargs=argparse.REMAINDER)
    options = parser.parse_args()
    from cupti import cupti

    kinds = cupti.ActivityKind
    names = {int(kinds.CONCURRENT_KERNEL): "kernels", int(kinds.MEMCPY): "copies",
             int(kinds.MEMSET): "memsets"}  # fmt: skip
    kept: list[tuple[int, int, int, int]] = []

    def completed(activities: list) -> None:
        for record in activities:
            kind = int(record.kind)
            kept.append((kind, record.start, record.end, getattr(record, "bytes", 0)))

    ctypes.CDLL("libcuda.so.1").cuInit(0)  # as any tracer: the driver up, no context yet
    for kind in names:
        cupti.activity_enable(kind)
    cupti.activity_register_callbacks(lambda: (BUFFER_BYTES, 0), completed)
    sys.argv = [options.script, *options.arguments]
    sys.path[0] = os.path.dirname(os.path.abspath(options.script))
    status = 0
    try:
        runpy.run_path(options.script, run_name="__main__")
    except SystemExit as exit_:
        status = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    finally:
        cupti.activity_flush_all(1)
        for kind in names:
            cupti.activity_disable(kind)
    counts = {name: sum(1 for kind, *_ in kept if kind == number) for number, name in names.items()}
    with open(options.out, "w", encoding="utf-8") as out:
        json.dump(counts, out)
    return status


if __name__ == "__main__":
    sys.exit(main())
