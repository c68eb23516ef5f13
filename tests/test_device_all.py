"""--device all, hostlink and portable without a GPU: parsing, orchestration, summaries."""

from __future__ import annotations

import contextlib
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from memprof import api, cli
from memprof.errors import EnvironmentProblem, ExitCode
from memprof.experiments import COMMANDS, experiment_class, hostlink, portable
from memprof.experiments import load as load_result
from memprof.experiments import parse as parse_result
from memprof.experiments.base import Experiment, NoExtra, RunOptions
from memprof.experiments.base import run as run_experiment
from memprof.experiments.compare import CompareParams
from memprof.experiments.pinned import PinnedParams
from memprof.model.device import DeviceFacts, DeviceRecord
from memprof.model.results import Measurement, Result, TimingInfo
from memprof.output import emit

runner = CliRunner()
NBYTES = 256 << 20


@pytest.fixture
def runs(monkeypatch) -> list[tuple]:
    recorded: list[tuple] = []
    monkeypatch.setattr(cli, "_run", lambda *arguments: recorded.append(arguments))
    return recorded


@pytest.mark.parametrize("command", ["pinned", "sweep", "compare"])
def test_device_all_reaches_the_run_as_none_and_an_index_as_itself(runs, command):
    assert runner.invoke(cli.app, [command, "--device", "all"]).exit_code == 0
    assert runner.invoke(cli.app, [command, "-d", "1"]).exit_code == 0
    assert [run[2] for run in runs] == [None, 1]


@pytest.mark.parametrize(
    ("value", "message"),
    [("64", "64 is outside the allowed range 0 to 63"), ("both", "'both' is not a device index")],
)
def test_a_bad_device_choice_is_one_usage_line(runs, value, message):
    result = runner.invoke(cli.app, ["pinned", "--device", value])
    assert result.exit_code == ExitCode.USAGE
    assert message in result.output
    assert runs == []


def test_commands_without_device_all_still_take_an_index_only(runs):
    assert runner.invoke(cli.app, ["zerocopy", "--device", "all"]).exit_code == ExitCode.USAGE
    assert runs == []


def test_affinity_is_on_unless_no_affinity_is_given(runs):
    runner.invoke(cli.app, ["pinned"])
    runner.invoke(cli.app, ["compare", "--no-affinity"])
    assert [run[5] for run in runs] == [True, False]
    assert runs[0][1] == PinnedParams() and runs[1][1] == CompareParams()


@pytest.fixture
def every_device(monkeypatch) -> list[tuple]:
    """Each experiment run_each_gpu starts: (command, device index or None for all at once)."""
    started: list[tuple] = []

    def run(experiment, params, options, progress, inputs=None):
        started.append((experiment.name, options.device))
        return f"{experiment.name} on {options.device}", []

    monkeypatch.setattr(api, "run_experiment", run)
    return started


EVERY_GPU_AT_ONCE = [
    e.name for e in (experiment_class(c.name) for c in COMMANDS) if e.gpus == "every"
]


@pytest.mark.parametrize("command", EVERY_GPU_AT_ONCE)
def test_an_experiment_over_every_gpu_at_once_runs_once_and_saves(
    command, every_device, monkeypatch, tmp_path
):
    emitted = []
    monkeypatch.setattr(emit, "emit", lambda results, summarize, output: emitted.append(results))
    saved = tmp_path / "run.json"
    result = runner.invoke(cli.app, [command, "--json", str(saved), "--quiet"])
    assert result.exit_code == 0, result.output
    assert every_device == [(command, None)]  # one run of every GPU, not each in turn
    assert emitted == [[f"{command} on None"]]


def test_every_gpu_runs_in_turn_then_hostlink_on_all_of_them(every_device):
    done = api.run_each_gpu("pinned", PinnedParams(), count=2)
    assert every_device == [("pinned", 0), ("pinned", 1), ("hostlink", None)]
    assert done.results == ["pinned on 0", "pinned on 1", "hostlink on None"]
    assert done.notes == []


def test_one_gpu_runs_device_0_says_so_and_measures_nothing_simultaneous(every_device):
    done = api.run_each_gpu("sweep", None, count=1)
    assert every_device == [("sweep", 0)]
    assert done.results == ["sweep on 0"]
    assert done.notes == [api.ONE_GPU]


class FakeSession:
    """A GpuSession that opens nothing: the run machinery's view of one GPU."""

    def __init__(self, index: int, timing: str, declared, ends_process: bool = False) -> None:
        self.device_index, self.declared, self.cleanup_failures = index, declared, []
        self.profiler = SimpleNamespace(
            measurements=list, timing_info=lambda: TimingInfo("events", "", None, None, None)
        )

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        pass

    def active(self):
        return contextlib.nullcontext(self)


def test_a_run_places_the_thread_before_the_experiment_and_records_it(monkeypatch):
    import memprof.core.affinity
    import memprof.core.devicefacts
    import memprof.core.session

    events: list[str] = []

    @contextlib.contextmanager
    def near_gpu(pci_bus_id, enabled):
        events.append(f"pin {pci_bus_id} {enabled}")
        yield "affinity: here"
        events.append("unpin")

    class Fake(Experiment):
        name = "fake"
        Params = PinnedParams
        measures = ()

        def run(self, ctx):
            events.append(f"run on {ctx.session.device_index}")
            return NoExtra()

    facts = SimpleNamespace(pci_bus_id="0000:1B:00.0")
    monkeypatch.setattr(memprof.core.session, "GpuSession", FakeSession)
    monkeypatch.setattr(memprof.core.devicefacts, "collect", lambda session: facts)
    monkeypatch.setattr(memprof.core.affinity, "near_gpu", near_gpu)
    result, failures = run_experiment(Fake(), PinnedParams(), RunOptions(3, "events", False))
    assert events == ["pin 0000:1B:00.0 False", "run on 3", "unpin"]
    assert result.timing.host_affinity == "affinity: here"
    assert (result.command, result.device, failures) == ("fake", facts, [])


# -- hostlink --------------------------------------------------------------------------------


def _copy(key: str, gb_per_s: float) -> Measurement:
    """A copy measurement from a figure key: "alone h2d 0", "together d2h 1", "pinned h2d 1"."""
    first, direction, gpu = key.split()
    operation = f"{direction}_at_once" if first == "together" else direction
    kind = first if first in portable.BUFFERS else "pinned"
    ms = NBYTES / gb_per_s / 1e6
    name = hostlink.DIRECTIONS[direction]
    return Measurement(
        "gpu",
        name,
        operation,
        kind,
        NBYTES,
        [ms] * 5,
        throughput_ms=[ms] * 5,
        batch=4,
        gpus=(int(gpu),),  # five: the default --repeat of runs over several GPUs
    )


def _devices(count: int) -> list[DeviceRecord]:
    """GPU 0 as _first_gpu() records it, then others."""
    return [DeviceRecord.of(_first_gpu())] + [
        DeviceRecord(i, "NVIDIA H200", f"0000:{i}B:00.0") for i in range(1, count)
    ]


def _first_gpu() -> DeviceFacts:
    """Every run records its (first) GPU's facts: GPU 0's, as recorded by hostlink."""
    return load_result(Path(__file__).parent / "fixtures" / "h200x2_hostlink.json").device


def hostlink_result(figures: dict[str, float]) -> Result:
    return Result(
        command="hostlink",
        parameters=hostlink.HostlinkParams(repeat=1),
        device=_first_gpu(),
        measurements=[_copy(key, value) for key, value in figures.items()],
        extra=hostlink.HostlinkExtra(devices=_devices(2)),
    )


def test_hostlink_figures_are_keyed_by_mode_direction_and_gpu():
    together = _copy("together d2h 1", 50.0)
    assert hostlink.figure_key(together) == ("together", "d2h", 1)
    assert hostlink.figure_key(_copy("alone h2d 0", 50.0)) == ("alone", "h2d", 0)
    peer_copy = Measurement("gpu", "x", "ce_on", "peer", NBYTES, [1.0], gpus=(0, 1))
    assert hostlink.figure_key(peer_copy) is None
    sideways = Measurement("gpu", "x", "sideways", "pinned", NBYTES, [1.0], gpus=(0,))
    assert hostlink.figure_key(sideways) is None


SHARED = {
    "alone h2d 0": 55.0,
    "alone h2d 1": 53.0,
    "together h2d 0": 30.0,
    "together h2d 1": 28.0,
    "alone d2h 0": 55.0,
    "alone d2h 1": 55.0,
    "together d2h 0": 54.0,
    "together d2h 1": 53.0,
}


def test_hostlink_sums_each_mode_and_says_which_direction_is_shared():
    result = parse_result(hostlink_result(SHARED).to_json())  # loads: its fields declared
    alone, together = hostlink.totals(result, "h2d")
    assert alone == pytest.approx(108.0) and together == pytest.approx(58.0)
    summary = hostlink.summarize(result)
    rows = [row for row in summary.tables[0].rows if row[0] == "total"]
    assert rows[0][1:5] == ["host → device", "108", "58.0", "0.54x"]
    h2d, d2h = summary.conclusions
    assert "2 GPUs at once moved 58.0 GB/s in total, 54% of the 108 GB/s" in h2d
    assert "they share something on the way" in h2d
    assert "nothing on the way is shared" in d2h


def test_hostlink_without_every_figure_leaves_the_total_out():
    figures = {k: v for k, v in SHARED.items() if k != "together d2h 1"}
    assert hostlink.totals(hostlink_result(figures), "d2h") is None
    assert len(hostlink.summarize(hostlink_result(figures)).conclusions) == 1


OWN, SHARES = "nothing on the way is shared", "they share something on the way"


@pytest.mark.parametrize(
    ("together_gb_per_s", "against_ninety_percent", "words"),
    [
        (54.0, 0, OWN),  # 108 of 120 GB/s: exactly 90%
        (53.99999999999999, -1, SHARES),
        (54.0000000000001, 1, OWN),
    ],
)
def test_hostlink_shares_something_only_under_ninety_percent_of_the_sum_alone(
    together_gb_per_s, against_ninety_percent, words
):
    figures = dict.fromkeys(SHARED, 60.0) | {
        "together h2d 0": together_gb_per_s,
        "together h2d 1": together_gb_per_s,
    }
    result = hostlink_result(figures)
    alone, together = hostlink.totals(result, "h2d")
    ratio = together / alone
    assert (ratio > 0.9) - (ratio < 0.9) == against_ninety_percent  # where the data lies
    h2d, d2h = hostlink.summarize(result).conclusions
    assert words in h2d and "moved 108 GB/s in total, 90% of the 120 GB/s" in h2d
    assert OWN in d2h and "moved 120 GB/s in total, 100% of the 120 GB/s" in d2h


def test_hostlink_says_each_direction_whose_totals_are_whole_though_the_other_is_not():
    figures = {k: v for k, v in SHARED.items() if k != "together h2d 1"}  # the first direction
    (d2h,) = hostlink.summarize(hostlink_result(figures)).conclusions
    assert d2h.startswith("Device → host: 2 GPUs at once moved 107 GB/s in total")


def _saved_hostlink_refusal(change) -> str | None:
    import json

    from memprof.errors import InvalidArgument

    fixtures = Path(__file__).parent / "fixtures"
    document = json.loads((fixtures / "h200x2_hostlink.json").read_text())
    change(document["measurements"][0])  # GPU 0's copies host → device, alone
    try:
        parse_result(json.dumps(document))
    except InvalidArgument as error:
        return str(error)
    return None


@pytest.mark.parametrize(
    ("field", "value", "refusal"),
    [
        ("kind", "pinned", None),
        ("kind", "pageable", "is 'pageable', but a gpu 'h2d' of this experiment is one of"),
        ("gpus", [0], None),
        ("gpus", [0, 1], "names 2 GPUs, but a 'h2d' runs on 1"),
    ],
)
def test_a_saved_hostlink_copy_is_of_pinned_memory_on_one_gpu(field, value, refusal):
    found = _saved_hostlink_refusal(lambda m: m.update({field: value}))
    assert found == refusal if refusal is None else f"measurements[0].{field} {refusal}" in found


def test_a_saved_hostlink_copy_is_judged_by_its_back_to_back_batches_alone():
    """Its figures are the batches' (basis "back to back"): its samples alone never refuse it."""
    zero = _saved_hostlink_refusal(lambda m: m.update(samples_ms=[0.0] * len(m["samples_ms"])))
    assert zero is None
    batches = _saved_hostlink_refusal(
        lambda m: m.update(throughput_ms=[0.0] * len(m["throughput_ms"]))
    )
    assert "measurements[0].throughput_ms has a median of 0 ms" in batches


def test_hostlink_says_what_its_figures_are_the_median_of_one_batch_or_several():
    one = hostlink.summarize(hostlink_result(SHARED)).tables[0].notes[0]  # --repeat 1
    assert "; median of 1 batch." in one
    several = hostlink.summarize(load_result(FIXTURES / "h200x2_hostlink.json")).tables[0]
    assert "; median of 5 batches." in several.notes[0]


FIXTURES = Path(__file__).parent / "fixtures"

# -- portable --------------------------------------------------------------------------------


def portable_result(figures: dict[str, float]) -> Result:
    return Result(
        command="portable",
        parameters=portable.PortableParams(repeat=1),
        device=_first_gpu(),
        measurements=[_copy(key, value) for key, value in figures.items()],
        extra=portable.PortableExtra(_devices(2), unified_addressing=True),
    )


def test_portable_compares_foreign_pinned_memory_with_portable_from_the_other_gpu():
    figures = {
        "portable h2d 0": 55.0,
        "portable h2d 1": 54.0,
        "pinned h2d 0": 55.0,
        "pinned h2d 1": 20.0,  # staged: treated as pageable
        "portable d2h 0": 55.0,
        "portable d2h 1": 55.0,
        "pinned d2h 0": 55.0,
        "pinned d2h 1": 54.0,  # as fast: pinned everywhere under unified addressing
    }
    result = parse_result(portable_result(figures).to_json())
    summary = portable.summarize(result)
    rows = summary.tables[0].rows
    assert rows[3][:4] == ["Pinned by GPU 0 only", "GPU 1", "20.0", "54.0"]
    assert rows[0][1] == "GPU 0 (its owner)"
    h2d, d2h = summary.conclusions
    assert h2d.startswith("GPU 1, host → device: memory pinned only in GPU 0's context moved 20.0")
    assert "37% of the portable buffer's 54.0 GB/s" in h2d and "as pageable" in h2d
    assert "treats the buffer as pinned too" in d2h


@pytest.mark.parametrize("command", ["hostlink", "portable"])
def test_two_gpu_commands_on_one_gpu_say_so_in_one_line_and_exit_3(monkeypatch, command):
    import memprof.core.session

    monkeypatch.setattr(memprof.core.session, "device_count", lambda: 1)
    result = runner.invoke(cli.app, [command])
    assert result.exit_code == ExitCode.ENVIRONMENT
    assert f"memprof {command} needs two GPUs: this machine has one" in result.output
    assert len(result.output.strip().splitlines()) == 1
    with pytest.raises(EnvironmentProblem, match="needs two GPUs"):  # the Python API too
        api.run(command)


def test_every_run_in_turn_is_told_whether_the_process_ends_with_it(monkeypatch):
    told = []

    def run(experiment, params, options, progress, inputs=None):
        told.append(options.ends_process)
        return experiment.name, []

    monkeypatch.setattr(api, "run_experiment", run)
    api.run_each_gpu("pinned", PinnedParams(), count=2, ends_process=True)
    api.run_each_gpu("pinned", PinnedParams(), count=2)
    assert told == [True, True, True, False, False, False]  # each GPU, then all at once


def test_a_runs_sessions_are_told_whether_the_process_ends_with_it(monkeypatch):
    import dataclasses

    from memprof.core import session as sessions
    from memprof.experiments import base, experiment_named

    monkeypatch.setattr(sessions, "device_count", lambda: 2)
    for ends_process in (False, True):
        options = base.RunOptions(0, ends_process=ends_process)
        _, one = base._sessions_for(experiment_named("pinned"), options)
        every_options = dataclasses.replace(options, device=None)
        _, every = base._sessions_for(experiment_named("peer"), every_options)
        assert (one.ends_process, every.ends_process) == (ends_process, ends_process)
