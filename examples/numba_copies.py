"""A Numba program whose copies come from known lines: what `memprof trace` must name.

numba.cuda.to_device (`upload`), DeviceNDArray.copy_to_host (`download`) and
copy_to_device from a pinned array on a stream (`pinned`); each line carries a
`# memprof-line: NAME` comment, and the program prints how many copies each made:

    memprof-example: {"lines": {"upload": 5, "download": 2, "pinned": 3}, ...}

tests/gpu/test_trace.py traces it where Numba is installed.
Usage: python examples/numba_copies.py (bare or under `memprof trace`).
"""

from __future__ import annotations

import json

import numpy as np
from numba import cuda

NBYTES = 1 << 20
UPLOADS, DOWNLOADS, PINNED = 5, 2, 3


def main() -> None:
    host = np.ones(NBYTES, np.uint8)
    for _ in range(UPLOADS):
        device = cuda.to_device(host)  # memprof-line: upload
    for _ in range(DOWNLOADS):
        back = device.copy_to_host()  # memprof-line: download
    pinned = cuda.pinned_array(NBYTES, np.uint8)
    pinned[:] = 1
    stream = cuda.stream()
    for _ in range(PINNED):
        device.copy_to_device(pinned, stream=stream)  # memprof-line: pinned
    stream.synchronize()
    report = {
        "program": "numba_copies",
        "lines": {"upload": UPLOADS, "download": DOWNLOADS, "pinned": PINNED},
        "correct": bool((back == 1).all()),
    }
    print("memprof-example: " + json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
