"""CUPTI's API callbacks through libcupti's own functions (memprof.core.api_callbacks): the
struct read at CUPTI's offsets, refusals in CUPTI's words, and the recorder's choice of
subscriber. The recorder's behaviour through it is tests/test_trace_where.py's, run on both."""

from __future__ import annotations

import ctypes
import gc
import threading
from types import SimpleNamespace

import pytest

from memprof.core import activity_buffers, api_callbacks
from memprof.core.activity import ApiRecord
from memprof.trace.stacks import CallRecorder, CodeFilter
from tests.fake_cupti import CBID, NO_LIBCUPTI, CallbackData, FakeCupti


def test_the_site_and_correlation_id_are_read_where_cupti_lays_them():
    data = CallbackData(callbackSite=1, correlationId=4_000_000_123, contextUid=77)
    data.correlationData = 0xFFFF_FFFF_FFFF_FFFF  # the neighbours must not leak in
    address = ctypes.addressof(data)
    assert api_callbacks.callback_site(address) == 1
    assert api_callbacks.correlation_id(address) == 4_000_000_123
    assert CallbackData.correlationId.offset == api_callbacks.CORRELATION_OFFSET


def test_a_refused_subscription_says_why_in_cuptis_words_or_its_number(tmp_path):
    cupti = FakeCupti()
    cupti.library.refuse_subscribe = 39
    recorder = CallRecorder(CodeFilter(str(tmp_path)), 5)
    assert recorder.start(cupti, cupti.library) == (
        "CUPTI refused its callbacks (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)"
    )
    cupti.library.refuse_subscribe = 999
    recorder = CallRecorder(CodeFilter(str(tmp_path)), 5)
    assert recorder.start(cupti, cupti.library) == "CUPTI refused its callbacks (CUPTI error 999)"
    assert cupti.subscriber is None


def test_callback_ids_refused_through_libcupti_are_skipped_alone(tmp_path):
    cupti = FakeCupti()
    cupti.library.refuse_ids = {CBID["cuMemcpyHtoD_v2"]}
    recorder = CallRecorder(CodeFilter(str(tmp_path)), 5)
    assert recorder.start(cupti, cupti.library) is None and cupti.subscriber is not None
    assert (1, CBID["cuMemcpyDtoH_v2"]) in cupti.callbacks_on
    assert (1, CBID["cuMemcpyHtoD_v2"]) not in cupti.callbacks_on

    cupti = FakeCupti()
    cupti.library.refuse_ids = set(CBID.values())
    recorder = CallRecorder(CodeFilter(str(tmp_path)), 5)
    assert recorder.start(cupti, cupti.library) == "CUPTI refused its callbacks (CUPTI error 1)"
    assert cupti.subscriber is None  # given back


def test_without_tables_of_callback_ids_both_domains_are_switched_on(tmp_path, monkeypatch):
    cupti = FakeCupti()
    monkeypatch.delattr(type(cupti), "driver_api_trace_cbid")
    recorder = CallRecorder(CodeFilter(str(tmp_path)), 5)
    assert recorder.start(cupti, cupti.library) is None
    assert cupti.domains_on == {1, 2} and not cupti.callbacks_on  # sorted by name in it


def test_no_libcupti_to_reach_means_no_stacks_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setattr(activity_buffers, "loaded_library", lambda prefix: None)
    assert api_callbacks.connect() is None  # none loaded
    monkeypatch.setattr(activity_buffers, "loaded_library", lambda prefix: str(tmp_path / "x.so"))
    assert api_callbacks.connect() is None  # one that cannot be opened
    assert api_callbacks.connect(NO_LIBCUPTI) is None  # its symbols missing
    no_unsubscribe = SimpleNamespace(
        cuptiSubscribe=lambda *a: 0,
        cuptiEnableCallback=lambda *a: 0,
        cuptiGetResultString=lambda *a: 0,
    )
    assert api_callbacks.connect(no_unsubscribe) is None
    cupti = FakeCupti()
    recorder = CallRecorder(CodeFilter(str(tmp_path)), 5)
    assert recorder.start(cupti, NO_LIBCUPTI) == (
        "CUPTI's callbacks cannot be reached: this process has no libcupti, or two"
    )
    assert cupti.subscriber is None


def test_the_callback_given_to_cupti_outlives_the_subscription(tmp_path):
    cupti = FakeCupti()
    recorder = CallRecorder(CodeFilter(str(tmp_path.resolve())), 5)
    assert recorder.start(cupti, cupti.library) is None
    recorder.stop()
    gc.collect()  # CUPTI may still be inside it on another thread: it must never be freed
    kept = {ctypes.cast(function, ctypes.c_void_p).value for function in api_callbacks._KEPT}
    assert cupti.library.callback_address in kept


@pytest.mark.parametrize("site", [0, 1])
def test_only_the_entry_takes_a_stack(tmp_path, site):
    cupti = FakeCupti()
    recorder = CallRecorder(CodeFilter(str(tmp_path.resolve())), 5)
    assert recorder.start(cupti, cupti.library) is None
    callback, userdata = cupti.subscriber
    data = CallbackData(callbackSite=site, correlationId=4242)
    callback(userdata, 1, CBID["cuMemAlloc_v2"], ctypes.addressof(data))
    assert (4242 in recorder.stacks or 4242 in recorder.own) == (site == 0)
    assert recorder.failures == 0


# -- each call's host time, from its entry's and exit's callbacks ----------------------------


def started_recorder(cupti: FakeCupti, code=None, every_call: bool = False) -> CallRecorder:
    recorder = CallRecorder(code, 5, every_call=every_call)
    assert recorder.start(cupti, cupti.library) is None
    return recorder


def test_each_call_is_timed_entry_to_exit_on_cuptis_clock_on_its_thread():
    cupti = FakeCupti()
    recorder = started_recorder(cupti)
    at = cupti.clock_ns
    first = cupti.call("cudaMemcpyAsync", 4_000, runtime=True, inner="cuMemcpyAsync")
    second = cupti.call("cuMemcpyHtoD_v2", 1_000)
    elsewhere = threading.Thread(target=cupti.call, args=("cuMemcpyDtoH_v2", 3_000))
    elsewhere.start()
    elsewhere.join()
    here = threading.get_native_id()
    assert recorder.api_records() == [  # in the order they returned
        ApiRecord("cuMemcpyAsync", 0.003998, first, at + 1, here),  # inside the runtime call
        ApiRecord("cudaMemcpyAsync", 0.004, first, at, here),
        ApiRecord("cuMemcpyHtoD_v2", 0.001, second, at + 4_000, here),
        ApiRecord("cuMemcpyDtoH_v2", 0.003, second + 7, at + 5_000, elsewhere.native_id),
    ]
    assert recorder.stacks == {} and recorder.failures == 0  # depth 0: no walk


def test_only_the_work_calls_are_called_back_and_timed_unless_every_call():
    cupti = FakeCupti()
    recorder = started_recorder(cupti)
    assert (1, CBID["cuLaunchKernel"]) not in cupti.callbacks_on
    assert (2, CBID["cudaGetDevice_v3020"]) not in cupti.callbacks_on
    cupti.call("cuLaunchKernel")
    cupti.call("cudaGetDevice_v3020", runtime=True)
    cupti.call("cuCtxSynchronize")
    assert [call.name for call in recorder.api_records()] == ["cuCtxSynchronize"]

    every = FakeCupti()
    recorder = started_recorder(every, CodeFilter("/nowhere"), every_call=True)
    assert every.domains_on == {1, 2}
    every.call("cuLaunchKernel")
    every.call("cudaGetDevice_v3020", runtime=True)
    memset = every.call("cuMemsetD8Async")
    names = [call.name for call in recorder.api_records()]
    assert names == ["cuLaunchKernel", "cudaGetDevice_v3020", "cuMemsetD8Async"]
    assert set(recorder.stacks) | recorder.own <= {memset}  # a stack for the work call alone
    assert every.names_asked == 3  # each call's name asked once, in the callback


def test_an_exit_without_its_entry_is_no_call():
    cupti = FakeCupti()
    recorder = started_recorder(cupti)
    callback, userdata = cupti.subscriber
    data = CallbackData(callbackSite=1, correlationId=77)
    callback(userdata, 1, CBID["cuMemcpyHtoD_v2"], ctypes.addressof(data))
    assert recorder.api_records() == [] and recorder.failures == 0
