"""Output files that never cost a run: checked before any GPU work, written atomically.

A destination is refused up front (one line, exit 2) when it cannot be written: a
directory (a name ending in "/" included), a missing or read-only directory, a name too
long, a read-only file, or an input of the same command. What is written is the file a
destination names: a symbolic link is followed (to its target, through any chain of links)
and stays a link. Regular files are written to a temporary file in the target's own
directory and renamed over the target, keeping its permissions, so a crash or a full disk
mid-write leaves the previous file whole, as editors save. Devices and pipes (/dev/stdout,
a FIFO) are written in place.

A file with several hard links is written in place instead: a rename would give the name
a new file and leave the other links holding the old one (a silent fork of the data).
In place, every link sees the new content. It is still safe: the whole text is first
written and synced to a temporary file beside it (so a full disk fails there, before the
target is touched), and if writing the target fails anyway its previous content is put back.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

from memprof.errors import InvalidArgument

TEMP_PREFIX = ".memprof-"


def destination(text: str, option: str) -> Path:
    """The Path an option names; a name ending in "/" (a directory) or an empty one refused.

    Path() would drop the slash: `--json newdir/` would then create a file named newdir.
    """
    if not text:
        raise InvalidArgument(f"{option}: the file name is empty")
    if text.endswith(("/", os.sep)):
        raise InvalidArgument(
            f"{option} {text}: names a directory (it ends in /), give a file name"
        )
    return Path(text)


def check_destination(path: Path, option: str) -> None:
    """Raise InvalidArgument unless `path` can be written now; creates nothing that stays."""
    try:
        status = _stat_or_none(path)
    except OSError as error:  # a name too long, a file used as a directory, a link loop
        raise InvalidArgument(f"{option} {path}: {_reason(error)}") from error
    target = resolved(path)
    if status is not None and stat.S_ISDIR(status.st_mode):
        raise InvalidArgument(f"{option} {path}: is a directory, give a file name")
    if status is not None and not stat.S_ISREG(status.st_mode):
        if not os.access(path, os.W_OK):
            raise InvalidArgument(f"{option} {path}: not writable")
        return  # a device or a pipe: written in place
    parent = target.parent
    if not parent.is_dir():
        raise InvalidArgument(f"{option} {path}: {parent} does not exist")
    read_only = status is not None and not status.st_mode & 0o222  # even for root
    if status is not None and (read_only or not os.access(path, os.W_OK)):
        raise InvalidArgument(f"{option} {path}: the file is read-only")
    try:  # the only sure test: create (and remove) the temporary file the save will need
        descriptor, probe = tempfile.mkstemp(dir=parent, prefix=TEMP_PREFIX, suffix=".tmp")
        os.close(descriptor)
        os.unlink(probe)
    except OSError as error:
        raise InvalidArgument(
            f"{option} {path}: cannot write in {parent}: {_reason(error)}"
        ) from error


def check_distinct(destinations: dict[str, Path | None], inputs: Iterable[Path] = ()) -> None:
    """Refuse to write over an input of the same command, or to write two outputs to one file."""
    seen: dict[tuple, str] = {}
    for path in inputs:
        seen.setdefault(_identity(path), f"input {path}")
    for option, path in destinations.items():
        if path is None:
            continue
        identity = _identity(path)
        if identity in seen:
            raise InvalidArgument(
                f"{option} {path} would overwrite the {seen[identity]}: choose another file"
            )
        seen[identity] = f"{option} file"


def write_text_atomic(path: Path, text: str) -> None:
    """Write `text` (UTF-8) to the file `path` names: all of it or, on any failure, nothing
    changed. A link is followed; a hard-linked file is written in place (module docstring)."""
    write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """write_text_atomic for bytes (a PNG picture)."""
    target = resolved(path)
    status = _stat_or_none(target)
    if status is not None and not stat.S_ISREG(status.st_mode):
        with target.open("wb") as handle:
            handle.write(data)
        return
    mode = stat.S_IMODE(status.st_mode) if status is not None else _default_mode()
    temporary = _written_beside(target, data, mode)
    if status is not None and status.st_nlink > 1:
        os.unlink(temporary)  # it proved the space is there; the links keep their file
        _write_in_place(target, data)
        return
    try:
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def resolved(path: Path) -> Path:
    """The file a name stands for: a symbolic link's target (through any chain of links),
    or the name itself. A link to nowhere resolves to where its target would be."""
    return Path(os.path.realpath(path)) if os.path.islink(path) else path


def _written_beside(target: Path, data: bytes, mode: int) -> str:
    """A temporary file in the target's directory holding `data`, synced, with `mode`."""
    descriptor, temporary = tempfile.mkstemp(dir=target.parent, prefix=TEMP_PREFIX, suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return temporary


def _write_in_place(target: Path, data: bytes) -> None:
    """Overwrite a file's content through its own inode; its old content back on failure."""
    with target.open("r+b") as handle:
        previous = handle.read()
        try:
            handle.seek(0)
            handle.write(data)
            handle.truncate()
            handle.flush()
            os.fsync(handle.fileno())
        except BaseException:
            with contextlib.suppress(OSError):
                handle.seek(0)
                handle.write(previous)
                handle.truncate()
                handle.flush()
            raise


def describe_os_error(error: OSError) -> str:
    """An OSError as a short phrase: "No space left on device"."""
    return _reason(error)


def _stat_or_none(path: Path) -> os.stat_result | None:
    try:
        return os.stat(path)
    except FileNotFoundError:
        return None


def _identity(path: Path) -> tuple:
    """The same file, however it is spelt (relative, symlinked, hard-linked)."""
    try:
        status = os.stat(path)
        return ("inode", status.st_dev, status.st_ino)
    except OSError:
        return ("path", os.path.realpath(path))


def _default_mode() -> int:
    """The permissions open() would give a new file: 0o666 less the umask."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _reason(error: OSError) -> str:
    return error.strerror or str(error)
