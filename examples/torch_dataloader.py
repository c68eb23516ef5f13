"""A small Transformer trained from a DataLoader with worker processes and pinned batches:
the shape of most PyTorch training scripts, for `memprof trace` (issue 38).

Two worker processes build each batch on the CPU (slowly, as decoding or augmenting data
does), the DataLoader pins it (`pin_memory=True`), and the loop copies it to the GPU with
non_blocking=True; the model is uploaded once (`.cuda()`, from pageable memory) and the loss
is read back every --log-every steps with .item(). The GPU computes for a small part of
the run: the host, feeding it, sets the pace. Only torch is needed.

It prints one line with what it did, by construction, and its own timings:

    memprof-example: {"program": "torch_dataloader", "copies": [...], "loop_s": ..., ...}

Usage: python examples/torch_dataloader.py [--steps 40] [--batch 32] [--workers 2]
"""

from __future__ import annotations

import time

START = time.perf_counter()

import argparse  # noqa: E402
import json  # noqa: E402

import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, Dataset  # noqa: E402

SEQUENCE, WIDTH, CLASSES = 64, 128, 10


class Synthetic(Dataset):
    """Token embeddings made on the CPU, each sample costing host time as real data does."""

    def __init__(self, samples: int, work: int) -> None:
        self.samples, self.work = samples, work

    def __len__(self) -> int:
        return self.samples

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        generator = torch.Generator().manual_seed(index)
        x = torch.randn(SEQUENCE, WIDTH, generator=generator)
        for _ in range(self.work):  # decoding, augmenting: the host's share of each sample
            x = torch.tanh(x @ torch.eye(WIDTH))
        return x, torch.tensor(index % CLASSES)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--work", type=int, default=4, help="host work per sample")
    parser.add_argument("--log-every", type=int, default=10)
    arguments = parser.parse_args()

    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(WIDTH, 4, 4 * WIDTH, batch_first=True)
    model = nn.Sequential(nn.TransformerEncoder(layer, 2), nn.Flatten(), nn.LazyLinear(CLASSES))
    model(torch.zeros(1, SEQUENCE, WIDTH))  # the lazy layer takes its shape on the CPU
    tensors = [*model.parameters(), *model.buffers()]
    uploads: dict[int, int] = {}
    for tensor in tensors:
        size = tensor.numel() * tensor.element_size()
        uploads[size] = uploads.get(size, 0) + 1
    model = model.cuda()  # one copy per tensor, from pageable memory
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(
        Synthetic(arguments.steps * arguments.batch, arguments.work),
        batch_size=arguments.batch,
        num_workers=arguments.workers,
        pin_memory=True,
    )

    loop_start = time.perf_counter()
    reads = 0
    for step, (x, y) in enumerate(loader):
        x = x.cuda(non_blocking=True)  # pinned by the DataLoader: an asynchronous copy
        y = y.cuda(non_blocking=True)
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % arguments.log_every == 0:
            loss.item()  # 4 bytes back to the host, waiting for the step
            reads += 1
    torch.cuda.synchronize()
    loop_s = time.perf_counter() - loop_start

    batch_bytes = arguments.batch * SEQUENCE * WIDTH * 4
    label_bytes = arguments.batch * 8
    copies = [
        {
            "direction": "HtoD",
            "source": "pageable",
            "destination": "device",
            "bytes": size,
            "count": count,
        }
        for size, count in sorted(uploads.items())
    ]
    pinned = {batch_bytes: arguments.steps, label_bytes: arguments.steps}
    copies += [
        {
            "direction": "HtoD",
            "source": "pinned",
            "destination": "device",
            "bytes": size,
            "count": count,
        }
        for size, count in pinned.items()
    ]
    copies.append(  # .item() reads back through a pinned buffer of PyTorch's
        {
            "direction": "DtoH",
            "source": "device",
            "destination": "pinned",
            "bytes": 4,
            "count": reads,
        }
    )
    report = {
        "program": "torch_dataloader",
        # the layers' own copies inside the GPU (PyTorch's attention, for one): not made here
        "not_counted": ["DtoD"],
        "steps": arguments.steps,
        "workers": arguments.workers,
        "copies": copies,
        "loop_s": round(loop_s, 4),
        "wall_s": round(time.perf_counter() - START, 4),
    }
    print("memprof-example: " + json.dumps(report))


if __name__ == "__main__":
    main()
