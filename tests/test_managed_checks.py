"""What a saved managed file must hold for its table and conclusion (Managed.check_consistency):
prefetch and advice only where the GPU has concurrentManagedAccess (a file without the
attribute is not refused for it), and every step the summary shows, each refusal said whole;
a variant whose first launch is missing is not shown, so nothing else of it is needed."""

from __future__ import annotations

import pytest

from memprof.experiments.managed import CONCURRENT, Managed
from memprof.model.schema import SchemaError
from tests.conftest import replace
from tests.verdict_tools import fixture


def with_attributes(result, attributes: dict):
    return replace(result, device=replace(result.device, attributes=attributes))


def without(result, *dropped: tuple[str, str, str]):
    kept = [m for m in result.measurements if (m.group, m.operation, m.kind) not in dropped]
    assert len(kept) == len(result.measurements) - len(dropped), dropped
    return replace(result, measurements=kept)


def refusal(result) -> str:
    with pytest.raises(SchemaError) as refused:
        Managed().check_consistency(result)
    return str(refused.value)


def test_prefetch_and_advice_need_concurrent_managed_access_and_its_absence_is_no_refusal():
    result = fixture("h200_managed")
    attributes = result.device.attributes
    assert attributes[CONCURRENT] == 1  # the H200's: its prefetch and advice were timed
    unknown = {name: value for name, value in attributes.items() if name != CONCURRENT}
    Managed().check_consistency(with_attributes(result, unknown))
    lacking = with_attributes(result, {**attributes, CONCURRENT: 0})
    index, kind = next(
        (i, m.kind)
        for i, m in enumerate(result.measurements)
        if (m.kind or "").startswith("managed+")
    )
    assert refusal(lacking) == (
        f"measurements[{index}].kind is {kind!r}, but device.attributes.{CONCURRENT} is 0"
    )


@pytest.mark.parametrize(
    "missing",
    [
        ("gpu", "kernel_first", "managed"),
        ("host", "host_read", "pageable"),
        ("span", "end_to_end", "device"),
        ("gpu", "kernel", "device"),
        ("gpu", "kernel", "managed"),
        ("host", "host_read", "managed+read-mostly"),
        ("gpu", "prefetch", "managed+prefetch"),
    ],
)
def test_each_step_the_summary_shows_is_needed(missing):
    group, operation, kind = missing
    assert refusal(without(fixture("h200_managed"), missing)) == (
        f"measurements has no {group} {operation!r} of kind {kind!r}, which the managed "
        "summary shows"
    )


def test_a_variant_without_its_first_launch_needs_nothing_else():
    kind = "managed+accessed-by"  # its host write and next launch kept, never shown
    result = without(
        fixture("h200_managed"), ("gpu", "kernel_first", kind), ("host", "host_read", kind)
    )
    Managed().check_consistency(result)


def test_a_file_without_prefetch_or_hints_shows_on_demand_steps_alone():
    """As --no-prefetch --advise '' saves it, or a GPU without concurrentManagedAccess."""
    from memprof.experiments import summarize
    from tests.verdict_tools import conclusion, table

    result = fixture("h200_managed")
    kept = [m for m in result.measurements if not (m.kind or "").startswith("managed+")]
    parameters = replace(result.parameters, prefetch=False, advice=())
    result = replace(result, measurements=kept, parameters=parameters)
    Managed().check_consistency(result)
    summary = summarize(result)
    steps = [row[0] for row in table(summary, "sumArrays over managed").rows]
    assert steps == [
        "on demand: first launch",
        "on demand: next launch",
        "on demand: host reads res",
        "host reads resident host memory (reference)",
        "device memory: kernel alone",
        "device memory: 2 HtoD + kernel + DtoH",
    ]
    assert "Prefetch" not in conclusion(summary, "On-demand migration")
