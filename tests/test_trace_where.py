"""Where a traced program made its calls, without a GPU: which calls are recorded, which frames
are the program's, the CUPTI callback that takes the stacks (tests/fake_cupti.py calls it as
CUPTI does), and the join of stacks with CUPTI's records by correlation id.

Programs are small files written here; their frames are the program's, the fake library's
(tests/fake_cupti.py) a library's, as torch's would be.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
import time
from pathlib import Path

import pytest

from memprof.core.activity import ApiRecord, GpuRecord
from memprof.model.lines import Frame
from memprof.model.timeline import NO_LINE, TIMELINE_VERSION, Timeline
from memprof.trace import stacks as stacks_module
from memprof.trace.stacks import (
    LIBRARY,
    OWN,
    SKIP,
    USER,
    CallRecorder,
    CodeFilter,
    base_name,
    call_kind,
    is_work_call,
)
from memprof.trace.timeline import timeline_of
from memprof.trace.where import source_lines
from tests import fake_cupti
from tests.fake_cupti import CBID, FakeCupti
from tests.fake_library import FakeLibrary

TESTS = str(Path(__file__).resolve().parent)
DRIVER = str(Path(fake_cupti.__file__).resolve())  # stands for CUPTI and the driver: C, no frames
MiB = 1 << 20


# -- which calls are recorded ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("cuMemcpyHtoD_v2", "copy"),
        ("cudaMemcpyAsync_v3020", "copy"),
        ("cudaMemcpy2DAsync_ptsz_v7000", "copy"),
        ("cuMemcpyBatchAsync_v2_ptsz", "copy"),
        ("cuMemsetD8_v2_ptds", "memset"),
        ("cudaMemsetAsync_v3020", "memset"),
        ("cuMemAlloc_v2", "alloc"),
        ("cudaMallocHost_v3020", "alloc"),
        ("cuMemHostAlloc", "alloc"),
        ("cudaHostAlloc_v3020", "alloc"),
        ("cuMemAllocManaged", "alloc"),
        ("cuMemCreate", "alloc"),
        ("cudaMallocAsync_v11020", "alloc"),
        ("cuMemFree_v2", "free"),
        ("cudaFreeHost_v3020", "free"),
        ("cudaFreeAsync_v11020", "free"),
        ("cuMemRelease", "free"),
        ("cuMemHostRegister_v2", "register"),
        ("cudaHostUnregister_v4000", "register"),
        ("cuMemPrefetchAsync_v2", "prefetch"),
        ("cudaMemPrefetchAsync_v2_ptsz_v12020", "prefetch"),
        ("cuMemDiscardAndPrefetchBatchAsync", "prefetch"),
        ("cuCtxSynchronize", "wait"),
        ("cudaDeviceSynchronize_v3020", "wait"),
        ("cudaStreamSynchronize_ptsz_v7000", "wait"),
        ("cuEventSynchronize", "wait"),
        ("cudaStreamWaitEvent_v3020", "wait"),
        ("cuStreamWaitValue32_v2", "wait"),
        ("cuLaunchKernel", None),
        ("cudaLaunchKernel_v7000", None),
        ("cudaEventQuery_v3020", None),
        ("cudaEventRecordWithFlags_v11010", None),
        ("cudaGetDevice_v3020", None),
        ("cudaStreamIsCapturing_v10000", None),
        ("cuMemGetInfo_v2", None),
        ("cuMemSetAccess", None),  # not a memset
        ("cudaMemSetMemPool_v13000", None),
        ("cuGraphAddMemcpyNode", None),  # builds a graph; copies nothing yet
        ("cudaGraphAddMemsetNode_v10000", None),
        ("cuMemHostGetDevicePointer_v2", None),
        ("cuMemAddressReserve", None),
        ("_runtime_api_trace_cbid__cudaRegisterFatBinary_v13000", None),
        ("cuStreamQuery", None),
    ],
)
def test_calls_are_recorded_by_what_they_ask_for(name, kind):
    assert call_kind(name) == kind


@pytest.mark.parametrize(
    ("name", "recorded"),
    [
        ("cuLaunchKernel", True),
        ("cudaLaunchKernel_v7000", True),
        ("_runtime_api_trace_cbid__cudaLaunchKernel_v13000", True),
        ("cudaGraphLaunch_v10000", True),
        ("cuMemcpyHtoDAsync_v2", True),
        ("cudaStreamSynchronize_v3020", True),
        ("cuMemFree_v2", True),
        ("cudaGetDevice_v3020", False),
        ("cuCtxGetCurrent", False),
        ("cudaEventRecord_v3020", False),
        ("cudaStreamIsCapturing_v10000", False),
        ("cuGraphAddMemcpyNode", False),
        ("cuGetProcAddress_v2", False),
    ],
)
def test_a_trace_keeps_the_calls_that_launch_or_ask_for_work(name, recorded):
    assert is_work_call(name) is recorded


def test_version_suffixes_go_and_the_name_stays():
    assert base_name("cudaMemPrefetchAsync_v2_ptsz_v12020") == "cudaMemPrefetchAsync"
    assert base_name("cuMemcpyHtoD_v2_ptds") == "cuMemcpyHtoD"
    assert base_name("cuStreamWaitValue32_v2") == "cuStreamWaitValue32"
    assert base_name("cuInit") == "cuInit"


# -- which frames are the program's -----------------------------------------------------------


@pytest.fixture
def folders(tmp_path):
    """A program folder, a site-packages, a standard library, a PyTorch outside both, and
    memprof's own folder: each with a file."""
    made = {}
    for name in ("prog", "venv/site-packages/torch", "stdlib", "src/torch", "own", "elsewhere"):
        (tmp_path / name).mkdir(parents=True)
        made[name] = str((tmp_path / name).resolve())
    return made


def test_the_program_is_what_no_library_and_not_memprof_claims(folders):
    site_packages = os.path.dirname(folders["venv/site-packages/torch"])
    code = CodeFilter(
        folders["prog"],
        program=(os.path.join(folders["prog"], "train.py"),),
        own=(folders["own"],),
        named=(folders["src/torch"],),
        libraries=(site_packages, folders["stdlib"]),
    )
    verdicts = {
        "prog/train.py": USER,
        "prog/data/loader.py": USER,
        "elsewhere/mine.py": USER,  # the user's own code outside the program's folder
        "venv/site-packages/torch/nn/module.py": LIBRARY,
        "venv/site-packages/requests/api.py": LIBRARY,
        "stdlib/threading.py": LIBRARY,
        "src/torch/cuda/__init__.py": LIBRARY,  # PyTorch built from source
        "own/trace/collect.py": OWN,  # memprof
    }
    root = os.path.dirname(folders["prog"])
    for relative, verdict in verdicts.items():
        assert code.classify(os.path.join(root, relative)) == verdict, relative
    assert code.classify("<frozen runpy>") == SKIP
    assert code.classify("<string>") == SKIP  # dataclasses' generated methods
    assert code.display(os.path.join(folders["prog"], "data", "loader.py")) == "data/loader.py"
    torch_file = os.path.join(folders["venv/site-packages/torch"], "nn", "module.py")
    assert code.display(torch_file) == "torch/nn/module.py"
    assert code.display(os.path.join(folders["src/torch"], "cuda.py")) == "torch/cuda.py"
    mine = os.path.join(folders["elsewhere"], "mine.py")
    assert code.display(mine) == mine


def test_a_program_installed_in_site_packages_is_still_the_program(folders):
    site_packages = os.path.dirname(folders["venv/site-packages/torch"])
    tool = os.path.join(site_packages, "mytool")
    os.makedirs(tool)
    code = CodeFilter(folders["prog"], program=(tool,), libraries=(site_packages,))
    assert code.classify(os.path.join(tool, "cli.py")) == USER
    assert code.classify(os.path.join(site_packages, "other", "x.py")) == LIBRARY
    # a library named never becomes the program's, even in the program's folder
    vendored = os.path.join(folders["prog"], "torch")
    code = CodeFilter(folders["prog"], program=(folders["prog"],), named=(vendored,))
    assert code.classify(os.path.join(vendored, "x.py")) == LIBRARY


def test_this_pythons_libraries_and_memprof_are_found_without_importing_them(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("")
    code = CodeFilter.for_program(str(script), None)
    assert code.classify(str(script)) == USER
    assert code.classify(os.__file__) == LIBRARY  # the standard library
    assert code.classify(pytest.__file__) == LIBRARY  # site-packages
    assert code.classify(stacks_module.__file__) == OWN
    assert code.program_folder == str(tmp_path.resolve())


def test_a_module_run_with_dash_m_is_the_program_where_python_finds_it(tmp_path, monkeypatch):
    package = tmp_path / "mypkg_for_filter"
    package.mkdir()
    (package / "__init__.py").write_text("")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    code = CodeFilter.for_program(None, "mypkg_for_filter.tool")
    assert code.program == (str(package.resolve()),)
    assert code.classify(str(package / "tool.py")) == USER
    assert "mypkg_for_filter" not in sys.modules  # found, not imported


# -- the callback -----------------------------------------------------------------------------


def program_module(tmp_path: Path, name: str, source: str):
    """A module of the program, loaded from its file as `python` loads it."""
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def line_of(path: Path, marker: str) -> int:
    """The line of a file that carries `marker` in its comment."""
    (number,) = [n for n, text in enumerate(path.read_text().splitlines(), 1) if marker in text]
    return number


def recorder_for(tmp_path: Path, depth: int = 5, **folders) -> tuple[CallRecorder, FakeCupti]:
    """A recorder subscribed through libcupti's own functions (memprof.core.api_callbacks),
    whose callback reads CUpti_CallbackData in C memory."""
    cupti = FakeCupti()
    folders.setdefault("libraries", tuple(stacks_module.python_library_folders()))
    folders.setdefault("skipped", (DRIVER,))
    code = CodeFilter(str(tmp_path.resolve()), named=(TESTS,), **folders)
    recorder = CallRecorder(code, depth)
    assert recorder.start(cupti, cupti.library) is None
    return recorder, cupti


PROGRAM = """\
def copy_in(gpu, nbytes):
    return gpu.to_device(nbytes)  # line: copy_in

def step(gpu):
    correlation = copy_in(gpu, 4096)  # line: step
    gpu.launch()
    return correlation

def loop(gpu, times):
    return [step(gpu) for _ in range(times)]  # line: loop
"""


def test_only_the_calls_of_the_recorded_kinds_are_enabled(tmp_path):
    recorder, cupti = recorder_for(tmp_path)
    enabled = {name for name, cbid in CBID.items() if any(c == cbid for _, c in cupti.callbacks_on)}
    assert enabled == {
        "cuMemcpyHtoDAsync_v2",
        "cuMemcpyDtoHAsync_v2",
        "cuMemcpyHtoD_v2",
        "cuMemcpyDtoH_v2",
        "cuMemsetD8Async",
        "cuMemAlloc_v2",
        "cuMemFree_v2",
        "cuCtxSynchronize",
        "cuMemcpyAsync",
        "cudaMemcpyAsync",
        "cudaStreamSynchronize_v3020",
    }
    assert not cupti.domains_on
    recorder.stop()
    assert cupti.subscriber is None


def test_each_call_keeps_the_programs_innermost_frames_by_correlation_id(tmp_path):
    recorder, cupti = recorder_for(tmp_path, depth=2)
    program = program_module(tmp_path, "steps", PROGRAM)
    correlations = program.loop(FakeLibrary(cupti), 3)
    path = tmp_path / "steps.py"
    recorded = recorder.recorded()
    assert set(correlations) <= set(recorded)
    origin, frames = recorded[correlations[0]]
    assert origin == "program"
    assert frames == (
        Frame("steps.py", line_of(path, "line: copy_in"), "copy_in"),
        Frame("steps.py", line_of(path, "line: step"), "step"),
    )  # depth 2: loop's frame is not kept
    assert len(recorded) == 3  # launches are not enabled: no stack taken for them


def test_a_runtime_call_and_the_driver_call_inside_it_are_one_stack(tmp_path):
    recorder, cupti = recorder_for(tmp_path)
    program = program_module(tmp_path, "once", PROGRAM)
    walks = []
    original = recorder._walk
    recorder._walk = lambda frame: walks.append(1) or original(frame)
    correlation = program.copy_in(FakeLibrary(cupti), 4096)
    assert len(walks) == 1  # the driver callback found its id taken: no second walk
    assert recorder.recorded()[correlation][0] == "program"


RUNNER = """\
def run(program, gpu):
    return program.loop(gpu, 1)  # line: runner

def caller(program, gpu):
    return run(program, gpu)  # line: caller
"""


def test_no_frame_below_the_runner_is_walked_once_a_line_is_met(tmp_path):
    """Issue 38, item 7: the callback's walk up the stack went on through memprof's CLI
    (twenty frames under a training step's few) to the bottom. It ends at the code that
    runs the program (collect.run_program); what is recorded above it is the same. A file
    of the program's folder calls the runner here, so a walk past it would keep its lines."""
    recorder, cupti = recorder_for(tmp_path, depth=7)
    program = program_module(tmp_path, "steps", PROGRAM)
    runner = program_module(tmp_path, "runner", RUNNER)
    places = []
    for given in (None, runner.run.__code__):
        recorder.runner = given
        (correlation,) = runner.caller(program, FakeLibrary(cupti))
        origin, frames = recorder.recorded()[correlation]
        assert origin == "program"
        places.append([(f.file, f.function) for f in frames])
    walked_past, ended = places
    assert walked_past[-2:] == [("runner.py", "run"), ("runner.py", "caller")]
    assert ended == walked_past[:-2] and {file for file, _ in ended} == {"steps.py"}


def test_a_call_with_only_memprofs_frames_below_the_runner_is_still_memprofs_own(tmp_path):
    """The runner ends the walk only once anyone's frame is met: a call made by memprof
    itself (its frames the runner's and below) is memprof's own, as without the runner."""
    recorder, cupti = recorder_for(tmp_path, own=(TESTS,))

    def runs_the_program():
        return cupti.call("cuCtxSynchronize")

    recorder.runner = runs_the_program.__code__
    correlation = runs_the_program()
    assert correlation in recorder.own and correlation not in recorder.stacks


def test_a_call_with_no_frame_but_memprofs_is_memprofs_own(tmp_path):
    recorder, cupti = recorder_for(tmp_path, own=(TESTS,))  # this file stands for memprof
    correlation = cupti.call("cuCtxSynchronize")
    assert correlation in recorder.own and correlation not in recorder.stacks


def test_a_call_from_a_library_thread_names_the_library_line(tmp_path):
    recorder, cupti = recorder_for(tmp_path)
    library = FakeLibrary(cupti)
    made = []
    worker = threading.Thread(target=lambda: made.append(library.to_device(MiB)))
    worker.start()
    worker.join()
    origin, frames = recorder.recorded()[made[0]]
    assert origin == "library"
    (frame,) = frames
    qualified = sys.version_info >= (3, 11)  # co_qualname; 3.10's code objects have co_name
    assert frame.file.endswith("fake_library.py")
    assert frame.function == ("FakeLibrary.to_device" if qualified else "to_device")


def test_a_thread_without_python_frames_borrows_the_main_threads_line(tmp_path):
    # threading's own frames count as none (a C thread has none): the stack is then the
    # main thread's, waiting at the program's line
    stdlib = os.path.dirname(os.path.realpath(threading.__file__))
    recorder, cupti = recorder_for(tmp_path, skipped=(TESTS, stdlib))
    program = program_module(
        tmp_path,
        "backward",
        "import threading\n"
        "def backward(work):\n"
        "    worker = threading.Thread(target=work)\n"
        "    worker.start(); worker.join()  # line: join\n",
    )
    made = []
    program.backward(lambda: made.append(cupti.call("cuMemAlloc_v2")))
    origin, frames = recorder.recorded()[made[0]]
    assert origin == "thread"
    assert frames[0] == Frame(
        "backward.py", line_of(tmp_path / "backward.py", "line: join"), "backward"
    )


def test_a_call_from_a_c_thread_borrows_the_main_threads_line(tmp_path):
    # on the H200, ResNet's backward pass made 1,474 such calls: each ended the callback in
    # "call stack is not deep enough" and its line was lost
    recorder, cupti = recorder_for(tmp_path)
    program = program_module(
        tmp_path,
        "native",
        "def backward(cupti):\n"
        "    return cupti.enter_from_a_c_thread('cuMemAlloc_v2')  # line: here\n",
    )
    correlation = program.backward(cupti)
    assert (recorder.failures, recorder.first_failure) == (0, "")
    origin, frames = recorder.recorded()[correlation]
    assert origin == "thread"
    assert frames[0] == Frame(
        "native.py", line_of(tmp_path / "native.py", "line: here"), "backward"
    )


def test_a_failing_callback_is_counted_and_the_program_runs_on(tmp_path):
    recorder, cupti = recorder_for(tmp_path)

    def broken(filename: str) -> int:
        raise OSError("no such folder")

    recorder.filter.classify = broken
    FakeLibrary(cupti).allocate()
    FakeLibrary(cupti).allocate()
    assert recorder.failures == 2
    assert recorder.first_failure == "OSError: no such folder"
    assert recorder.stacks == {}


def test_ctrl_c_inside_the_callback_is_delivered_again_by_memprofs_entry_point(
    tmp_path, monkeypatch
):
    from memprof import interrupts

    recorder, cupti = recorder_for(tmp_path)

    def pressed(filename: str) -> int:
        raise KeyboardInterrupt

    def on_alarm(signum, frame):  # memprof.__main__'s handler, by its name
        pass

    on_alarm.__qualname__ = "_handle_ctrl_c.<locals>.on_alarm"
    timers = []
    monkeypatch.setattr(stacks_module.signal, "getsignal", lambda signum: on_alarm)
    monkeypatch.setattr(stacks_module.signal, "setitimer", lambda *a: timers.append(a))
    recorder.filter.classify = pressed
    interrupts.forget_presses()
    try:
        FakeLibrary(cupti).allocate()  # no KeyboardInterrupt escapes into CUPTI
        assert timers == [(stacks_module.signal.ITIMER_REAL, 0.005)]
        assert interrupts.pressed()
    finally:
        interrupts.forget_presses()
    monkeypatch.setattr(stacks_module.signal, "getsignal", lambda signum: None)
    with pytest.raises(KeyboardInterrupt):  # no entry point to deliver it: as Python would
        FakeLibrary(cupti).allocate()  # (through ctypes' callback, 5 ms later: no exception
        deadline = time.monotonic() + 10  # passes out of a ctypes callback)
        while time.monotonic() < deadline:
            time.sleep(0.01)
    interrupts.forget_presses()


def test_a_frame_inside_cuptis_callback_is_told_from_one_outside(tmp_path):
    recorder, cupti = recorder_for(tmp_path)
    seen, classify = [], recorder.filter.classify

    def spy(filename: str) -> int:
        seen.append(sys._getframe())
        return classify(filename)

    recorder.filter.classify = spy
    FakeLibrary(cupti).allocate()
    assert seen and all(stacks_module.inside_callback(frame) for frame in seen)
    assert not stacks_module.inside_callback(sys._getframe())
    assert not stacks_module.inside_callback(None)


def test_a_ctrl_c_waits_until_the_main_thread_has_left_the_callback(monkeypatch):
    """A timer of a fixed 5 ms fired, on a loaded machine, while the callback that set it
    was still returning: the KeyboardInterrupt raised there was dropped by ctypes."""
    answers, delivered = [True, True, False], threading.Event()
    looked = []

    def inside(frame) -> bool:
        looked.append(frame)
        return answers.pop(0)

    monkeypatch.setattr(stacks_module, "inside_callback", inside)
    monkeypatch.setattr(stacks_module._thread, "interrupt_main", delivered.set)
    stacks_module.interrupt_main_soon()
    assert delivered.wait(10)
    assert len(looked) == 3 and not answers  # delivered on the first look outside it
    assert all(frame is not None for frame in looked)  # the main thread's, looked at


def test_without_tables_of_callback_ids_every_call_is_sorted_by_name(tmp_path, monkeypatch):
    cupti = FakeCupti()
    monkeypatch.delattr(type(cupti), "runtime_api_trace_cbid")
    code = CodeFilter(str(tmp_path.resolve()), skipped=(DRIVER,), named=(TESTS,))
    recorder = CallRecorder(code, 5)
    assert recorder.start(cupti, cupti.library) is None
    assert cupti.domains_on == {1, 2} and not cupti.callbacks_on
    program = program_module(tmp_path, "named", PROGRAM)
    library = FakeLibrary(cupti)
    correlation = program.copy_in(library, 4096)
    library.launch()
    library.launch()
    assert set(recorder.stacks) == {correlation}
    assert cupti.names_asked == 3  # once per call name: cached


# -- the join ---------------------------------------------------------------------------------


def copy(cid: int, nbytes: int, us: float, src="pageable", dst="device", name="HTOD"):
    return GpuRecord("memcpy", name, 0, int(us * 1000), nbytes, src, dst, False, cid)


def site(line: int, *callers: int, file="train.py", origin="program"):
    frames = (Frame(file, line, "step"), *(Frame(file, c, "main") for c in callers))
    return origin, frames


def test_each_call_joins_its_work_its_host_time_and_its_line_by_correlation_id():
    gpu = [copy(10, MiB, 100), copy(11, MiB, 120), copy(12, 4096, 5, "device", "pageable", "DTOH")]
    gpu.append(GpuRecord("kernel", "sumArrays", 0, 1000, correlation_id=13))
    api = [
        ApiRecord("cudaMemcpyAsync_v3020", 0.3, 10),
        ApiRecord("cuMemcpyAsync", 0.25, 10),  # the driver call inside: same id, shorter
        ApiRecord("cudaMemcpyAsync_v3020", 0.4, 11),
        ApiRecord("cuMemcpyDtoH_v2", 0.02, 12),
        ApiRecord("cudaLaunchKernel_v7000", 0.005, 13),
        ApiRecord("cudaStreamSynchronize_v3020", 2.0, 14),
        ApiRecord("cudaStreamSynchronize_v3020", 1.0, 15),
        ApiRecord("cudaGetDevice_v3020", 0.001, 16),
    ]
    stacks = {10: site(42, 80), 11: site(42, 81), 12: site(50), 14: site(60), 15: site(60)}
    lines = {(s.activity, s.line): s for s in source_lines(gpu, api, stacks)}
    assert set(lines) == {
        ("HtoD pageable -> device", 42),
        ("DtoH device -> pageable", 50),
        ("wait", 60),
    }
    copies = lines["HtoD pageable -> device", 42]
    assert (copies.calls, copies.bytes, copies.api) == (
        2,
        2 * MiB,
        ["cuMemcpyAsync", "cudaMemcpyAsync"][1:],
    )
    assert copies.gpu_ms_each == pytest.approx([0.1, 0.12])
    assert copies.host_ms_each == pytest.approx([0.3, 0.4])  # the runtime call, not the driver's
    assert [(c.calls, c.frames[0].line) for c in copies.chains] == [(1, 80), (1, 81)]
    waits = lines["wait", 60]
    assert (waits.calls, waits.gpu_ms_each, waits.bytes) == (2, [], 0)
    assert waits.host_ms == pytest.approx(3.0)


def test_calls_without_a_stack_and_records_without_a_call_are_kept_as_no_line():
    gpu = [copy(10, MiB, 100), copy(0, 4096, 5)]  # the second has no correlation id
    api = [ApiRecord("cuMemcpyHtoD_v2", 0.3, 10), ApiRecord("cuMemAlloc_v2", 0.1, 11)]
    lines = source_lines(gpu, api, {})
    assert {(s.activity, s.origin, s.file, s.calls) for s in lines} == {
        ("HtoD pageable -> device", "none", "", 2),
        ("alloc", "none", "", 1),
    }
    (copies,) = [s for s in lines if s.activity != "alloc"]
    assert (copies.smallest_bytes, copies.largest_bytes) == (4096, MiB)
    assert len(copies.host_ms_each) == 1  # the unlinked record has no call to time


def test_memprofs_own_calls_are_left_out():
    api = [ApiRecord("cuCtxSynchronize", 5.0, 99), ApiRecord("cuCtxSynchronize", 1.0, 98)]
    lines = source_lines([], api, {98: site(70)}, own=frozenset({99}))
    assert [(s.activity, s.line, s.calls) for s in lines] == [("wait", 70, 1)]
    # a copy memprof made (a program running memprof's experiments) is still a copy
    api.append(ApiRecord("cuMemcpyHtoD_v2", 1.0, 97))
    lines = source_lines([copy(97, MiB, 10)], api, {98: site(70)}, own=frozenset({99, 97}))
    assert {(s.activity, s.origin, s.calls) for s in lines} == {
        ("wait", "program", 1),
        ("HtoD pageable -> device", "none", 1),
    }


def test_a_batch_of_two_kinds_counts_once_in_each_and_its_host_time_once():
    gpu = [copy(10, MiB, 100), copy(10, 2 * MiB, 150, "pinned")]
    api = [ApiRecord("cuMemcpyBatchAsync", 0.5, 10)]
    lines = source_lines(gpu, api, {10: site(42)})
    assert sorted((s.activity, s.calls, s.bytes, s.host_ms) for s in lines) == [
        ("HtoD pageable -> device", 1, MiB, 0.5),
        ("HtoD pinned -> device", 1, 2 * MiB, 0.0),
    ]


def test_a_line_keeps_its_ten_commonest_callers():
    gpu = [copy(cid, 4096, 1) for cid in range(1, 13)]
    api = [ApiRecord("cuMemcpyHtoD_v2", 0.01, cid) for cid in range(1, 13)]
    stacks = {cid: site(42, 100 + min(cid, 11)) for cid in range(1, 13)}  # 11 callers
    (line,) = source_lines(gpu, api, stacks)
    assert len(line.chains) == 10
    assert line.chains[0].calls == 2 and line.chains[0].frames[0].line == 111
    assert sum(chain.calls for chain in line.chains) == 11  # one caller's call is not shown


def test_a_memset_is_one_activity_whatever_its_record_says_of_memory_kinds():
    gpu = [GpuRecord("memset", "memset", 0, 20_000, 4096, "device", "device", False, 10)]
    api = [ApiRecord("cuMemsetD8_v2", 0.03, 10)]
    (line,) = source_lines(gpu, api, {10: site(42)})
    assert (line.activity, line.line, line.bytes, line.api) == ("memset", 42, 4096, ["cuMemsetD8"])
    assert line.gpu_ms_each == pytest.approx([0.02])
    assert line.timed_on_gpu


def test_a_kernel_without_a_call_is_no_line_and_a_copy_without_one_borrows_no_stack():
    """A record without a correlation id has no call and so no stack: never call 1's."""
    kernel = GpuRecord("kernel", "sumArrays", 0, 1000)  # a launch is not asked for
    assert source_lines([kernel], [], {}) == []
    api = [ApiRecord("cuMemAlloc_v2", 0.1, 1)]
    lines = source_lines([kernel, copy(0, 4096, 5)], api, {1: site(42)})
    assert sorted((s.activity, s.origin, s.file, s.line, s.function) for s in lines) == [
        ("HtoD pageable -> device", "none", "", 0, ""),
        ("alloc", "program", "train.py", 42, "step"),
    ]


def test_the_lines_of_one_activity_come_costliest_first_gpu_and_host_time_added():
    """Line 10 costs 1 ms on the GPU and 5 on the host (6 in all), line 20 2 ms and 0.01:
    the order by GPU time alone, or by GPU less host time, would be the other way round."""
    gpu = [
        copy(11, MiB, 2000),
        copy(12, MiB, 1000),
        copy(13, 4096, 1, "device", "pageable", "DTOH"),
    ]
    api = [ApiRecord("cuMemcpyHtoDAsync_v2", 0.01, 11), ApiRecord("cuMemcpyHtoD_v2", 5.0, 12)]
    api.append(ApiRecord("cuMemcpyDtoH_v2", 0.01, 13))
    lines = source_lines(gpu, api, {11: site(20), 12: site(10), 13: site(30)})
    assert [(s.activity, s.line) for s in lines] == [
        ("DtoH device -> pageable", 30),
        ("HtoD pageable -> device", 10),
        ("HtoD pageable -> device", 20),
    ]


def test_a_program_that_made_no_cuda_call_has_an_empty_timeline_from_0():
    assert timeline_of([], [], {}, []) == Timeline(TIMELINE_VERSION, 0, [], [], [])


def test_a_copy_memprof_made_is_on_the_timeline_at_its_line_and_its_own_wait_at_none():
    """memprof's own calls are no line unless they made GPU work (source_lines): the
    timeline's events say the same."""
    gpu = [copy(97, MiB, 10)]
    api = [ApiRecord("cuMemcpyHtoD_v2", 1.0, 97, 100), ApiRecord("cuCtxSynchronize", 5.0, 99, 200)]
    stacks, own = {97: site(42), 99: site(70)}, frozenset({97, 99})
    lines = source_lines(gpu, api, stacks, own)
    assert [(s.activity, s.line) for s in lines] == [("HtoD pageable -> device", 42)]
    timeline = timeline_of(gpu, api, stacks, lines, own)
    assert [row[-1] for row in timeline.api] == [0, NO_LINE]
    assert [row[-1] for row in timeline.gpu] == [0]
