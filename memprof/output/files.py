"""Output files that never cost a run: checked before any GPU work, written atomically.

A destination is refused up front (one line, exit 2) when it cannot be written: a
directory, a missing or read-only directory, a name too long, a read-only file, or an
input of the same command. Regular files are written to a temporary file in the same
directory and renamed over the target, so a crash or a full disk mid-write leaves the
previous file whole. Devices and pipes (/dev/stdout, a FIFO) are written in place.
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


def check_destination(path: Path, option: str) -> None:
    """Raise InvalidArgument unless `path` can be written now; creates nothing that stays."""
    try:
        status = _stat_or_none(path)
    except OSError as error:  # a name too long, a file used as a directory, no permission
        raise InvalidArgument(f"{option} {path}: {_reason(error)}") from error
    if status is not None and stat.S_ISDIR(status.st_mode):
        raise InvalidArgument(f"{option} {path}: is a directory, give a file name")
    if status is not None and not stat.S_ISREG(status.st_mode):
        if not os.access(path, os.W_OK):
            raise InvalidArgument(f"{option} {path}: not writable")
        return  # a device or a pipe: written in place
    parent = path.parent
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
    """Write `text` (UTF-8) to `path`: all of it or, on any failure, nothing changed."""
    status = _stat_or_none(path)
    if status is not None and not stat.S_ISREG(status.st_mode):
        with path.open("w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        return
    mode = stat.S_IMODE(status.st_mode) if status is not None else _default_mode()
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=TEMP_PREFIX, suffix=".tmp")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
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
