"""NUMA and CPU affinity from sysfs, parsed from files made in tmp_path."""

from __future__ import annotations

from memprof.core.affinity import Affinity, format_cpulist, gpu_affinity, parse_cpulist
from memprof.experiments import parse as parse_result
from memprof.experiments import summarize


def _device(tmp_path, bus_id: str, node: str, cpus: str):
    directory = tmp_path / bus_id
    directory.mkdir()
    (directory / "numa_node").write_text(node + "\n")
    (directory / "local_cpulist").write_text(cpus + "\n")
    return directory


def test_cpulists_parse_ranges_and_single_cpus():
    assert parse_cpulist("0-3,8,10-11\n") == (0, 1, 2, 3, 8, 10, 11)
    assert parse_cpulist("5") == (5,)
    assert parse_cpulist("") == ()


def test_cpulists_format_back_as_sysfs_writes_them():
    assert format_cpulist((0, 1, 2, 3, 8, 10, 11)) == "0-3,8,10-11"
    assert format_cpulist((7,)) == "7"
    assert format_cpulist(()) == ""


def test_a_gpu_on_node_1_with_cuda_s_upper_case_bus_id(tmp_path):
    _device(tmp_path, "0000:9b:00.0", "1", "32-63,96-127")
    affinity = gpu_affinity("0000:9B:00.0", tmp_path)
    assert affinity == Affinity(1, tuple(range(32, 64)) + tuple(range(96, 128)))
    assert affinity.describe() == "NUMA node 1, local CPUs 32-63,96-127"


def test_a_machine_without_numa_says_so_and_missing_files_give_none(tmp_path):
    _device(tmp_path, "0000:1b:00.0", "-1", "0-15")
    assert gpu_affinity("0000:1B:00.0", tmp_path) == Affinity(None, tuple(range(16)))
    assert gpu_affinity("0000:2B:00.0", tmp_path) is None


def test_info_shows_the_node_and_cpus_it_recorded_and_says_when_it_did_not():
    from memprof.experiments import info
    from tests.conftest import load_fixture

    result = load_fixture("info")  # the H200 VM: sysfs names no NUMA node, CPUs 0-15
    rows = {row[0]: row[1] for row in info.summarize(result).tables[0].rows}
    assert rows["NUMA node, local CPUs"] == "no NUMA node, local CPUs 0-15 [sysfs]"
    result.extra = info.InfoExtra()  # as in results saved before memprof recorded it
    rows = {row[0]: row[1] for row in info.summarize(result).tables[0].rows}
    assert rows["NUMA node, local CPUs"] == "not recorded (sysfs did not say)"
    result.extra = info.InfoExtra(info.AffinityRecord(numa_node=0, local_cpus=[0, 1, 2, 3, 8]))
    rows = {row[0]: row[1] for row in info.summarize(result).tables[0].rows}
    assert rows["NUMA node, local CPUs"] == "NUMA node 0, local CPUs 0-3,8 [sysfs]"


class FakeScheduler:
    """sched_getaffinity/sched_setaffinity of a thread allowed on `allowed`."""

    def __init__(self, allowed: set[int]) -> None:
        self.cpus = set(allowed)
        self.calls: list[set[int]] = []

    def get(self, pid: int) -> set[int]:
        assert pid == 0  # the calling thread
        return set(self.cpus)

    def set(self, pid: int, cpus: set[int]) -> None:
        assert pid == 0
        self.calls.append(set(cpus))
        self.cpus = set(cpus)


def test_the_thread_runs_on_the_gpu_s_local_cpus_inside_and_gets_its_cpus_back(tmp_path):
    from memprof.core.affinity import near_gpu

    _device(tmp_path, "0000:9b:00.0", "1", "32-63")
    scheduler = FakeScheduler(set(range(48)))  # a cgroup allows CPUs 0-47 only
    with near_gpu("0000:9B:00.0", True, tmp_path, scheduler.get, scheduler.set) as note:
        assert scheduler.cpus == set(range(32, 48))  # local and allowed
        assert note == "affinity: host thread on CPUs 32-47, local to the GPU (NUMA node 1)"
    assert scheduler.cpus == set(range(48))


def test_no_affinity_or_no_sysfs_or_no_usable_cpu_leaves_the_thread_alone(tmp_path):
    from memprof.core.affinity import NOT_ASKED, near_gpu

    _device(tmp_path, "0000:9b:00.0", "1", "32-63")
    scheduler = FakeScheduler(set(range(16)))
    with near_gpu("0000:9B:00.0", False, tmp_path, scheduler.get, scheduler.set) as note:
        assert note == NOT_ASKED
    with near_gpu("0000:9B:00.0", True, tmp_path, scheduler.get, scheduler.set) as note:
        assert "none of the GPU's local CPUs is available" in note
    with near_gpu("0000:1B:00.0", True, tmp_path, scheduler.get, scheduler.set) as note:
        assert "sysfs does not say" in note
    assert scheduler.calls == []


def test_the_header_says_where_the_host_thread_ran():
    from rich.console import Console

    from memprof.output.render import render_result
    from tests.conftest import load_fixture

    result = load_fixture("pinned_p20")
    recorded = result.timing.host_affinity  # what the H200 run said
    assert recorded.startswith("affinity: host thread on CPUs")
    result.timing.host_affinity = None  # a run with --no-affinity, or saved before placement
    console = Console(width=200, record=True, color_system=None)
    render_result(result, summarize(result), console)
    assert "affinity:" not in console.export_text()
    result.timing.host_affinity = "affinity: host thread on CPUs 0-15, local to the GPU"
    console = Console(width=200, record=True, color_system=None)
    render_result(result, summarize(result), console)
    assert console.export_text().splitlines()[1] == result.timing.host_affinity
    saved = parse_result(result.to_json())
    assert saved.timing.host_affinity == result.timing.host_affinity
