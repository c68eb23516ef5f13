"""--json and --csv write the file a name stands for: links followed, hard links kept whole,
a name ending in "/" refused; and `trace` saves the way every command saves."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprof import cli
from memprof.errors import ExitCode, InvalidArgument
from memprof.experiments import load as load_result
from memprof.output import files

FIXTURES = Path(__file__).parent / "fixtures"
PINNED = FIXTURES / "h200_pinned_p20.json"


def invoke(*arguments: object):
    return CliRunner().invoke(cli.app, [str(argument) for argument in arguments])


def leftovers(*folders: Path) -> list[str]:
    return [p.name for folder in folders for p in folder.iterdir() if p.name.startswith(".memprof")]


def test_a_symlink_is_followed_and_stays_a_link(tmp_path):
    data, links = tmp_path / "data", tmp_path / "links"
    data.mkdir(), links.mkdir()
    target = data / "run.json"
    target.write_text("old\n")
    target.chmod(0o640)
    link = links / "run.json"
    link.symlink_to(Path("..") / "data" / "run.json")  # relative, as ln -s makes them
    ran = invoke("report", "-q", PINNED, "--json", link)
    assert ran.exit_code == 0, ran.output
    assert link.is_symlink() and os.readlink(link) == str(Path("..") / "data" / "run.json")
    assert load_result(target) == load_result(PINNED)  # the target holds the new run
    assert target.stat().st_mode & 0o777 == 0o640  # and keeps its permissions
    assert leftovers(data, links) == []


def test_a_chain_of_links_and_a_link_to_a_new_file(tmp_path):
    target = tmp_path / "real.csv"
    (tmp_path / "second").symlink_to(target)
    (tmp_path / "first").symlink_to(tmp_path / "second")
    files.write_text_atomic(tmp_path / "first", "a,b\n")  # the target does not exist yet
    assert target.read_text() == "a,b\n"
    assert (tmp_path / "first").is_symlink() and (tmp_path / "second").is_symlink()


def test_the_temporary_file_is_made_in_the_targets_directory(tmp_path, monkeypatch):
    """Rename works only within one file system: the temporary file sits beside the target."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    target = elsewhere / "run.json"
    target.write_text("old\n")
    (tmp_path / "link.json").symlink_to(target)
    made_in = []
    real_mkstemp = files.tempfile.mkstemp

    def spy(**settings):
        made_in.append(Path(settings["dir"]))
        return real_mkstemp(**settings)

    monkeypatch.setattr(files.tempfile, "mkstemp", spy)
    ran = invoke("report", "-q", PINNED, "--csv", tmp_path / "link.json")
    assert ran.exit_code == 0, ran.output
    assert set(made_in) == {elsewhere}  # the destination check's probe and the save


def test_a_symlink_loop_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    ran = invoke("report", PINNED, "--json", tmp_path / "a")
    assert ran.exit_code == ExitCode.USAGE
    assert "symbolic links" in ran.output and ran.output.count("\n") == 1


def test_a_link_into_a_missing_directory_is_refused(tmp_path):
    (tmp_path / "dangling.json").symlink_to(tmp_path / "gone" / "run.json")
    ran = invoke("report", PINNED, "--json", tmp_path / "dangling.json")
    assert ran.exit_code == ExitCode.USAGE
    assert f"{tmp_path / 'gone'} does not exist" in ran.output


def test_a_link_to_an_input_is_the_input(tmp_path):
    copy = tmp_path / "run.json"
    copy.write_text(PINNED.read_text())
    (tmp_path / "alias.json").symlink_to(copy)
    ran = invoke("report", copy, "--json", tmp_path / "alias.json")
    assert ran.exit_code == ExitCode.USAGE and "would overwrite the input" in ran.output


def test_every_hard_link_sees_the_new_content(tmp_path):
    first = tmp_path / "run.json"
    first.write_text("old " * 10_000)
    second = tmp_path / "backup-of-run.json"
    os.link(first, second)
    inode = first.stat().st_ino
    ran = invoke("report", "-q", PINNED, "--json", first)
    assert ran.exit_code == 0, ran.output
    assert first.stat().st_ino == second.stat().st_ino == inode  # still one file, two names
    assert first.stat().st_nlink == 2
    assert load_result(second) == load_result(PINNED)
    assert second.read_text() == first.read_text()  # shorter than before: truncated
    assert leftovers(tmp_path) == []


def test_a_hard_linked_file_that_cannot_be_written_keeps_its_old_content(tmp_path, monkeypatch):
    first, second = tmp_path / "run.csv", tmp_path / "other.csv"
    first.write_text("the previous run\n")
    os.link(first, second)
    calls = []

    def fails_on_the_target(descriptor):
        calls.append(descriptor)
        if len(calls) == 2:  # the temporary file synced fine; the target's write fails
            raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(files.os, "fsync", fails_on_the_target)
    with pytest.raises(OSError, match="Input/output error"):
        files.write_text_atomic(first, "a new and longer run\n" * 20)
    assert first.read_text() == second.read_text() == "the previous run\n"
    assert leftovers(tmp_path) == []


def test_a_full_disk_fails_before_a_hard_linked_target_is_touched(tmp_path, monkeypatch):
    first = tmp_path / "run.csv"
    first.write_text("the previous run\n")
    os.link(first, tmp_path / "other.csv")

    def disk_full(descriptor):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files.os, "fsync", disk_full)
    ran = invoke("report", PINNED, "--csv", first)
    assert ran.exit_code == ExitCode.SAVE_FAILED
    assert first.read_text() == "the previous run\n"
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("command", [["report", PINNED], ["diff", PINNED, PINNED]])
def test_a_name_ending_in_a_slash_is_refused(tmp_path, command):
    ran = invoke(*command, "--json", f"{tmp_path}/newdir/")
    assert ran.exit_code == ExitCode.USAGE
    assert ran.output == (
        f"memprof: error: --json {tmp_path}/newdir/: names a directory (it ends in /), "
        "give a file name\n"
    )
    assert not (tmp_path / "newdir").exists()


def test_a_name_ending_in_a_slash_is_refused_before_any_gpu_work(tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "pycuda", None)  # the GPU check would exit 3
    ran = invoke("pinned", "--csv", "out/")
    assert ran.exit_code == ExitCode.USAGE and "--csv out/: names a directory" in ran.output
    assert invoke("pinned", "--json", "").exit_code == ExitCode.USAGE


def test_destination_keeps_ordinary_names():
    assert files.destination("runs/a.json", "--json") == files.Destination("runs/a.json")
    assert files.destination("runs/a.json", "--json").path == Path("runs/a.json")
    with pytest.raises(InvalidArgument, match="ends in /"):
        files.destination("runs/", "--csv")
    with pytest.raises(InvalidArgument, match="empty"):
        files.destination("", "--csv")


def test_help_still_names_the_options_as_paths():
    ran = invoke("report", "--help")
    assert "--json" in ran.output and "<path>" in ran.output


def test_json_saved_through_a_link_is_loadable_and_identical(tmp_path):
    target = tmp_path / "real.json"
    (tmp_path / "link.json").symlink_to(target)
    assert invoke("report", "-q", PINNED, "--json", tmp_path / "link.json").exit_code == 0
    assert json.loads(target.read_text())["command"] == "pinned"
