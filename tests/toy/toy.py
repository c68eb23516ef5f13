"""`memprof toy`: the smallest experiment, pinned copies each way, for tests/test_toy.py.

tests/test_toy.py adds it to a copy of the tree as memprof/experiments/toy.py with one
registry line, as docs/adding-an-experiment.md says, and runs the tests that iterate over
every command.
"""

from __future__ import annotations

import dataclasses
import functools

from memprof.experiments import base
from memprof.model.figures import figure
from memprof.model.formatting import format_bytes, format_gb_per_s, format_ms
from memprof.model.results import Result
from memprof.model.summary import Summary, Table

COPIES = {d: dataclasses.replace(m, kinds=("pinned",)) for d, m in base.ONE_COPY.items()}


class Toy(base.Experiment):
    name = "toy"
    Params = base.OneSize
    measures = (*COPIES.values(), *base.COPY_CALLS, *base.ALLOCATIONS[:2])

    def run(self, ctx: base.RunContext) -> base.NoExtra:
        from memprof.core import memory

        session, params = ctx.session, ctx.params
        elements = base.array_bytes(params) // base.FLOAT32_BYTES
        host = memory.allocate(session, "pinned", elements)
        device = memory.allocate(session, "device", elements)
        for done, (direction, (to, source)) in enumerate(
            {"h2d": (device, host), "d2h": (host, device)}.items()
        ):
            ctx.progress(f"pinned copies {direction}, {format_bytes(host.nbytes)}", done, 2)
            step = functools.partial(memory.copy, session, to, source)
            ctx.measure.repeat(step, params.warmup, params.repeat)
        ctx.progress("done", 2, 2)
        return base.NoExtra()


def summarize(result: Result) -> Summary:
    nbytes = base.array_bytes(result.parameters)
    table = Table(f"Pinned copies of {format_bytes(nbytes)}", ["Direction", "Median", "GB/s"])
    for direction, measure in COPIES.items():
        found = figure(result, base.find(result, measure, "pinned"), measure)
        table.add_row(
            base.DIRECTIONS[direction],
            format_ms(found.median_ms),
            format_gb_per_s(found.gb_per_s),
            source=(found.measurement,),
        )
    return Summary(tables=[table])
