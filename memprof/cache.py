"""Where memprof keeps what it can make again (compiled kernels, this GPU's figures), in
$XDG_CACHE_HOME/memprof. A cache is untrusted input: read only where it is a regular file
(opened without blocking: a FIFO never hangs a run), no larger than its cap, its values
checked by the reader; one that fails is ignored with one warning and made again.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from memprof.output.files import cache_folder

JSON_CACHE_BYTES = 1 << 20  # a figures cache holds a few GPUs' entries: a few KiB
WARNING = "memprof: warning: "
_warned: set[str] = set()


def cache_directory() -> Path | None:
    """memprof's cache folder, or None where there is none (no home: warned once)."""
    folder = cache_folder()
    if folder is None:
        warn_once(
            "no home",
            "no cache: HOME is not set and this user has no home directory, so kernels are "
            "compiled and figures measured on every run (set HOME or XDG_CACHE_HOME)",
        )
    return folder


def read_bytes(path: Path, limit_bytes: int) -> bytes | None:
    """A cache file's bytes, or None: absent (silently), or unusable (one warning)."""
    descriptor = None
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            warn_once(str(path), f"ignored the cache {path}: it is not a regular file")
            return None
        with open(descriptor, "rb", closefd=False) as handle:  # a regular file: it blocks
            data = handle.read(limit_bytes + 1) if status.st_size <= limit_bytes else b""
        if status.st_size > limit_bytes or len(data) > limit_bytes:
            warn_once(str(path), f"ignored the cache {path}: larger than {limit_bytes} bytes")
            return None
        return data
    except FileNotFoundError:
        return None
    except OSError as error:
        warn_once(str(path), f"ignored the cache {path}: {error.strerror or error}")
        return None
    finally:
        if descriptor is not None:
            os.close(descriptor)


def read_json(path: Path, limit_bytes: int = JSON_CACHE_BYTES) -> Any:
    """A JSON cache's value, or None (absent, or unusable: one warning). NaN, Infinity and a
    number too large for a float (1e400) are refused; so is nesting too deep to read."""
    data = read_bytes(path, limit_bytes)
    if data is None:
        return None
    try:
        return json.loads(data.decode("utf-8"), parse_constant=_refuse, parse_float=_finite)
    except (ValueError, RecursionError) as error:  # UnicodeDecodeError is a ValueError
        reason = "nested too deep" if isinstance(error, RecursionError) else f"not JSON: {error}"
        warn_once(str(path), f"ignored the cache {path}: {reason}")
        return None


def _refuse(constant: str) -> float:
    raise ValueError(f"{constant} is not a number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is not a finite number")
    return value


def store(path: Path, data: bytes) -> None:
    """Write `data` to `path` whole or not at all (a temporary file renamed over it), so that
    two memprof processes never read half a file. A cache that cannot be written is skipped."""
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(data)
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise


def warn_once(key: str, message: str) -> None:
    """One line on stderr, once per process for each `key` (a cache file): the run goes on."""
    if key in _warned:
        return
    _warned.add(key)
    from memprof.output.console import print_note

    print_note(WARNING + message, style="yellow")
