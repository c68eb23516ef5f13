"""A CuPy program whose copies come from known lines: what `memprof trace` must name.

cupy.asarray of a numpy array (`upload`), cupy.asnumpy (`download`) and ndarray.set from
pinned memory on a stream (`pinned`); each line carries a `# memprof-line: NAME` comment,
and the program prints how many copies each made:

    memprof-example: {"lines": {"upload": 5, "download": 2, "pinned": 3}, ...}

tests/gpu/test_trace.py traces it where CuPy is installed.
Usage: python examples/cupy_copies.py (bare or under `memprof trace`).
"""

from __future__ import annotations

import json

import cupy
import numpy as np

NBYTES = 1 << 20
UPLOADS, DOWNLOADS, PINNED = 5, 2, 3


def main() -> None:
    host = np.ones(NBYTES, np.uint8)
    for _ in range(UPLOADS):
        device = cupy.asarray(host)  # memprof-line: upload
    for _ in range(DOWNLOADS):
        back = cupy.asnumpy(device)  # memprof-line: download
    memory = cupy.cuda.alloc_pinned_memory(NBYTES)
    pinned = np.frombuffer(memory, np.uint8, NBYTES)
    pinned[:] = 1
    stream = cupy.cuda.Stream(non_blocking=True)
    for _ in range(PINNED):
        device.set(pinned, stream=stream)  # memprof-line: pinned
    stream.synchronize()
    report = {
        "program": "cupy_copies",
        "lines": {"upload": UPLOADS, "download": DOWNLOADS, "pinned": PINNED},
        "correct": bool((back == 1).all()),
    }
    print("memprof-example: " + json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
