"""A PyCUDA program of two files whose copies come from three lines: what `memprof trace`
must name, exactly, with their counts.

transfers.py copies host to device (`upload`, called from two lines here) and back
(`download`); this file copies from pinned memory itself (`direct`). Each of the three lines
carries a `# memprof-line: NAME` comment, and the program prints how many copies each made:

    memprof-example: {"lines": {"upload": 5, "download": 2, "direct": 4}, ...}

tests/gpu/test_trace.py finds the lines by their comments and sets them against the trace.
Usage: python examples/lines/main.py (bare or under `memprof trace`).
"""

from __future__ import annotations

import json

import numpy as np
import pycuda.driver as cuda
import transfers

NBYTES = 1 << 20
UPLOADS_FIRST, UPLOADS_SECOND, DIRECT, DOWNLOADS = 3, 2, 4, 2


def main() -> None:
    cuda.init()
    context = cuda.Device(0).make_context()
    try:
        device = cuda.mem_alloc(NBYTES)
        pageable = np.ones(NBYTES, np.uint8)
        pinned = cuda.pagelocked_empty(NBYTES, np.uint8)
        pinned[:] = 1
        stream = cuda.Stream()
        for _ in range(UPLOADS_FIRST):
            transfers.upload(device, pageable)
        for _ in range(UPLOADS_SECOND):
            transfers.upload(device, pageable)
        for _ in range(DIRECT):
            cuda.memcpy_htod_async(device, pinned, stream)  # memprof-line: direct
        stream.synchronize()
        for _ in range(DOWNLOADS):
            transfers.download(pageable, device)
        report = {
            "program": "lines",
            "lines": {
                "upload": UPLOADS_FIRST + UPLOADS_SECOND,
                "download": DOWNLOADS,
                "direct": DIRECT,
            },
            "correct": bool((pageable == 1).all()),
        }
        print("memprof-example: " + json.dumps(report), flush=True)
        pinned.base.free()
        device.free()
    finally:
        context.pop()


if __name__ == "__main__":
    main()
