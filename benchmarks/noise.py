"""How many repetitions each noise target needs, per kind of measurement: the data behind
--max-noise's default (memprof.core.repetitions.DEFAULT_MAX_NOISE_PCT: its comment says what
this printed on each GPU).

Each command runs once with a large fixed --repeat; every measurement's samples, in the order
they were taken, are then replayed through the stopping rule memprof uses (RepetitionLoop: at
least MIN_COUNT, the noise checked as the count grows, no time cap, no cap on the count), for
each target. Printed per kind of measurement (command, group and operation; batches apart):
the samples each target needed (median and largest over the measurements of that kind),
how many never got there within --repeat, and the time saved against the command's count
before the noise target (its repeat field's `most`, the cap memprof applies): the measured
GPU or host time of the samples between the needed count and that count.

    python3 benchmarks/noise.py [--repeat 200] [--commands pinned,compare,...] [--save DIR]
    python3 benchmarks/noise.py --saved run1.json run2.json   # replay saved runs (no GPU)

The loop stops on the samples it sees while it runs: gated events beside CUPTI's records,
the host clock otherwise; the replay reads the same (events_ms where a measurement has them).
Each measurement is replayed alone: a loop recording several figures (pinned's flow: copies,
kernel and the span) runs until all of them settle, so its counts are the largest of theirs.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memprof.core.repetitions import MIN_COUNT, THROUGHPUT_BATCHES, Repetitions  # noqa: E402

TARGETS_PCT = (0.5, 1.0, 2.0)
# Each command with a large fixed --repeat (--repeat here overrides), sizes kept moderate.
COMMANDS = {
    "pinned": {"power": 20},
    "zerocopy": {"powers": (20,), "single_size": True},
    "managed": {"power": 20},
    "device": {"power": 24},
    "compare": {"power": 22},
    "sweep": {"powers": (8, 14, 20, 26)},
    "smallcopies": {},
    "alloc": {"powers": (16, 20, 24)},
}
SIDE = {"driver_call", "launch", "memset"}  # the core's records beside the figures


def needed(samples: list[float], target_pct: float, minimum: int) -> int | None:
    """The count the stopping rule ends at on these samples, or None if they never settle."""
    loop = Repetitions(None, target_pct, math.inf, minimum).loop()
    while loop.more(lambda: [samples[: loop.count]]):
        if loop.count > len(samples):
            return None
    return loop.count


def series_of(result) -> list[tuple[str, list[float], list[float], int, int]]:
    """(kind, the samples the loop saw, the samples saved, least count, count before the
    noise target) of each figure."""
    from memprof.experiments import experiment_class
    from memprof.experiments.base import repetitions_of

    most = repetitions_of(experiment_class(result.command).Params(), 1.0).most
    found = []
    for m in result.measurements:
        if m.operation in SIDE:
            continue
        seen = m.events_ms or m.samples_ms
        single = (f"{m.group} {m.operation}", seen, m.samples_ms, MIN_COUNT, most)
        if m.throughput_ms and m.samples_ms != m.throughput_ms:
            found.append(single)
        if m.throughput_ms:
            batches = m.throughput_ms
            most_batches = max(THROUGHPUT_BATCHES, most)
            kind = f"{m.group} {m.operation} batches"
            found.append((kind, batches, batches, THROUGHPUT_BATCHES, most_batches))
        else:
            found.append(single)
    return found


def report(results: list) -> None:
    rows: dict[str, list[tuple[list[float], list[float], int, int]]] = defaultdict(list)
    for result in results:
        for kind, seen, saved, minimum, most in series_of(result):
            rows[f"{result.command}: {kind}"].append((seen, saved, minimum, most))
    header = f"{'measurement kind':<36} {'n':>4} {'of':>4} {'was':>4}"
    for target in TARGETS_PCT:
        header += f" | {target:g}%: {'median':>6} {'max':>5} {'never':>5} {'saved':>9}"
    print(header)
    totals = dict.fromkeys(TARGETS_PCT, 0.0)
    for kind in sorted(rows):
        series = rows[kind]
        taken = statistics.median(len(seen) for seen, *_ in series)
        line = f"{kind[:36]:<36} {len(series):>4} {taken:>4g} {series[0][3]:>4}"
        for target in TARGETS_PCT:
            counts = [needed(seen, target, minimum) for seen, _, minimum, _ in series]
            settled = [count for count in counts if count is not None]
            never = len(counts) - len(settled)
            saved_ms = sum(
                math.fsum(saved[count:most])
                for (_, saved, _, most), count in zip(series, counts, strict=True)
                if count is not None
            )
            totals[target] += saved_ms
            median = f"{statistics.median(settled):g}" if settled else "-"
            largest = f"{max(settled)}" if settled else "-"
            line += f" | {'':>5} {median:>6} {largest:>5} {never:>5} {saved_ms:>7.1f}ms"
        print(line)
    print(
        "saved in all: "
        + ", ".join(f"{target:g}%: {totals[target]:.1f} ms" for target in TARGETS_PCT)
        + " (measured time of the samples between each needed count and the count before the "
        "noise target, 'was'; the host's own time around each repetition comes on top)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=200, help="fixed repetitions per run")
    parser.add_argument("--commands", default=",".join(COMMANDS), help="comma-separated")
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--saved", nargs="+", type=Path, help="replay these saved results")
    parser.add_argument("--save", type=Path, help="also save each run here, for --saved")
    arguments = parser.parse_args()
    if arguments.saved:
        from memprof.experiments import load

        report([load(path) for path in arguments.saved])
        return 0
    import time

    import memprof

    results = []
    for command in arguments.commands.split(","):
        options = COMMANDS[command]
        started = time.perf_counter()
        result = memprof.run(command, device=arguments.device, repeat=arguments.repeat, **options)
        results.append(result)
        if arguments.save:
            arguments.save.mkdir(parents=True, exist_ok=True)
            result.save(arguments.save / f"noise-{command}.json")
        print(f"{command}: {time.perf_counter() - started:.1f} s with --repeat {arguments.repeat}")
    report(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
