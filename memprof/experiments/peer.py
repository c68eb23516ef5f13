"""`memprof peer`: copies between every pair of GPUs, as the bandwidth tools measure them.

For each ordered pair (source → destination), with one context per GPU (memprof.multigpu):
- copy engine, peer access off: cuMemcpyPeerAsync, which the driver stages through host
  memory (timed as the calls return: a staged copy may block the host, so it is not gated);
- copy engine, peer access on: the same call, now straight over NVLink or PCIe;
- both directions at once (peer access on), each direction timed on its own GPU's stream;
- a kernel on the destination reading the source's memory (readSum), and one on the source
  writing the destination's memory (fillValue), through peer access;
- the latency of one small read of the source's memory from the destination (a dependent
  chain of 4-byte uncached loads), beside the same chain in the GPU's own memory.
GB/s come from back-to-back batches behind the GPU-side gate (Profiler.throughput). Every
copy, read and write is verified; destinations are poisoned before each method.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from memprof.core import memory
from memprof.core.access import DirectAccess
from memprof.core.devicefacts import collect
from memprof.core.kernels import load_kernel
from memprof.core.measure import MAX_BATCH, THROUGHPUT_BATCHES
from memprof.core.multigpu import (
    DEVICE_RECORD,
    PeerSession,
    device_records,
    memcpy_peer_async,
    ordered_pairs,
    unordered_pairs,
)
from memprof.errors import EnvironmentProblem
from memprof.experiments.common import FLOAT32_BYTES, POISON_BYTE, Progress, no_progress
from memprof.model.formatting import bandwidth_gb_per_s, format_bytes, format_gb_per_s
from memprof.model.results import ByteCount, Check, Count, Measurement, Result
from memprof.model.summary import Summary, Table

COPY_NAME = "[CUDA memcpy PtoP]"  # nvprof's name for peer-to-peer copies
PEER = "peer"
METHODS = {  # bandwidth methods, in the order the tables show them
    "ce_off": "Copy engine, peer access off (the driver stages through host memory)",
    "ce_on": "Copy engine, peer access on (cuMemcpyPeerAsync over the link)",
    "ce_bidir": "Copy engine, both directions at once (peer access on), each direction",
    "kernel_read": "Kernel on the destination GPU reading the source GPU's memory (readSum)",
    "kernel_write": "Kernel on the source GPU writing the destination GPU's memory (fillValue)",
}
LATENCY = "latency"
BIDIR_TARGET_MS = 5.0  # a two-direction batch lasts about this long: host skew stays small
CHAIN_BYTES = 1 << 20  # the latency chain: 1 MiB, one hop every 256 bytes
CHAIN_STRIDE_ELEMENTS = 64
FILL_VALUE = 2.5


@dataclass(frozen=True)
class PeerParams:
    power: int = 26  # 2^26 float32 = 256 MiB per copy
    repeat: int = 5
    warmup: int = 1
    latency_steps: int = 4096


# What a saved Result holds: `parameters` (every field) and `extra`, checked at load.
PARAMS = PeerParams
EXTRA_FIELDS = {
    "devices": list[DEVICE_RECORD],
    "peer_access": list[list[bool]],  # [source][destination]: can access
    "bytes_per_array": ByteCount,
    "latency_steps": Count,
    "skipped": list[str],
}


def operation_key(method: str, source: int, destination: int) -> str:
    """The Measurement operation of one method and pair: 'ce_on 0->1' (data flows 0 to 1)."""
    return f"{method} {source}->{destination}"


def parse_operation_key(key: str) -> tuple[str, int, int] | None:
    """(method, source, destination) of a peer measurement, None for anything else."""
    method, _, pair = key.partition(" ")
    source, arrow, destination = pair.partition("->")
    if not arrow or not source.isdigit() or not destination.isdigit():
        return None
    return method, int(source), int(destination)


def pointer_chain(elements: int, stride: int, seed: int = 11) -> tuple[np.ndarray, np.ndarray]:
    """(next, order): next[i] is the index read after i; order is the cycle from index 0.

    The hops visit every stride-th element once in a random order, so each load depends
    on the previous one and the hardware cannot guess the next address.
    """
    positions = np.arange(0, elements, stride, dtype=np.uint32)
    rest = np.random.default_rng(seed).permutation(positions[1:])
    order = np.concatenate([positions[:1], rest])
    chain = np.zeros(elements, np.uint32)
    chain[order] = np.roll(order, -1)
    return chain, order


def chain_end(order: np.ndarray, steps: int) -> int:
    """The index a chase of `steps` loads from index 0 ends on."""
    return int(order[steps % order.size])


# -- running ---------------------------------------------------------------------------------


@dataclass
class _Device:
    session: Any
    values: np.ndarray
    source: memory.Buffer
    destination: memory.Buffer
    access: DirectAccess
    chase: Any
    chain: memory.Buffer
    last: memory.Buffer


def run(peers: PeerSession, params: PeerParams, progress: Progress = no_progress) -> Result:
    devices = peers.devices
    if len(devices) < 2:
        raise EnvironmentProblem(
            f"memprof peer needs two GPUs: this machine has {len(devices)}, so there is no "
            "peer to copy to"
        )
    elements = 1 << params.power
    nbytes = elements * FLOAT32_BYTES
    chain_elements = CHAIN_BYTES // 4
    chain, order = pointer_chain(chain_elements, CHAIN_STRIDE_ELEMENTS)
    state: dict[int, _Device] = {}
    facts = {}
    for index in devices:
        with peers.active(index) as session:
            memory.require_memory(session, device_bytes=2 * nbytes + CHAIN_BYTES)
            facts[index] = collect(session)
            values = np.random.default_rng(100 + index).random(elements, dtype=np.float32)
            with session.profiler.paused():
                source = memory.allocate(session, "device", elements)
                destination = memory.allocate(session, "device", elements)
                chain_buffer = memory.allocate(session, "device", chain_elements, np.uint32)
                last = memory.allocate(session, "device", 1, np.uint32)
            session.cuda.memcpy_htod(source.device_pointer, values)
            session.cuda.memcpy_htod(chain_buffer.device_pointer, chain)
            state[index] = _Device(
                session,
                values,
                source,
                destination,
                DirectAccess(session),
                load_kernel(session, "peer.cu", "chaseChain"),
                chain_buffer,
                last,
            )
    pairs = ordered_pairs(devices)
    access_matrix = [[a == b or peers.can_access_peer(a, b) for b in devices] for a in devices]
    can = {(a, b): access_matrix[devices.index(a)][devices.index(b)] for a, b in pairs}
    checks: list[Check] = []
    skipped: list[str] = []
    bidirectional: list[Measurement] = []
    steps = len(pairs) * 5 + len(devices) + len(unordered_pairs(devices))
    done = 0

    def advance(text: str) -> None:
        nonlocal done
        progress(text, done, steps)
        done += 1

    # Peer access off first: once enabled, a context cannot be measured without it.
    for a, b in pairs:
        advance(f"{a} → {b}: copy, peer access off")
        checks.append(_copy(peers, state, params, "ce_off", a, b, nbytes, synchronous=True))
    for a, b in pairs:
        if can[a, b]:
            peers.enable_peer_access(a, b)
        else:
            skipped.append(f"GPU {a} cannot access GPU {b}'s memory (cuDeviceCanAccessPeer = 0)")
    for a, b in pairs:
        advance(f"{a} → {b}: copy, peer access on")
        direct = can[a, b] and can[b, a]  # a copy over the link needs both mapped
        if direct:
            checks.append(_copy(peers, state, params, "ce_on", a, b, nbytes, synchronous=False))
        advance(f"{a} → {b}: kernel read")
        if can[b, a]:
            checks.append(_kernel_read(state, params, a, b, elements))
        advance(f"{a} → {b}: kernel write")
        if can[a, b]:
            checks.append(_kernel_write(peers, state, params, a, b, elements))
        advance(f"{a} → {b}: latency")
        if can[b, a]:
            checks.append(_latency(state, params, a, b, order))
    for index in devices:
        advance(f"{index}: local latency")
        checks.append(_latency(state, params, index, index, order))
    for a, b in unordered_pairs(devices):
        advance(f"{a} ↔ {b}: both directions")
        if can[a, b] and can[b, a]:
            found, verified = _bidirectional(peers, state, a, b, nbytes)
            bidirectional += found
            checks += verified
    progress("done", steps, steps)

    measurements: list[Measurement] = []
    timing = None
    for index in devices:
        with peers.active(index) as session:
            device = state[index]
            for buffer in (device.source, device.destination, device.chain, device.last):
                buffer.free()
            device.access.free()
            measurements += session.profiler.measurements()
            if timing is None:
                timing = session.profiler.timing_info()
    return Result(
        command="peer",
        parameters=asdict(params),
        device=facts[devices[0]],
        measurements=measurements + bidirectional,
        checks=checks,
        extra={
            "devices": device_records(facts, devices),
            "peer_access": access_matrix,
            "bytes_per_array": nbytes,
            "latency_steps": params.latency_steps,
            "skipped": skipped,
        },
        timing=timing,
    )


def _poison(state: dict[int, _Device], peers: PeerSession, index: int) -> None:
    with peers.active(index) as session:
        target = state[index].destination
        session.cuda.memset_d8(target.device_pointer, POISON_BYTE, target.nbytes)


def _received(peers: PeerSession, state: dict[int, _Device], index: int) -> np.ndarray:
    with peers.active(index) as session:
        session.synchronize()
        host = np.empty(state[index].values.size, np.float32)
        session.cuda.memcpy_dtoh(host, state[index].destination.device_pointer)
    return host


def _check(name: str, received: np.ndarray, expected: np.ndarray | float) -> Check:
    wrong = np.flatnonzero(received != expected)
    detail = (
        "Check result success!"
        if not wrong.size
        else f"element {wrong[0]} is {received[wrong[0]]!r} ({wrong.size} wrong)"
    )
    return Check(name, not wrong.size, int(received.size), detail)


def _copy_action(state: dict[int, _Device], a: int, b: int, nbytes: int):
    source, destination = state[a], state[b]
    arguments = (
        destination.destination.device_pointer,
        destination.session.context.handle,
        source.source.device_pointer,
        source.session.context.handle,
        nbytes,
    )
    return lambda stream: memcpy_peer_async(*arguments, stream.handle)


def _copy(peers, state, params, method: str, a: int, b: int, nbytes: int, synchronous: bool):
    """cuMemcpyPeerAsync a → b on the source GPU's stream: single copies, then batches."""
    _poison(state, peers, b)
    key = operation_key(method, a, b)
    action = _copy_action(state, a, b, nbytes)
    with peers.active(a) as session:
        profiler = session.profiler

        def step() -> None:
            with profiler.events("gpu", COPY_NAME, key, PEER, nbytes, synchronous=synchronous):
                action(profiler.stream)

        profiler.repeat(step, params.warmup, params.repeat)
        profiler.throughput(COPY_NAME, key, PEER, nbytes, action, synchronous)
        session.synchronize()
    return _check(
        f"{METHODS[method]}: GPU {a} → GPU {b}", _received(peers, state, b), state[a].values
    )


def _kernel_read(state, params, a: int, b: int, elements: int) -> Check:
    """GPU b's readSum over GPU a's source buffer, its sum checked against numpy's."""
    key = operation_key("kernel_read", a, b)
    reader = state[b]
    pointer = state[a].source.device_pointer
    profiler = reader.session.profiler
    with _current(reader.session):
        profiler.repeat(
            lambda: reader.access.read(pointer, elements, PEER, operation=key),
            params.warmup,
            params.repeat,
        )
        profiler.throughput(
            reader.access.reader.signature.display,
            key,
            PEER,
            4 * elements,
            lambda stream: reader.access.read(pointer, elements, PEER, stream, key),
        )
        return reader.access.check_sum(
            f"{METHODS['kernel_read']}: GPU {b} reading GPU {a}", state[a].values
        )


def _kernel_write(peers, state, params, a: int, b: int, elements: int) -> Check:
    """GPU a's fillValue over GPU b's destination buffer, every element checked."""
    _poison(state, peers, b)
    key = operation_key("kernel_write", a, b)
    writer = state[a]
    pointer = state[b].destination.device_pointer
    with peers.active(a) as session:
        profiler = session.profiler
        profiler.repeat(
            lambda: writer.access.write(pointer, elements, FILL_VALUE, PEER, operation=key),
            params.warmup,
            params.repeat,
        )
        profiler.throughput(
            writer.access.writer.signature.display,
            key,
            PEER,
            4 * elements,
            lambda stream: writer.access.write(pointer, elements, FILL_VALUE, PEER, stream, key),
        )
        session.synchronize()
    received = _received(peers, state, b)
    return _check(f"{METHODS['kernel_write']}: GPU {a} writing GPU {b}", received, FILL_VALUE)


def _latency(state, params, a: int, b: int, order: np.ndarray) -> Check:
    """GPU b chasing the chain in GPU a's memory (a == b: its own memory, the baseline)."""
    key = operation_key(LATENCY, a, b)
    reader = state[b]
    kind = PEER if a != b else "device"
    session = reader.session
    with _current(session):
        session.profiler.repeat(
            lambda: reader.chase.launch(
                session,
                1,
                state[a].chain.device_pointer,
                params.latency_steps,
                reader.last.device_pointer,
                kind=kind,
                nbytes=4 * params.latency_steps,
                block_size=1,
                blocks=1,
                operation=key,
            ),
            params.warmup,
            params.repeat,
        )
        session.synchronize()
        last = np.zeros(1, np.uint32)
        session.cuda.memcpy_dtoh(last, reader.last.device_pointer)
    expected = chain_end(order, params.latency_steps)
    where = "its own memory" if a == b else f"GPU {a}'s memory"
    return Check(
        f"Latency chain: GPU {b} reading {where}",
        int(last[0]) == expected,
        params.latency_steps,
        f"ended on index {int(last[0])}, expected {expected}",
    )


def _bidirectional(peers, state, a: int, b: int, nbytes: int):
    """a → b and b → a together, each on its source's stream behind its own gate."""
    _poison(state, peers, a)
    _poison(state, peers, b)
    directions = ((a, b), (b, a))
    actions = {pair: _copy_action(state, *pair, nbytes) for pair in directions}
    with peers.active(a) as session:
        one_ms = session.profiler.time_once(lambda: actions[a, b](session.profiler.stream))
    count = max(1, min(MAX_BATCH, math.ceil(BIDIR_TARGET_MS / max(one_ms, 1e-4))))
    per_copy: dict[tuple[int, int], list[float]] = {pair: [] for pair in directions}
    for _ in range(THROUGHPUT_BATCHES):
        events = {}
        for source, destination in directions:
            with peers.active(source) as session:
                profiler = session.profiler
                profiler.gate().close(profiler.stream)
                start, end = session.cuda.Event(), session.cuda.Event()
                start.record(profiler.stream)
                for _ in range(count):
                    actions[source, destination](profiler.stream)
                end.record(profiler.stream)
                events[source, destination] = (start, end)
        for source, _ in directions:  # open both gates back to back: the copies overlap
            state[source].session.profiler.release_gate()
        for pair in directions:
            with peers.active(pair[0]) as session:
                start, end = events[pair]
                end.synchronize()
                session.profiler.gate().check()
                per_copy[pair].append(end.time_since(start) / count)
    measurements = [
        Measurement(
            "gpu",
            COPY_NAME,
            operation_key("ce_bidir", *pair),
            PEER,
            nbytes,
            samples_ms=list(per_copy[pair]),
            throughput_ms=list(per_copy[pair]),
            batch=count,
        )
        for pair in directions
    ]
    checks = [
        _check(
            f"{METHODS['ce_bidir']}: GPU {source} → GPU {destination}",
            _received(peers, state, destination),
            state[source].values,
        )
        for source, destination in directions
    ]
    return measurements, checks


class _current:
    """The session's context current for the work inside (state holds sessions, not indexes)."""

    def __init__(self, session: Any) -> None:
        self.session = session

    def __enter__(self) -> None:
        self.session.context.push()

    def __exit__(self, *exc_info: Any) -> None:
        self.session.cuda.Context.pop()


# -- summarizing -----------------------------------------------------------------------------


def devices_of(result: Result) -> list[int]:
    return [device["index"] for device in result.extra["devices"]]


def figures(result: Result, method: str) -> dict[tuple[int, int], float]:
    """(source, destination) -> GB/s of back-to-back operations, for one method."""
    found = {}
    for m in result.measurements:
        parsed = parse_operation_key(m.operation)
        if parsed is None or parsed[0] != method or m.group != "gpu":
            continue
        stats = m.throughput_stats or m.stats
        found[parsed[1], parsed[2]] = bandwidth_gb_per_s(m.bytes, stats.median_ms)
    return found


def latencies_us(result: Result) -> dict[tuple[int, int], float]:
    """(memory's GPU, reading GPU) -> microseconds per dependent read, median."""
    steps = result.extra["latency_steps"]
    found = {}
    for m in result.measurements:
        parsed = parse_operation_key(m.operation)
        if parsed is not None and parsed[0] == LATENCY and m.group == "gpu":
            found[parsed[1], parsed[2]] = m.stats.median_ms * 1e3 / steps
    return found


def matrix_table(
    title: str, devices: list[int], cells: dict[tuple[int, int], float], unit_format
) -> Table:
    """A GPU x GPU table: rows are sources, columns destinations; '-' where nothing ran."""
    table = Table(title, ["from \\ to", *(f"GPU {d}" for d in devices)])
    for source in devices:
        row = [
            unit_format(cells[source, destination]) if (source, destination) in cells else "-"
            for destination in devices
        ]
        table.add_row(f"GPU {source}", *row)
    return table


def summarize(result: Result) -> Summary:
    devices = devices_of(result)
    nbytes = result.extra["bytes_per_array"]
    tables = []
    for method, title in METHODS.items():
        cells = figures(result, method)
        if not cells:
            continue
        table = matrix_table(f"{title}, GB/s", devices, cells, format_gb_per_s)
        if method == "ce_bidir":
            for a, b in unordered_pairs(devices):
                if (a, b) in cells and (b, a) in cells:
                    table.notes.append(
                        f"GPU {a} ↔ GPU {b}: {format_gb_per_s(cells[a, b] + cells[b, a])} GB/s "
                        "in total."
                    )
        tables.append(table)
    latency = latencies_us(result)
    if latency:
        tables.append(
            matrix_table(
                "Latency of one 4-byte read, µs: rows hold the memory, columns read it "
                "(diagonal: the GPU's own memory)",
                devices,
                latency,
                lambda us: f"{us:.2f}",
            )
        )
        tables[-1].notes.append(
            f"A single thread follows a chain of {result.extra['latency_steps']} dependent "
            "uncached loads, 256 bytes apart in 1 MiB; kernel time / loads, median of "
            f"{result.parameters['repeat']}."
        )
    link = "yes" if all(all(row) for row in result.extra["peer_access"]) else "not for every pair"
    tables[0].notes += [
        f"{format_bytes(nbytes)} per copy; GB/s = 10^9 bytes/s from back-to-back batches between "
        "one event pair (peer access on: behind a GPU-side gate; off: timed as the calls "
        "return, since the driver may block while it stages).",
        f"Peer access possible between every pair (cuDeviceCanAccessPeer): {link}.",
    ] + [f"Skipped: {reason}." for reason in result.extra["skipped"]]
    return Summary(tables=tables, conclusions=_conclusions(result, devices), show_profile=False)


def _conclusions(result: Result, devices: list[int]) -> list[str]:
    on, off = figures(result, "ce_on"), figures(result, "ce_off")
    bidir = figures(result, "ce_bidir")
    latency = latencies_us(result)
    lines = []
    for a, b in ordered_pairs(devices):
        if (a, b) in on and (a, b) in off:
            lines.append(
                f"GPU {a} → GPU {b}: {format_gb_per_s(on[a, b])} GB/s with peer access, "
                f"{format_gb_per_s(off[a, b])} GB/s without ({on[a, b] / off[a, b]:.1f}x)."
            )
    for a, b in unordered_pairs(devices):
        if (a, b) in bidir and (b, a) in bidir and (a, b) in on and (b, a) in on:
            total = bidir[a, b] + bidir[b, a]
            one_way = max(on[a, b], on[b, a])
            lines.append(
                f"GPU {a} ↔ GPU {b} at once: {format_gb_per_s(total)} GB/s in total, "
                f"{total / one_way:.2f}x one direction: the link "
                + ("carries both directions in full." if total >= 1.8 * one_way else "is shared.")
            )
        if (a, b) in latency and (b, b) in latency:
            lines.append(
                f"One read of GPU {a}'s memory from GPU {b} takes {latency[a, b]:.2f} µs, "
                f"{latency[a, b] / latency[b, b]:.1f}x a read of its own ({latency[b, b]:.2f} µs)."
            )
    return lines


def measure(params: PeerParams, progress: Progress = no_progress) -> Result:
    """Open a context on every GPU and run the experiment (one GPU: exit 3, one line)."""
    from memprof.core.multigpu import device_count

    count = device_count()
    if count < 2:
        raise EnvironmentProblem(
            "memprof peer needs two GPUs: this machine has one, so there is nothing to measure"
        )
    with PeerSession(list(range(count))) as peers:
        return run(peers, params, progress)
