"""Output files that never cost a run: checked before any GPU work (one line, exit 2), written
atomically (write_bytes_atomic). A stream ("-", /dev/stdout, /dev/fd/N, a link to one) is
written through the descriptor the process holds: renaming over /dev/stdout's file would
replace what `>>` meant to append to.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from memprof.errors import InvalidArgument

TEMP_PREFIX = ".memprof-"


STDOUT = "-"
STREAM_NAMES = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}
# /dev/fd/N, /proc/self/fd/N, /proc/thread-self/fd/N, /proc/PID/fd/N, /proc/PID/task/TID/fd/N
DESCRIPTOR_NAME = re.compile(
    r"/(?:dev|proc/(self|thread-self|[0-9]+)(?:/task/[0-9]+)?)/fd/([0-9]+)"
)
LINK_HOPS = 40  # the kernel's own limit on a chain of symbolic links


@dataclass(frozen=True)
class Destination:
    """Where --json or --csv writes: a file (written atomically), or a stream the process
    already holds ("-", /dev/stdout, /dev/fd/N...: `descriptor` set), written through it."""

    name: str  # as given on the command line
    descriptor: int | None = None

    @property
    def path(self) -> Path:
        return Path(self.name)

    @property
    def is_stdout(self) -> bool:
        """Whether this writes to stdout: "-", or a name of descriptor 1."""
        return self.descriptor == 1

    def __str__(self) -> str:
        return self.name


def destination(text: str, option: str) -> Destination:
    """What an option names: "-" or a name of an open descriptor is that stream; an empty name
    or one ending in "/" is refused (Path() would drop the slash and make a file newdir)."""
    if not text:
        raise InvalidArgument(f"{option}: the file name is empty")
    if "\0" in text:  # from Python: no shell passes one
        raise InvalidArgument(f"{option} {text!r}: a file name cannot hold a NUL character")
    if text == STDOUT:
        return Destination(text, 1)
    if text.endswith(("/", os.sep)):
        raise InvalidArgument(
            f"{option} {text}: names a directory (it ends in /), give a file name"
        )
    return Destination(text, descriptor_named(text, option))


def descriptor_named(text: str, option: str = "") -> int | None:
    """The descriptor of this process a name reaches (through any chain of links), or None.
    Only names are read: a pipe behind /proc/self/fd/1 has no name of its own to follow."""
    path = os.path.abspath(text)
    for _ in range(LINK_HOPS):
        folder, name = os.path.split(path)
        path = os.path.join(os.path.realpath(folder), name)  # /dev/fd -> /proc/PID/fd
        if path in STREAM_NAMES:
            return STREAM_NAMES[path]
        match = DESCRIPTOR_NAME.fullmatch(path)
        if match:
            owner = match.group(1)
            if owner not in (None, "self", "thread-self") and int(owner) != os.getpid():
                raise InvalidArgument(
                    f"{option} {text}: names a descriptor of another process "
                    f"({path}): give a file name"
                )
            return int(match.group(2))
        try:
            if not os.path.islink(path):
                return None
            path = os.path.join(os.path.dirname(path), os.readlink(path))
        except OSError:  # unreadable: the file checks that follow say why
            return None
    return None  # a loop: check_destination reports it


def check_output(target: Destination, option: str) -> None:
    """Raise InvalidArgument unless `target` can be written now (a stream: open to write)."""
    if target.descriptor is None:
        check_destination(target.path, option)
        return
    if target.name == STDOUT and sys.stdout is None:
        raise InvalidArgument(f"{option} -: stdout is closed")  # `>&-`
    descriptor = target.descriptor
    try:
        status = os.fstat(descriptor)
        flags = _status_flags(descriptor)
    except (OSError, OverflowError) as error:  # `memprof ... --json /dev/stdout >&-`
        raise InvalidArgument(f"{option} {target}: descriptor {descriptor} is not open") from error
    if stat.S_ISDIR(status.st_mode):
        raise InvalidArgument(f"{option} {target}: descriptor {descriptor} is a directory")
    if flags is not None and flags & os.O_ACCMODE == os.O_RDONLY:
        raise InvalidArgument(
            f"{option} {target}: descriptor {descriptor} is open for reading only"
        )


def _status_flags(descriptor: int) -> int | None:
    try:
        import fcntl
    except ImportError:  # not a POSIX system: the write says what goes wrong
        return None
    return fcntl.fcntl(descriptor, fcntl.F_GETFL)


def check_destination(path: Path, option: str) -> None:
    """Raise InvalidArgument unless `path` can be written now; creates nothing that stays."""
    try:
        status = _stat_or_none(path)
    except OSError as error:  # a name too long, a file used as a directory, a link loop
        raise InvalidArgument(f"{option} {path}: {_reason(error)}") from error
    target = resolved(path)
    if status is not None and stat.S_ISDIR(status.st_mode):
        raise InvalidArgument(f"{option} {path}: is a directory, give a file name")
    _refuse_cache(path, option)
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


def cache_folder() -> Path | None:
    """$XDG_CACHE_HOME/memprof, else ~/.cache/memprof (memprof.cache), where no output may go;
    None where this user has no home."""
    root = os.environ.get("XDG_CACHE_HOME", "")
    if os.path.isabs(root):  # "relative paths are invalid and should be ignored" (XDG)
        return Path(root) / "memprof"
    try:
        home = os.path.expanduser("~")  # HOME, else the passwd entry
    except (KeyError, OSError, RuntimeError):
        return None
    return Path(home) / ".cache" / "memprof" if os.path.isabs(home) else None  # "~": neither


def _refuse_cache(path: Path, option: str) -> None:
    """No output in memprof's cache folder: it holds the run's inputs, which it may rewrite."""
    folder = cache_folder()
    if folder is None:
        return
    root, real = os.path.realpath(folder), os.path.realpath(path)
    if os.path.commonpath([root, real]) == root:
        raise InvalidArgument(
            f"{option} {path}: is in memprof's cache folder {folder}, which memprof rewrites "
            "and may delete: choose another file"
        )


def check_distinct(
    destinations: dict[str, Destination | None], inputs: Iterable[Path] = ()
) -> None:
    """Refuse to write over an input of the same command, or two outputs to one file or one
    stream (`--json - --csv -`: a reader could not tell where one ends)."""
    seen: dict[tuple, str] = {}
    for path in inputs:
        seen.setdefault(_identity(path), f"input {path}")
    for option, target in destinations.items():
        if target is None:
            continue
        identities = _identities(target)
        clash = next((seen[i] for i in identities if i in seen), None)
        if clash is not None and target.descriptor is not None and not clash.startswith("input"):
            raise InvalidArgument(
                f"{option} {target}: the {clash} goes to the same stream, where the two "
                "could not be told apart: send one to a file"
            )
        if clash is not None:
            raise InvalidArgument(
                f"{option} {target} would overwrite the {clash}: choose another file"
            )
        label = f"{option} file" if target.descriptor is None else f"{option} output"
        seen.update(dict.fromkeys(identities, label))


def check_each_once(paths: Iterable[Path]) -> None:
    """Refuse an input given twice, however spelt (a link, ./x): its runs would be shown,
    exported and counted in a fleet's median twice, as if two GPUs had measured them."""
    seen: dict[tuple, Path] = {}
    for path in paths:
        first = seen.setdefault(_identity(path), path)
        if first is not path:
            again = "twice" if str(first) == str(path) else f"twice (as {first} and {path})"
            raise InvalidArgument(f"{first} is given {again}: give each file once")


def _identities(target: Destination) -> list[tuple]:
    """Every way a destination could meet another: its inode, or descriptor and what it is on."""
    if target.descriptor is None:
        return [_identity(target.path)]
    identities: list[tuple] = [("descriptor", target.descriptor)]
    try:
        descriptor = sys.stdout.fileno() if target.name == STDOUT else target.descriptor
        status = os.fstat(descriptor)
    except (OSError, AttributeError, ValueError):  # a stdout with no descriptor (tests)
        return identities
    if stat.S_ISCHR(status.st_mode):  # a terminal: one beside another is readable
        return identities
    kind = "inode" if stat.S_ISREG(status.st_mode) else "stream"
    return [*identities, (kind, status.st_dev, status.st_ino)]


def write_output(target: Destination, text: str) -> None:
    """Write `text` (UTF-8) where `target` says: a file atomically, a stream through its
    open descriptor (appending where it was opened to append)."""
    if target.descriptor is None:
        write_text_atomic(target.path, text)
    elif target.name == STDOUT:
        _write_stdout(text)
    else:
        _write_descriptor(target.descriptor, text.encode("utf-8"))


def _write_stdout(text: str) -> None:
    """To sys.stdout: through its descriptor, every byte even where it is non-blocking (a CI
    runner's pipe, where a buffered write drops all past 64 KiB); else as bytes to its buffer."""
    stream = sys.stdout
    try:
        descriptor = stream.fileno()
    except (AttributeError, ValueError, OSError):  # an in-memory stream (a test runner's)
        descriptor = None
    if descriptor is not None:
        _write_descriptor(descriptor, text.encode("utf-8"))
        return
    stream.flush()
    buffer = getattr(stream, "buffer", None)
    if buffer is None:
        stream.write(text)
        stream.flush()
        return
    buffer.write(text.encode("utf-8"))
    buffer.flush()


def _write_descriptor(descriptor: int, data: bytes) -> None:
    """Every byte through `descriptor`, after what Python's own streams on it hold."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, ValueError, OSError):
            if stream.fileno() == descriptor:
                stream.flush()
    view = memoryview(data)
    while view:
        try:
            written = os.write(descriptor, view)
        except BlockingIOError:  # a descriptor left non-blocking: wait until it takes more
            import select

            select.select([], [descriptor], [])
            continue
        view = view[written:]


def write_text_atomic(path: Path, text: str) -> None:
    """Write `text` (UTF-8) to the file `path` names: all of it or, on failure, nothing."""
    write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """write_text_atomic for bytes (a PNG picture): a temporary file beside the target (a
    link's), synced and given its mode, renamed over it, so a crash or full disk leaves the
    previous file whole. A device or pipe is written in place; so is a hard-linked file (a
    rename would fork it from its other links), once the whole text proved the space beside
    it, its old content put back on failure."""
    target = resolved(path)
    status = _stat_or_none(target)
    if status is not None and not stat.S_ISREG(status.st_mode):
        with target.open("wb") as handle:
            handle.write(data)
        return
    mode = stat.S_IMODE(status.st_mode) if status is not None else _default_mode()
    descriptor, temporary = tempfile.mkstemp(dir=target.parent, prefix=TEMP_PREFIX, suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        if status is None or status.st_nlink <= 1:
            os.replace(temporary, target)
            return
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    os.unlink(temporary)  # it proved the space is there; the links keep their file
    _write_in_place(target, data)


def resolved(path: Path) -> Path:
    """The file a name stands for: a symbolic link's target (where it would be), or itself."""
    return Path(os.path.realpath(path)) if os.path.islink(path) else path


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


def write_new_beside(target: Destination, suffix: str, text: str) -> Path:
    """Write `text` to a new file named after `target` with `suffix`, beside it (else in the
    temporary folder), never over a file; OSError where neither place takes it."""
    beside = target.descriptor is None
    folder = resolved(target.path).parent if beside else Path(tempfile.gettempdir())
    stem = resolved(target.path).name if beside else "memprof"
    problem = OSError("no folder")
    for where in dict.fromkeys((folder, Path(tempfile.gettempdir()))):
        try:
            descriptor, name = tempfile.mkstemp(prefix=f"{stem}.", suffix=suffix, dir=where)
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                handle.write(text)
        except OSError as error:
            problem = error
            continue
        return Path(name)
    raise problem
