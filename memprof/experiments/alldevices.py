"""`--device all`: one experiment on every GPU in turn, then every GPU's copies at once.

Each GPU gets its own GpuSession, one after the other, so each Result is the same as a
`--device N` run. With two or more GPUs, memprof hostlink follows: every GPU's pinned HtoD
and DtoH alone and at the same time, which shows whether the GPUs share the host's link
or memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memprof.experiments import run_experiment
from memprof.experiments.common import Progress, no_progress
from memprof.model.results import Result

ONE_GPU = "--device all: this machine has one GPU, so memprof ran on device 0 only"


@dataclass
class EveryDevice:
    """What `--device all` measured: a Result per GPU, then hostlink's (two GPUs or more)."""

    results: list[Result] = field(default_factory=list)
    cleanup_failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def run_on_every_device(
    command: str,
    params: Any,
    timing: str = "auto",
    affinity: bool = True,
    progress: Progress = no_progress,
    count: int | None = None,
) -> EveryDevice:
    """Run `command` on every GPU (count: how many; asked of the driver when None)."""
    from memprof.core.multigpu import device_count
    from memprof.core.session import GpuSession
    from memprof.experiments import hostlink

    count = device_count() if count is None else count
    done = EveryDevice()
    for index in range(count):
        with GpuSession(index, timing) as session:
            done.results.append(run_experiment(command, session, params, progress, affinity))
        done.cleanup_failures += session.cleanup_failures
    if count < 2:
        done.notes.append(ONE_GPU)
    else:
        devices = list(range(count))
        done.results.append(
            hostlink.measure(hostlink.HostlinkParams(), progress, affinity, devices)
        )
    return done
