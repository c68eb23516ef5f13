"""memprof from Python: run an experiment, read its figures, render it, save and load it.

    python3 examples/python_api.py [--power 20]

Prints the figures it reads from the Result, then the Result as `memprof pinned` prints it.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import memprof
from memprof.model.formatting import bandwidth_gb_per_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--power", type=int, default=20)
    power = parser.parse_args().power

    result = memprof.run("pinned", power=power, repeat=5)  # measures, prints nothing
    print(f"{result.device.name}, timed by {result.timing.source}, verified: {result.passed}")
    for kind in ("pageable", "pinned"):
        copy = result.find("h2d", kind, "gpu")  # every sample is kept
        one_copy_us = copy.stats.median_ms * 1e3
        back_to_back = bandwidth_gb_per_s(copy.bytes, copy.throughput_stats.median_ms)
        print(
            f"{kind:>8} HtoD of {copy.bytes >> 20} MiB: one copy {one_copy_us:.1f} us, "
            f"{back_to_back:.1f} GB/s back to back, samples {len(copy.samples_ms)}"
        )

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "pinned.json"
        result.save(path)
        again = memprof.load(path)  # checked as `memprof report` checks a file
        print(f"saved and loaded again: {again.to_json() == result.to_json()}\n")
    memprof.render(again)


if __name__ == "__main__":
    main()
