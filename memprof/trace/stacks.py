"""Where in the user's program each CALL_KINDS call was asked for, and how long it held the
host: CUPTI's callbacks at each call's entry (the Python stack) and exit, by correlation id
(memprof.trace.where joins by it). Only CALL_KINDS calls are enabled, so launches run no
Python. A thread without Python frames is given the main thread's (origin "thread").
"""

from __future__ import annotations

import _thread
import contextlib
import importlib.util
import os
import re
import signal
import site
import sys
import sysconfig
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import CodeType, FrameType
from typing import Any

from memprof.core import api_callbacks
from memprof.core.activity import ApiRecord, callback_name
from memprof.errors import error_words
from memprof.model.lines import CALL_KINDS, Frame, Origin

MAX_STACK_DEPTH = 64
DEFAULT_STACK_DEPTH = 5  # the line and four of its callers

# Calls by the kind of thing they ask for, read from their names (driver cuX and runtime
# cudaX alike, without version suffixes). Graph-building calls (cuGraphAddMemcpyNode) ask
# for nothing yet, and do not match: every pattern is anchored at the call's own name.
_CALL_PATTERNS = (
    ("copy", re.compile(r"^cu(da)?Memcpy")),
    ("memset", re.compile(r"^cu(da)?Memset")),  # not cuMemSetAccess
    ("prefetch", re.compile(r"^cu(da)?Mem(DiscardAnd)?Prefetch")),
    ("alloc", re.compile(r"^cu(da)?(MemAlloc|Malloc|MemHostAlloc|HostAlloc|MemCreate)")),
    ("free", re.compile(r"^cu(da)?(MemFree|Free|MemRelease)")),
    ("register", re.compile(r"^cu(da)?(MemHost|Host)(Un)?[Rr]egister")),
    (
        "wait",
        re.compile(
            r"^cu(da)?(Ctx|Device|Stream|Event|Thread)Synchronize$"
            r"|^cu(da)?(Stream|Ctx|GreenCtx)Wait"
        ),
    ),
)
assert {kind for kind, _ in _CALL_PATTERNS} == set(CALL_KINDS)
_VERSION_SUFFIX = re.compile(r"(_v\d+|_ptsz|_ptds)+$")


def base_name(name: str) -> str:
    """A call's name without CUPTI's version and stream suffixes:
    `cudaMemcpyAsync_v3020` -> `cudaMemcpyAsync`, `cuMemcpyHtoD_v2_ptds` -> `cuMemcpyHtoD`."""
    return _VERSION_SUFFIX.sub("", name)


def call_kind(name: str) -> str | None:
    """What a driver or runtime call asks for (a CALL_KINDS entry), None for anything else."""
    base = base_name(name)
    return next((kind for kind, pattern in _CALL_PATTERNS if pattern.search(base)), None)


def is_work_call(name: str) -> bool:
    """A call that launches work or is of CALL_KINDS: what a trace keeps without --all-calls
    (a training step makes hundreds of cudaGetDevice and the like, which cost it time)."""
    return "Launch" in name or call_kind(name) is not None


# -- which frames are the program's ---------------------------------------------------------

# A frame's verdict. SKIP: no one's line (CUPTI's Python, <frozen runpy>, generated code);
# OWN: memprof's, which makes a call memprof's own where it is the innermost that is not SKIP.
USER, LIBRARY, SKIP, OWN = 0, 1, 2, 3
LIBRARY_PACKAGES = (
    "torch",
    "cupy",
    "cupyx",
    "cupy_backends",
    "numba",
    "numba_cuda",  # NVIDIA's numba-cuda, behind numba.cuda
    "pycuda",
    "cuda",  # NVIDIA's cuda-python (cuda.bindings, cuda.core)
    "numpy",
    "triton",
    "nvidia",
)
SKIPPED_PACKAGES = ("cupti",)  # frames that are never a line of anyone's
_MEMPROF_FOLDER = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def package_folders(name: str) -> list[str]:
    """Where a top-level package lives, found without importing it ([] if not installed)."""
    spec = None
    with contextlib.suppress(ImportError, ValueError):
        spec = importlib.util.find_spec(name)
    if spec is None:
        return []
    if spec.submodule_search_locations:
        return [os.path.realpath(folder) for folder in spec.submodule_search_locations]
    return [os.path.realpath(spec.origin)] if spec.origin else []


def python_library_folders() -> list[str]:
    """The standard library and every site-packages folder this Python reads."""
    paths = sysconfig.get_paths()
    folders = {paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths}
    with contextlib.suppress(Exception):
        folders.update(site.getsitepackages())
    with contextlib.suppress(Exception):
        folders.add(site.getusersitepackages())
    folders.update(p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages"))
    return sorted(os.path.realpath(folder) for folder in folders if folder)


def _under(path: str, folders: Iterable[str]) -> bool:
    return any(path == folder or path.startswith(folder + os.sep) for folder in folders)


@dataclass
class CodeFilter:
    """Which frames are the program's own code: not the standard library, site-packages, the
    libraries named, memprof's or CUPTI's. The program's files win over site-packages (run
    with -m from there), never over the libraries named. Paths are resolved, each once."""

    program_folder: str  # the script's folder, or the working directory for -m
    program: tuple[str, ...] = ()  # the script, or the -m module's package folder
    own: tuple[str, ...] = (_MEMPROF_FOLDER,)  # memprof's
    skipped: tuple[str, ...] = ()  # SKIPPED_PACKAGES' folders
    named: tuple[str, ...] = ()  # LIBRARY_PACKAGES' folders
    libraries: tuple[str, ...] = ()  # the standard library and site-packages
    _real: dict[str, str] = field(default_factory=dict, repr=False)

    @classmethod
    def for_program(cls, script: str | None, module: str | None) -> CodeFilter:
        """The filter of `python SCRIPT` or `python -m MODULE`, with sys.path the program's."""
        if script is not None:
            path = os.path.realpath(script)
            folder, program = os.path.dirname(path), (path,)
        else:
            folder = os.path.realpath(os.getcwd())
            program = tuple(package_folders((module or "").partition(".")[0]))
        skipped = [f for name in SKIPPED_PACKAGES for f in package_folders(name)]
        named = [f for name in LIBRARY_PACKAGES for f in package_folders(name)]
        libraries = tuple(python_library_folders())
        return cls(folder, program, (_MEMPROF_FOLDER,), tuple(skipped), tuple(named), libraries)

    def real(self, filename: str) -> str:
        path = self._real.get(filename)
        if path is None:
            path = self._real[filename] = os.path.realpath(filename)
        return path

    def classify(self, filename: str) -> int:
        """USER, LIBRARY, SKIP or OWN for a frame's file (a code object's co_filename)."""
        if filename.startswith("<"):  # <frozen runpy>, <string> (dataclass methods)
            return SKIP
        path = self.real(filename)
        if _under(path, self.skipped):
            return SKIP
        if _under(path, self.own):
            return OWN
        if _under(path, self.named):
            return LIBRARY
        if path in self.program or _under(path, self.program):
            return USER
        if _under(path, self.libraries):
            return LIBRARY
        return USER

    def display(self, filename: str) -> str:
        """A frame's file as a Result keeps it: relative to the program's folder, a library's
        from its package (`torch/utils/data/...`), else absolute."""
        if filename.startswith("<"):
            return filename
        path = self.real(filename)
        if _under(path, (self.program_folder,)):
            return os.path.relpath(path, self.program_folder).replace(os.sep, "/")
        parents = [os.path.dirname(folder) for folder in self.named] + list(self.libraries)
        for folder in sorted(parents, key=len, reverse=True):
            if _under(path, (folder,)):
                return os.path.relpath(path, folder).replace(os.sep, "/")
        return path


# -- the CUPTI callback ---------------------------------------------------------------------

RawFrame = tuple[CodeType, int]  # (code, line): made into a Frame after the program
RawStack = tuple[Origin, tuple[RawFrame, ...]]


class CallRecorder:
    """Each call's host time (CUPTI's clock at entry and exit) and, for CALL_KINDS calls, the
    program's innermost frames (up to `depth`), by correlation id. Callbacks, not CUPTI's API
    records: those slowed a launch-bound step by a fifth on the H200 (docs/trace.md); launches
    only with `every_call`. What the callback raises is counted (`failures`), never passed on;
    a Ctrl-C landing in it is delivered again where the program runs."""

    def __init__(
        self,
        code_filter: CodeFilter | None,
        depth: int = DEFAULT_STACK_DEPTH,
        runner: CodeType | None = None,
        every_call: bool = False,
    ) -> None:
        self.filter = code_filter
        self.depth = depth if code_filter is not None else 0
        self.runner = runner  # the code that runs the program: no frame below it is its
        self.every_call = every_call
        self.stacks: dict[int, RawStack] = {}
        self.own: set[int] = set()  # calls of memprof's own (its last synchronize)
        # (domain, callback id, correlation id, start, end in CUPTI's ns, thread's system id)
        self.calls: list[tuple[int, int, int, int, int, int]] = []
        self.failures = 0
        self.first_failure = ""
        self._started: dict[tuple[int, int], int] = {}  # (domain, correlation) -> entry's ns
        self._verdicts: dict[str, int] = {}  # by file name: hashing a code object is costly
        self._main = threading.main_thread().ident
        self._cupti: Any = None
        self._direct: api_callbacks.Subscription | None = None  # libcupti's subscriber
        # (domain, cbid) -> (record it, walk its stack), asked by name where CUPTI calls
        # callbacks of calls not picked one by one (every_call, or no callback ids listed)
        self._picked: dict[tuple[int, int], tuple[bool, bool]] | None = None
        self._names: dict[tuple[int, int], str] = {}  # (domain, cbid) -> CUPTI's name

    # -- subscription ---------------------------------------------------------------------

    def start(self, cupti: Any, library: Any = None) -> str | None:
        """Subscribe through libcupti's own functions (a fifth of the cost per call of
        cupti-python's subscriber): None, or why not."""
        domains = cupti.CallbackDomain
        tables = (
            (domains.DRIVER_API, getattr(cupti, "driver_api_trace_cbid", None)),
            (domains.RUNTIME_API, getattr(cupti, "runtime_api_trace_cbid", None)),
        )
        direct = api_callbacks.connect(library)
        if direct is None:
            return "CUPTI's callbacks cannot be reached: this process has no libcupti, or two"
        try:
            direct.subscribe(self._on_raw)
            self._cupti, self._direct = cupti, direct
            self._enable(tables)
        except Exception as error:
            self.stop()  # nothing to stop where the subscription itself was refused
            return f"CUPTI refused its callbacks ({error_words(error)})"
        return None

    def _enable(self, tables: tuple[tuple[Any, Any], ...]) -> None:
        """Enable each CALL_KINDS callback id; with every_call, or where cupti-python lists no
        ids, every call of both domains, picked by name in the callback."""
        assert self._direct is not None
        if self.every_call or any(table is None for _, table in tables):
            self._picked = {}
            for domain, _ in tables:
                self._direct.enable_domain(int(domain))
            return
        enabled, refusal = 0, None
        for domain, table in tables:
            for member in table:
                if call_kind(member.name) is None:
                    continue
                try:  # an id this driver lacks is refused alone
                    self._direct.enable(int(domain), int(member))
                    enabled += 1
                except Exception as error:
                    refusal = error
        if not enabled and refusal is not None:
            raise refusal

    def stop(self) -> None:
        """No more callbacks (before memprof's own driver calls after the program)."""
        if self._direct is not None:
            with contextlib.suppress(Exception):
                self._direct.unsubscribe()
            self._direct = None

    # -- at each call ---------------------------------------------------------------------

    def _on_raw(self, userdata: Any, domain: int, cbid: int, data_address: int) -> None:
        """CUPTI's call through libcupti's subscriber. The exit's clock is read first and the
        entry's last, so the call's time holds none of the callback's own work."""
        try:
            direct = self._direct
            if direct is None:
                return
            if api_callbacks.callback_site(data_address) != api_callbacks.API_ENTER:
                end_ns = direct.timestamp_ns()
                correlation = api_callbacks.correlation_id(data_address)
                start_ns = self._started.pop((domain, correlation), None)
                if start_ns is not None:
                    thread = threading.get_native_id()
                    self.calls.append((domain, cbid, correlation, start_ns, end_ns, thread))
                return
            record, walk = (True, True) if self._picked is None else self._pick(domain, cbid)
            if not record:
                return
            correlation = api_callbacks.correlation_id(data_address)
            walked = correlation in self.stacks or correlation in self.own
            if walk and self.depth and not walked:  # a runtime call's driver call: walked
                stack = self._stack(sys._getframe().f_back)  # None on a thread born in C
                if stack == OWN:
                    self.own.add(correlation)
                elif stack is not None:
                    self.stacks[correlation] = stack
            self._started[domain, correlation] = direct.timestamp_ns()
        except KeyboardInterrupt:
            try:
                deliver_ctrl_c_again()
            except KeyboardInterrupt:  # no exception passes out of a ctypes callback
                interrupt_main_soon()
        except Exception as error:
            self.failures += 1
            self.first_failure = self.first_failure or f"{type(error).__name__}: {error}"

    def _pick(self, domain: int, cbid: int) -> tuple[bool, bool]:
        """(record it, walk its stack) for a call CUPTI calls back though not picked by id."""
        key = (int(domain), int(cbid))
        picked = self._picked.get(key) if self._picked is not None else None
        if picked is None:
            work = call_kind(self._name(*key)) is not None
            picked = self._picked[key] = (self.every_call or work, work)  # type: ignore[index]
        return picked

    def _name(self, domain: int, cbid: int) -> str:
        """CUPTI's name of a call (cuMemcpyHtoDAsync_v2), asked once per call."""
        key = (int(domain), int(cbid))
        if key not in self._names:
            self._names[key] = callback_name(self._cupti, domain, cbid)
        return self._names[key]

    def _stack(self, frame: FrameType | None) -> RawStack | int | None:
        """The call's stack; OWN where memprof made it; None where nothing is known."""
        frames, library = self._walk(frame)
        if frames == OWN:
            return OWN
        if frames:
            return "program", frames
        if library is None and threading.get_ident() != self._main:
            frames, _ = self._walk(sys._current_frames().get(self._main))
            if frames and frames != OWN:
                return "thread", frames
        if library is not None:
            return "library", (library,)
        return None

    def _walk(self, frame: FrameType | None) -> tuple[Any, RawFrame | None]:
        """The program's innermost frames (up to depth) and the innermost library frame; OWN
        where the innermost that is anyone's is memprof's. The walk ends at the runner's frame:
        below it lie memprof's CLI's twenty frames, under a training step's few."""
        verdicts, classify, depth = self._verdicts, self.filter.classify, self.depth
        runner = self.runner
        found: list[RawFrame] = []
        library = None
        anyones = False
        while frame is not None:
            code = frame.f_code
            if code is runner and anyones:  # below: memprof's CLI, no line of the program's
                break
            verdict = verdicts.get(code.co_filename)
            if verdict is None:
                verdict = verdicts[code.co_filename] = classify(code.co_filename)
            if verdict == OWN and not anyones:
                return OWN, None
            anyones = anyones or verdict != SKIP
            if verdict == USER:
                found.append((code, frame.f_lineno or 0))
                if len(found) >= depth:
                    break
            elif verdict == LIBRARY and library is None:
                library = (code, frame.f_lineno or 0)
            frame = frame.f_back
        return tuple(found), library

    # -- after the program ----------------------------------------------------------------

    def recorded(self) -> dict[int, tuple[Origin, tuple[Frame, ...]]]:
        """Every recorded stack, by correlation id, its frames as a Result keeps them."""
        frames: dict[tuple[int, int], Frame] = {}  # by (id(code), line): the codes live on

        def made(raw: RawFrame) -> Frame:
            code, line = raw
            key = (id(code), line)
            if key not in frames:
                name = getattr(code, "co_qualname", code.co_name)
                frames[key] = Frame(self.filter.display(code.co_filename), line, name)
            return frames[key]

        return {
            correlation: (origin, tuple(made(raw) for raw in raw_frames))
            for correlation, (origin, raw_frames) in self.stacks.items()
        }

    def api_records(self) -> list[ApiRecord]:
        """Every call recorded, in the order they returned, named as CUPTI names them."""
        return [
            ApiRecord(
                self._name(domain, cbid), (end_ns - start_ns) / 1e6, correlation, start_ns, thread
            )
            for domain, cbid, correlation, start_ns, end_ns, thread in self.calls
        ]


def deliver_ctrl_c_again() -> None:
    """A Ctrl-C raised inside the callback cannot reach the program from there: memprof's
    entry point delivers it again 5 ms later on SIGALRM; without it, raise it again."""
    from memprof.interrupts import note_press

    note_press()
    handler = signal.getsignal(signal.SIGALRM)
    if callable(handler) and "_handle_ctrl_c" in getattr(handler, "__qualname__", ""):
        signal.setitimer(signal.ITIMER_REAL, 0.005)
        return
    raise KeyboardInterrupt


def interrupt_main_soon() -> None:
    """Ctrl-C for the main thread once it has left the callback, looked at every 5 ms (a fixed
    5 ms timer lost it on a loaded machine, firing before the callback had returned)."""
    main = threading.main_thread().ident

    def deliver() -> None:
        while True:
            time.sleep(0.005)
            if not inside_callback(sys._current_frames().get(main)):
                _thread.interrupt_main()
                return

    threading.Thread(target=deliver, name="memprof-ctrl-c", daemon=True).start()


def inside_callback(frame: FrameType | None) -> bool:
    """Whether `frame` or a caller is CUPTI's callback, where ctypes drops a KeyboardInterrupt."""
    while frame is not None:
        if frame.f_code in _CALLBACK_CODES:
            return True
        frame = frame.f_back
    return False


_CALLBACK_CODES = frozenset(  # a frame of any is inside CUPTI's callback
    (CallRecorder._on_raw.__code__, deliver_ctrl_c_again.__code__, interrupt_main_soon.__code__)
)
