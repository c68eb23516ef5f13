"""A PyTorch program whose copies to the GPU all go through one helper (`to_gpu`): the
caller at the line marked `chose` passes it pageable memory, the one marked `pinned` pinned
memory. `memprof trace` files both under the helper's line; its advice must name the caller
that chose pageable memory as the line to change (tests/gpu/test_trace.py).

    memprof-example: {"lines": {"helper": 7}}

Usage: python examples/torch_helper.py (bare or traced).
"""

from __future__ import annotations

import json

import torch

NBYTES = 1 << 22
PAGEABLE, PINNED = 4, 3


def to_gpu(host: torch.Tensor) -> torch.Tensor:
    return host.to("cuda", non_blocking=True)  # memprof-line: helper


def main() -> None:
    torch.cuda.init()
    pageable = torch.ones(NBYTES, dtype=torch.uint8)
    pinned = torch.ones(NBYTES, dtype=torch.uint8, pin_memory=True)
    total = 0
    for _ in range(PAGEABLE):
        total += int(to_gpu(pageable)[-1])  # memprof-line: chose
    for _ in range(PINNED):
        total += int(to_gpu(pinned)[-1])  # memprof-line: pinned
    report = {
        "program": "torch_helper",
        "lines": {"helper": PAGEABLE + PINNED},
        "correct": total == PAGEABLE + PINNED,
    }
    print("memprof-example: " + json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
