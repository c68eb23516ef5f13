"""The second file of examples/lines: one line that copies to the device, one back."""

from __future__ import annotations

import pycuda.driver as cuda


def upload(device, host) -> None:
    cuda.memcpy_htod(device, host)  # memprof-line: upload


def download(host, device) -> None:
    cuda.memcpy_dtoh(host, device)  # memprof-line: download
