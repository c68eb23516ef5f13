"""ResNet-style training in PyTorch: the program `memprof trace` is judged on for overhead.

A ResNet-18 (basic blocks, 2-2-2-2, 64 to 512 channels) trained with SGD on synthetic
images from a DataLoader, as a training script does it: each batch copied to the GPU from
pageable memory (`--pin-memory` pins it and copies with non_blocking=True), the loss read
with .item() every step. Only torch itself is needed (no torchvision, no data set).
`--cudnn-benchmark` sets torch.backends.cudnn.benchmark: cuDNN then times its algorithms on
each new convolution shape in the first step, which the trace names as cuDNN's autotuning.

It prints one line with what it did and its own timings, which
benchmarks/trace_overhead.py compares bare and traced:

    memprof-example: {"steps": 30, "loop_s": ..., "wall_s": ..., "lines": {...}}

loop_s is the training loop alone (first batch to the last step's .item(), which waits for
the GPU), step_s each step's share of it (the first steps load kernels and plan); the lines
carrying `# memprof-line: NAME` are those the trace should name.
Usage: python examples/resnet_train.py [--steps 30] [--batch 64] [--size 64] [--pin-memory]
       [--cudnn-benchmark]
"""

from __future__ import annotations

import time

START = time.perf_counter()

import argparse  # noqa: E402
import json  # noqa: E402

import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

CLASSES = 100


class BasicBlock(nn.Module):
    def __init__(self, inputs: int, outputs: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inputs, outputs, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(outputs)
        self.conv2 = nn.Conv2d(outputs, outputs, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(outputs)
        self.shortcut = nn.Sequential()
        if stride != 1 or inputs != outputs:
            self.shortcut = nn.Sequential(
                nn.Conv2d(inputs, outputs, 1, stride, bias=False), nn.BatchNorm2d(outputs)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + self.shortcut(x))


class ResNet18(nn.Module):
    def __init__(self, classes: int = CLASSES) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 64, 7, 2, 3, bias=False),
            nn.BatchNorm2d(64),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2, 1),
        )
        layers, inputs = [], 64
        for outputs, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            layers += [BasicBlock(inputs, outputs, stride), BasicBlock(outputs, outputs, 1)]
            inputs = outputs
        self.layers = nn.Sequential(*layers)
        self.head = nn.Linear(512, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers(self.stem(x))
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--size", type=int, default=64, help="image height and width")
    parser.add_argument("--pin-memory", action="store_true")
    parser.add_argument("--cudnn-benchmark", action="store_true", help="time cuDNN's algorithms")
    options = parser.parse_args()
    if options.cudnn_benchmark:
        torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    device = torch.device("cuda")
    images = torch.randn(options.steps * options.batch, 3, options.size, options.size)
    labels = torch.randint(0, CLASSES, (options.steps * options.batch,))
    loader = DataLoader(
        TensorDataset(images, labels),
        batch_size=options.batch,
        pin_memory=options.pin_memory,
    )
    model = ResNet18().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    non_blocking = options.pin_memory
    losses, step_ends = [], []
    loop_start = time.perf_counter()
    for batch, target in loader:
        batch = batch.to(device, non_blocking=non_blocking)  # memprof-line: images
        target = target.to(device, non_blocking=non_blocking)  # memprof-line: labels
        optimizer.zero_grad()
        loss = criterion(model(batch), target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())  # memprof-line: item
        step_ends.append(time.perf_counter())
    loop_s = time.perf_counter() - loop_start
    starts = [loop_start, *step_ends[:-1]]
    report = {
        "program": "resnet_train",
        "steps": len(losses),
        "batch": options.batch,
        "pin_memory": options.pin_memory,
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "loop_s": loop_s,
        "step_s": [end - start for start, end in zip(starts, step_ends, strict=True)],
        "wall_s": time.perf_counter() - START,
        "first_loss": losses[0],
        "last_loss": losses[-1],
        "lines": {"images": len(losses), "labels": len(losses), "item": len(losses)},
    }
    print("memprof-example: " + json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
