"""streams, device, compare and sweep rendered from results recorded on the H200."""

from memprof.experiments import compare, device, streams, sweep
from memprof.model.figures import ideal_overlapped_ms
from memprof.model.formatting import bandwidth_gb_per_s, format_gb_per_s
from memprof.model.results import Result
from tests.conftest import array_bytes, load_fixture, load_legacy, render_text


def load(name: str) -> Result:
    return load_fixture(name)


def rendered(name: str) -> str:
    return render_text(load(name), width=220)


def test_streams_ideal_and_achieved_fraction_follow_the_stage_times():
    result = load("streams")
    sums = streams.stage_sums(result, "serial").values()
    times = {s.name: (s.median_ms, s.median_ms / len(s.parts)) for s in sums}
    ideal = ideal_overlapped_ms(list(times.values()))
    longest = max(total for total, _ in times.values())
    assert ideal > longest
    labels = streams.mode_labels(result.parameters.streams)
    overlapped = result.find("total", labels["overlapped"], "span").stats.median_ms
    assert (
        f"{ideal / overlapped:.0%} of the ideal overlap" in streams.summarize(result).conclusions[0]
    )


def test_streams_draws_one_timeline_row_per_stream():
    result = load("streams")
    text = rendered("streams")
    count = result.parameters.streams
    for lane in range(count):
        assert f"stream {lane:<2} |" in text
    assert "H = copy in (HtoD), K = kernel, D = copy out (DtoH)" in text
    assert f"asyncEngineCount = {result.device.attributes['asyncEngineCount']}" in text


def test_device_bandwidth_rows_and_peak_fraction():
    result = load("device")
    [table] = device.summarize(result).tables
    assert [row[0].split()[0] for row in table.rows] == [
        "cuMemcpyDtoD",
        "cuMemset",
        "copy",
        "mul",
        "add",
        "triad",
        "dot",
    ]
    peak = result.device.theoretical_memory_bandwidth_gb_per_s
    triad = next(m for m in result.measurements if m.name.startswith("stream_triad_"))
    best = bandwidth_gb_per_s(triad.bytes, triad.stats.min_ms)
    triad_row = next(row for row in table.rows if row[0].startswith("triad"))
    assert triad_row[-2] == format_gb_per_s(best)
    assert triad_row[-1] == f"{best / peak:.1%}"
    assert "a copy counts its read and its write" in rendered("device")


def test_compare_rows_and_the_cheapest_allocation():
    result = load("compare")
    table = compare.summarize(result).tables[0]
    assert [row[0] for row in table.rows] == list(compare.ROWS.values())  # all measured here
    # kinds allocated through cuda-bindings have rows only where measured: not in an older file
    older = compare.summarize(load_legacy("compare")).tables[0]
    shown = [label for row, label in compare.ROWS.items() if row not in compare.MEASURED_ONLY]
    assert [row[0] for row in older.rows] == shown
    allocate_best = table.rows[next(r for r, c in table.highlighted if c == 1)][0]
    allocations = {
        row: v for (row, operation), v in compare._figures(result).items() if operation == "alloc"
    }
    assert allocate_best == compare.ROWS[min(allocations, key=allocations.__getitem__)]
    # the pools hand back what was freed: cheaper than cuMemAllocManaged, which has no pages yet
    assert allocations["pool_kept"] < allocations["managed first touch"]
    older_best = older.rows[next(r for r, c in older.highlighted if c == 1)][0]
    assert older_best == "managed, first touch"


def test_compare_gives_four_justified_recommendations():
    conclusions = compare.summarize(load("compare")).conclusions
    uses = [line.split(":")[0] for line in conclusions]
    assert uses == [
        "Data the GPU uses once",
        "Data the GPU reads 10 times",
        "Data the CPU writes and the GPU consumes",
        "Results the CPU reads back",
    ]
    for line in conclusions:
        assert "ms for 64 MiB" in line


def test_sweep_curves_peaks_and_chart():
    result = load("sweep")
    found = sweep.curves(result)
    pinned = found["pinned", "h2d"]
    assert [power for power, _, _ in pinned] == list(result.parameters.powers)
    text = rendered("sweep")
    assert "(log scales)" in text
    assert text.count("(2^n floats)") == 2
    assert "90% of peak from" in text


def test_sweep_crossovers_need_a_clear_lead():
    series = {
        "a": [(1, 0.0, 1.0), (2, 0.0, 2.0), (3, 0.0, 4.0)],
        "b": [(1, 0.0, 2.0), (2, 0.0, 2.02), (3, 0.0, 3.0)],
    }
    [line] = sweep.crossovers(series)
    assert line.startswith("a overtakes b between 2^1 and 2^3")
    assert sweep.crossovers({"a": series["a"][:2], "b": [(1, 0, 1.01), (2, 0, 1.99)]}) == []


def test_recommendations_prefer_the_safer_option_within_noise():
    figures = compare._figures(load("compare"))
    nbytes = array_bytes(load("compare"))

    def results_line(writecombined_read_gbs: float) -> str:
        changed = dict(figures)
        changed["writecombined", "host_read"] = writecombined_read_gbs
        changed["writecombined", "d2h"] = changed["pinned", "d2h"]
        # numpy memory slower than both, whatever this recording measured for it
        changed["pageable", "d2h"] = changed["pinned", "d2h"] / 2
        changed["pageable", "host_read"] = changed["pinned", "host_read"] / 2
        return compare.recommendations(changed, nbytes)[3]

    pinned_read = figures["pinned", "host_read"]
    hidden = "only because this platform hid the write-combined trap"
    # write-combined memory is never the advice for reading back, however fast it measured
    for faster in (1.01, 3.0):
        line = results_line(pinned_read * faster)
        assert line.startswith("Results the CPU reads back: copy them into pinned")
        assert f"writecombined was faster {hidden}" in line and "as good" not in line
    assert f"writecombined came within 5% {hidden}" in results_line(pinned_read * 0.99)
    assert "trap" not in results_line(pinned_read / 2)
