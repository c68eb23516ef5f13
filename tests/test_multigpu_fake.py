"""hostlink's, peer's and check-pairs' run on two stand-in GPUs (tests/fakegpu.py, one
FakeSession each): what each measures, between which GPUs, what it verifies, its progress, and
that it frees everything it allocated. The real two-GPU runs are tests/gpu/test_peer.py,
tests/gpu/test_device_all.py and tests/gpu/test_gpu_state_and_check.py."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import pytest

from memprof.core import bindings
from memprof.experiments import check, hostlink, peer
from memprof.experiments.base import RunContext, declared_keys
from memprof.experiments.common import CheckedCopies
from memprof.model.results import Result
from tests.conftest import replace
from tests.fakegpu import FakeBindings, FakeSession, Handle
from tests.test_device_all import _first_gpu
from tests.test_progress import ATTRIBUTES

POWER = 12  # 16 KiB copies
NBYTES = 4 << POWER
REPEAT = 4  # samples per figure: none of the measuring core's defaults


class FakeGpus:
    """memprof.core.session.Devices on stand-in GPUs: one FakeSession per index."""

    def __init__(self, experiment: type, count: int) -> None:
        self.indices = list(range(count))
        self.sessions = {
            i: FakeSession(ATTRIBUTES, declared_keys(experiment)) for i in self.indices
        }
        for index, session in self.sessions.items():
            session.device_index = index
            session.context = SimpleNamespace(handle=Handle(0x100 + index))
        self.peer_enabled: list[tuple[int, int]] = []

    def session(self, index: int) -> FakeSession:
        return self.sessions[index]

    def enable_peer_access(self, accessor: int, owner: int) -> None:
        self.peer_enabled.append((accessor, owner))
        bindings.enable_peer_access(self.sessions[owner].context.handle)

    def leaks(self) -> dict[int, dict[str, int]]:
        found = {index: session.gpu.leaks() for index, session in self.sessions.items()}
        return {index: leaks for index, leaks in found.items() if leaks}


@pytest.fixture
def fake_bindings(monkeypatch):
    def use(gpus: FakeGpus) -> FakeBindings:
        fake = FakeBindings(gpus.sessions[0].gpu, devices=len(gpus.indices))
        monkeypatch.setattr(bindings, "_import", lambda: (fake, None))
        return fake

    bindings._allocation_properties.cache_clear()
    yield use
    bindings._allocation_properties.cache_clear()


def run_on(experiment, params, gpus: FakeGpus, progress=None) -> tuple[Result, RunContext]:
    """Run on the stand-in GPUs, every allocation freed by the run itself (checked before the
    sessions close). Not loaded back: the stand-in's copies beat the recorded GPU's link."""
    facts = {i: replace(_first_gpu(), index=i, pci_bus_id=f"0000:0{i}:00.0") for i in gpus.indices}
    ctx = RunContext(params, devices=gpus, facts=facts, affinity=False)
    if progress is not None:
        ctx.progress = progress
    try:
        extra = experiment.run(ctx)
        assert gpus.leaks() == {}
        measurements = [m for s in gpus.sessions.values() for m in s.profiler.measurements()]
    finally:
        for session in gpus.sessions.values():
            session.close()
    result = Result(experiment.name, params, facts[0], measurements, ctx.checks, extra)
    return result, ctx


# -- hostlink ----------------------------------------------------------------------------------


def _hostlink(gpus: FakeGpus, progress=None) -> tuple[Result, RunContext]:
    params = hostlink.HostlinkParams(power=POWER, repeat=REPEAT, warmup=1)
    return run_on(hostlink.Hostlink(), params, gpus, progress)


@pytest.mark.parametrize("count", [2, 3])
def test_hostlink_copies_each_gpu_alone_then_all_at_once_and_verifies_every_copy(
    count, fake_bindings
):
    gpus = FakeGpus(hostlink.Hostlink, count)
    fake_bindings(gpus)
    steps = []
    result, ctx = _hostlink(gpus, lambda what, done, total: steps.append((what, done, total)))
    keys = {(m.operation, m.gpus, m.kind, m.bytes) for m in result.measurements}
    assert keys == {
        (f"{direction}{at_once}", (index,), "pinned", NBYTES)
        for direction in ("h2d", "d2h")
        for at_once in ("", "_at_once")
        for index in range(count)
    }
    assert len(result.measurements) == 4 * count
    for m in result.measurements:  # nvprof's names; every batch of each repetition kept
        assert m.name == hostlink.DIRECTIONS[m.operation.removesuffix("_at_once")]
        assert len(m.samples_ms) == len(m.throughput_ms) == REPEAT
    indices = range(count)
    assert [(c.name, c.passed) for c in result.checks] == [
        (f"Pinned {words}, GPU {index} {mode}", True)
        for words in ("host → device", "device → host")
        for mode in ("alone", "all at once")
        for index in indices
    ]
    total = 2 * (count + 1)
    listed = ", ".join(map(str, indices))
    assert steps == [
        *(
            (f"pinned {direction}, 16 KiB: {what}", done, total)
            for d, direction in enumerate(("h2d", "d2h"))
            for done, what in [
                *((d * (count + 1) + i, f"alone on GPU {i}") for i in indices),
                (d * (count + 1) + count, f"GPUs [{listed}] at once"),
            ]
        ),
        ("done", total, total),
    ]
    assert [device.index for device in result.extra.devices] == list(indices)
    assert [device.pci_bus_id for device in result.extra.devices] == [
        f"0000:0{i}:00.0" for i in indices
    ]
    named = {2: "GPUs 0, 1", 3: "GPUs 0-2"}[count]  # one line for GPUs placed alike
    assert ctx.placement == (
        f"affinity: {named}: off (--no-affinity): the host thread ran wherever the OS put it"
    )
    assert hostlink.summarize(result).conclusions  # every total there: a verdict each way


def test_hostlink_names_each_gpus_placement_where_they_differ(fake_bindings, monkeypatch):
    import contextlib

    from memprof.experiments.base import RunContext

    @contextlib.contextmanager
    def near_gpu(ctx, index):
        yield f"affinity: host thread on CPUs {8 * index}-{8 * index + 7}"

    monkeypatch.setattr(RunContext, "near_gpu", near_gpu)
    gpus = FakeGpus(hostlink.Hostlink, 2)
    fake_bindings(gpus)
    _, ctx = _hostlink(gpus)
    assert ctx.placement == (
        "affinity: GPU 0: host thread on CPUs 0-7; GPU 1: host thread on CPUs 8-15"
    )


def test_hostlink_fails_the_checks_of_the_gpu_whose_copies_move_nothing(fake_bindings, monkeypatch):
    gpus = FakeGpus(hostlink.Hostlink, 2)
    fake_bindings(gpus)
    copy = CheckedCopies.action

    def action(gpu, direction):  # GPU 1's copies move nothing: what it had stays
        return copy(gpu, direction) if gpu.session.device_index == 0 else lambda *_: None

    monkeypatch.setattr(CheckedCopies, "action", action)
    result, _ = _hostlink(gpus)
    failed = [check.name for check in result.checks if not check.passed]
    assert failed == [
        f"Pinned {words}, GPU 1 {mode}"
        for words in ("host → device", "device → host")
        for mode in ("alone", "all at once")
    ]


# -- peer --------------------------------------------------------------------------------------

STEPS = 37  # dependent loads in the latency chain
METHOD_WORDS = {
    "ce_off": "Copy engine, peer access off (the driver stages through host memory): "
    "GPU {a} → GPU {b}",
    "ce_on": "Copy engine, peer access on (cuMemcpyPeerAsync over the link): GPU {a} → GPU {b}",
    "kernel_read": "Kernel on the destination GPU reading the source GPU's memory (readSum): "
    "GPU {b} reading GPU {a}",
    "kernel_write": "Kernel on the source GPU writing the destination GPU's memory (fillValue): "
    "GPU {a} writing GPU {b}",
    "latency": "Latency chain: GPU {b} reading GPU {a}'s memory",
    "ce_bidir": "Copy engine, both directions at once (peer access on), each direction: "
    "GPU {a} → GPU {b}",
}


def _peer(gpus: FakeGpus, progress=None) -> Result:
    params = peer.PeerParams(power=POWER, repeat=REPEAT, warmup=1, latency_steps=STEPS)
    result, _ = run_on(peer.Peer(), params, gpus, progress)
    return result


def _keys(result: Result) -> set[tuple[str, tuple[int, ...], str, int]]:
    return {(m.operation, m.gpus, m.kind, m.bytes) for m in result.measurements if m.group == "gpu"}


def _expected_keys(pairs, own) -> set[tuple[str, tuple[int, ...], str, int]]:
    """pairs: method -> (first GPU, second GPU) pairs; own: the GPUs chasing their own chain."""
    found = {
        (method, pair, "peer", 4 * STEPS if method == "latency" else NBYTES)
        for method, listed in pairs.items()
        for pair in listed
    }
    return found | {("latency", (i, i), "device", 4 * STEPS) for i in own}


@pytest.mark.parametrize("count", [2, 3])
def test_peer_measures_every_method_between_every_pair_and_verifies_each(count, fake_bindings):
    gpus = FakeGpus(peer.Peer, count)
    fake_bindings(gpus)
    steps = []
    result = _peer(gpus, lambda what, done, total: steps.append((what, done, total)))
    pairs = list(itertools.permutations(range(count), 2))  # source-major
    both = list(itertools.combinations(range(count), 2))
    methods = ("ce_off", "ce_on", "kernel_read", "kernel_write", "latency", "ce_bidir")
    assert _keys(result) == _expected_keys(dict.fromkeys(methods, pairs), range(count))
    per_pair = ("ce_on", "kernel_read", "kernel_write", "latency")
    assert [(c.name, c.passed, c.elements) for c in result.checks] == [
        *((METHOD_WORDS["ce_off"].format(a=a, b=b), True, NBYTES // 4) for a, b in pairs),
        *(
            (METHOD_WORDS[m].format(a=a, b=b), True, STEPS if m == "latency" else NBYTES // 4)
            for a, b in pairs
            for m in per_pair
        ),
        *((f"Latency chain: GPU {i} reading its own memory", True, STEPS) for i in range(count)),
        *(
            (METHOD_WORDS["ce_bidir"].format(a=a, b=b), True, NBYTES // 4)
            for pair in both
            for a, b in (pair, pair[::-1])
        ),
    ]
    names = {"ce_off": peer.COPY_NAME, "ce_on": peer.COPY_NAME, "ce_bidir": peer.COPY_NAME}
    names |= {"kernel_read": "readSum(float*, float*, long long)"}
    names |= {"kernel_write": "fillValue(float*, float, long long)"}
    names |= {"latency": "chaseChain(unsigned int*, long long, unsigned int*)"}
    for m in result.measurements:
        if m.group == "gpu":
            assert m.name == names[m.operation]
            assert m.operation == "ce_bidir" or len(m.samples_ms) == REPEAT, m
    assert gpus.peer_enabled == pairs
    assert result.extra.peer_access == [[True] * count for _ in range(count)]
    assert result.extra.skipped == []
    assert [d.index for d in result.extra.devices] == list(range(count))
    total = len(pairs) * 5 + count + len(both)
    said = [what for what, _, _ in steps]
    assert [(done, whole) for _, done, whole in steps] == [
        (min(n, total), total) for n in range(total + 1)
    ]
    assert said[: len(pairs)] == [
        f"GPU {a} → GPU {b}, 16 KiB: copy, peer access off" for a, b in pairs
    ]
    assert said[len(pairs) : 5 * len(pairs)] == [
        line
        for a, b in pairs
        for line in (
            f"GPU {a} → GPU {b}, 16 KiB: copy, peer access on",
            f"GPU {a} → GPU {b}, 16 KiB: kernel read",
            f"GPU {a} → GPU {b}, 16 KiB: kernel write",
            f"GPU {a} → GPU {b}: latency of dependent loads",
        )
    ]
    assert said[5 * len(pairs) :] == [
        *(f"GPU {i}: latency of dependent loads in its own memory" for i in range(count)),
        *(f"GPU {a} ↔ GPU {b}, 16 KiB: both directions at once" for a, b in both),
        "done",
    ]


def test_peer_runs_only_what_one_way_access_allows_and_says_what_it_skipped(
    fake_bindings, monkeypatch
):
    gpus = FakeGpus(peer.Peer, 2)
    fake_bindings(gpus)
    monkeypatch.setattr(bindings, "can_access_peer", lambda a, b: (a, b) != (0, 1))
    result = _peer(gpus)
    assert gpus.peer_enabled == [(1, 0)]
    assert result.extra.peer_access == [[True, False], [True, True]]
    assert result.extra.skipped == [
        "GPU 0 cannot access GPU 1's memory (cuDeviceCanAccessPeer = 0)"
    ]
    # GPU 1 reads and writes GPU 0's memory; GPU 0 touches nothing of GPU 1's
    assert _keys(result) == _expected_keys(
        {
            "ce_off": [(0, 1), (1, 0)],
            "kernel_read": [(0, 1)],
            "kernel_write": [(1, 0)],
            "latency": [(0, 1)],
        },
        (0, 1),
    )
    assert all(check.passed for check in result.checks)


def test_peer_fails_the_checks_of_copies_over_the_link_that_move_nothing(
    fake_bindings, monkeypatch
):
    """Copies with peer access off move the values; once it is on, nothing: each copy's
    destination must be poisoned first, or what the copy before left there passes."""
    gpus = FakeGpus(peer.Peer, 2)
    fake_bindings(gpus)
    copy = bindings.memcpy_peer_async

    def staged_only(*arguments) -> None:
        if not gpus.peer_enabled:
            copy(*arguments)

    monkeypatch.setattr(bindings, "memcpy_peer_async", staged_only)
    monkeypatch.setattr(peer, "chain_end", lambda order, steps: -1)  # no chain ends there
    checks = _peer(gpus).checks
    own = next(check for check in checks if check.name.endswith("GPU 0 reading its own memory"))
    order = peer.pointer_chain(peer.CHAIN_BYTES // 4, peer.CHAIN_STRIDE_ELEMENTS)[1]
    ended = int(order[STEPS % order.size])  # where the chase really ends (chain_end is patched)
    assert own.detail == f"ended on index {ended}, expected -1"  # where it ended, said
    failed = [check.name for check in checks if not check.passed]
    assert failed == [
        *(
            METHOD_WORDS[method].format(a=a, b=b)
            for a, b in ((0, 1), (1, 0))
            for method in ("ce_on", "latency")
        ),
        *(f"Latency chain: GPU {i} reading its own memory" for i in (0, 1)),
        *(METHOD_WORDS["ce_bidir"].format(a=a, b=b) for a, b in ((0, 1), (1, 0))),
    ]


@pytest.mark.parametrize("command", ["hostlink", "peer"])
def test_each_gpu_is_asked_for_all_the_memory_it_will_use_before_allocating(
    command, fake_bindings, monkeypatch
):
    """hostlink: a device buffer on each GPU and a pinned one per GPU plus one more in host
    memory; peer: source and destination (8 bytes an element) and the 1 MiB latency chain."""
    from memprof.core import memory

    asked = []
    real = memory.require_memory

    def require(session, device_bytes=0, host_bytes=0):
        asked.append((session.device_index, device_bytes, host_bytes))
        real(session, device_bytes=device_bytes, host_bytes=host_bytes)

    monkeypatch.setattr(memory, "require_memory", require)
    experiment = {"hostlink": hostlink.Hostlink, "peer": peer.Peer}[command]
    gpus = FakeGpus(experiment, 3)
    fake_bindings(gpus)
    (_hostlink if command == "hostlink" else _peer)(gpus)
    if command == "hostlink":
        assert asked == [(i, NBYTES, 4 * NBYTES) for i in range(3)]
    else:
        assert asked == [(i, 2 * NBYTES + peer.CHAIN_BYTES, 0) for i in range(3)]


# -- check-pairs -------------------------------------------------------------------------------


def _check_pairs(gpus: FakeGpus, progress=None) -> Result:
    params = check.CheckPairsParams(power=POWER, repeat=REPEAT)
    result, _ = run_on(check.CheckPairs(), params, gpus, progress)
    return result


@pytest.mark.parametrize("count", [2, 3])
def test_check_pairs_copies_each_pair_each_way_then_both_at_once_and_verifies_each(
    count, fake_bindings
):
    gpus = FakeGpus(check.CheckPairs, count)
    fake_bindings(gpus)
    steps = []
    result = _check_pairs(gpus, lambda what, done, total: steps.append((what, done, total)))
    both = list(itertools.combinations(range(count), 2))
    ways = [way for pair in both for way in (pair, pair[::-1])]
    assert sorted((m.operation, m.gpus, m.kind, m.bytes) for m in result.measurements) == sorted(
        (operation, way, "peer", NBYTES) for operation in ("peer", "peer_at_once") for way in ways
    )
    for m in result.measurements:  # nvprof's name; every batch of each repetition kept
        assert m.name == "[CUDA memcpy PtoP]"
        assert len(m.samples_ms) == len(m.throughput_ms) == REPEAT
    assert [(c.name, c.passed, c.elements) for c in result.checks] == [
        (f"GPU {x} → GPU {y}, {how}", True, NBYTES // 4)
        for a, b in both
        for how in ("one direction", "both at once")
        for x, y in ((a, b), (b, a))
    ]
    assert gpus.peer_enabled == ways
    assert result.extra.peer_access == [[True] * count for _ in range(count)]
    assert [d.index for d in result.extra.devices] == list(range(count))
    total = 3 * len(both)
    assert steps == [
        *(
            (what, 3 * n + i, total)
            for n, (a, b) in enumerate(both)
            for i, what in enumerate(
                (
                    f"GPU {a} → GPU {b}, 16 KiB: peer copies",
                    f"GPU {b} → GPU {a}, 16 KiB: peer copies",
                    f"GPU {a} ↔ GPU {b}, 16 KiB: both directions at once",
                )
            )
        ),
        ("done", total, total),
    ]


def test_check_pairs_fails_the_checks_of_peer_copies_that_move_nothing(fake_bindings, monkeypatch):
    """Each destination poisoned before its copies: a copy that moves nothing never passes."""
    gpus = FakeGpus(check.CheckPairs, 2)
    fake_bindings(gpus)
    monkeypatch.setattr(bindings, "memcpy_peer_async", lambda *arguments: None)
    failed = [c.name for c in _check_pairs(gpus).checks if not c.passed]
    assert failed == [
        f"GPU {a} → GPU {b}, {how}"
        for how in ("one direction", "both at once")
        for a, b in ((0, 1), (1, 0))
    ]
