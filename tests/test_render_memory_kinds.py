"""uva, managed, writecombined, register and alloc rendered from results recorded on the H200."""

import re

from memprof.experiments import alloc, managed, register, uva, writecombined
from memprof.model.formatting import format_ms
from memprof.model.results import Result
from tests.conftest import load_fixture, render_text


def load(name: str) -> Result:
    return load_fixture(name)


def rendered(name: str) -> str:
    return render_text(load(name), width=220)


def test_uva_shows_both_addresses_and_all_three_kernels():
    result = load("uva")
    text = rendered("uva")
    for addresses in (result.extra.pointers.a, result.extra.pointers.b):
        assert f"0x{addresses.host:x}" in text
    assert "yes" in text
    for label in uva.PATHS.values():
        assert label in text
    [conclusion] = uva.summarize(result).conclusions
    uva_median = result.find("kernel", "uva", "gpu").stats.median_ms
    assert format_ms(uva_median) in conclusion
    assert "UVA removes the pointer bookkeeping, not the bus" in conclusion


def test_managed_lists_every_step_with_its_measured_time():
    result = load("managed")
    text = rendered("managed")
    for step in (
        "first launch",
        "next launch",
        "host reads res",
        "prefetch a, b, res",
        "2 HtoD + kernel + DtoH",
    ):
        assert step in text
    for advice in ("read-mostly", "preferred-location", "accessed-by"):
        assert f"cuMemAdvise {advice}: first launch" in text
    first = result.find("kernel_first", "managed", "gpu").stats.median_ms
    assert format_ms(first) in text
    # first launches keep their own profile row, apart from the resident ones
    assert "sumArraysGPU(float*, float*, float*, int) (managed, first launch)" in text
    assert "Verified against numpy: all 6 results match" in text


def test_managed_conclusion_follows_the_numbers():
    result = load("managed")
    [conclusion] = managed.summarize(result).conclusions
    first = result.find("kernel_first", "managed", "gpu").stats.median_ms
    resident = result.find("kernel", "managed", "gpu").stats.median_ms
    assert f"{first / resident:.0f}x slower" in conclusion
    prefetched = (
        result.find("kernel_first", "managed+prefetch", "gpu").stats.median_ms
        + result.find("prefetch", "managed+prefetch", "gpu").stats.median_ms
    )
    expected = "prefetch managed memory before" if prefetched < first else "did not beat"
    assert expected in conclusion


def test_writecombined_table_compares_both_kinds_per_operation():
    result = load("writecombined")
    summary = writecombined.summarize(result)
    table = summary.tables[0]
    assert [row[0] for row in table.rows] == [label for _, label in writecombined.ROWS]
    read_ratio = (
        result.find("host_read", "writecombined", "host").stats.median_ms
        / result.find("host_read", "mapped", "host").stats.median_ms
    )
    [conclusion] = summary.conclusions
    if read_ratio < 1.5:  # recorded on a VM where write-combining did not take effect
        assert "did not appear on this machine" in conclusion
    else:
        assert f"{read_ratio:.1f}x slower" in conclusion


def test_register_reports_registration_cost_and_three_transfer_kinds():
    result = load("register")
    text = rendered("register")
    register_median = result.find("register", "registered", "api").stats.median_ms
    assert format_ms(register_median) in text
    for label in register.TRANSFER_KINDS.values():
        assert label in text
    assert "Verified against numpy: all 4 results match" in text


def test_alloc_has_a_row_per_size_and_a_column_per_kind():
    result = load("alloc")
    allocate, free, *allocators = alloc.summarize(result).tables
    assert [table.title.split(",")[0] for table in allocators] == [
        "Stream-ordered allocation",
        "Stream-ordered free",
        "Virtual memory management",
        "Growing a buffer to twice its size",
        "First use",
        "Allocate",
    ]  # the cuda-bindings allocators, measured on this run
    for table in (allocate, free):
        assert table.headers == ["Size", *result.extra.kinds]
        assert len(table.rows) == len(result.parameters.powers) + 1
    largest = 4 << max(result.parameters.powers)
    pinned = result.find("alloc", "pinned", byte_count=largest).stats.median_ms
    assert (
        allocate.rows[-1][1 + result.extra.kinds.index("pinned")]
        == f"{pinned * 2**30 / largest:,.2f}"
    )
    text = rendered("alloc")
    gpu_work = text[text.index("GPU activities:") : text.index("API calls:")]
    # the only GPU work: the device allocators' first use (a memset) and the pools' stream side
    kinds = set(re.findall(r"\((\w+)\)\n", gpu_work))
    assert kinds == {"device", "pool", "pool_kept", "vmm"}
    assert "cuMemHostAlloc" in text and "writecombined" in text  # CUPTI names calls alone
