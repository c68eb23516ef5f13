"""Run a Python program under torch.profiler (with_stack=True) and write what it saw: the
reference `memprof trace` is set against on a PyTorch program. GPU machine.

    python3 benchmarks/torch_profiler_run.py --out PATH SCRIPT [ARGS...]

The program runs as `python SCRIPT ARGS` would, inside one profile of CPU and CUDA
activities. PATH gets {"kernels": N, "memsets": N, "copies": {"HtoD pageable -> device": N},
"copy_functions": {"file.py:upload": N}, ...}: copies named as memprof's Where tables name
them; copy_functions counts each copy at the first frame under the script's folder of the
operator that made it ("(none)" where none has one). A record_function range torch draws on
the GPU (optimizer.step's) is no kernel: it goes under gpu_annotations_not_counted.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import runpy
import sys
from collections import Counter

COPY_NAME = re.compile(r"^Memcpy (\w+) \((\w+) -> (\w+)\)$")  # Memcpy HtoD (Pageable -> Device)
STACK_ENTRY = re.compile(r"^(.*)\((\d+)\): (.*)$")  # path(42): function
API_CALL = re.compile(r"^cu(da)?[A-Z]\w*$")  # cudaGetDeviceProperties_v2, cuLaunchKernel


def copy_activity(name: str) -> str | None:
    matched = COPY_NAME.match(name)
    return f"{matched[1]} {matched[2].lower()} -> {matched[3].lower()}" if matched else None


def program_function(stack: list[str], folder: str) -> str:
    """The innermost entry of the stack in a file under `folder`, as `file.py:function`: by
    function, as torch's tracer gives a frame its function's first line, not the copy's."""
    for entry in stack:
        matched = STACK_ENTRY.match(entry)
        if matched is None:
            continue
        path = matched[1] if os.path.isabs(matched[1]) else os.path.join(folder, matched[1])
        path = os.path.realpath(path)
        if path.startswith(folder + os.sep) and os.path.exists(path):
            return f"{os.path.relpath(path, folder)}:{matched[3]}"
    return "(none)"


def copies_made(event) -> int:
    """How many copies a CPU event launched; none for a CUDA API call, which torch may link
    to a copy an operator made (an API call outside any operator keeps CUPTI's correlation
    id as its id: on two H100s cudaGetDeviceProperties_v2 "made" aten::to's copy)."""
    if API_CALL.match(event.name):
        return 0
    return sum(1 for kernel in event.kernels if copy_activity(kernel.name) is not None)


def stack_of(event) -> list[str]:
    """The Python stack of the operator that made a copy: torch keeps it on the outermost
    operator only (aten::to), not on the aten::copy_ inside it that launched the copy."""
    while event is not None and not event.stack:
        event = event.cpu_parent
    return list(event.stack) if event is not None else []


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="where to write what the profiler saw")
    parser.add_argument("script")
    parser.add_argument("arguments", nargs=argparse.REMAINDER)
    options = parser.parse_args()

    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    script = os.path.abspath(options.script)
    folder = os.path.realpath(os.path.dirname(script))
    sys.argv = [options.script, *options.arguments]
    sys.path.insert(0, folder)
    activities = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
    # with_stack alone leaves the operators' stacks empty in some torch releases; the
    # experimental verbose config keeps them (pytorch/pytorch#100253, #127951)
    settings: dict = {}
    config = getattr(getattr(torch._C, "_profiler", None), "_ExperimentalConfig", None)
    if config is not None:
        settings["experimental_config"] = config(verbose=True)
    with profile(activities=activities, with_stack=True, **settings) as profiler:
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as ended:
            if ended.code not in (None, 0):
                raise
        torch.cuda.synchronize()
    events = profiler.events()
    kernels = memsets = 0
    copies: Counter = Counter()
    annotations: Counter = Counter()  # record_function ranges drawn on the GPU's timeline
    for event in events:
        if event.device_type != DeviceType.CUDA:
            continue
        if getattr(event, "is_user_annotation", False):  # optimizer.step's range, say
            annotations[event.name.split("#")[0]] += 1
            continue
        activity = copy_activity(event.name)
        if activity is not None:
            copies[activity] += 1
        elif event.name.startswith("Memset"):
            memsets += 1
        else:
            kernels += 1
    lines: Counter = Counter()
    makers = []  # the operators that made copies, as torch describes them (for a reader)
    api_links: Counter = Counter()  # copies torch linked to API calls too: not counted
    for event in events:
        if event.device_type != DeviceType.CPU:
            continue
        made = copies_made(event)
        linked = sum(1 for kernel in event.kernels if copy_activity(kernel.name))
        if linked and API_CALL.match(event.name):
            api_links[event.name] += linked
        if made:
            lines[program_function(stack_of(event), folder)] += made
            chain, parent = [], event
            while parent is not None and len(chain) < 6:
                chain.append(f"{parent.name} ({len(parent.stack or [])} frames)")
                parent = parent.cpu_parent
            makers.append({"operators": chain, "stack": list(stack_of(event))[:3]})
    seen = {
        "kernels": kernels,
        "memsets": memsets,
        "copies": dict(copies),
        "gpu_annotations_not_counted": dict(annotations),
        "copy_functions": dict(lines),
        "copies_linked_to_api_calls_not_counted": dict(api_links),
        "events_with_stacks": sum(1 for event in events if event.stack),
        "copy_makers": makers[:3],
    }
    with open(options.out, "w") as file:
        json.dump(seen, file, indent=1)
    attributed, timeline = sum(lines.values()), sum(copies.values())
    if attributed != timeline:  # a copy counted twice, or at no operator: say so
        print(
            f"torch_profiler_run: torch linked {attributed} copies to operators, but its "
            f"timeline holds {timeline}: copy_functions does not count each copy once",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
