"""How memprof.output.files writes and refuses, at the edges a command line seldom reaches: each
refusal's whole line, a closed stdout, a descriptor of a directory, Python's own streams on or
beside a descriptor, a stdout with no descriptor, a full non-blocking pipe, the temporary file's
name, what a failed rename leaves, and where a refused run's records are kept."""

from __future__ import annotations

import errno
import io
import os
import re
from pathlib import Path

import pytest

from memprof.errors import InvalidArgument
from memprof.output import files

# -- refusals -----------------------------------------------------------------------------------


def test_a_closed_stdout_is_refused_for_dash_and_dev_stdout_is_held_to_its_descriptor(
    monkeypatch,
):
    """`--json -` under `>&-` leaves sys.stdout None: refused by name; /dev/stdout is
    written through descriptor 1, which is open here, so sys.stdout does not decide it."""
    monkeypatch.setattr(files.sys, "stdout", None)
    with pytest.raises(InvalidArgument) as refused:
        files.check_output(files.destination("-", "--json"), "--json")
    assert str(refused.value) == "--json -: stdout is closed"
    files.check_output(files.destination("/dev/stdout", "--json"), "--json")


def test_a_descriptor_of_a_directory_is_refused_in_one_line(tmp_path):
    descriptor = os.open(tmp_path, os.O_RDONLY)
    try:
        name = f"/dev/fd/{descriptor}"
        with pytest.raises(InvalidArgument) as refused:
            files.check_output(files.destination(name, "--csv"), "--csv")
    finally:
        os.close(descriptor)
    assert str(refused.value) == f"--csv {name}: descriptor {descriptor} is a directory"


def test_the_cache_folders_refusal_says_why_whole(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    target = tmp_path / "memprof" / "run.json"
    with pytest.raises(InvalidArgument) as refused:
        files.check_destination(target, "--json")
    assert str(refused.value) == (
        f"--json {target}: is in memprof's cache folder {tmp_path / 'memprof'}, which memprof "
        "rewrites and may delete: choose another file"
    )


def test_an_error_without_the_systems_words_is_named_by_its_own(tmp_path, monkeypatch):
    """An OSError raised with a message alone (strerror None) still says what went wrong."""

    def refuse(**settings):
        raise OSError("quota of this folder reached")

    monkeypatch.setattr(files.tempfile, "mkstemp", refuse)
    with pytest.raises(InvalidArgument) as refused:
        files.check_destination(tmp_path / "run.json", "--json")
    assert str(refused.value) == (
        f"--json {tmp_path / 'run.json'}: cannot write in {tmp_path}: quota of this folder reached"
    )


def test_a_name_holding_nul_is_refused_in_one_line():
    """From Python (no shell passes one): refused by name, not a ValueError from os.stat."""
    with pytest.raises(InvalidArgument) as refused:
        files.destination("run\0.json", "--json")
    assert str(refused.value) == "--json 'run\\x00.json': a file name cannot hold a NUL character"


def test_another_process_descriptor_is_refused_naming_the_option():
    name = "/proc/1/fd/1" if os.getpid() != 1 else "/proc/2/fd/1"
    with pytest.raises(InvalidArgument) as refused:
        files.destination(name, "--csv")
    assert str(refused.value) == (
        f"--csv {name}: names a descriptor of another process ({name}): give a file name"
    )


def test_a_missing_folder_is_named_as_it_was_given(tmp_path, monkeypatch):
    """A relative name's folder is said as typed, not resolved to an absolute path."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidArgument) as refused:
        files.check_destination(Path("no/such/x.out"), "--json")
    assert str(refused.value) == "--json no/such/x.out: no/such does not exist"


@pytest.mark.parametrize("mode", [0o444, 0o445, 0o555])
def test_a_file_without_write_bits_is_read_only_even_for_root(tmp_path, mode):
    """Root may write it (os.access says so): its mode alone says the user meant to keep it,
    whatever its execute bits."""
    target = tmp_path / "kept.json"
    target.write_text("mine")
    target.chmod(mode)
    with pytest.raises(InvalidArgument) as refused:
        files.check_destination(target, "--json")
    assert str(refused.value) == f"--json {target}: the file is read-only"


def test_a_device_or_pipe_that_cannot_be_written_is_refused_in_one_line(tmp_path, monkeypatch):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    monkeypatch.setattr(files.os, "access", lambda path, how: False)  # root passes any mode
    with pytest.raises(InvalidArgument) as refused:
        files.check_destination(fifo, "--json")
    assert str(refused.value) == f"--json {fifo}: not writable"


def test_two_outputs_to_one_stream_are_refused_naming_both():
    stdout = {"--json": files.destination("-", "--json")}
    stdout["--csv"] = files.destination("/dev/stdout", "--csv")
    with pytest.raises(InvalidArgument) as refused:
        files.check_distinct(stdout)
    assert str(refused.value) == (
        "--csv /dev/stdout: the --json output goes to the same stream, where the two could "
        "not be told apart: send one to a file"
    )


def test_stdout_as_python_holds_it_is_checked_against_the_inputs(tmp_path, monkeypatch):
    """A caller that pointed sys.stdout at a file (redirect_stdout) and asks for `--json -`
    would write over that file: the one sys.stdout writes to, not descriptor 1's."""
    source = tmp_path / "run.json"
    source.write_text("{}")
    with source.open("a") as redirected:
        monkeypatch.setattr(files.sys, "stdout", redirected)
        with pytest.raises(InvalidArgument, match="would overwrite the input"):
            files.check_distinct({"--json": files.destination("-", "--json")}, [source])


# -- streams ------------------------------------------------------------------------------------


def test_stdout_without_a_descriptor_gets_the_text_as_it_is():
    """A stream of text alone (no descriptor, no buffer, as a test runner's): written as text."""
    stream = io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(files.sys, "stdout", stream)
        files.write_output(files.destination("-", "--json"), "host → device\n")
    assert stream.getvalue() == "host → device\n"


def test_stdout_without_a_descriptor_gets_utf8_bytes_whatever_its_encoding():
    """A text stream over bytes in ASCII: the JSON's arrows still arrive, as UTF-8 bytes
    through its buffer, not refused by (or mangled into) its own encoding."""
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="ascii")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(files.sys, "stdout", stream)
        files.write_output(files.destination("-", "--json"), "host → device\n")
    assert raw.getvalue() == "host → device\n".encode()


class NoDescriptor:
    """A stream object without fileno (AttributeError)."""


class ClosedDescriptor:
    def fileno(self) -> int:
        raise ValueError("I/O operation on closed file")


class LostDescriptor:
    def fileno(self) -> int:
        raise OSError(errno.EBADF, "Bad file descriptor")


@pytest.mark.parametrize("stream", [NoDescriptor(), ClosedDescriptor(), LostDescriptor()])
def test_a_python_stream_without_a_usable_descriptor_does_not_stop_a_write(
    tmp_path, monkeypatch, stream
):
    target = tmp_path / "out.json"
    descriptor = os.open(target, os.O_WRONLY | os.O_CREAT)
    try:
        monkeypatch.setattr(files.sys, "stderr", stream)
        files.write_output(files.destination(f"/dev/fd/{descriptor}", "--json"), "{}\n")
    finally:
        os.close(descriptor)
    assert target.read_text() == "{}\n"


def test_what_python_holds_for_the_same_descriptor_goes_first(tmp_path, monkeypatch):
    """print() to a stream on the descriptor, not yet flushed, comes before the output; a
    stream on another descriptor is left as it is."""
    target, other = tmp_path / "out.txt", tmp_path / "other.txt"
    with target.open("w") as held, other.open("w") as elsewhere:
        monkeypatch.setattr(files.sys, "stdout", held)
        monkeypatch.setattr(files.sys, "stderr", elsewhere)
        held.write("printed first\n")
        elsewhere.write("not flushed by the write\n")
        name = f"/dev/fd/{held.fileno()}"
        files.write_output(files.destination(name, "--json"), "then saved\n")
        assert target.read_text() == "printed first\nthen saved\n"
        assert other.read_text() == ""


@pytest.mark.parametrize("name", ["/dev/fd/{writer}", "-"])
def test_a_full_non_blocking_pipe_is_waited_on_until_it_takes_every_byte(monkeypatch, name):
    """A CI runner's pipe left non-blocking fills at 64 KiB: the write waits until the pipe
    can take more (select on the descriptor, for writing), then goes on, never dropping the rest;
    "-" too, through sys.stdout's descriptor (its buffer would drop what the pipe refused).
    The reader starts only once the writer has had to wait, so the wait is always reached."""
    import fcntl
    import select
    import threading

    reader, writer = os.pipe()
    fcntl.fcntl(writer, fcntl.F_SETFL, fcntl.fcntl(writer, fcntl.F_GETFL) | os.O_NONBLOCK)
    waits, received, full = [], bytearray(), threading.Event()
    real_select = select.select

    def waiting(*lists):
        waits.append(lists)
        full.set()
        return real_select(*lists)

    def read_once_full() -> None:
        full.wait(timeout=30)
        while chunk := os.read(reader, 65536):
            received.extend(chunk)

    monkeypatch.setattr(select, "select", waiting)
    monkeypatch.setattr(files.sys, "stdout", io.TextIOWrapper(io.FileIO(writer, "w", False)))
    thread = threading.Thread(target=read_once_full)
    thread.start()
    text = "x" * (4 * 65536) + "end\n"
    try:
        files.write_output(files.destination(name.format(writer=writer), "--json"), text)
    finally:
        os.close(writer)
        thread.join()
        os.close(reader)
    assert bytes(received) == text.encode()
    assert waits and all(lists == ([], [writer], []) for lists in waits)


# -- files --------------------------------------------------------------------------------------


def test_the_temporary_file_is_hidden_and_named_as_memprofs(tmp_path, monkeypatch):
    """Where a crash leaves it, `ls` hides it and its name says whose it is."""
    renamed = []
    real_replace = files.os.replace

    def spy(source, target):
        renamed.append(Path(source).name)
        real_replace(source, target)

    monkeypatch.setattr(files.os, "replace", spy)
    files.write_text_atomic(tmp_path / "run.json", "{}\n")
    (name,) = renamed
    assert re.fullmatch(r"\.memprof-.+\.tmp", name), name
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]


def test_the_destination_checks_probe_is_named_as_the_saves_temporary_file(tmp_path, monkeypatch):
    removed = []
    real_unlink = files.os.unlink

    def spy(path):
        removed.append(Path(path).name)
        real_unlink(path)

    monkeypatch.setattr(files.os, "unlink", spy)
    files.check_destination(tmp_path / "run.json", "--json")
    (name,) = removed
    assert re.fullmatch(r"\.memprof-.+\.tmp", name), name
    assert list(tmp_path.iterdir()) == []


def rename_fails(source, target):
    raise OSError(errno.EXDEV, "Invalid cross-device link")


def test_a_failed_rename_raises_its_own_error_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    target = tmp_path / "run.json"
    target.write_text("old\n")
    monkeypatch.setattr(files.os, "replace", rename_fails)
    with pytest.raises(OSError) as failed:
        files.write_text_atomic(target, "new\n")
    assert failed.value.errno == errno.EXDEV
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]
    assert target.read_text() == "old\n"


def unlink_fails(path):
    raise OSError(errno.EACCES, "Permission denied")


def test_a_failed_rename_whose_cleanup_fails_too_raises_the_renames_error(tmp_path, monkeypatch):
    """The error the user is told is the one that stopped the save, not the cleanup's."""
    monkeypatch.setattr(files.os, "replace", rename_fails)
    monkeypatch.setattr(files.os, "unlink", unlink_fails)
    with pytest.raises(OSError) as failed:
        files.write_text_atomic(tmp_path / "run.json", "new\n")
    assert failed.value.errno == errno.EXDEV


def test_a_failed_write_whose_cleanup_fails_too_raises_the_writes_error(tmp_path, monkeypatch):
    def disk_full(descriptor):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files.os, "fsync", disk_full)
    monkeypatch.setattr(files.os, "unlink", unlink_fails)
    with pytest.raises(OSError) as failed:
        files.write_text_atomic(tmp_path / "run.json", "new\n")
    assert failed.value.errno == errno.ENOSPC


# -- a refused run's records, kept for a bug report ------------------------------------------------


@pytest.fixture
def temporary_folder(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(files.tempfile, "tempdir", str(folder))
    return folder


def test_records_are_kept_beside_the_file_they_were_meant_for(tmp_path, temporary_folder):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "run.json").write_text("old\n")
    (tmp_path / "link.json").symlink_to(tmp_path / "elsewhere" / "run.json")
    kept = files.write_new_beside(files.Destination(str(tmp_path / "link.json")), ".x.json", "→\n")
    assert kept.parent == tmp_path / "elsewhere"  # where the link's file is
    assert kept.name.startswith("run.json.") and kept.name.endswith(".x.json")
    assert kept.read_text(encoding="utf-8") == "→\n"
    assert (tmp_path / "elsewhere" / "run.json").read_text() == "old\n"  # never over a file
    assert list(temporary_folder.iterdir()) == []


def test_records_meant_for_a_stream_are_kept_in_the_temporary_folder(temporary_folder):
    kept = files.write_new_beside(files.destination("-", "--json"), ".x.json", "{}\n")
    assert kept.parent == temporary_folder and kept.name.startswith("memprof.")
    assert kept.read_text() == "{}\n"


def refusing(where: Path, monkeypatch) -> None:
    """mkstemp refuses to make a file in `where` (a full or read-only folder, even for root)."""
    real_mkstemp = files.tempfile.mkstemp

    def mkstemp(**settings):
        if Path(settings["dir"]) == where:
            raise OSError(errno.ENOSPC, "No space left on device", str(where))
        return real_mkstemp(**settings)

    monkeypatch.setattr(files.tempfile, "mkstemp", mkstemp)


def test_records_go_to_the_temporary_folder_where_the_files_own_refuses(
    tmp_path, temporary_folder, monkeypatch
):
    refusing(tmp_path, monkeypatch)
    kept = files.write_new_beside(files.Destination(str(tmp_path / "run.json")), ".x", "{}\n")
    assert kept.parent == temporary_folder and kept.name.startswith("run.json.")


def test_records_no_folder_takes_raise_the_last_folders_error(
    tmp_path, temporary_folder, monkeypatch
):
    refusing(tmp_path, monkeypatch)
    beside_refused = files.tempfile.mkstemp

    def mkstemp(**settings):
        if Path(settings["dir"]) == temporary_folder:
            raise OSError(errno.EROFS, "Read-only file system", str(temporary_folder))
        return beside_refused(**settings)

    monkeypatch.setattr(files.tempfile, "mkstemp", mkstemp)
    with pytest.raises(OSError) as failed:
        files.write_new_beside(files.Destination(str(tmp_path / "run.json")), ".x", "{}\n")
    assert failed.value.errno == errno.EROFS


class RestoreFails:
    """A file handle whose second write (putting the old content back) fails."""

    def __init__(self, handle) -> None:
        self.handle, self.writes = handle, 0

    def __enter__(self):
        return self

    def __exit__(self, *exception) -> None:
        self.handle.close()

    def write(self, data: bytes) -> int:
        self.writes += 1
        if self.writes == 2:
            raise OSError(errno.EIO, "Input/output error")
        return self.handle.write(data)

    def __getattr__(self, name: str):
        return getattr(self.handle, name)


def test_a_hard_linked_file_whose_restore_fails_too_raises_the_writes_error(tmp_path, monkeypatch):
    """The error that stopped the save is the one the user is told, not the restore's."""
    first, second = tmp_path / "run.csv", tmp_path / "other.csv"
    first.write_text("the previous run\n")
    os.link(first, second)
    syncs = []

    def fails_on_the_target(descriptor):
        syncs.append(descriptor)
        if len(syncs) == 2:  # the temporary file synced fine; the target's write fails
            raise OSError(errno.ENOSPC, "No space left on device")

    real_open = Path.open
    monkeypatch.setattr(files.os, "fsync", fails_on_the_target)
    monkeypatch.setattr(Path, "open", lambda self, *a, **k: RestoreFails(real_open(self, *a, **k)))
    with pytest.raises(OSError) as failed:
        files.write_text_atomic(first, "a new run\n")
    assert failed.value.errno == errno.ENOSPC
