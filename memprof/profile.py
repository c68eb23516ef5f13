"""Records what memprof does on the GPU, and folds it into nvprof's profile rows.

GPU work is timed with CUDA events recorded around it (resolved later, so timing
never adds a synchronisation); driver calls and host work with the host clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

from memprof.results import Group, Measurement
from memprof.timing import Statistics

_Key = tuple[str, str, str, "str | None", int]


class Profiler:
    """Collects every sample into Measurements keyed by (group, name, operation, kind, bytes)."""

    def __init__(self, cuda: Any) -> None:
        self._cuda = cuda
        self._measurements: dict[_Key, Measurement] = {}
        self._pending: list[tuple[Measurement, Any, Any]] = []
        self._paused = 0

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Run warm-ups: the work happens, nothing is recorded."""
        self._paused += 1
        try:
            yield
        finally:
            self._paused -= 1

    @contextmanager
    def host_clock(
        self, group: Group, name: str, operation: str, kind: str | None = None, nbytes: int = 0
    ) -> Iterator[None]:
        """Time a driver call ("api") or host work ("host") on the host's monotonic clock."""
        start_ns = time.perf_counter_ns()
        yield
        elapsed_ns = time.perf_counter_ns() - start_ns
        if not self._paused:
            self._measurement(group, name, operation, kind, nbytes).samples_ms.append(
                elapsed_ns / 1e6
            )

    def api(
        self, name: str, operation: str, kind: str | None = None, nbytes: int = 0
    ) -> AbstractContextManager[None]:
        return self.host_clock("api", name, operation, kind, nbytes)

    @contextmanager
    def events(
        self,
        group: Group,
        name: str,
        operation: str,
        kind: str | None = None,
        nbytes: int = 0,
        stream: Any = None,
    ) -> Iterator[None]:
        """Time GPU work between two CUDA events on `stream`; resolved by `resolve()`."""
        if self._paused:
            yield
            return
        start = self._cuda.Event()
        start.record(stream)
        yield
        end = self._cuda.Event()
        end.record(stream)
        self._pending.append((self._measurement(group, name, operation, kind, nbytes), start, end))

    def add_sample(
        self,
        group: Group,
        name: str,
        operation: str,
        kind: str | None,
        nbytes: int,
        milliseconds: float,
    ) -> None:
        """Record a time measured elsewhere (events an experiment placed itself)."""
        if not self._paused:
            self._measurement(group, name, operation, kind, nbytes).samples_ms.append(milliseconds)

    def time_once(self, action: Callable[[], None], stream: Any = None) -> float:
        """Milliseconds `action` takes on the GPU, between two events; never recorded."""
        with self.paused():
            start, end = self._cuda.Event(), self._cuda.Event()
            start.record(stream)
            action()
            end.record(stream)
            end.synchronize()
            return end.time_since(start)

    def resolve(self) -> None:
        """Wait for every recorded event and turn event pairs into samples."""
        for measurement, start, end in self._pending:
            end.synchronize()
            measurement.samples_ms.append(end.time_since(start))
        self._pending.clear()

    def repeat(self, step: Callable[[], None], warmup: int, repeat: int) -> None:
        """Run `step` warmup times unrecorded, then `repeat` times recorded."""
        with self.paused():
            for _ in range(warmup):
                step()
        for _ in range(repeat):
            step()
        self.resolve()

    def measurements(self) -> list[Measurement]:
        self.resolve()
        return [m for m in self._measurements.values() if m.samples_ms]

    def discard_pending(self) -> None:
        """Drop unresolved events (after an error) so nothing holds the context."""
        self._pending.clear()

    def _measurement(
        self, group: Group, name: str, operation: str, kind: str | None, nbytes: int
    ) -> Measurement:
        key = (group, name, operation, kind, nbytes)
        if key not in self._measurements:
            self._measurements[key] = Measurement(group, name, operation, kind, nbytes)
        return self._measurements[key]


@dataclass(frozen=True)
class ProfileRow:
    """One line of nvprof's table: a name with its calls and their times."""

    group: str  # "GPU activities" or "API calls"
    name: str
    stats: Statistics
    time_fraction: float  # of the group's total time


PROFILE_GROUPS: dict[str, str] = {"gpu": "GPU activities", "api": "API calls"}


def profile_rows(measurements: list[Measurement]) -> list[ProfileRow]:
    """nvprof's rows: GPU activities then API calls, each sorted by total time, largest first.

    Measurements of one name and kind at several sizes fold into one row, as nvprof
    folds every call of one name.
    """
    rows: list[ProfileRow] = []
    for group, title in PROFILE_GROUPS.items():
        samples_by_name: dict[str, list[float]] = {}
        for m in measurements:
            if m.group == group:
                samples_by_name.setdefault(m.display_name, []).extend(m.samples_ms)
        group_total = sum(sum(s) for s in samples_by_name.values())
        group_rows = [
            ProfileRow(
                title,
                name,
                Statistics.of(samples),
                sum(samples) / group_total if group_total > 0 else 0.0,
            )
            for name, samples in samples_by_name.items()
        ]
        rows.extend(sorted(group_rows, key=lambda r: (-r.stats.total_ms, r.name)))
    return rows
