"""`memprof check --thresholds FILE`: a JSON file of floors per GPU model, validated before the
GPU is opened, matched to the GPU by its name, kept in the Result and judged again by
`memprof report`. Figures are recorded ones (tests/check_results.py)."""

from __future__ import annotations

import dataclasses
import json
import re
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from memprof.cli import app
from memprof.errors import InvalidArgument
from memprof.experiments import check, check_thresholds, load
from memprof.experiments.base import RunContext, declared_keys
from memprof.experiments.check import CheckGpu, CheckInputs, CheckParams, figure, lines
from memprof.experiments.check_thresholds import (
    MAX_FILE_BYTES,
    CheckThresholds,
    matches,
    read_thresholds,
    thresholds_for,
)
from memprof.model.ceilings import hbm_ceiling, pcie_ceiling
from tests.check_results import check_result, slower
from tests.fakegpu import FakeSession
from tests.test_gpu_state import healthy

runner = CliRunner()
EXAMPLE = check.Path(__file__).parent.parent / "examples" / "check_thresholds.json"
WHAT = {
    "h2d": "Pinned host → device",
    "d2h": "Pinned device → host",
    "at_once": "Both directions at once",
    "d2d": "Device copy (read + write)",
}


@pytest.fixture(autouse=True)
def no_shipped_references(tmp_path, monkeypatch):
    folder = tmp_path / "references"
    folder.mkdir()
    monkeypatch.setattr(check, "REFERENCE_FOLDER", folder)
    check._references.cache_clear()
    yield
    check._references.cache_clear()


def written(tmp_path, content, name: str = "gates.json") -> str:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


def judged_by(file: str, gpu: str = "NVIDIA H200", **floors: int) -> check.Result:
    """The recorded check, its floors set by `file`'s entry for `gpu`."""
    result = check_result()
    result.gpu_states = [healthy()]
    models = {gpu: {f"{line}_floor_pct": pct for line, pct in floors.items()}} if floors else {}
    kept = thresholds_for(file, models, result.device.name)
    return keeping(result, kept)


def keeping(result, kept: CheckThresholds | None):
    """`result` as a run with --thresholds (kept.file) that decided `kept` keeps it."""
    file = kept.file if kept else None
    result.parameters = dataclasses.replace(result.parameters, thresholds=file)
    result.extra = dataclasses.replace(result.extra, thresholds=kept)
    return result


def found(result) -> dict[str, check.Line]:
    return {line.what: line for line in lines(result, None)}


def share_pct(result, line: str) -> float:
    """The line's figure in percent of what its floor is a share of."""
    if line == "at_once":
        return 100 * min(figure(result, f"{o}_at_once") / figure(result, o) for o in ("h2d", "d2h"))
    ceiling = hbm_ceiling(result.device) if line == "d2d" else pcie_ceiling(result)
    return 100 * figure(result, line) / ceiling.gb_per_s


# -- the file, validated whole before the GPU is opened -------------------------------------------


def test_a_file_reads_as_its_models_floors(tmp_path):
    path = written(tmp_path, {"NVIDIA H200": {"h2d_floor_pct": 87, "d2d_floor_pct": 85}})
    assert read_thresholds(path) == {"NVIDIA H200": {"h2d_floor_pct": 87, "d2d_floor_pct": 85}}
    assert read_thresholds(None) is None


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("{not json", "is not JSON: Expecting property name"),
        (b"\xff\xfe{}", "is not UTF-8 text"),
        ("[]", "holds no GPU model"),
        ("{}", "holds no GPU model"),
        ({"NVIDIA H200": 85}, '"NVIDIA H200" is not an object of floors (h2d_floor_pct, '),
        ({"NVIDIA H200": {}}, '"NVIDIA H200" is not an object of floors'),
        ({"NVIDIA H200": {"h2d": 85}}, '"NVIDIA H200" has "h2d": the floors are h2d_floor_pct,'),
        ({"NVIDIA H200": {"h2d_floor_pct": 0}}, "h2d_floor_pct is 0: a whole percentage"),
        ({"NVIDIA H200": {"h2d_floor_pct": 1}}, None),
        ({"NVIDIA H200": {"d2d_floor_pct": 100}}, None),
        ({"NVIDIA H200": {"d2d_floor_pct": 101}}, "d2d_floor_pct is 101: a whole percentage"),
        ({"NVIDIA H200": {"d2h_floor_pct": 85.5}}, "d2h_floor_pct is 85.5: a whole"),
        ({"NVIDIA H200": {"d2h_floor_pct": True}}, "d2h_floor_pct is true: a whole"),
        ({"NVIDIA H200": {"d2h_floor_pct": "85"}}, 'd2h_floor_pct is "85": a whole'),
        ({"NVIDIA H200": {"at_once_floor_pct": None}}, "at_once_floor_pct is null: a whole"),
        ('{"NVIDIA H200": {"d2d_floor_pct": 80, "d2d_floor_pct": 90}}', '"d2d_floor_pct" twice'),
        ('{"A": {"d2d_floor_pct": 80}, "A": {"d2d_floor_pct": 90}}', 'names "A" twice'),
        (
            {"NVIDIA H200": {"d2d_floor_pct": 80}, "nvidia h200": {"d2d_floor_pct": 90}},
            '"nvidia h200" and "NVIDIA H200" name the same GPU model',
        ),
        ({"NVIDIA\nH200": {"h2d": 1}}, '"NVIDIA\\nH200" has "h2d"'),  # printed as spelt
    ],
)
def test_every_bad_key_or_value_is_refused_in_one_line_naming_the_file(tmp_path, content, why):
    path = written(tmp_path, content)
    if why is None:
        assert read_thresholds(path)
        return
    with pytest.raises(InvalidArgument) as refused:
        read_thresholds(path)
    message = str(refused.value)
    assert message.startswith(f"--thresholds {path}: ") and why in message
    assert "\n" not in message


def test_a_missing_or_oversized_file_is_refused(tmp_path):
    with pytest.raises(InvalidArgument, match="cannot be read"):
        read_thresholds(str(tmp_path / "absent.json"))
    with pytest.raises(InvalidArgument, match="cannot be read"):
        read_thresholds(str(tmp_path))  # a folder
    at_limit = '{"A": {"h2d_floor_pct": 85}}'.ljust(MAX_FILE_BYTES)
    assert read_thresholds(written(tmp_path, at_limit))
    with pytest.raises(InvalidArgument, match=f"is over {MAX_FILE_BYTES} bytes"):
        read_thresholds(written(tmp_path, at_limit + " "))


def test_the_command_refuses_a_bad_file_before_any_gpu_work(tmp_path):
    path = written(tmp_path, {"NVIDIA H200": {"h2d_floor_pct": 185}})
    ran = runner.invoke(app, ["check", "--thresholds", path], env={"COLUMNS": "200"})
    assert ran.exit_code == 2
    assert f"--thresholds {path}: " in ran.output and "h2d_floor_pct is 185" in ran.output
    ran = runner.invoke(app, ["check", "--thresholds", path, "--json", path])
    assert ran.exit_code == 2 and "would overwrite the input" in ran.output


def test_the_example_file_is_a_valid_one():
    assert "NVIDIA H200" in read_thresholds(str(EXAMPLE))


# -- matching a GPU model -------------------------------------------------------------------------


def test_a_model_matches_the_drivers_whole_name_in_any_case():
    assert matches("NVIDIA H200", "NVIDIA H200")
    assert matches("nvidia h200", "NVIDIA H200")
    assert not matches("NVIDIA H200", "NVIDIA H200 NVL")
    assert not matches("NVIDIA H200 NVL", "NVIDIA H200")
    assert not matches("H200", "NVIDIA H200")
    models = {"NVIDIA H200 NVL": {"h2d_floor_pct": 70}, "nvidia h200": {"d2d_floor_pct": 90}}
    kept = thresholds_for("g.json", models, "NVIDIA H200")
    assert kept == CheckThresholds("g.json", "nvidia h200", d2d_floor_pct=90)
    assert thresholds_for("g.json", models, "NVIDIA H100 80GB HBM3") == CheckThresholds("g.json")
    assert thresholds_for(None, None, "NVIDIA H200") is None


# -- the verdicts, by the file's floors -----------------------------------------------------------


@pytest.mark.parametrize("line", ["h2d", "d2h", "at_once", "d2d"])
def test_each_line_passes_at_the_files_floor_warns_above_and_fails_under_90_percent(line):
    share = share_pct(check_result(), line)  # 88.1% of the link, 89.1% of HBM, 91-93% at once
    at, above, failing = int(share), int(share) + 1, int(share / 0.9) + 1
    assert found(judged_by("gates.json", **{line: at}))[WHAT[line]].verdict == "PASS"
    assert found(judged_by("gates.json", **{line: above}))[WHAT[line]].verdict == "WARN"
    assert found(judged_by("gates.json", **{line: failing - 1}))[WHAT[line]].verdict == "WARN"
    assert found(judged_by("gates.json", **{line: failing}))[WHAT[line]].verdict == "FAIL"


def test_the_file_overrides_the_runs_floor_for_the_lines_it_sets_only():
    result = judged_by("gates.json", h2d=95)  # 88.1% of the link
    result.parameters = dataclasses.replace(result.parameters, h2d_floor_pct=50, d2h_floor_pct=95)
    shown = found(result)
    assert shown[WHAT["h2d"]].verdict == "WARN"  # the file's 95, not the run's 50
    assert shown[WHAT["d2h"]].verdict == "WARN"  # the run's own 95: the file leaves it
    assert shown[WHAT["d2d"]].verdict == "PASS"


def test_each_line_says_which_floors_judged_it():
    result = judged_by("ci/gates.json", h2d=87, at_once=90)
    shown = found(result)
    assert shown[WHAT["h2d"]].expected == ">= 54.8 GB/s (gates.json: 87% of PCIe's 63.0)"
    assert shown[WHAT["d2h"]].expected == ">= 53.6 GB/s (85% of PCIe's 63.0)"
    assert shown[WHAT["at_once"]].expected == "each >= 90% of its rate alone (gates.json)"
    notes = check.summarize(result).tables[0].notes
    assert (
        'Thresholds: ci/gates.json (--thresholds), its entry "NVIDIA H200": h2d_floor_pct 87, '
        "at_once_floor_pct 90; the lines marked with the file's name are judged by it, the "
        "others by the run's own floors."
    ) in notes


def test_a_gpu_the_file_does_not_name_is_judged_by_the_runs_floors_and_says_so():
    result = judged_by("gates.json", gpu="NVIDIA H100 80GB HBM3", h2d=95)
    assert result.extra.thresholds == CheckThresholds("gates.json")
    shown = found(result)
    assert shown[WHAT["h2d"]].verdict == "PASS"  # 88.1% against the built-in 85
    assert "gates.json" not in shown[WHAT["h2d"]].expected
    summary = check.summarize(result)
    assert summary.header == [
        "Thresholds: gates.json (--thresholds) has no entry for NVIDIA H200: the run's own "
        "floors judged every line."
    ]  # a warning above the table, not an error
    assert not any("Thresholds" in note for note in summary.tables[0].notes)
    assert check.summarize(judged_by("gates.json", h2d=95)).header == []


# -- kept in the Result, judged again by report ---------------------------------------------------


def test_a_saved_run_is_judged_by_its_kept_floors_wherever_it_is_read(tmp_path):
    result = judged_by(written(tmp_path, "{}"), h2d=95)
    (tmp_path / "gates.json").unlink()  # the file is gone: the Result holds what judged it
    path = tmp_path / "check.json"
    path.write_text(result.to_json())
    assert load(path).extra.thresholds == result.extra.thresholds
    shown = runner.invoke(app, ["report", str(path)], env={"COLUMNS": "200"})
    assert shown.exit_code == 0
    assert "WARN     Pinned host → device" in shown.stdout
    assert "(gates.json: 95% of PCIe's 63.0)" in shown.stdout


@pytest.mark.parametrize(
    ("kept", "why"),
    [
        (
            CheckThresholds("g.json", "NVIDIA H100 80GB HBM3", h2d_floor_pct=90),
            re.escape(
                ".model is 'NVIDIA H100 80GB HBM3', but the run measured 'NVIDIA H200': the "
                "entry kept is the GPU's own"
            )
            + "$",
        ),
        (
            CheckThresholds("g.json", "NVIDIA H200"),
            re.escape(" keeps the entry 'NVIDIA H200' but no floor it set") + "$",
        ),
        (
            CheckThresholds("g.json", None, d2d_floor_pct=90),
            " keeps floors but no entry that set them$",
        ),
        (CheckThresholds("g.json", "NVIDIA H200", h2d_floor_pct=101), "h2d_floor_pct"),
        (CheckThresholds("g.json", "NVIDIA H200", d2d_floor_pct=0), "d2d_floor_pct"),
        (
            CheckThresholds("", "NVIDIA H200", d2d_floor_pct=90),
            r"\.file is empty: the file the floors came from is named$",
        ),
    ],
)
def test_the_loader_refuses_kept_floors_that_could_not_have_judged_the_run(tmp_path, kept, why):
    result = keeping(check_result(), kept)
    path = tmp_path / "check.json"
    path.write_text(result.to_json())
    with pytest.raises(InvalidArgument, match=f"check.json: extra.thresholds.*{why}"):
        load(path)
    if why.endswith("$"):  # the line whole: the field it refuses, then why
        with pytest.raises(
            InvalidArgument, match=f"^{re.escape(str(path))}: extra.thresholds{why}"
        ):
            load(path)


def test_the_loader_refuses_floors_kept_of_another_file_or_none_kept_of_one(tmp_path):
    result = keeping(check_result(), CheckThresholds("g.json", "NVIDIA H200", h2d_floor_pct=90))
    result.parameters = dataclasses.replace(result.parameters, thresholds="other.json")
    path = tmp_path / "check.json"
    path.write_text(result.to_json())
    whole = (
        f"{path}: extra.thresholds is the floors of 'g.json', but parameters.thresholds is "
        "'other.json': a run keeps what its --thresholds decided"
    )
    with pytest.raises(InvalidArgument, match=f"^{re.escape(whole)}$"):
        load(path)
    result = keeping(check_result(), None)
    result.parameters = dataclasses.replace(result.parameters, thresholds="g.json")
    path.write_text(result.to_json())
    with pytest.raises(
        InvalidArgument, match=re.escape("is absent, but parameters.thresholds is 'g.json'")
    ):
        load(path)


@pytest.mark.parametrize(
    "kept",
    [
        CheckThresholds("g.json", "nvidia h200", h2d_floor_pct=1, d2d_floor_pct=100),
        CheckThresholds("g.json"),
    ],
)
def test_the_loader_keeps_floors_that_could_have(tmp_path, kept):
    result = keeping(check_result(), kept)
    path = tmp_path / "check.json"
    path.write_text(result.to_json())
    assert load(path).extra.thresholds == kept


# -- the run keeps the GPU's entry, and its retries are judged by it ------------------------------


def test_a_run_keeps_its_gpus_entry_and_decides_retries_by_it(monkeypatch):
    judged_with = []

    def latest(result, reference, line):
        judged_with.append(result.extra.thresholds)
        return "PASS"

    monkeypatch.setattr(check, "_latest", latest)
    models = {"NVIDIA H200": {"d2d_floor_pct": 90}}
    session = FakeSession({}, declared_keys(CheckGpu))
    facts = SimpleNamespace(name="NVIDIA H200", attributes={})
    params = CheckParams(power=10, device_power=10, repeat=2, retries=1, thresholds="g.json")
    ctx = RunContext(
        params, lambda *step: None, session=session, facts={0: facts},
        inputs=CheckInputs(thresholds=models),
    )  # fmt: skip
    extra = CheckGpu().run(ctx)
    session.close()
    assert extra.thresholds == CheckThresholds("g.json", "NVIDIA H200", d2d_floor_pct=90)
    assert judged_with and set(judged_with) == {extra.thresholds}


@pytest.mark.parametrize("name", ["h200_check", "h100_check"])
def test_the_example_passes_the_recorded_checks_as_docs_check_md_says(name):
    """The example's floors sit under what the recorded checks measured: every line PASSes,
    each judged by the file (docs/check.md quotes the H200's host → device line)."""
    result = load(check.Path(__file__).parent / "fixtures" / f"{name}.json")
    kept = thresholds_for(EXAMPLE.name, read_thresholds(str(EXAMPLE)), result.device.name)
    shown = found(keeping(result, kept))
    assert [shown[what].verdict for what in WHAT.values()] == ["PASS"] * 4
    assert all(EXAMPLE.name in shown[what].expected for what in WHAT.values())
    docs = (EXAMPLE.parent.parent / "docs" / "check.md").read_text()
    if name == "h200_check":
        assert f"`{shown[WHAT['h2d']].expected}`" in " ".join(docs.split())


def test_the_picture_judges_each_line_as_the_table_does(tmp_path):
    """`memprof plot` of a check: each line's verdict and expectation are the table's, by the
    floors and the --reference the run kept (it judged by the shipped reference, or none)."""
    from memprof.experiments import summarize
    from memprof.experiments.check import read_reference, reference_figures
    from memprof.experiments.pictures import picture

    known_good = check_result()
    known_good.gpu_states = [healthy()]
    mine = tmp_path / "mine.json"
    mine.write_text(slower(known_good, "d2d", 4800.0).to_json())  # this run's: under 90% of it
    result = judged_by("gates.json", h2d=95)  # WARN by the file's floor
    reference = reference_figures(str(mine), read_reference(str(mine)), result.device)
    result.parameters = dataclasses.replace(result.parameters, reference=str(mine))
    result.extra = dataclasses.replace(result.extra, reference=reference)
    table = summarize(result).tables[0]
    words = " ".join(line.strip() for line in picture(result, summarize(result)).panels[0].lines)
    assert [row[0] for row in table.rows][1:5] == ["WARN", "PASS", "PASS", "WARN"]
    for verdict, what, measured, expected in table.rows:
        said = f"{verdict:<4}  {what}: {measured} (expected {expected})"
        assert " ".join(said.split()) in " ".join(words.split())


# -- the refusals' whole words (mutation testing: a word added or lost is a changed message) ------


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b"\xff{}", "is not UTF-8 text"),
        ("[]", 'holds no GPU model: write {"NVIDIA H200": {"h2d_floor_pct": 85}}'),
        (
            {"NVIDIA H200": {"d2h_floor_pct": 0}},
            '"NVIDIA H200" d2h_floor_pct is 0: a whole percentage of its ceiling, 1 to 100',
        ),
        (
            {"A": []},
            '"A" is not an object of floors '
            "(h2d_floor_pct, d2h_floor_pct, at_once_floor_pct, d2d_floor_pct)",
        ),
    ],
)
def test_a_refusal_is_the_file_and_its_whole_reason(tmp_path, content, said):
    path = written(tmp_path, content)
    with pytest.raises(InvalidArgument) as refused:
        read_thresholds(path)
    assert str(refused.value) == f"--thresholds {path}: {said}"


def test_an_unreadable_file_is_refused_with_the_systems_reason_alone(tmp_path):
    path = str(tmp_path / "absent.json")
    with pytest.raises(InvalidArgument) as refused:
        read_thresholds(path)
    assert str(refused.value) == f"--thresholds {path}: cannot be read (No such file or directory)"


def test_a_model_named_beyond_ascii_is_printed_as_written():
    """A name stays as written ("ä", where json by default prints "\\u00e4")."""
    kept = thresholds_for("g.json", {"NVIDIA Hä": {"h2d_floor_pct": 90}}, "nvidia hä")
    assert kept == CheckThresholds("g.json", "NVIDIA Hä", h2d_floor_pct=90)
    assert 'its entry "NVIDIA Hä": h2d_floor_pct 90;' in check_thresholds.note(kept, "nvidia hä")


def test_without_a_file_or_its_floors_nothing_is_kept():
    assert thresholds_for("g.json", None, "NVIDIA H200") is None
    assert thresholds_for(None, {"NVIDIA H200": {"h2d_floor_pct": 90}}, "NVIDIA H200") is None


def test_an_endless_file_is_read_no_further_than_its_limit(monkeypatch):
    """--thresholds /dev/zero (or a pipe) is refused after MAX_FILE_BYTES + 1 bytes, not read
    whole into memory."""

    class Endless:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def read(self, size=-1):
            assert size is not None and size >= 0, "read an endless file whole"
            return b" " * size

    monkeypatch.setattr(check_thresholds, "open", lambda path, mode: Endless(), raising=False)
    with pytest.raises(InvalidArgument, match=f"is over {MAX_FILE_BYTES} bytes"):
        read_thresholds("/dev/zero")
