"""What the profile says about its own figures, from Results recorded on the H200 with CUPTI
and with --timing events, and nvprof's Unified Memory section from a managed run."""

from memprof.output.profile import profile_rows
from memprof.output.render import timing_note, unified_memory_lines
from tests.conftest import load_fixture, render_text, replace


def test_cupti_runs_say_the_gpu_activities_are_cuptis_records():
    result = load_fixture("pinned_p20")
    assert result.timing.source == "cupti"
    text = render_text(result, width=120)
    assert "GPU activities are CUPTI's records" in text
    assert "CUDA events" not in timing_note(result)
    assert "install cupti-python" not in timing_note(result)


def test_events_runs_say_how_events_were_placed_and_corrected():
    result = load_fixture("pinned_p20_events")
    assert result.timing.source == "events"
    note = timing_note(result)
    assert "--timing events" in note and "GPU-side gate" in note
    overhead_us = f"{result.timing.event_overhead_ms * 1e3:.2f} us"
    assert overhead_us in note  # the correction applied is printed, from this run
    assert "install cupti-python" in note  # what events cannot resolve is said, not hidden


def test_every_timed_operation_has_exactly_repeat_calls():
    for name in ("pinned_p20", "pinned_p20_events"):
        result = load_fixture(name)
        repeat = result.parameters.repeat
        for row in profile_rows(result.measurements):
            if row.group == "GPU activities":
                # one call per timed repetition (a and b are both copied in each)
                assert row.stats.count in (repeat, 2 * repeat), row.name


def test_managed_runs_print_nvprofs_unified_memory_section():
    result = load_fixture("managed")
    lines = unified_memory_lines(result)
    header, *rows = lines
    assert header.split()[:3] == ["Count", "Avg", "Size"]
    counters = result.timing.unified_memory
    htod = next(line for line in rows if line.endswith("Host To Device"))
    assert htod.split()[0] == str(counters["BYTES_TRANSFER_HTOD"]["count"])
    faults = counters["CPU_PAGE_FAULT_COUNT"]["count"]
    assert f"Total CPU Page faults: {faults}" in lines
    assert "Unified Memory profiling result" in render_text(result, width=120)


def test_a_refused_counter_is_one_line_with_cuptis_reason():
    result = load_fixture("managed")
    reason = "CUPTI refused unified-memory counters: ERROR_NOT_READY (13)"
    result.timing = replace(result.timing, unified_memory=None, unified_memory_note=reason)
    assert unified_memory_lines(result) == [reason]


def test_runs_without_migrations_print_no_unified_memory_section():
    result = load_fixture("pinned_p20")
    assert unified_memory_lines(result) == []
