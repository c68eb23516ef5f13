"""`memprof peer`: copies between every pair of GPUs, as the bandwidth tools measure them.

For each ordered pair, one context per GPU: cuMemcpyPeerAsync with peer access off (the
driver stages through host memory; timed as the calls return, since it may block the host)
and on, both directions at once, a kernel reading and one writing the other GPU's memory, and
the latency of a dependent chain of 4-byte loads beside the same chain in the GPU's own
memory. GB/s from back-to-back batches behind the GPU-side gate; everything is verified.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from memprof.experiments import base
from memprof.experiments.common import POISON_BYTE, pair_figures, peer_copy
from memprof.experiments.hostlink import devices_of
from memprof.model.device import DeviceRecord
from memprof.model.figures import Figure
from memprof.model.formatting import format_bytes, format_gb_per_s, said_once
from memprof.model.params import Range, param
from memprof.model.results import Check, Result
from memprof.model.schema import SchemaError
from memprof.model.summary import Column, Summary, Table, table

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
class PeerParams(base.LargeCopies):
    latency_steps: Annotated[int, Range(1, 1 << 20)] = param(
        4096, "Dependent loads in the latency chain (1 to 1048576)."
    )


@dataclass(frozen=True)
class PeerExtra:
    devices: list[DeviceRecord]
    peer_access: list[list[bool]]  # [source][destination]: can access
    skipped: list[str]


# Each method's GB/s from back-to-back batches, against the links between the two GPUs
# (peer access off, the driver stages through host memory: no bound declared).
METHOD_MEASURES = {
    method: base.Measure(
        "gpu",
        method,
        f"{title}: one operation, then back to back",
        "back to back",
        required=method == "ce_off",
        arrays=1,
        kinds=(PEER,),
        gpus=2,
        shows="throughput",
        bound=None if method == "ce_off" else "nvlink",
        per_repeat=method != "ce_bidir",  # its samples are its batches
    )
    for method, title in METHODS.items()
}


LATENCY_CHAIN = base.Measure(
    "gpu",
    LATENCY,
    "a chain of dependent 4-byte reads, one thread",
    "one operation",
    kinds=(PEER, "device"),
    gpus=2,
    shows="latency",
    per_sample="latency_steps",
)


class Peer(base.Experiment):
    name = "peer"
    Params = PeerParams
    Extra = PeerExtra
    gpus = "every"
    needs_two_gpus = "so there is nothing to measure"
    measures = (*METHOD_MEASURES.values(), LATENCY_CHAIN, base.LAUNCH_CALL)

    def run(self, ctx: base.RunContext) -> PeerExtra:
        from memprof.core.bindings import can_access_peer

        devices, params = ctx.devices, ctx.params
        indices = devices.indices
        elements = 1 << params.power
        nbytes = elements * base.FLOAT32_BYTES
        chain, order = pointer_chain(CHAIN_BYTES // 4, CHAIN_STRIDE_ELEMENTS)
        state = {i: _Device.open(devices.session(i), elements, chain) for i in indices}
        pairs = ordered_pairs(indices)
        access = [[a == b or can_access_peer(a, b) for b in indices] for a in indices]
        can = {(a, b): access[indices.index(a)][indices.index(b)] for a, b in pairs}
        skipped: list[str] = []
        step = ctx.steps(len(pairs) * 5 + len(indices) + len(unordered_pairs(indices)))

        # Peer access off first: once enabled, a context cannot be measured without it.
        for a, b in pairs:
            step(f"GPU {a} → GPU {b}, {format_bytes(nbytes)}: copy, peer access off")
            ctx.check(_copy(state, params, "ce_off", a, b, nbytes, synchronous=True))
        for a, b in pairs:
            if can[a, b]:
                devices.enable_peer_access(a, b)
            else:
                skipped.append(
                    f"GPU {a} cannot access GPU {b}'s memory (cuDeviceCanAccessPeer = 0)"
                )
        for a, b in pairs:
            step(f"GPU {a} → GPU {b}, {format_bytes(nbytes)}: copy, peer access on")
            if can[a, b] and can[b, a]:  # a copy over the link needs both mapped
                ctx.check(_copy(state, params, "ce_on", a, b, nbytes, synchronous=False))
            step(f"GPU {a} → GPU {b}, {format_bytes(nbytes)}: kernel read")
            if can[b, a]:
                ctx.check(_kernel_read(state, params, a, b, elements))
            step(f"GPU {a} → GPU {b}, {format_bytes(nbytes)}: kernel write")
            if can[a, b]:
                ctx.check(_kernel_write(state, params, a, b, elements))
            step(f"GPU {a} → GPU {b}: latency of dependent loads")
            if can[b, a]:
                ctx.check(_latency(state, params, a, b, order))
        for index in indices:
            step(f"GPU {index}: latency of dependent loads in its own memory")
            ctx.check(_latency(state, params, index, index, order))
        for a, b in unordered_pairs(indices):
            step(f"GPU {a} ↔ GPU {b}, {format_bytes(nbytes)}: both directions at once")
            if can[a, b] and can[b, a]:
                ctx.checks += _bidirectional(state, a, b, nbytes)
        for device in state.values():
            device.free()
        step("done")
        devices = [DeviceRecord.of(ctx.facts[index]) for index in indices]
        return PeerExtra(devices=devices, peer_access=access, skipped=skipped)

    def derived(self, result: Result) -> dict:
        params = result.parameters
        return {"bytes_per_array": base.array_bytes(params), "latency_steps": params.latency_steps}

    def check_consistency(self, result: Result) -> None:
        access = base.access_matrix(result, devices_of(result))  # (base.run_devices)
        for index, m in enumerate(result.measurements):
            if m.group != "gpu":
                continue
            a, b = m.gpus
            _check_peer_figure(m, index, a, b, access, result.parameters.latency_steps)


def _check_peer_figure(m, index: int, a: int, b: int, access: dict, steps: int) -> None:
    """A figure between GPUs a and b: of the right kind, between two GPUs where a method
    needs two, and only where peer access allowed it to run."""
    where = f"measurements[{index}]"
    if m.operation == LATENCY:
        if m.bytes != 4 * steps:
            raise SchemaError(
                f"{where}.bytes",
                f"is {m.bytes}, but 4-byte loads of parameters.latency_steps make {4 * steps}",
            )
        kind = "device" if a == b else PEER
    else:
        if a == b:
            raise SchemaError(
                f"{where}.gpus", f"is GPU {a} to itself: {m.operation} is between two"
            )
        kind = PEER
    if m.kind != kind:
        raise SchemaError(
            f"{where}.kind", f"is {m.kind!r}, but a {m.operation} between these GPUs is {kind!r}"
        )
    needed = {  # (memory's GPU, accessing GPU) pairs the method maps
        "ce_on": [(a, b), (b, a)],
        "ce_bidir": [(a, b), (b, a)],
        "kernel_read": [(b, a)],
        "kernel_write": [(a, b)],
        LATENCY: [(b, a)] if a != b else [],
    }.get(m.operation, [])
    for reader, memory in needed:
        if not access[reader, memory]:
            raise SchemaError(
                f"{where}.gpus",
                f"is GPU {a} → GPU {b} by {m.operation}, but extra.peer_access says GPU "
                f"{reader} cannot access GPU {memory}",
            )


def ordered_pairs(devices: list[int]) -> list[tuple[int, int]]:
    """Every (source, destination) pair of distinct devices, source-major as matrices read."""
    return [(a, b) for a, b in itertools.product(devices, devices) if a != b]


def unordered_pairs(devices: list[int]) -> list[tuple[int, int]]:
    """Each pair once (for measurements in both directions at once)."""
    return list(itertools.combinations(devices, 2))


def pointer_chain(elements: int, stride: int, seed: int = 11) -> tuple[Any, Any]:
    """(next, order): next[i] is the index read after i, order the cycle from index 0. The hops
    visit every stride-th element once in random order: the hardware cannot guess the next."""
    import numpy as np

    positions = np.arange(0, elements, stride, dtype=np.uint32)
    rest = np.random.default_rng(seed).permutation(positions[1:])
    order = np.concatenate([positions[:1], rest])
    chain = np.zeros(elements, np.uint32)
    chain[order] = np.roll(order, -1)
    return chain, order


def chain_end(order: Any, steps: int) -> int:
    """The index a chase of `steps` loads from index 0 ends on."""
    return int(order[steps % order.size])


# -- running ---------------------------------------------------------------------------------


@dataclass
class _Device:
    session: Any
    values: Any
    source: Any
    destination: Any
    access: Any
    chase: Any
    chain: Any
    last: Any

    @classmethod
    def open(cls, session: Any, elements: int, chain: Any) -> _Device:
        """One GPU's buffers (filled source, destination, latency chain) and kernels."""
        import numpy as np

        from memprof.core import memory
        from memprof.core.access import DirectAccess
        from memprof.core.kernels import load_kernel

        with session.active():
            memory.require_memory(session, device_bytes=8 * elements + CHAIN_BYTES)
            rng = np.random.default_rng(100 + session.device_index)
            values = rng.random(elements, dtype=np.float32)
            source, destination = (memory.allocate(session, "device", elements) for _ in range(2))
            chain_buffer = memory.allocate(session, "device", chain.size, np.uint32)
            last = memory.allocate(session, "device", 1, np.uint32)
            session.cuda.memcpy_htod(source.device_pointer, values)
            session.cuda.memcpy_htod(chain_buffer.device_pointer, chain)
            access, chase = DirectAccess(session), load_kernel(session, "peer.cu", "chaseChain")
        return cls(session, values, source, destination, access, chase, chain_buffer, last)

    def free(self) -> None:
        with self.session.active():
            for buffer in (self.source, self.destination, self.chain, self.last):
                buffer.free()
            self.access.free()

    def poison(self) -> None:
        with self.session.active():
            target = self.destination
            self.session.cuda.memset_d8(target.device_pointer, POISON_BYTE, target.nbytes)

    def received(self) -> Any:
        import numpy as np

        with self.session.active():
            self.session.synchronize()
            host = np.empty(self.values.size, np.float32)
            self.session.cuda.memcpy_dtoh(host, self.destination.device_pointer)
        return host


def _check(name: str, received: Any, expected: Any) -> Check:
    """Every element as expected (an array, or one value written everywhere)."""
    import numpy as np

    from memprof.core.verify import compare_arrays

    return compare_arrays(name, received, np.broadcast_to(np.float32(expected), received.shape))


def _copy_action(state: dict[int, _Device], a: int, b: int, nbytes: int) -> Any:
    into = state[b]
    return peer_copy(state[a].session, state[a].source, into.session, into.destination, nbytes)


def _copy(state, params, method: str, a: int, b: int, nbytes: int, synchronous: bool) -> Check:
    """cuMemcpyPeerAsync a → b on the source GPU's stream: single copies, then batches."""
    state[b].poison()
    action = _copy_action(state, a, b, nbytes)
    with state[a].session.active() as session:
        profiler = session.profiler

        def step() -> None:
            with profiler.events("gpu", COPY_NAME, method, PEER, nbytes, synchronous=synchronous):
                action(profiler.stream)

        with profiler.on_gpus(a, b):
            profiler.repeat(step, params.warmup, params.repeat)
            profiler.throughput(COPY_NAME, method, PEER, nbytes, action, synchronous)
        session.synchronize()
    return _check(f"{METHODS[method]}: GPU {a} → GPU {b}", state[b].received(), state[a].values)


def _kernel_timed(session, params, pair, kernel, method: str, launch: Callable) -> None:
    """A kernel's figures between `pair`: launch() (recording itself) after warm-ups, then
    back-to-back batches of launch(stream), of the bytes it reads or writes."""
    profiler, nbytes = session.profiler, base.array_bytes(params)
    with profiler.on_gpus(*pair):
        profiler.repeat(launch, params.warmup, params.repeat)
        profiler.throughput(kernel.signature.display, method, PEER, nbytes, launch)


def _kernel_read(state, params, a: int, b: int, elements: int) -> Check:
    """GPU b's readSum over GPU a's source buffer, its sum checked against numpy's."""
    from memprof.core.access import float64_sum

    reader = state[b]
    pointer = state[a].source.device_pointer

    def read(stream: Any = None) -> None:
        reader.access.read(pointer, elements, PEER, stream, "kernel_read")

    with reader.session.active() as session:
        _kernel_timed(session, params, (a, b), reader.access.reader, "kernel_read", read)
        values = state[a].values
        return reader.access.check_sum(
            f"{METHODS['kernel_read']}: GPU {b} reading GPU {a}", values.size, float64_sum(values)
        )


def _kernel_write(state, params, a: int, b: int, elements: int) -> Check:
    """GPU a's fillValue over GPU b's destination buffer, every element checked."""
    state[b].poison()
    writer = state[a]
    pointer = state[b].destination.device_pointer

    def write(stream: Any = None) -> None:
        writer.access.write(pointer, elements, FILL_VALUE, PEER, stream, "kernel_write")

    with writer.session.active() as session:
        _kernel_timed(session, params, (a, b), writer.access.writer, "kernel_write", write)
        session.synchronize()
    name = f"{METHODS['kernel_write']}: GPU {a} writing GPU {b}"
    return _check(name, state[b].received(), FILL_VALUE)


def _latency(state, params, a: int, b: int, order: Any) -> Check:
    """GPU b chasing the chain in GPU a's memory (a == b: its own memory, the baseline)."""
    import numpy as np

    reader = state[b]
    kind = PEER if a != b else "device"
    with reader.session.active() as session:

        def chase() -> None:
            reader.chase.launch(
                session,
                1,
                state[a].chain.device_pointer,
                params.latency_steps,
                reader.last.device_pointer,
                kind=kind,
                nbytes=4 * params.latency_steps,
                block_size=1,
                blocks=1,
                operation=LATENCY,
            )

        with session.profiler.on_gpus(a, b):
            session.profiler.repeat(chase, params.warmup, params.repeat)
        session.synchronize()
        last = np.zeros(1, np.uint32)
        session.cuda.memcpy_dtoh(last, reader.last.device_pointer)
    expected = chain_end(order, params.latency_steps)
    where = "its own memory" if a == b else f"GPU {a}'s memory"
    detail = f"ended on index {int(last[0])}, expected {expected}"
    name = f"Latency chain: GPU {b} reading {where}"
    return Check(name, int(last[0]) == expected, params.latency_steps, detail)


def _bidirectional(state, a: int, b: int, nbytes: int) -> list[Check]:
    """a → b and b → a together, each on its source's stream behind its own gate."""
    from memprof.core.measure import Lane, concurrent

    directions = ((a, b), (b, a))
    for _, destination in directions:
        state[destination].poison()
    lanes = [
        Lane(
            state[source].session.profiler,
            _copy_action(state, source, destination, nbytes),
            COPY_NAME,
            "ce_bidir",
            PEER,
            nbytes,
            (source, destination),
        )
        for source, destination in directions
    ]
    concurrent(lanes, target_ms=BIDIR_TARGET_MS)
    return [
        _check(
            f"{METHODS['ce_bidir']}: GPU {source} → GPU {destination}",
            state[destination].received(),
            state[source].values,
        )
        for source, destination in directions
    ]


# -- summarizing -----------------------------------------------------------------------------


def figures(result: Result, method: str) -> dict[tuple[int, int], float]:
    """(source, destination) -> GB/s of back-to-back operations, for one method."""
    return {
        pair: one.gb_per_s for pair, one in pair_figures(result, METHOD_MEASURES[method]).items()
    }


def latencies_us(result: Result) -> dict[tuple[int, int], float]:
    """(memory's GPU, reading GPU) -> microseconds per dependent read, median."""
    return {
        pair: one.per_operation_ms * 1e3
        for pair, one in pair_figures(result, LATENCY_CHAIN).items()
    }


def matrix_table(
    title: str, devices: list[int], found: dict[tuple[int, int], Figure], shows: str
) -> Table:
    """A GPU x GPU table: rows are sources, columns destinations; '-' where nothing ran."""
    columns = [Column("from \\ to", "from")]
    columns += [Column(f"GPU {d}", f"GPU {d}", shows) for d in devices]
    rows = [
        {"from": f"GPU {one}", **{f"GPU {d}": found.get((one, d)) for d in devices}}
        for one in devices
    ]
    return table(title, columns, rows)


def summarize(result: Result) -> Summary:
    devices = devices_of(result)
    nbytes = base.array_bytes(result.parameters)
    tables = []
    for method, title in METHODS.items():
        found = pair_figures(result, METHOD_MEASURES[method])
        if not found:
            continue
        cells = {pair: one.gb_per_s for pair, one in found.items()}
        table = matrix_table(f"{title}, GB/s", devices, found, "gb_per_s")
        if method == "ce_on":
            table.notes += _ceiling_notes(found, len(ordered_pairs(devices)))
        if method == "ce_bidir":
            pairs = unordered_pairs(devices)
            totals = [
                ((a, b), f"{format_gb_per_s(cells[a, b] + cells[b, a])} GB/s in total.")
                for a, b in pairs
                if (a, b) in cells and (b, a) in cells
            ]
            every = "every pair" if len(totals) == len(pairs) else ""  # else: name them
            table.notes += said_once(totals, _pairs_named, every)
        tables.append(table)
    latency = pair_figures(result, LATENCY_CHAIN)
    if latency:
        title = (
            "Latency of one 4-byte read, µs: rows hold the memory, columns read it "
            "(diagonal: the GPU's own memory)"
        )
        tables.append(matrix_table(title, devices, latency, "per_operation_us"))
        tables[-1].notes.append(
            f"A single thread follows a chain of {result.parameters.latency_steps} dependent "
            "uncached loads, 256 bytes apart in 1 MiB; kernel time / loads, median of "
            f"{base.repetitions(result)}."
        )
    access = result.extra.peer_access
    link = "yes" if access and all(all(row) for row in access) else "not for every pair"
    tables[0].notes += [
        f"{format_bytes(nbytes)} per copy; GB/s = 10^9 bytes/s from back-to-back batches between "
        "one event pair (peer access on: behind a GPU-side gate; off: timed as the calls "
        "return, since the driver may block while it stages).",
        f"Peer access possible between every pair (cuDeviceCanAccessPeer): {link}.",
    ] + [f"Skipped: {reason}." for reason in result.extra.skipped]
    return Summary(tables=tables, conclusions=_conclusions(result, devices), show_profile=False)


def _ceiling_notes(found: dict[tuple[int, int], Figure], pairs: int) -> list[str]:
    """Each pair's link, and the share of it the copies reached (memprof.model.ceilings): one
    line for the pairs that say the same, "every pair" only if it is said of all `pairs`."""
    said = [
        (pair, f"{one.share:.0%} of its ceiling, {one.ceiling.detail}.")
        for pair, one in found.items()
        if one.ceiling is not None
    ]
    if not said:
        return ["The links' ceilings were not recorded in this file (no GPU state from NVML)."]
    every = "every pair, each way" if len(said) == pairs else ""  # else: name them
    return said_once(said, _pair_names, every, "pairs")


def _pair_names(pairs: list[tuple[int, int]]) -> str:
    return ", ".join(f"GPU {a} → GPU {b}" for a, b in pairs)


def _conclusions(result: Result, devices: list[int]) -> list[str]:
    """What the copies and reads concluded, pair by pair; past two GPUs, a line per finding
    over the pairs sharing it (a range, slowest and fastest named): 56 pairs fit a screen."""
    on_figures = pair_figures(result, METHOD_MEASURES["ce_on"])
    on = {pair: one.gb_per_s for pair, one in on_figures.items()}
    off, bidir = figures(result, "ce_off"), figures(result, "ce_bidir")
    latency = latencies_us(result)
    copies, at_once = [], []
    for a, b in ordered_pairs(devices):
        if (a, b) in on and (a, b) in off:
            ceiling = on_figures[a, b].ceiling
            limit = f"{ceiling.limiter} ceiling" if ceiling is not None else None
            copies.append(((a, b), limit, on_figures[a, b].share, on[a, b], off[a, b]))
    for a, b in unordered_pairs(devices):
        if (a, b) in bidir and (b, a) in bidir and (a, b) in on and (b, a) in on:
            total, one_way = bidir[a, b] + bidir[b, a], max(on[a, b], on[b, a])
            at_once.append(((a, b), total >= 1.8 * one_way, total, total / one_way))
    # each pair's read one way (two GPUs: the one sentence said until now), else every read
    pairs = unordered_pairs(devices) if len(devices) <= 2 else ordered_pairs(devices)
    reads = [((a, b), latency[a, b], latency[b, b]) for a, b in pairs
             if (a, b) in latency and (b, b) in latency]  # fmt: skip
    if len(devices) <= 2:
        return _pair_conclusions(copies, at_once, reads)
    return _range_conclusions(copies, at_once, reads, devices)


def _share(limit: str | None, share: float | None) -> str:
    return f" ({share:.0%} of its {limit})" if limit is not None and share is not None else ""


def _link_words(full: bool) -> str:
    return "carries both directions in full." if full else "is shared."


def _pair_conclusions(copies: list, at_once: list, reads: list) -> list[str]:
    lines = [
        f"GPU {a} → GPU {b}: {format_gb_per_s(with_access)} GB/s with peer access"
        f"{_share(limit, share)}, {format_gb_per_s(without)} GB/s without "
        f"({with_access / without:.1f}x)."
        for (a, b), limit, share, with_access, without in copies
    ]
    for (a, b), full, total, times in at_once:
        lines.append(
            f"GPU {a} ↔ GPU {b} at once: {format_gb_per_s(total)} GB/s in total, "
            f"{times:.2f}x one direction: the link {_link_words(full)}"
        )
    for (a, b), other_us, own_us in reads:
        lines.append(
            f"One read of GPU {a}'s memory from GPU {b} takes {other_us:.2f} µs, "
            f"{other_us / own_us:.1f}x a read of its own ({own_us:.2f} µs)."
        )
    return lines


def _span(values: list[float], show: Callable[[float], str]) -> str:
    """'392-394', or one figure where the range prints as one."""
    low, high = show(min(values)), show(max(values))
    return low if low == high else f"{low}-{high}"


def _range_conclusions(copies: list, at_once: list, reads: list, devices: list[int]) -> list[str]:
    """A line per finding; "every pair" only of every pair of `devices` (one-way peer access
    leaves some unmeasured)."""
    lines = []
    by_limit: dict[str | None, list] = {}
    for copy in copies:
        by_limit.setdefault(copy[1], []).append(copy)
    for limit, group in by_limit.items():
        if len(group) == 1:
            lines += _pair_conclusions(group, [], [])
            continue
        slowest = min(group, key=lambda copy: copy[3])
        fastest = max(group, key=lambda copy: copy[3])
        shares = [copy[2] for copy in group if copy[2] is not None]
        share = (
            f" ({_span(shares, lambda x: f'{x:.0%}')} of its {limit})" if limit and shares else ""
        )
        whom = "every pair" if len(group) == len(ordered_pairs(devices)) else f"{len(group)} pairs"
        lines.append(
            f"{whom.capitalize()}, each way: {_span([c[3] for c in group], format_gb_per_s)} GB/s "
            f"with peer access{share}, {_span([c[4] for c in group], format_gb_per_s)} GB/s "
            f"without ({_span([c[3] / c[4] for c in group], lambda x: f'{x:.1f}')}x); slowest "
            f"GPU {slowest[0][0]} → GPU {slowest[0][1]} ({format_gb_per_s(slowest[3])} GB/s), "
            f"fastest GPU {fastest[0][0]} → GPU {fastest[0][1]} "
            f"({format_gb_per_s(fastest[3])} GB/s)."
        )
    for full in (True, False):
        group = [one for one in at_once if one[1] == full]
        if len(group) == 1:
            lines += _pair_conclusions([], group, [])
        elif group:
            every = len(group) == len(unordered_pairs(devices))
            whom = "every pair" if every else _pairs_named(group)
            lines.append(
                f"{whom[0].upper()}{whom[1:]} at once: "
                f"{_span([one[2] for one in group], format_gb_per_s)} GB/s in total, "
                f"{_span([one[3] for one in group], lambda x: f'{x:.2f}')}x one direction: "
                f"the link {_link_words(full)}"
            )
    if len(reads) == 1:
        lines += _pair_conclusions([], [], reads)
    elif reads:
        slowest = max(reads, key=lambda read: read[1])
        lines.append(
            f"One read of another GPU's memory takes {_span([r[1] for r in reads], _us)} µs, "
            f"{_span([r[1] / r[2] for r in reads], lambda x: f'{x:.1f}')}x a read of its own "
            f"({_span([r[2] for r in reads], _us)} µs); slowest: GPU {slowest[0][0]}'s memory "
            f"from GPU {slowest[0][1]} ({_us(slowest[1])} µs)."
        )
    return lines


def _us(microseconds: float) -> str:
    return f"{microseconds:.2f}"


def _pairs_named(group: list) -> str:
    """Unordered pairs, or findings led by theirs: 'GPU 0 ↔ GPU 1, GPU 2 ↔ GPU 3'."""
    pairs = [one if isinstance(one[0], int) else one[0] for one in group]
    return ", ".join(f"GPU {a} ↔ GPU {b}" for a, b in pairs)
