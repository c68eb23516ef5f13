"""CUPTI's API callbacks through libcupti's own functions (memprof.core.api_callbacks): the
struct read at CUPTI's offsets, refusals in CUPTI's words, and the recorder's choice of
subscriber. The recorder's behaviour through it is tests/test_trace_where.py's, run on both."""

from __future__ import annotations

import ctypes
import gc
from types import SimpleNamespace

import pytest

from memprof.core import activity_buffers, api_callbacks
from memprof.trace.stacks import CodeFilter, StackRecorder
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
    recorder = StackRecorder(CodeFilter(str(tmp_path)), 5)
    assert recorder.start(cupti, cupti.library) == (
        "CUPTI refused its callbacks (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)"
    )
    cupti.library.refuse_subscribe = 999
    recorder = StackRecorder(CodeFilter(str(tmp_path)), 5)
    assert recorder.start(cupti, cupti.library) == "CUPTI refused its callbacks (CUPTI error 999)"
    assert cupti.subscriber is None


def test_callback_ids_refused_through_libcupti_are_skipped_alone(tmp_path):
    cupti = FakeCupti()
    cupti.library.refuse_ids = {CBID["cuMemcpyHtoD_v2"]}
    recorder = StackRecorder(CodeFilter(str(tmp_path)), 5)
    assert recorder.start(cupti, cupti.library) is None and cupti.subscriber is not None
    assert (1, CBID["cuMemcpyDtoH_v2"]) in cupti.callbacks_on
    assert (1, CBID["cuMemcpyHtoD_v2"]) not in cupti.callbacks_on

    cupti = FakeCupti()
    cupti.library.refuse_ids = set(CBID.values())
    recorder = StackRecorder(CodeFilter(str(tmp_path)), 5)
    assert recorder.start(cupti, cupti.library) == "CUPTI refused its callbacks (CUPTI error 1)"
    assert cupti.subscriber is None  # given back


def test_without_tables_of_callback_ids_both_domains_are_switched_on(tmp_path, monkeypatch):
    cupti = FakeCupti()
    monkeypatch.delattr(type(cupti), "driver_api_trace_cbid")
    recorder = StackRecorder(CodeFilter(str(tmp_path)), 5)
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
    recorder = StackRecorder(CodeFilter(str(tmp_path)), 5)
    assert recorder.start(cupti, NO_LIBCUPTI) == (
        "CUPTI's callbacks cannot be reached: this process has no libcupti, or two"
    )
    assert cupti.subscriber is None


def test_the_callback_given_to_cupti_outlives_the_subscription(tmp_path):
    cupti = FakeCupti()
    recorder = StackRecorder(CodeFilter(str(tmp_path.resolve())), 5)
    assert recorder.start(cupti, cupti.library) is None
    recorder.stop()
    gc.collect()  # CUPTI may still be inside it on another thread: it must never be freed
    kept = {ctypes.cast(function, ctypes.c_void_p).value for function in api_callbacks._KEPT}
    assert cupti.library.callback_address in kept


@pytest.mark.parametrize("site", [0, 1])
def test_only_the_entry_takes_a_stack(tmp_path, site):
    cupti = FakeCupti()
    recorder = StackRecorder(CodeFilter(str(tmp_path.resolve())), 5)
    assert recorder.start(cupti, cupti.library) is None
    callback, userdata = cupti.subscriber
    data = CallbackData(callbackSite=site, correlationId=4242)
    callback(userdata, 1, CBID["cuMemAlloc_v2"], ctypes.addressof(data))
    assert (4242 in recorder.stacks or 4242 in recorder.own) == (site == 0)
    assert recorder.failures == 0
