"""How many CUPTI activity records each command makes, of which kinds, and what reading them
costs: the records memprof reads after a run (ActivityLog.flush) are part of every command's
wall time.

    python3 benchmarks/activity_records.py [sweep compare managed alloc]

Runs each command in this process (memprof.api.run, its defaults) with ActivityLog's buffer
callback wrapped: per command, the records by kind (by cupti-python's class where it made an
object of each, by activity kind where memprof reads CUPTI's buffers itself:
memprof.core.activity_buffers), the seconds spent in memprof's callback, the seconds flush()
took in all (the records made or walked, then the callback), the API records by call, and
the run's wall time. Then what pausing CUPTI costs (ActivityLog.paused(), which every
throughput batch and untraced loop enters): 200 pauses, enter and exit. Needs the GPU
machine.
"""

from __future__ import annotations

import collections
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memprof import api  # noqa: E402
from memprof.core.activity import _KIND, ActivityLog  # noqa: E402


def main() -> int:
    commands = sys.argv[1:] or ["sweep", "compare", "managed", "alloc"]
    counts: collections.Counter[str] = collections.Counter()
    spent = {"callback": 0.0, "flush": 0.0}
    completed, read_at, flush = (
        ActivityLog._buffer_completed,
        ActivityLog._records_at,
        ActivityLog.flush,
    )

    def counted(self, activities) -> None:  # cupti-python's objects
        started = time.perf_counter()
        for record in activities:
            counts[type(record).__name__] += 1
        completed(self, activities)
        spent["callback"] += time.perf_counter() - started

    def counted_at(self, memory, base, addresses) -> None:  # the buffers read in place
        started = time.perf_counter()
        for address in addresses:
            kind = self.cupti.ActivityKind(_KIND.unpack_from(memory, address - base)[0])
            counts[kind.name] += 1
        read_at(self, memory, base, addresses)
        spent["callback"] += time.perf_counter() - started

    def timed_flush(self) -> None:
        started = time.perf_counter()
        flush(self)
        spent["flush"] += time.perf_counter() - started

    names: collections.Counter[str] = collections.Counter()
    keep = ActivityLog._keep

    def named(self, which, fields) -> None:
        keep(self, which, fields)
        if which == "api":
            names[self._callback_name(fields[1], "driver")] += 1

    ActivityLog._buffer_completed = counted
    ActivityLog._records_at = counted_at
    ActivityLog.flush = timed_flush
    ActivityLog._keep = named
    for command in commands:
        counts.clear()
        names.clear()
        spent.update(callback=0.0, flush=0.0)
        started = time.perf_counter()
        result = api.run(command)
        wall_s = time.perf_counter() - started
        print(
            f"{command}: {wall_s:.2f} s, passed {result.passed}; {sum(counts.values()):,} "
            f"records; memprof's callback {spent['callback']:.2f} s, flush in all "
            f"{spent['flush']:.2f} s"
        )
        for name, count in counts.most_common():
            print(f"    {count:8,}  {name}")
        print("  API records by call (the ten most):")
        for name, count in names.most_common(10):
            print(f"    {count:8,}  {name}")
    from memprof.core.session import GpuSession

    with GpuSession(0) as session:
        log = session.activity
        started = time.perf_counter()
        for _ in range(200):
            with log.paused():
                pass
        pause_ms = (time.perf_counter() - started) / 200 * 1e3
    print(f"ActivityLog.paused(), enter and exit: {pause_ms:.3f} ms each (200)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
