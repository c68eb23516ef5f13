def test_the_files_a_command_reads_are_its_fields_declared_reads_file():
    from pathlib import Path

    from memprof.experiments.check import CheckParams
    from memprof.model.params import input_files

    given = {"reference": "ref.json", "thresholds": None, "power": 20}
    assert input_files(CheckParams, given) == [Path("ref.json")]
    both = {"reference": "ref.json", "thresholds": "floors.json"}
    assert input_files(CheckParams, both) == [Path("ref.json"), Path("floors.json")]
    assert input_files(CheckParams, {"power": 20}) == []
