"""Managed (unified) memory touched first by the host, then by a kernel: pages migrate on demand.

What `memprof trace` shows as its Unified Memory section and its first-touch advice: 64 MiB
of cuMemAllocManaged memory written by numpy (the pages start on the host), then read by a
kernel (each page group faults over to the GPU), then read back by numpy (faults back).
Needs nvcc (PyCUDA compiles the kernel). Prints one `memprof-example: {json}` line.
"""

from __future__ import annotations

import json

import numpy as np
import pycuda.driver as cuda
from pycuda.compiler import SourceModule

MANAGED_BYTES = 64 << 20
KERNEL = """
extern "C" __global__ void addOne(float *data, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) data[i] += 1.0f;
}
"""


def main() -> None:
    cuda.init()
    context = cuda.Device(0).make_context()
    try:
        count = MANAGED_BYTES // 4
        data = cuda.managed_empty(count, np.float32, mem_flags=cuda.mem_attach_flags.GLOBAL)
        data[:] = 1.0  # first touch on the host
        add_one = SourceModule(KERNEL, no_extern_c=True).get_function("addOne")
        add_one(data, np.int64(count), block=(256, 1, 1), grid=((count + 255) // 256, 1))
        context.synchronize()
        correct = bool(np.all(data == 2.0))  # the host reads it back: pages return
        report = {
            "program": "managed_touch",
            "copies": [],
            "memsets": [],
            "managed_bytes": MANAGED_BYTES,
            "correct": correct,
        }
        print("memprof-example: " + json.dumps(report), flush=True)
        del data
    finally:
        context.pop()


if __name__ == "__main__":
    main()
