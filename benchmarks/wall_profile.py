"""Where a memprof command's wall time goes, by sampling its stack every few milliseconds.

cProfile charges every Python call, which makes numpy-heavy commands look slower than they are.
Here a thread reads the main thread's stack (sys._current_frames; no signals: memprof's Ctrl-C
handling owns them) every --interval-ms and counts each function on it once: its share of the
samples is its share of the wall time, waiting for the GPU included.

    python3 benchmarks/wall_profile.py [--interval-ms 2] [--top 40] -- sweep --quiet
"""

from __future__ import annotations

import argparse
import collections
import runpy
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interval-ms", type=float, default=2.0)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    options = parser.parse_args()
    command = [word for word in options.command if word != "--"]
    inclusive: collections.Counter[tuple[str, str]] = collections.Counter()
    samples = 0
    main_thread = threading.main_thread().ident
    done = threading.Event()
    interval_s = options.interval_ms / 1000

    def sampler() -> None:
        nonlocal samples
        while not done.wait(interval_s):
            frame = sys._current_frames().get(main_thread)
            samples += 1
            seen = set()  # each function once a sample, however deep it recurses
            while frame is not None:
                seen.add((Path(frame.f_code.co_filename).name, frame.f_code.co_qualname))
                frame = frame.f_back
            inclusive.update(seen)

    sys.argv = ["memprof", *command]
    sys.path.insert(0, str(ROOT))
    sys.setswitchinterval(interval_s)
    thread = threading.Thread(target=sampler, daemon=True)
    start = time.perf_counter()
    thread.start()
    try:
        runpy.run_module("memprof", run_name="__main__")
    except SystemExit:
        pass
    finally:
        done.set()
        thread.join()
    wall_s = time.perf_counter() - start
    print(f"\nmemprof {' '.join(command)}: {wall_s:.2f} s wall, {samples} samples", flush=True)
    per_sample_s = wall_s / max(samples, 1)
    frames = [
        (key, count)
        for key, count in inclusive.most_common()
        if not key[0].startswith("<frozen") and key[0] not in ("wall_profile.py", "__main__.py")
    ]
    for (file, function), count in frames[: options.top]:
        print(f"  {count * per_sample_s:7.3f} s  {100 * count / samples:5.1f}%  {file}:{function}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
