"""A PyTorch program whose copies come from known lines: `memprof trace` must name them as
torch.profiler(with_stack=True) names them.

Pageable copies to the device from a helper (`upload`), asynchronous ones from pinned memory
(`pinned`), copies back with .cpu() (`download`) and a scalar read with .item() (`item`);
each line carries a `# memprof-line: NAME` comment, and the program prints how many copies
each made:

    memprof-example: {"lines": {"upload": 5, "pinned": 3, "download": 2, "item": 4}}

tests/gpu/test_trace.py traces it, and runs it under torch.profiler with
benchmarks/torch_profiler_run.py, and sets the three against each other.
Usage: python examples/torch_lines.py (bare, traced, or under the profiler).
"""

from __future__ import annotations

import json

import torch

NBYTES = 1 << 20
UPLOADS, PINNED, DOWNLOADS, ITEMS = 5, 3, 2, 4


def upload(host: torch.Tensor) -> torch.Tensor:
    return host.to("cuda")  # memprof-line: upload


def main() -> None:
    torch.cuda.init()
    pageable = torch.ones(NBYTES, dtype=torch.uint8)
    pinned = torch.ones(NBYTES, dtype=torch.uint8, pin_memory=True)
    device = torch.empty(NBYTES, dtype=torch.uint8, device="cuda")
    for _ in range(UPLOADS):
        device = upload(pageable)
    for _ in range(PINNED):
        device.copy_(pinned, non_blocking=True)  # memprof-line: pinned
    torch.cuda.synchronize()
    for _ in range(DOWNLOADS):
        back = device.cpu()  # memprof-line: download
    total = 0
    for index in range(ITEMS):
        total += int(device[index].item())  # memprof-line: item
    report = {
        "program": "torch_lines",
        "lines": {"upload": UPLOADS, "pinned": PINNED, "download": DOWNLOADS, "item": ITEMS},
        "correct": bool(back.eq(1).all()) and total == ITEMS,
    }
    print("memprof-example: " + json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
