"""From linked trace events to benchmark records: one per host op that launched kernels.

A record's time is the sum of its kernels' durations (`timing: kernel`, `kernels`: how many),
its device the name `deviceProperties` gives its first kernel's device, its work and bytes the
ledger `aten.py` finds for the op's recorded shapes. Device activity that is not a kernel
(memcpy, memset), communication kernels (`collectives.py` says which) and kernels no op
launched are not records: they are accounted for in the summary, so that every microsecond of
the trace is either priced or said to be unpriced.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from roofwise.base.built import BuiltRows
from roofwise.traces.aten import (
    OpPrice,
    is_tf32_kernel,
    is_winograd_kernel,
    make_call,
    unpriced,
)
from roofwise.traces.attention import is_attention, nested_attention
from roofwise.traces.collectives import (
    Message,
    is_collective_kernel,
    is_collective_op,
    message_of,
)
from roofwise.traces.link import NO_OP, launching_ops
from roofwise.traces.prices import price_call
from roofwise.traces.reader import KINDS, GpuColumns, Signature, TraceEvents, id_value
from roofwise.traces.timeline import Timeline, timeline

US = 1e-6  # trace timestamps and durations are in microseconds


@dataclass(frozen=True, slots=True)  # slots: a trace can hold a million of these
class TraceOp:
    """One host op that launched kernels, with its price (or why it has none)."""

    op: str
    shapes: tuple[Any, ...]
    dtypes: tuple[str, ...]
    device: str
    time_s: float  # summed kernel durations
    kernels: int
    price: OpPrice
    communication: bool
    message: Message | None = None  # a collective's message, when it is one

    @property
    def workload(self) -> dict[str, Any]:
        return {"shapes": [list(s) if isinstance(s, (list, tuple)) else s for s in self.shapes],
                "dtypes": list(self.dtypes)}

    def record(self) -> dict[str, Any] | None:
        """The benchmark record, or None when the op could not be priced."""
        common = self.common_fields()
        return None if common is None else call_record(common, self.time_s, self.kernels,
                                                       self.device)

    def common_fields(self) -> dict[str, Any] | None:
        """The record's fields every call of this op and shapes shares (its ledger's), or None
        when the op could not be priced: a trace's calls build them once per price."""
        ledger = self.price.ledger
        if ledger is None:
            return None
        common = ledger.to_record()
        common.update(op=self.op, workload=self.workload, timing="kernel",
                      priced_by=self.price.source)
        if self.price.reason:
            common["note"] = self.price.reason
        return common


def call_record(common: dict[str, Any], time_s: float, kernels: int,
                device: str) -> dict[str, Any]:
    """One call's record: the fields its price fixes, then its own time, launches, device."""
    record = {**common, "time_s": time_s, "kernels": kernels}
    if device:
        record["device"] = device
    return record


@dataclass(frozen=True)
class OpTable:
    """TraceOps.ops as columns, one entry per op (a few bytes each), so that judging and
    grouping a million calls loop over distinct prices and shapes, never over calls."""

    signature: np.ndarray  # int64: the op's signature (index into the reader's signatures)
    time_s: np.ndarray  # float64: summed kernel durations
    kernels: np.ndarray  # int64
    device: np.ndarray  # int64: index into device_names
    device_names: tuple[str, ...]  # '' where deviceProperties names none
    priced: np.ndarray  # bool: has a ledger (is a record)
    communication: np.ndarray  # bool

    def __len__(self) -> int:
        return int(self.signature.shape[0])


@dataclass(frozen=True)
class TraceSummary:
    """Where the trace's device time went (summed durations, in seconds)."""

    kernel_time_s: float
    priced_time_s: float
    communication_time_s: float
    memcpy_time_s: float
    memset_time_s: float
    unattributed_time_s: float  # non-communication kernels no traced host op launched
    kernels: int
    ops: int
    priced_ops: int
    devices: tuple[str, ...] = field(default=())
    devices_from_properties: tuple[str, ...] = field(default=())  # named by roofwise, not the trace
    skipped: tuple[tuple[str, int], ...] = field(default=())  # (why, events) the reader skipped
    timeline: Timeline | None = None  # the same time on the clock (overlaps counted once)
    rank: int | None = None  # distributedInfo's rank
    world_size: int | None = None  # distributedInfo's world_size
    # the clock's step in the kernels' durations: 1 us where every one is a whole number of
    # microseconds (older traces), else 1 ns (what Kineto's fractional microseconds keep)
    duration_tick_s: float = 1e-9

    @property
    def skipped_events(self) -> int:
        return sum(n for _, n in self.skipped)

    @property
    def gpu_time_s(self) -> float:
        return self.kernel_time_s + self.memcpy_time_s + self.memset_time_s

    @property
    def unpriced_time_s(self) -> float:
        """Kernel time not priced, communication excluded (it has a line of its own); sums in
        another order round differently, so a difference that is all rounding is zero."""
        rest = self.kernel_time_s - self.priced_time_s - self.communication_time_s
        return rest if rest > 1e-12 * self.kernel_time_s else 0.0


@dataclass(frozen=True)
class TraceOps:
    """The ops that launched kernels: their columns (`table`) and what is shared by many
    (each distinct signature's price, the reader's signatures), with the few ops priced on
    their own (collectives, nested attention) kept by position. Memory is one table entry per
    op and one price per distinct signature; `ops` makes an op's TraceOp when it is read."""

    summary: TraceSummary
    table: OpTable
    signatures: Sequence[Signature]
    prices: Mapping[int, OpPrice]  # signature -> its price
    own: Mapping[int, tuple[OpPrice, Message | None]]  # op position -> its own price

    @property
    def ops(self) -> Sequence[TraceOp]:
        return BuiltRows(len(self.table), self.op)

    def op(self, n: int) -> TraceOp:
        table = self.table
        sig = self.signatures[int(table.signature[n])]
        price, message = self.own.get(n) or (self.prices[int(table.signature[n])], None)
        return TraceOp(sig.name, sig.dims, sig.types, table.device_names[int(table.device[n])],
                       float(table.time_s[n]), int(table.kernels[n]), price,
                       bool(table.communication[n]), message)


def build_ops(events: TraceEvents, allow_tf32: bool = False, replay: bool = True) -> TraceOps:
    """The host ops that launched kernels, and the summary of device time.

    Sums are taken over the reader's columns at once; each distinct op signature is priced
    once and each distinct device named once, however many calls share them: no Python
    object is made per op."""
    op_of = launching_ops(events)
    gpu, ops = events.gpu_columns, events.op_columns
    assert gpu is not None and ops is not None
    n_ops = len(ops.ts_us)
    dur_s = gpu.dur_us * US
    kernel = gpu.kind == KINDS.index("kernel")
    # communication: a kernel whose own name is a collective, or one a collective op launched
    # (both judged once per distinct name)
    comm_name = np.array([is_collective_kernel(n) for n in events.names] + [False], dtype=bool)
    comm_sig = np.array([is_collective_op(s.name) for s in events.signatures] + [False],
                        dtype=bool)
    comm_op = np.append(comm_sig[ops.signature], False)  # the last entry: NO_OP (-1)
    comm = kernel & (comm_name[gpu.name] | comm_op[op_of])
    launched = kernel & (op_of != NO_OP)
    launched_at = np.flatnonzero(launched)
    ops_with_kernels, first = np.unique(op_of[launched_at], return_index=True)
    time_by_op = np.bincount(op_of[launched], weights=dur_s[launched], minlength=n_ops)
    count_by_op = np.bincount(op_of[launched], minlength=n_ops)
    comm_by_op = np.bincount(op_of[launched & comm], minlength=n_ops)
    first_kernel = launched_at[first]  # each op's first kernel, in file order
    device_of, device_names = _device_codes(events, gpu.device[first_kernel])
    signature_of = ops.signature[ops_with_kernels].astype(np.int64)
    times = time_by_op[ops_with_kernels]
    communicating = comm_by_op[ops_with_kernels] > 0
    own = _collectives(events, op_of, launched & comm, ops_with_kernels, communicating)
    for n, why in _nested_attention(events, ops_with_kernels).items():
        own.setdefault(n, (unpriced(why), None))  # a collective stays one
    # every other op is priced by its signature, once, in the order the signatures first
    # appear among those ops
    shared = np.ones(len(ops_with_kernels), dtype=bool)
    shared[list(own)] = False
    distinct, at = np.unique(signature_of[shared], return_index=True)
    # a signature some of whose calls launched a TF32 tensor-core kernel ran its fp32
    # contractions on them, one that launched a Winograd kernel did fewer multiplies (the
    # faster roof, the smaller count: a bound must not exceed what that kernel did)
    def launching(named: Callable[[str], bool]) -> set[int]:
        """The signatures some of whose calls launched a kernel whose name `named` says."""
        hit = np.array([named(n) for n in events.names] + [False], dtype=bool)
        by_op = np.bincount(op_of[launched & hit[gpu.name]], minlength=n_ops) > 0
        return set(signature_of[by_op[ops_with_kernels]].tolist())

    tf32_signatures, winograd_signatures = launching(is_tf32_kernel), launching(
        is_winograd_kernel)
    prices: dict[int, OpPrice] = {}
    for s in distinct[np.argsort(at, kind="stable")].tolist():
        prices[s] = _price(events.signatures[s], allow_tf32 or s in tf32_signatures, replay,
                           s in winograd_signatures)
    priced_by_signature = np.zeros(len(events.signatures), dtype=bool)
    for s, price in prices.items():
        priced_by_signature[s] = price.priced
    priced = priced_by_signature[signature_of] & shared
    summary = TraceSummary(
        kernel_time_s=float(dur_s[kernel].sum()),
        # left to right, in op order (as `sum()` of the floats)
        priced_time_s=float(np.cumsum(times[priced])[-1]) if priced.any() else 0.0,
        communication_time_s=float(dur_s[comm].sum()),
        memcpy_time_s=float(dur_s[gpu.kind == KINDS.index("memcpy")].sum()),
        memset_time_s=float(dur_s[gpu.kind == KINDS.index("memset")].sum()),
        unattributed_time_s=float(dur_s[kernel & ~comm & (op_of == NO_OP)].sum()),
        kernels=int(kernel.sum()), ops=len(ops_with_kernels),
        priced_ops=int(priced.sum()),
        devices=tuple(sorted(set(events.device_names.values()))),
        devices_from_properties=tuple(sorted(events.devices_from_properties)),
        skipped=tuple(sorted(events.skipped.items(), key=lambda kv: -kv[1])),
        timeline=_timeline(gpu, dur_s, kernel, comm), rank=events.rank,
        world_size=events.world_size, duration_tick_s=_tick_s(gpu.dur_us[kernel]))
    table = OpTable(signature_of, times, count_by_op[ops_with_kernels].astype(np.int64),
                    device_of, device_names, priced, communicating)
    return TraceOps(summary, table, events.signatures, prices, own)


def _collectives(events: TraceEvents, op_of: np.ndarray, launched_comm: np.ndarray,
                 ops_with_kernels: np.ndarray, communicating: np.ndarray
                 ) -> dict[int, tuple[OpPrice, Message | None]]:
    """Per communication op (by position in `ops_with_kernels`), its price (none: it is
    priced on the interconnect) and message: the one its signature records, else its first
    comm kernel's recorded one (the comms table holds only those few kernels)."""
    gpu = events.gpu_columns
    assert gpu is not None
    comm_at = np.flatnonzero(launched_comm)
    comm_ops, first_comm = np.unique(op_of[comm_at], return_index=True)
    comm_kernel = dict(zip(comm_ops.tolist(), (events.names[i] for i in
                                               gpu.name[comm_at[first_comm]].tolist()),
                           strict=True))
    recorded: dict[int, tuple[Any, ...]] = {}
    for k in sorted(events.comms):
        if launched_comm[k]:
            recorded.setdefault(int(op_of[k]), events.comms[k])
    collective = unpriced("communication: priced on the interconnect, not the roofline")
    ops = events.op_columns
    assert ops is not None
    found: dict[int, tuple[OpPrice, Message | None]] = {}
    for n in np.flatnonzero(communicating).tolist():
        index = int(ops_with_kernels[n])
        sig = events.signatures[int(ops.signature[index])]
        found[n] = (collective, message_of(sig.name, sig.dims, sig.types, recorded.get(index),
                                           comm_kernel.get(index, "")))
    return found


def _tick_s(dur_us: np.ndarray) -> float:
    """1 us when every duration is a whole number of microseconds, else 1 ns."""
    return 1e-6 if len(dur_us) and bool((dur_us == np.round(dur_us)).all()) else 1e-9


def _timeline(gpu: GpuColumns, dur_s: np.ndarray, kernel: np.ndarray,
              comm: np.ndarray) -> Timeline:
    # from the first event: epoch microseconds in seconds would lose a tenth of a microsecond
    start_s = (gpu.ts_us - gpu.ts_us.min()) * US if len(gpu.ts_us) else gpu.ts_us
    return timeline(start_s, dur_s, kernel, comm)


def _nested_attention(events: TraceEvents, launching: np.ndarray) -> dict[int, str]:
    """attention.nested_attention over the ops that launched kernels (by position in
    `launching`), fed from the columns: only the attention ops' rows are looked at."""
    ops = events.op_columns
    assert ops is not None
    attention = np.array([is_attention(s.name) for s in events.signatures] + [False],
                         dtype=bool)
    at = np.flatnonzero(attention[ops.signature[launching]]) if len(launching) else launching
    if len(at) < 2:
        return {}
    rows = launching[at]
    found = nested_attention([events.signatures[s].name for s in ops.signature[rows].tolist()],
                             ops.thread[rows].tolist(), ops.ts_us[rows].tolist(),
                             ops.end_us[rows].tolist())
    return {int(at[i]): why for i, why in found.items()}


def _device_codes(events: TraceEvents, ids: np.ndarray) -> tuple[np.ndarray, tuple[str, ...]]:
    """The name deviceProperties gives each device id ('' where it names none), as codes into
    the distinct names; looked up once per distinct id.

    A process that sees some of the host's GPUs (CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES)
    lists them from id 0 in deviceProperties while its kernels may carry the physical id
    (ROCm traces: kernels on device 2 or 9, one device listed): where every device listed has
    one name, a kernel on an id not listed ran on a card of that name."""
    listed = set(events.device_names.values()) - {""}
    other = next(iter(listed)) if len(listed) == 1 else ""
    if ids.dtype != object:
        distinct, where = np.unique(ids, return_inverse=True)
        names = [events.device_names.get(id_value(distinct, i), other)
                 for i in range(len(distinct))]
    else:
        index: dict[Any, int] = {}
        where = np.fromiter((index.setdefault(d, len(index)) for d in ids.tolist()), np.int64,
                            len(ids))
        names = [events.device_names.get(d, other) for d in index]
    code: dict[str, int] = {}
    of_id = np.array([code.setdefault(name, len(code)) for name in names], dtype=np.int64)
    return of_id[where.reshape(-1)].astype(np.int64), tuple(code)


def _price(sig: Signature, allow_tf32: bool, replay: bool, winograd: bool = False
           ) -> OpPrice:
    return price_call(make_call(sig.name, sig.dims, sig.types, sig.concrete, sig.strides),
                      allow_tf32, replay, winograd)
