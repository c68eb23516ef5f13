"""A second process copying on a GPU, for `memprof check` to find: pinned 64 MiB copies,
host → device and device → host on two streams, back to back, for the given seconds.

    python3 benchmarks/copy_load.py DEVICE SECONDS

Plain PyCUDA, not memprof: the load must not share memprof's process or its code paths.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import pycuda.driver as cuda

COPY_BYTES = 64 << 20


def main(device: int, seconds: float) -> int:
    cuda.init()
    context = cuda.Device(device).make_context()
    try:
        host_in = cuda.pagelocked_empty(COPY_BYTES // 4, np.float32)
        host_out = cuda.pagelocked_empty(COPY_BYTES // 4, np.float32)
        device_in, device_out = cuda.mem_alloc(COPY_BYTES), cuda.mem_alloc(COPY_BYTES)
        to_gpu, from_gpu = cuda.Stream(), cuda.Stream()
        copies, end = 0, time.monotonic() + seconds
        print(f"copy_load: copying on GPU {device} for {seconds:g} s", flush=True)
        while time.monotonic() < end:
            for _ in range(16):
                cuda.memcpy_htod_async(device_in, host_in, to_gpu)
                cuda.memcpy_dtoh_async(host_out, device_out, from_gpu)
            to_gpu.synchronize()
            from_gpu.synchronize()
            copies += 32
        moved = copies * COPY_BYTES / 1e9
        print(f"copy_load: {copies} copies, {moved:.0f} GB in {seconds:g} s", flush=True)
        device_in.free()
        device_out.free()
        host_in.base.free()
        host_out.base.free()
    finally:
        context.pop()
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), float(sys.argv[2])))
