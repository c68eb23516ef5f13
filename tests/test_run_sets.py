"""Every GPU in one file: `--json` with `--device all` saves each GPU's Result (then the run
over every GPU at once) in one file that report, --fleet, --junit, diff and load_all read; the
loader holds it to being one run, and a file of one Result loads as it always did. The runs
are four real H200 checks (tests/fixtures/fleet) and a recorded check-pairs of the same host."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

import memprof
from memprof import api, cli
from memprof.errors import ExitCode, InvalidArgument
from memprof.experiments import load_all_summarized
from memprof.model.results import RUN_SET_FORMAT, results_to_json

runner = CliRunner()
FIXTURES = Path(__file__).parent / "fixtures"
CHECKS = [FIXTURES / "fleet" / f"h200x4_check_gpu{i}.json" for i in range(4)]
PAIRS = FIXTURES / "h200x2_check_pairs.json"


def members() -> list[dict]:
    """The plain data of each GPU's check, then the check-pairs run."""
    return [json.loads(path.read_text()) for path in (*CHECKS, PAIRS)]


def saved(tmp_path: Path, found: list[dict], name: str = "all.json", **envelope) -> Path:
    path = tmp_path / name
    document = {"format": RUN_SET_FORMAT, "format_version": 1, "results": found} | envelope
    path.write_text(json.dumps(document, indent=1))
    return path


def test_device_all_json_saves_one_file_that_report_renders(tmp_path, monkeypatch):
    loaded = [memprof.load(path) for path in (*CHECKS, PAIRS)]
    monkeypatch.setattr(api, "run_each_gpu", lambda *a, **k: api.EveryDevice(list(loaded)))
    target = tmp_path / "check.json"
    ran = runner.invoke(cli.app, ["check", "--device", "all", "--json", str(target), "-q"])
    assert ran.exit_code == 0, ran.output
    again = memprof.load_all(target)
    assert [r.to_json() for r in again] == [r.to_json() for r in loaded]
    assert json.loads(target.read_text())["format"] == RUN_SET_FORMAT
    shown = runner.invoke(cli.app, ["report", str(target), "--no-color"])
    assert shown.exit_code == 0, shown.output
    for gpu in range(4):
        assert f"memprof check, GPU {gpu} (NVIDIA H200): 7 PASS" in shown.output
    assert "Health of every pair of GPUs" in shown.output or "check-pairs" in shown.output


def test_a_file_of_one_result_loads_as_before_and_load_refuses_several(tmp_path):
    one = memprof.load(CHECKS[0])
    assert [r.to_json() for r in memprof.load_all(CHECKS[0])] == [one.to_json()]
    several = saved(tmp_path, members())
    with pytest.raises(InvalidArgument, match=r"holds 5 results .* memprof\.load_all reads"):
        memprof.load(several)
    assert [r.gpu_index for r in memprof.load_all(several)] == [0, 1, 2, 3, 0]


def test_one_run_without_the_run_over_every_gpu_loads(tmp_path):
    assert len(load_all_summarized(saved(tmp_path, members()[:4]))) == 4
    assert len(load_all_summarized(saved(tmp_path, members()[:1]))) == 1


def _planted(change) -> list[dict]:
    found = members()
    change(found)
    return found


def _set(found: list[dict], index: int, field: str, value: object) -> None:
    found[index][field] = value


@pytest.mark.parametrize(
    ("found", "envelope", "message"),
    [
        (members(), {"format": "memprof result"}, "its format is the string 'memprof result', not"),
        (members(), {"format_version": 2}, "version 2, which this memprof"),
        ([], {}, "results is empty"),
        (members(), {"gpus": 4}, "gpus is not a known field"),
        (_planted(lambda f: _set(f, 1, "host", "node-b")), {}, "from 2 hosts"),
        (
            _planted(lambda f: f.insert(2, f[1])),
            {},
            "results[2] measured GPU 1, as results[1]",
        ),
        (_planted(lambda f: f.insert(2, f.pop())), {}, "results[2] is a check-pairs result after"),
        (_planted(lambda f: f.append(f[-1])), {}, "results[4] is a check-pairs result after"),
        (
            [*members()[:4], json.loads((FIXTURES / "h200x2_hostlink.json").read_text())],
            {},
            "results[4] is a hostlink result after check results",
        ),
        (
            _planted(lambda f: f[3]["measurements"][0].update(bytes=-1)),
            {},
            "results[3]: measurements[0].bytes",
        ),
    ],
)
def test_the_loader_refuses_what_is_not_one_run_in_one_line(tmp_path, found, envelope, message):
    path = saved(tmp_path, found, **envelope)
    with pytest.raises(InvalidArgument, match=f"^{re.escape(str(path))}.*{re.escape(message)}"):
        load_all_summarized(path)


def test_a_key_twice_in_the_envelope_is_refused(tmp_path):
    path = tmp_path / "twice.json"
    text = results_to_json([memprof.load(CHECKS[0])])
    path.write_text(
        text.replace('"format_version": 1,', '"format_version": 1, "format_version": 1,')
    )
    with pytest.raises(InvalidArgument, match="names the string 'format_version' as a key twice"):
        load_all_summarized(path)


def test_a_run_the_loader_would_refuse_is_not_saved(tmp_path, monkeypatch):
    loaded = [memprof.load(path) for path in CHECKS]
    loaded[1].host = "node-b"  # not one run: the loader's check runs before the file is written
    monkeypatch.setattr(api, "run_each_gpu", lambda *a, **k: api.EveryDevice(loaded))
    target = tmp_path / "check.json"
    ran = runner.invoke(cli.app, ["check", "--device", "all", "--json", str(target), "-q"])
    assert ran.exit_code == ExitCode.INTERNAL
    assert "from 2 hosts" in ran.output and not target.exists()


def test_fleet_and_junit_read_each_gpu_of_the_file(tmp_path):
    path = saved(tmp_path, members())
    fleet = runner.invoke(cli.app, ["report", "--fleet", str(path), "--no-color"])
    assert fleet.exit_code == 0, fleet.output
    assert "4 runs against the fleet's median" in fleet.output  # check-pairs is not one
    junit = tmp_path / "j.xml"
    assert runner.invoke(cli.app, ["report", str(path), "--junit", str(junit), "-q"]).exit_code == 0
    suites = junit.read_text().count("<testsuite ")
    assert suites == 5 and 'name="memprof check, GPU 3 (NVIDIA H200)"' in junit.read_text()


def _slower(found: list[dict], gpu: int, factor: float) -> None:
    for m in next(f for f in found if f["device"]["index"] == gpu)["measurements"]:
        for field in ("samples_ms", "throughput_ms"):
            m[field] = [t * factor for t in m.get(field) or []]


def test_diff_compares_each_gpu_with_the_same_gpu(tmp_path):
    a = saved(tmp_path, members()[:4], "a.json")
    found = members()[:4]
    found[0], found[1] = found[1], found[0]  # another order: matched by GPU, not by place
    _slower(found, 0, 1.3)  # in B's second place
    b = saved(tmp_path, found, "b.json")
    ran = runner.invoke(cli.app, ["diff", str(a), str(b), "--fail-above", "5", "--no-color"])
    assert ran.exit_code == ExitCode.CHECK_FAILED, ran.output
    worse = [line for line in ran.output.splitlines() if line.startswith("memprof: regressed:")]
    assert worse and all(line.startswith("memprof: regressed: GPU 0: ") for line in worse)
    same = runner.invoke(cli.app, ["diff", str(a), str(a), "--fail-above", "5"])
    assert same.exit_code == 0, same.output


def test_diff_refuses_files_of_different_gpus_in_one_line(tmp_path):
    a = saved(tmp_path, members()[:4], "a.json")
    b = saved(tmp_path, members()[:3], "b.json")
    ran = runner.invoke(cli.app, ["diff", str(a), str(b)])
    assert ran.exit_code == ExitCode.USAGE
    assert "A holds GPU 0, GPU 1, GPU 2, GPU 3 and B GPU 0, GPU 1, GPU 2" in ran.output
    assert len(ran.output.strip().splitlines()) == 1


def test_diff_names_the_run_over_every_gpu_and_a_file_of_one_run_as_it_refuses_them(tmp_path):
    a = saved(tmp_path, members(), "a.json")  # four checks, then check-pairs over every GPU
    b = saved(tmp_path, [*members()[:3], members()[4]], "b.json")
    for first, second, held in [
        (a, b, "A holds GPU 0, GPU 1, GPU 2, GPU 3, every GPU (check-pairs) and B GPU 0, GPU 1, "),
        (CHECKS[0], b, "A holds GPU 0 and B GPU 0, GPU 1, GPU 2, every GPU (check-pairs): "),
    ]:
        ran = runner.invoke(cli.app, ["diff", str(first), str(second)], env={"COLUMNS": "300"})
        assert ran.exit_code == ExitCode.USAGE, ran.output
        assert ran.stderr.startswith(f"memprof: error: {held}")
        assert ran.stderr.endswith(
            ": a diff of runs of --device all compares each GPU with the same GPU in the other, "
            "so both files must hold the same GPUs' runs\n"
        )


def test_a_gate_refusing_one_gpus_runs_of_a_device_all_diff_names_that_gpu(tmp_path):
    a = saved(tmp_path, members()[:4], "a.json")
    found = members()[:4]
    found[1]["device"]["driver_version"] = "999.1"
    b = saved(tmp_path, found, "b.json")
    ran = runner.invoke(cli.app, ["diff", str(a), str(b), "--fail-above", "5"])
    assert ran.exit_code == ExitCode.USAGE, ran.output
    assert ran.stderr == (
        "memprof: error: GPU 1: A and B are not comparable: driver: A 580.159.04 (CUDA 13.0), "
        "B 999.1 (CUDA 13.0); --allow-not-comparable compares them anyway\n"
    )


def test_a_file_of_several_is_valid_under_the_shipped_schema(tmp_path):
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is not installed here")
    from memprof.experiments.json_schema import SCHEMA_FILE

    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA_FILE.read_text()))
    document = json.loads(saved(tmp_path, members()[:4]).read_text())  # of today's version
    assert validator.is_valid(document)
    assert not validator.is_valid(document | {"format_version": 2})
    assert not validator.is_valid(document | {"results": []})


def test_every_gpus_footnotes_are_shown_once_and_a_differing_one_kept():
    from memprof.model.summary import Summary, Table
    from memprof.output.emit import notes_once

    runs = [memprof.load(path) for path in CHECKS[:3]]
    shown: dict = {}
    tables = [Table("t", ["a"], notes=notes) for notes in (["x", "y"], ["x", "y"], ["x", "z"])]
    kept = [
        notes_once(Summary(tables=[table]), run, shown).tables[0].notes
        for table, run in zip(tables, runs, strict=True)
    ]
    assert kept == [
        ["x", "y"],
        ["Notes as for GPU 0 above."],
        ["z", "Other notes as for GPU 0 above."],
    ]


def test_report_of_every_gpu_shows_the_checks_footnotes_once(tmp_path):
    shown = runner.invoke(cli.app, ["report", str(saved(tmp_path, members())), "--no-color"])
    assert shown.output.count("Copies of 64 MiB from pinned memory") == 1
    assert shown.output.count("Notes as for GPU 0 above.") == 3


def test_a_note_one_run_repeats_in_its_own_tables_stays_in_each():
    from memprof.model.summary import Summary, Table
    from memprof.output.emit import notes_once

    tables = [Table("t", ["a"], notes=["x"]), Table("u", ["a"], notes=["x"])]
    kept = notes_once(Summary(tables=tables), memprof.load(CHECKS[0]), {})
    assert [table.notes for table in kept.tables] == [["x"], ["x"]]


def test_plot_of_a_run_of_every_gpu_draws_each_gpus_run_told_apart_by_its_gpu(tmp_path):
    pytest.importorskip("matplotlib", reason="memprof plot needs matplotlib (the plot extra)")
    import xml.etree.ElementTree as ElementTree

    from tests.test_plot import texts

    source = saved(tmp_path, members())  # four GPUs' checks, then the check-pairs run
    target = tmp_path / "all.svg"
    ran = runner.invoke(cli.app, ["plot", str(source), "-o", str(target)])
    assert ran.exit_code == 0, ran.output
    words = texts(ElementTree.parse(target).getroot())
    assert "memprof check: 4 runs" in words  # each GPU's check; check-pairs is report's
    for gpu in range(4):
        assert any(w.startswith(f"[{gpu + 1}]") and f": GPU {gpu}: NVIDIA H200" in w for w in words)
    ran = runner.invoke(cli.app, ["plot", str(source), "-o", str(target), "--label", "a"])
    assert ran.exit_code == 2 and "--label: 1 given for 4 runs" in ran.output


def test_runs_are_led_by_their_gpu_only_where_they_are_of_several_gpus():
    from memprof.experiments.pictures import run_label, run_labels

    gpus = [memprof.load(path) for path in CHECKS[:2]]
    assert run_labels(gpus) == [f"GPU {i}: {run_label(r)}" for i, r in enumerate(gpus)]
    one_gpu = [gpus[0], memprof.load(FIXTURES / "h200_check.json")]  # both device 0
    assert run_labels(one_gpu) == [run_label(r) for r in one_gpu]


def test_a_run_is_labelled_by_the_gpu_its_result_names():
    """A measured run by its device facts' GPU, a traced program (no device facts) by the GPU
    its trace recorded, a run that names none as such: never another run's words."""
    import dataclasses

    from memprof.experiments.pictures import run_label

    measured = memprof.load(FIXTURES / "h200_check.json")
    traced = memprof.load(FIXTURES / "h200_trace_pycuda.json")
    assert traced.device is None and measured.device is not None
    assert run_label(measured) == f"{measured.device.name}, {measured.created_at}"
    assert run_label(traced) == f"NVIDIA H200, {traced.created_at}"
    traced.extra = dataclasses.replace(traced.extra, gpu_name="")
    assert run_label(traced) == f"no GPU recorded, {traced.created_at}"
