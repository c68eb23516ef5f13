"""How many CUPTI activity records each command makes, of which kinds, and what reading them
costs: the records memprof reads after a run (ActivityLog.flush) are part of every command's
wall time.

    python3 benchmarks/activity_records.py [sweep compare managed alloc]

Runs each command in this process (memprof.api.run, its defaults) with ActivityLog's buffer
callback wrapped: per command, the records by cupti-python's class, the seconds spent in
memprof's callback, the seconds flush() took in all (cupti-python making the records, then
the callback), the API records by call, and the run's wall time. Then what pausing CUPTI
costs (ActivityLog.paused(), which every throughput batch and untraced loop enters): 200
pauses, enter and exit. Needs the GPU machine.
"""

from __future__ import annotations

import collections
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memprof import api  # noqa: E402
from memprof.core.activity import ActivityLog  # noqa: E402


def main() -> int:
    commands = sys.argv[1:] or ["sweep", "compare", "managed", "alloc"]
    counts: collections.Counter[str] = collections.Counter()
    spent = {"callback": 0.0, "flush": 0.0}
    completed, flush = ActivityLog._buffer_completed, ActivityLog.flush

    def counted(self, activities) -> None:
        started = time.perf_counter()
        for record in activities:
            counts[type(record).__name__] += 1
        completed(self, activities)
        spent["callback"] += time.perf_counter() - started

    def timed_flush(self) -> None:
        started = time.perf_counter()
        flush(self)
        spent["flush"] += time.perf_counter() - started

    names: collections.Counter[str] = collections.Counter()
    add_api = ActivityLog._add_api

    def named(self, record) -> None:
        add_api(self, record)
        names[self._callback_name(record.cbid, "driver")] += 1

    ActivityLog._buffer_completed = counted
    ActivityLog.flush = timed_flush
    ActivityLog._add_api = named
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
